package aggregator_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Items with no date of their own are stored with their estimated publish
// time (here the response's Last-Modified, for the newest), not a zero
// one, and an undated reading gets that time; items already stored keep
// theirs when a later poll finds them again.
func TestStoredItemsCarryPublishEstimates(t *testing.T) {
	lastMod := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	doc := `<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>` +
		`<item><guid>b</guid><title>second</title></item>` +
		`<item><guid>a</guid><title>first</title></item></channel></rss>`
	mux := http.NewServeMux()
	mux.HandleFunc("/f", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Header().Set("Last-Modified", lastMod.Format(http.TimeFormat))
		_, _ = w.Write([]byte(doc))
	})
	st, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := schedule.NewVirtualClock(lastMod.Add(30 * time.Second))
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store:     st,
		Clock:     clock,
		Fetcher:   fetcher.New(fetcher.Options{Transport: handlerTransport{mux}}),
		Scheduler: schedule.Config{},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := svc.Subscribe(storage.Feed{URL: "http://pub.test/f"})
	if err != nil {
		t.Fatal(err)
	}
	for poll := range 2 {
		if _, err := svc.FetchNow(context.Background(), f.ID); err != nil {
			t.Fatal(err)
		}
		b, err := st.Item(f.ID, "b")
		if err != nil {
			t.Fatal(err)
		}
		if !b.Published.Equal(lastMod) {
			t.Errorf("poll %d: newest item stored with published %v, want the Last-Modified %v", poll, b.Published, lastMod)
		}
		a, err := st.Item(f.ID, "a")
		if err != nil {
			t.Fatal(err)
		}
		if a.Published.IsZero() || a.Published.After(lastMod) {
			t.Errorf("poll %d: older item stored with published %v", poll, a.Published)
		}
		clock.Advance(time.Minute)
	}
	if items, _ := st.Items(f.ID, storage.ItemQuery{}); len(items) != 2 || !strings.HasPrefix(items[0].Title, "second") && !strings.HasPrefix(items[1].Title, "second") {
		t.Errorf("items %+v", items)
	}
}
