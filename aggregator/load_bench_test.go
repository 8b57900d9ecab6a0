package aggregator_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

var (
	loadFeeds = flag.Int("load.feeds", 1000, "BenchmarkLoad: feeds in the store")
	loadObs   = flag.Int("load.obs", 500, "BenchmarkLoad: observations a feed")
)

// BenchmarkLoad times Service.Load, what `serve` does before it listens:
// every remote feed scheduled with its policy rebuilt from its stored
// observations. It reports the time per feed and per observation, from
// which the start-up at other sizes follows (it grows with feeds ×
// observations kept, at most storage.DefaultMaxObservations a feed).
//
//	go test -run '^$' -bench BenchmarkLoad ./aggregator/ -args -load.feeds 1000 -load.obs 2000
func BenchmarkLoad(b *testing.B) {
	st, err := storage.Open(filepath.Join(b.TempDir(), "load.db"), storage.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make(chan error, *loadFeeds)
	for i := range *loadFeeds {
		f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://s%d.example/f.rss", i), Policy: schedule.DefaultPolicy}
		if err := st.CreateFeed(&f); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func(id uint64) { // concurrent writers share group commits
			defer wg.Done()
			for j := range *loadObs {
				at := t0.Add(time.Duration(j) * time.Hour)
				o := storage.Observation{At: at.Add(3 * time.Second), Hit: j%5 != 0, Status: 200}
				if o.Hit {
					o.Published = []time.Time{at}
					o.LatencyS = []float64{3}
				}
				if err := st.AddObservation(id, o); err != nil {
					errs <- err
					return
				}
			}
		}(f.ID)
		if i%64 == 63 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	for b.Loop() {
		svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher.New(fetcher.Options{})})
		if err != nil {
			b.Fatal(err)
		}
		if err := svc.Load(); err != nil {
			b.Fatal(err)
		}
	}
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(per/float64(*loadFeeds)/1e3, "µs/feed")
	b.ReportMetric(per/float64(*loadFeeds**loadObs), "ns/observation")
}
