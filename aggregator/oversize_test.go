package aggregator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/storage"
)

// An item too large to store is named in the feed's warning with its
// size, at every poll while the document has it; the poll counts only the
// items stored as new.
func TestOversizedItemWarns(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><rss version="2.0"><channel><title>big</title><link>https://example.org/</link>`)
	for i := 4; i >= 1; i-- {
		desc := fmt.Sprintf("reading %d", i)
		if i == 2 {
			desc = strings.Repeat("x", 1_500_000)
		}
		fmt.Fprintf(&b, `<item><guid>r-%d</guid><link>https://example.org/r/%d</link><title>reading %d</title><description>%s</description></item>`, i, i, i, desc)
	}
	b.WriteString(`</channel></rss>`)
	srv := newDocServer(t, []byte(b.String()))
	svc, st := newTestService(t)
	f, err := svc.Subscribe(storage.Feed{URL: srv.srv.URL + "/feed"})
	if err != nil {
		t.Fatal(err)
	}
	for poll := 1; poll <= 2; poll++ {
		o, err := svc.FetchNow(context.Background(), f.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.Feed(f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.LastError != "" || got.Items != 3 {
			t.Fatalf("poll %d: last error %q, %d items; want none and 3", poll, got.LastError, got.Items)
		}
		for _, want := range []string{`"r-2"`, "https://example.org/r/2", "bytes encoded, more than 1048576"} {
			if !strings.Contains(got.Warning, want) {
				t.Fatalf("poll %d: warning %q does not say %s", poll, got.Warning, want)
			}
		}
		if n := map[int]int{1: 3, 2: 0}[poll]; len(o.Published) != n {
			t.Fatalf("poll %d: %d new items counted, want %d", poll, len(o.Published), n)
		}
	}
}
