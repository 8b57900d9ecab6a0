package ui

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
	"github.com/slogfeed/slogfeed/web/feedlist"
)

var (
	fleetFeeds = flag.Int("ui.fleet", 100_000, "feeds in BenchmarkFleetPages's store")
	fleetDB    = flag.String("ui.fleetdb", "", "BenchmarkFleetPages's data file: made there when missing, else used as it is (made by an earlier run with the same -ui.fleet)")
)

// fleetNext is when station i's next fetch is planned: every 100th
// overdue by an hour.
func fleetNext(i int) time.Time {
	if i%100 == 0 {
		return t0.Add(-time.Hour)
	}
	return t0.Add(time.Duration(i%60) * time.Second)
}

// startAt is a policy whose first fetch is at a given time.
type startAt time.Time

func (s startAt) Start(time.Time) time.Time             { return time.Time(s) }
func (s startAt) Next(o schedule.Observation) time.Time { return o.At.Add(time.Hour) }

// plan records feed id's planned fetch, fleetNext(i), in a and in its
// scheduler (added two hours before t0, nothing fetched since).
func (a *testAgg) plan(b *testing.B, id uint64, i int) {
	a.set(id, schedule.State{}, fleetNext(i))
	if err := a.sched.Add(int(id), schedule.Feed{Policy: startAt(fleetNext(i))}, t0.Add(-2*time.Hour)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFleetPages renders the feeds page (the fleet's aggregates and
// one page of the list) and the API's first page for a store of
// -ui.fleet feeds (100,000 by default; building a store of 10^6 takes a
// few minutes): the whole handler. The fleet's aggregates and an
// unfiltered page come from the summaries the store keeps in memory; a
// filter or a search walks them; the starved feeds come from the
// scheduler's feeds in order of planned fetch. Every feed has counters
// and a latency; every 50th is erroring, every 100th starved, every 7th
// on fixed-15m.
//
//	go test -run '^$' -bench BenchmarkFleetPages -benchtime 10x ./web/ui/ -args -ui.fleet 1000000
func BenchmarkFleetPages(b *testing.B) {
	clock := &testClock{t: t0}
	path := *fleetDB
	if path == "" {
		path = filepath.Join(b.TempDir(), "fleet.db")
	}
	_, statErr := os.Stat(path)
	st, err := storage.Open(path, storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	sched, err := schedule.New(schedule.Config{})
	if err != nil {
		b.Fatal(err)
	}
	sched.Grow(*fleetFeeds + 1)
	agg := &testAgg{states: map[uint64]schedule.State{}, next: map[uint64]time.Time{}, sched: sched}
	start := time.Now()
	if statErr == nil {
		feeds, err := st.Feeds()
		if err != nil {
			b.Fatal(err)
		}
		if len(feeds) != *fleetFeeds {
			b.Fatalf("%s holds %d feeds, not %d", path, len(feeds), *fleetFeeds)
		}
		for _, f := range feeds {
			var i int
			if _, err := fmt.Sscanf(f.URL, "https://station-%d.example.org/feed.rss", &i); err != nil {
				b.Fatal(err)
			}
			agg.plan(b, f.ID, i)
		}
		feeds = nil
		b.Logf("%d feeds read from %s in %v", len(agg.next), path, time.Since(start).Round(time.Second))
	} else {
		makeFleet(b, st, agg)
		b.Logf("%d feeds stored in %v", *fleetFeeds, time.Since(start).Round(time.Second))
	}
	auth := web.NewAuth(web.AuthOptions{Loopback: true, Now: clock.Now})
	u, err := New(Options{Store: st, Auth: auth, Aggregator: agg, BaseURL: "http://127.0.0.1:8080", Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	h := web.New(web.Options{Store: st, Aggregator: agg, Auth: auth, UI: u, Now: clock.Now})
	// The store builds the summaries it keeps in memory by one walk of
	// every record, which serve does in the background after start-up
	// (feedlist.Warm); the heap they keep is reported per feed. Then the
	// first page after start-up.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	first := time.Now()
	if _, _, err := feedlist.Warm(st); err != nil {
		b.Fatal(err)
	}
	warmed := time.Since(first)
	runtime.GC()
	runtime.ReadMemStats(&after)
	first = time.Now()
	req := httptest.NewRequest("GET", "/ui/feeds", nil)
	req.Host = "127.0.0.1:8080"
	h.ServeHTTP(httptest.NewRecorder(), req)
	b.Logf("summaries warmed in %v (heap kept: %.0f B/feed); first feeds page after: %v", warmed.Round(time.Millisecond),
		(float64(after.HeapAlloc)-float64(before.HeapAlloc))/float64(*fleetFeeds), time.Since(first).Round(time.Microsecond))
	last := feedlist.EncodeCursor(uint64(*fleetFeeds - 50))
	for _, tc := range []struct{ name, path string }{
		{"ui", "/ui/feeds"},
		{"ui-search", "/ui/feeds?q=station-4242."},
		{"ui-starved", "/ui/feeds?status=starved"},
		{"api", "/api/v1/feeds"},
		{"api-erroring", "/api/v1/feeds?status=erroring&limit=1000"},
		{"api-policy", "/api/v1/feeds?policy=fixed-15m"},
		{"api-last-page", "/api/v1/feeds?cursor=" + last},
		// Last: the clock moves on by more than a count of the starved
		// feeds serves, so each page counts them again.
		{"ui-recount", "/ui/feeds"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// One request before the timed ones: the page's count of the
			// starved feeds serves the next StarvedEvery (ui-recount
			// measures the count).
			warm := httptest.NewRequest("GET", tc.path, nil)
			warm.Host = "127.0.0.1:8080"
			h.ServeHTTP(httptest.NewRecorder(), warm)
			var size int
			for b.Loop() {
				if tc.name == "ui-recount" {
					clock.Add(11 * time.Second)
				}
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

// makeFleet stores -ui.fleet feeds in st, their planned fetches in agg.
func makeFleet(b *testing.B, st *storage.Store, agg *testAgg) {
	// Created by a few writers at once: their creations share commits.
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < *fleetFeeds; i += writers {
				f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://station-%d.example.org/feed.rss", i),
					Title: fmt.Sprintf("Station %d", i), Policy: "auto", Polls: 100, Hits: 90,
					LatencySumS: float64(90 * (1 + i%30)), LatencyCount: 90}
				if i%7 == 0 {
					f.Policy = "fixed-15m"
				}
				if i%50 == 0 {
					f.LastError, f.ErrorCount = "HTTP 503", 1
				}
				if err := st.CreateFeed(&f); err != nil {
					errs <- err
					return
				}
				agg.plan(b, f.ID, i)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	agg.states = map[uint64]schedule.State{}
}
