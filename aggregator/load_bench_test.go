package aggregator_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
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
	loadStore = flag.String("load.store", "", "BenchmarkStartup: the store's file, built unless it exists (kept for the next run)")
)

// buildLoadStore fills a store at path with feeds remote feeds of
// obs hourly polls each (one in five a miss), written as a running
// service writes them (the policy states folded in), the newest poll of
// feed i at end minus i's share of an hour: about half the feeds are due
// at end.
func buildLoadStore(b *testing.B, path string, feeds, obs int, end time.Time) {
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	st.SetLearner(aggregator.Learn)
	var wg sync.WaitGroup
	errs := make(chan error, 128)
	next := make(chan int, 1024)
	go func() {
		defer close(next)
		for i := range feeds {
			next <- i
		}
	}()
	for range 128 { // concurrent writers share group commits
		wg.Go(func() {
			for i := range next {
				f := storage.Feed{Kind: storage.KindRemote, URL: fmt.Sprintf("https://s%d.example/f.rss", i), Policy: schedule.DefaultPolicy}
				if err := st.CreateFeed(&f); err != nil {
					errs <- err
					return
				}
				phase := time.Duration(i%3600) * time.Second
				t0 := end.Add(-time.Duration(obs)*time.Hour - phase)
				for j := range obs {
					at := t0.Add(time.Duration(j+1) * time.Hour)
					o := storage.Observation{At: at.Add(3 * time.Second), Hit: j%5 != 0, Status: 200}
					if o.Hit {
						o.Published = []time.Time{at}
						o.LatencyS = []float64{3}
					}
					if err := st.AddObservation(f.ID, o); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkLoad times Service.Load, what a start-up does to schedule
// every remote feed, side by side: "replay" rebuilds each policy from
// its stored observations (a store without policy states), "states"
// restores it from the state stored with the polls. It reports the time
// per feed and, for the replay, per observation; the replay grows with
// the observations kept (at most storage.DefaultMaxObservations a
// feed), the restore does not.
//
//	go test -run '^$' -bench BenchmarkLoad ./aggregator/ -args -load.feeds 1000 -load.obs 500
func BenchmarkLoad(b *testing.B) {
	path := filepath.Join(b.TempDir(), "load.db")
	buildLoadStore(b, path, *loadFeeds, *loadObs, time.Now())
	st, err := storage.Open(path, storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, mode := range []string{"replay", "states"} {
		b.Run(mode, func(b *testing.B) {
			var store aggregator.Store = st
			if mode == "replay" {
				store = replayOnly{st}
			}
			for b.Loop() {
				svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: store, Fetcher: fetcher.New(fetcher.Options{})})
				if err != nil {
					b.Fatal(err)
				}
				if err := svc.Load(); err != nil {
					b.Fatal(err)
				}
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(per/float64(*loadFeeds)/1e3, "µs/feed")
			if mode == "replay" {
				b.ReportMetric(per/float64(*loadFeeds**loadObs), "ns/observation")
			}
		})
	}
}

// BenchmarkStartup times a start-up as serve does it on a durable store
// of -load.feeds feeds with -load.obs polls each: the service runs and
// loads in the background (LoadInBackground), polling due feeds as soon
// as they are scheduled. It reports the time until the service could
// listen (the load under way), until the first poll of a due feed,
// until every feed is scheduled, all from the store's opening, which it
// reports on its own, and the policy state's bytes per feed.
//
//	go test -run '^$' -bench BenchmarkStartup -benchtime 1x ./aggregator/ -args -load.feeds 100000 -load.obs 24
func BenchmarkStartup(b *testing.B) {
	path := *loadStore
	if path == "" {
		path = filepath.Join(b.TempDir(), "startup.db")
	}
	if _, err := os.Stat(path); err != nil {
		buildStart := time.Now()
		buildLoadStore(b, path, *loadFeeds, *loadObs, time.Now())
		b.Logf("store of %d feeds × %d polls built in %v", *loadFeeds, *loadObs, time.Since(buildStart).Round(time.Millisecond))
	}
	// Opening the file is the start-up's first step: bbolt rebuilds its
	// free list from the pages.
	openStart := time.Now()
	st, err := storage.Open(path, storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	open := time.Since(openStart)
	if fi, err := os.Stat(path); err == nil {
		b.Logf("store file of %d MiB opened in %v", fi.Size()>>20, open.Round(time.Millisecond))
	}
	// The state's bytes: a sample of the feeds.
	var stateBytes, sampled int
	for id := uint64(1); id <= uint64(*loadFeeds); id += uint64(max(1, *loadFeeds/1000)) {
		ps, ok, err := st.PolicyStateOf(id)
		if err != nil || !ok {
			b.Fatalf("feed %d: state %v, %v", id, ok, err)
		}
		stateBytes += len(ps.Policy) + 17 // with storage's header
		sampled++
	}
	var listen, firstPoll, loaded time.Duration
	for b.Loop() {
		polled := make(chan struct{})
		var once sync.Once
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(polled) })
			w.WriteHeader(http.StatusNotModified)
		})
		start := time.Now().Add(-open)
		svc, err := aggregator.NewService(aggregator.ServiceOptions{
			Store: st, Fetcher: fetcher.New(fetcher.Options{Transport: benchTransport{h}}),
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		run := make(chan error, 1)
		go func() { run <- svc.Run(ctx) }()
		done := svc.LoadInBackground(ctx)
		listen = time.Since(start)
		<-polled
		firstPoll = time.Since(start)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		loaded = time.Since(start)
		if p := svc.LoadProgress(); p.Done != *loadFeeds || p.Replayed != 0 {
			b.Fatalf("progress %+v", p)
		}
		cancel()
		if err := <-run; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(open.Microseconds())/1e3, "ms-to-open")
	b.ReportMetric(float64(listen.Microseconds())/1e3, "ms-to-listen")
	b.ReportMetric(float64(firstPoll.Microseconds())/1e3, "ms-to-first-poll")
	b.ReportMetric(loaded.Seconds(), "s-to-loaded")
	b.ReportMetric(float64(stateBytes)/float64(sampled), "state-B/feed")
}

// benchTransport serves every request with a handler.
type benchTransport struct{ h http.Handler }

func (t benchTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// BenchmarkLearn times what a poll's write adds to keep its feed's
// policy state: restoring auto's state (a day of hourly polls learned),
// learning the poll's observation and encoding the state again, inside
// the write's transaction.
func BenchmarkLearn(b *testing.B) {
	f := storage.Feed{ID: 7, Kind: storage.KindRemote, Policy: schedule.DefaultPolicy}
	st := storage.PolicyState{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	obs := func(j int) storage.Observation {
		at := t0.Add(time.Duration(j) * time.Hour)
		o := storage.Observation{At: at.Add(3 * time.Second), Hit: j%5 != 0, Status: 200}
		if o.Hit {
			o.Published = []time.Time{at}
		}
		return o
	}
	for j := range 24 {
		o := obs(j)
		var ok bool
		if st, ok = aggregator.Learn(&f, &st, &o); !ok {
			b.Fatal("auto keeps no state")
		}
	}
	j := 24
	for b.Loop() {
		o := obs(j)
		st, _ = aggregator.Learn(&f, &st, &o)
		j++
	}
}
