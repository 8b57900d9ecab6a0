package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/reader/opml"
	"github.com/slogfeed/slogfeed/web"
)

// An import's feeds are subscribed with their first fetches paced at
// web.BulkFirstRate, as the API's bulk subscriptions are, rather than
// all due at once.
func TestImportPacesFirstFetches(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	const n = 300
	var outlines []opml.Outline
	for i := range n {
		outlines = append(outlines, opml.Outline{Title: fmt.Sprint("s", i), URL: fmt.Sprintf("https://h%d.example.org/s%d.rss", i%7, i)})
	}
	e.ui.now = time.Now // the aggregator's clock
	if res := e.ui.subscribeAll(t.Context(), outlines, ""); res.added != n {
		t.Fatalf("import: %s", res)
	}
	feeds, err := e.st.Feeds()
	if err != nil {
		t.Fatal(err)
	}
	// The aggregator runs on its own clock: the spread is what counts.
	var first, last time.Time
	imported := 0
	for _, f := range feeds {
		if !strings.Contains(f.URL, ".example.org/s") {
			continue
		}
		imported++
		next, ok := e.agg.Service.NextFetch(f.ID)
		if !ok {
			t.Fatalf("feed %d not scheduled", f.ID)
		}
		if first.IsZero() || next.Before(first) {
			first = next
		}
		if next.After(last) {
			last = next
		}
	}
	want := time.Duration(float64(n-1) / web.BulkFirstRate * float64(time.Second))
	if imported != n || last.Sub(first) < want-10*time.Millisecond {
		t.Errorf("%d feeds imported, their first fetches %v apart: want %d, %v", imported, last.Sub(first), n, want)
	}
}
