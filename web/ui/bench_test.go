package ui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/web"
)

// Size of the benchmarks' store.
const (
	benchFeeds = 1000
	benchPolls = 200 // observations per feed
	benchItems = 50  // items per feed, each with a reading
)

// benchFixture is a server over a store of benchFeeds feeds, built once
// for both benchmarks (it takes a while).
type benchFixture struct {
	h    http.Handler
	ui   *UI
	feed uint64 // a feed in the middle of the list
	err  error
}

var (
	benchOnce sync.Once
	bench     benchFixture
)

func benchSetup(b *testing.B) *benchFixture {
	b.Helper()
	benchOnce.Do(func() { bench = buildBench(b.TempDir) })
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return &bench
}

// buildBench fills a store as a slogfeed that has polled benchFeeds feeds
// for a while: observations with hits, misses, latencies and errors, and
// items with HTML and readings.
func buildBench(tempDir func() string) benchFixture {
	clock := &testClock{t: t0}
	// The store outlives the benchmark that built it (the other one uses
	// it too); the temporary directory goes when the test binary ends.
	st, err := storage.Open(filepath.Join(tempDir(), "bench.db"), storage.Options{NoSync: true, Now: clock.Now})
	if err != nil {
		return benchFixture{err: err}
	}
	agg := &testAgg{states: map[uint64]schedule.State{}, next: map[uint64]time.Time{}}
	var mid uint64
	for i := range benchFeeds {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://station-%d.example.org/feed.rss", i),
			Title: fmt.Sprintf("Station %d <temperature>", i), Policy: "auto"}
		if err := st.CreateFeed(&f); err != nil {
			return benchFixture{err: err}
		}
		if i == benchFeeds/2 {
			mid = f.ID
		}
		period := time.Duration(30+i%60) * time.Second
		start := t0.Add(-benchPolls * period)
		var items []storage.Item
		for j := range benchPolls {
			at := start.Add(time.Duration(j) * period)
			o := storage.Observation{At: at.Add(time.Duration(1+j%5) * time.Second), Hit: j%4 != 0, Status: 200,
				Hints: schedule.Hints{Desync: time.Second}}
			if o.Hit {
				o.Published = []time.Time{at}
				o.LatencyS = []float64{float64(1 + j%5)}
				if j >= benchPolls-benchItems*4/3 && len(items) < benchItems {
					items = append(items, storage.Item{
						ID: "r" + strconv.Itoa(j), Title: fmt.Sprintf("Temperature %d", j), Link: f.URL + "#" + strconv.Itoa(j),
						Summary:   `<p>Temperature <b>` + strconv.Itoa(20+j%7) + ` °C</b> at <a href="https://example.org/map">the mast</a>.</p>`,
						Published: at, Reading: &storage.Reading{Value: 20 + float64(j%7), Unit: "C", Time: at},
					})
				}
			} else if j%8 == 0 {
				o.Status, o.Err = 503, "HTTP 503 Service Unavailable"
			}
			if _, err := st.RecordPoll(f.ID, o, func(f *storage.Feed) error {
				f.Polls++
				f.LastFetch = o.At
				if o.Hit {
					f.Hits++
					f.LastHit = o.At
				}
				return nil
			}); err != nil {
				return benchFixture{err: err}
			}
		}
		if _, err := st.AddItems(f.ID, items); err != nil {
			return benchFixture{err: err}
		}
		agg.states[f.ID] = schedule.State{Median: period, Sigma: time.Second, Gaps: 50}
		agg.next[f.ID] = t0.Add(period / 2)
	}
	auth := web.NewAuth(web.AuthOptions{Loopback: true, Now: clock.Now})
	u, err := New(Options{Store: st, Auth: auth, Aggregator: agg, BaseURL: "http://127.0.0.1:8080", Now: clock.Now})
	if err != nil {
		return benchFixture{err: err}
	}
	h := web.New(web.Options{Store: st, Aggregator: agg, Auth: auth, UI: u, Now: clock.Now})
	return benchFixture{h: h, ui: u, feed: mid}
}

// benchPage renders path through the whole handler b.N times; with
// cold set, the feeds' latency cache is emptied before each.
func benchPage(b *testing.B, path string, cold bool) {
	fx := benchSetup(b)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		if cold {
			fx.ui.latency.mu.Lock()
			clear(fx.ui.latency.entries)
			fx.ui.latency.mu.Unlock()
		}
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1:8080"
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %.300s", rec.Code, rec.Body)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(size), "bytes/page")
}

// BenchmarkFeedsList renders the feeds list of a slogfeed with 1,000
// feeds, each with 200 polls and 50 items.
// "cold" reads every feed's latencies (the first view, or every feed
// polled since the last); "cached" only the feeds polled since (none).
func BenchmarkFeedsList(b *testing.B) {
	b.Run("cold", func(b *testing.B) { benchPage(b, "/ui/feeds", true) })
	b.Run("cached", func(b *testing.B) { benchPage(b, "/ui/feeds", false) })
}

// BenchmarkFeedPage renders the page of one of those feeds.
func BenchmarkFeedPage(b *testing.B) {
	fx := benchSetup(b)
	benchPage(b, "/ui/feeds/"+strconv.FormatUint(fx.feed, 10), false)
}
