package ui

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/opml"
)

// An import's feeds are subscribed with their first fetches paced at
// aggregator.FirstFetchRate, as the API's bulk subscriptions are, rather
// than all due at once; an import and a bulk request at the same time
// share the node's rate, each first fetch in a slot of its own.
func TestImportPacesFirstFetches(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	const n = 300
	var outlines []opml.Outline
	var bulk []string
	for i := range n {
		outlines = append(outlines, opml.Outline{Title: fmt.Sprint("s", i), URL: fmt.Sprintf("https://h%d.example.org/s%d.rss", i%7, i)})
		bulk = append(bulk, fmt.Sprintf(`{"url": "https://b%d.example.org/s%d.rss"}`, i%7, i))
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if res := e.ui.subscribeAll(t.Context(), outlines, ""); res.added != n {
			t.Errorf("import: %s", res)
		}
	})
	wg.Go(func() {
		resp, err := http.Post(e.srv.URL+"/api/v1/feeds/bulk", "application/json", strings.NewReader(`{"feeds": [`+strings.Join(bulk, ",")+`]}`))
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("bulk request: %s", resp.Status)
		}
	})
	wg.Wait()
	feeds, err := e.st.Feeds()
	if err != nil {
		t.Fatal(err)
	}
	// The aggregator runs on its own clock: the spread is what counts.
	var first, last time.Time
	seen := map[time.Time]bool{}
	for _, f := range feeds {
		if !strings.Contains(f.URL, ".example.org/s") {
			continue
		}
		next, ok := e.agg.Service.NextFetch(f.ID)
		if !ok {
			t.Fatalf("feed %d not scheduled", f.ID)
		}
		if seen[next] {
			t.Fatalf("feed %d: first fetch at %v, a slot another feed has", f.ID, next)
		}
		seen[next] = true
		if first.IsZero() || next.Before(first) {
			first = next
		}
		if next.After(last) {
			last = next
		}
	}
	want := time.Duration(float64(2*n-1) / aggregator.FirstFetchRate * float64(time.Second))
	if len(seen) != 2*n || last.Sub(first) < want-10*time.Millisecond {
		t.Errorf("%d feeds subscribed, their first fetches %v apart: want %d, %v", len(seen), last.Sub(first), 2*n, want)
	}
}
