package ui

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

var fleetFeeds = flag.Int("ui.fleet", 100_000, "feeds in BenchmarkFleetPages's store")

// BenchmarkFleetPages renders the feeds page (the fleet's aggregates and
// one page of the list) and the API's first page for a store of
// -ui.fleet feeds (100,000 by default; building a store of 10^6 takes a
// few minutes): the whole handler, the walk of the store's feed
// summaries included (no record changes between requests: each request
// walks the records and decodes none). Every feed has counters and a
// latency; every 50th is erroring, every 100th starved.
//
//	go test -run '^$' -bench BenchmarkFleetPages -benchtime 10x ./web/ui/ -args -ui.fleet 1000000
func BenchmarkFleetPages(b *testing.B) {
	clock := &testClock{t: t0}
	st, err := storage.Open(filepath.Join(b.TempDir(), "fleet.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	agg := &testAgg{states: map[uint64]schedule.State{}, next: map[uint64]time.Time{}}
	start := time.Now()
	for i := range *fleetFeeds {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://station-%d.example.org/feed.rss", i),
			Title: fmt.Sprintf("Station %d", i), Policy: "auto", Polls: 100, Hits: 90,
			LatencySumS: float64(90 * (1 + i%30)), LatencyCount: 90}
		if i%50 == 0 {
			f.LastError, f.ErrorCount = "HTTP 503", 1
		}
		if err := st.CreateFeed(&f); err != nil {
			b.Fatal(err)
		}
		next := t0.Add(time.Duration(i%60) * time.Second)
		if i%100 == 0 {
			next = t0.Add(-time.Hour)
		}
		agg.next[f.ID] = next
	}
	b.Logf("%d feeds stored in %v", *fleetFeeds, time.Since(start).Round(time.Second))
	auth := web.NewAuth(web.AuthOptions{Loopback: true, Now: clock.Now})
	u, err := New(Options{Store: st, Auth: auth, Aggregator: agg, BaseURL: "http://127.0.0.1:8080", Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	h := web.New(web.Options{Store: st, Aggregator: agg, Auth: auth, UI: u, Now: clock.Now})
	// The first list after start-up decodes every record once; later
	// ones only the records changed since.
	first := time.Now()
	req := httptest.NewRequest("GET", "/api/v1/feeds", nil)
	req.Host = "127.0.0.1:8080"
	h.ServeHTTP(httptest.NewRecorder(), req)
	b.Logf("first list after start-up: %v", time.Since(first).Round(time.Millisecond))
	for _, tc := range []struct{ name, path string }{
		{"ui", "/ui/feeds"},
		{"ui-search", "/ui/feeds?q=station-4242."},
		{"ui-starved", "/ui/feeds?status=starved"},
		{"api", "/api/v1/feeds"},
		{"api-erroring", "/api/v1/feeds?status=erroring&limit=1000"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				req := httptest.NewRequest("GET", tc.path, nil)
				req.Host = "127.0.0.1:8080"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %.300s", rec.Code, rec.Body)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			b.ReportMetric(float64(size), "bytes/page")
		})
	}
}
