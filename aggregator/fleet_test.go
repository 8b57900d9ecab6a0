package aggregator_test

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/aggregator/aggtest"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// BenchmarkFleet's run: how long the live loop learns the feeds before
// the measurement, and how long the measurement lasts (a multiple of
// fleetPeriod is best).
var (
	fleetWarmup  = flag.Duration("fleet.warmup", fleetPeriod, "BenchmarkFleet: time before the measurement")
	fleetMeasure = flag.Duration("fleet.measure", fleetPeriod+fleetGrace, "BenchmarkFleet: measured time (at least a period and a minute)")
)

const (
	fleetPeriod = 300 * time.Second
	fleetHosts  = 8
	fleetItems  = 5 // items a feed lists
	// fleetGrace: a feed is starved when none of its items was stored in
	// the last period and this grace of the run.
	fleetGrace = time.Minute
)

// fleetStats gathers what the watcher hears during the measurement.
type fleetStats struct {
	mu       sync.Mutex
	from     time.Time
	polls    int
	lat      []float64 // use latency of items published after from, s
	lastHit  []time.Time
	measured bool
}

func (st *fleetStats) fetched(ev aggregator.Fetched, idx map[uint64]int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.measured {
		return
	}
	st.polls++
	for _, it := range ev.Added {
		if !it.Published.Before(st.from) {
			st.lat = append(st.lat, ev.At.Sub(it.Published).Seconds())
		}
	}
	if len(ev.Added) > 0 {
		st.lastHit[idx[ev.Feed.ID]] = ev.At
	}
}

// peakRSS is the process's peak resident set in bytes (Linux).
func peakRSS() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss * 1024
}

// BenchmarkFleet runs the live loop (default policy, 64 workers) over 1,000
// and 100,000 loopback feeds that publish every 300 s, each at its own
// phase, on 8 addresses 127.0.0.x with conditional GET, for
// -fleet.warmup then -fleet.measure of wall time (11 minutes for each
// size by default: run it alone). It reports the median and maximum use
// latency (publish → stored) of the items published during the
// measurement, polls/s, the feeds none of whose items was stored in the
// last period and a minute of the run (starved; every feed publishes once
// a period),
// CPU per poll (the loopback publisher's included), the process's peak
// RSS per feed (publisher, Go runtime and bbolt's mapped pages included)
// and the data file's growth per feed per day, both as the file's size
// and as its pages in use. b.N is ignored: one run.
func BenchmarkFleet(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("feeds-%d", n), func(b *testing.B) { runFleet(b, n) })
	}
}

func runFleet(b *testing.B, n int) {
	pub := aggtest.StartFleet(b, fleetHosts, fleetPeriod, fleetItems)
	path := filepath.Join(b.TempDir(), "fleet.db")
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if err := st.CreateFeed(&storage.Feed{URL: pub.URL(i), Kind: storage.KindRemote, Policy: schedule.DefaultPolicy}); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	if st, err = storage.Open(path, storage.Options{}); err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	feeds, err := st.Feeds()
	if err != nil {
		b.Fatal(err)
	}
	idx := make(map[uint64]int, n)
	for i, f := range feeds {
		idx[f.ID] = i
	}
	stats := &fleetStats{lastHit: make([]time.Time, len(feeds))}
	fetcher := fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher, Scheduler: schedule.Config{Workers: 64}})
	if err != nil {
		b.Fatal(err)
	}
	svc.Watch(aggregator.Watcher{Fetched: func(ev aggregator.Fetched) { stats.fetched(ev, idx) }})
	if err := svc.Load(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	b.ResetTimer()

	time.Sleep(*fleetWarmup) // the live loop runs on the wall clock: this is the run
	size0, err := st.Size()
	if err != nil {
		b.Fatal(err)
	}
	used0, err := st.InUse()
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := aggtest.CPUTime()
	stats.mu.Lock()
	stats.from, stats.measured = time.Now(), true
	stats.mu.Unlock()
	time.Sleep(*fleetMeasure)
	stats.mu.Lock()
	stats.measured = false
	end := time.Now()
	polls, lat := stats.polls, slices.Clone(stats.lat)
	starved := 0
	for _, t := range stats.lastHit {
		if t.Before(end.Add(-fleetPeriod - fleetGrace)) {
			starved++
		}
	}
	measured := end.Sub(stats.from)
	stats.mu.Unlock()
	cpu := aggtest.CPUTime() - cpu0
	size1, err := st.Size()
	if err != nil {
		b.Fatal(err)
	}
	used1, err := st.InUse()
	if err != nil {
		b.Fatal(err)
	}
	cancel()
	<-done
	b.StopTimer()

	slices.Sort(lat)
	med, worst := 0.0, 0.0
	if len(lat) > 0 {
		med, worst = lat[len(lat)/2], lat[len(lat)-1]
	}
	b.ReportMetric(med, "median-latency-s")
	b.ReportMetric(worst, "max-latency-s")
	b.ReportMetric(float64(polls)/measured.Seconds(), "polls/s")
	b.ReportMetric(float64(starved), "starved-feeds")
	if polls > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(polls), "cpu-µs/poll")
	}
	b.ReportMetric(float64(peakRSS())/float64(n), "rss-B/feed")
	b.ReportMetric(float64(size1-size0)/float64(n)/measured.Hours()*24, "file-B/feed/day")
	// The file's size is its high-water mark (a commit's new pages before
	// the old ones are freed); the pages in use are what is stored.
	b.ReportMetric(float64(used1-used0)/float64(n)/measured.Hours()*24, "data-B/feed/day")
	b.Logf("%d feeds: %d items published in the measurement stored, %d polls in %v", n, len(lat), polls, measured.Round(time.Second))
}
