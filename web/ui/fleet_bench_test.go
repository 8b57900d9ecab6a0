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
	// A page in the middle of the list, asked for forward (after the
	// feed before it) and backward (before the feed after it): the same
	// rows, and the same for the erroring feeds (every 50th, pages of 20).
	mid := uint64(*fleetFeeds / 2)
	back := func(ff feedlist.Filter) (next, prev string) {
		p, err := feedlist.List(st, ff, agg, clock.Now())
		if err == nil {
			ff.After = p.IDs[len(p.IDs)-1]
			p, err = feedlist.List(st, ff, agg, clock.Now())
		}
		if err != nil {
			b.Fatal(err)
		}
		return "cursor=" + feedlist.EncodeCursor(mid), "before=" + p.Prev
	}
	next, prev := back(feedlist.Filter{Limit: 100, After: mid})
	errNext, errPrev := back(feedlist.Filter{Limit: 20, After: mid, Status: feedlist.Erroring})
	b.Run("list", func(b *testing.B) { benchPageCut(b, st, agg, mid) })
	for _, tc := range []struct{ name, path string }{
		{"ui", "/ui/feeds"},
		{"ui-mid-next", "/ui/feeds?" + next},
		{"ui-mid-prev", "/ui/feeds?" + prev},
		{"ui-erroring-mid-next", "/ui/feeds?status=erroring&limit=20&" + errNext},
		{"ui-erroring-mid-prev", "/ui/feeds?status=erroring&limit=20&" + errPrev},
		{"api-mid-prev", "/api/v1/feeds?" + prev},
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

// benchPageCut times the cut of the page of 100 feeds after feed mid
// alone (feedlist.List, which the feeds page calls once) forward, by
// the index read backward, and by a walk of every summary from the first
// up to the page with a ring of the last 101 IDs (the sensors list's
// way to its previous page), which grows with the fleet.
func benchPageCut(b *testing.B, st *storage.Store, agg *testAgg, mid uint64) {
	want := make([]uint64, 100)
	for i := range want {
		want[i] = mid + 1 + uint64(i)
	}
	for _, tc := range []struct {
		name string
		cut  func() ([]uint64, error)
	}{
		{"next", func() ([]uint64, error) {
			p, err := feedlist.List(st, feedlist.Filter{Limit: 100, After: mid}, agg, t0)
			return p.IDs, err
		}},
		{"prev", func() ([]uint64, error) {
			p, err := feedlist.List(st, feedlist.Filter{Limit: 100, Before: mid + 101}, agg, t0)
			return p.IDs, err
		}},
		{"scan-prev", func() ([]uint64, error) {
			ring, n := make([]uint64, 101), 0
			err := st.EachFeedSummary(func(f *storage.FeedSummary) bool {
				if f.ID > mid+100 {
					return false
				}
				ring[n%len(ring)] = f.ID
				n++
				return true
			})
			ids := make([]uint64, 0, 100)
			for i := 1; i <= 100; i++ {
				ids = append(ids, ring[(n+i)%len(ring)])
			}
			return ids, err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				ids, err := tc.cut()
				if err != nil {
					b.Fatal(err)
				}
				if len(ids) != 100 || ids[0] != want[0] || ids[99] != want[99] {
					b.Fatalf("page %v…, want %v…", ids[:min(3, len(ids))], want[:3])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N), "µs/op")
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
