package aggregator_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
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

// BenchmarkFleet's run: the fleet, how long the live loop learns the
// feeds before the measurement, and how long the measurement lasts.
var (
	fleetSizes    = flag.String("fleet.feeds", "1000,100000", "BenchmarkFleet: fleet sizes, comma-separated")
	fleetPeriod   = flag.Duration("fleet.period", 300*time.Second, "BenchmarkFleet: every feed's publishing period")
	fleetWarmup   = flag.Duration("fleet.warmup", 0, "BenchmarkFleet: time before the measurement (0: one period)")
	fleetMeasure  = flag.Duration("fleet.measure", 0, "BenchmarkFleet: measured time (0: a period and a minute, what the starved count needs)")
	fleetInProc   = flag.Bool("fleet.inprocess", false, "BenchmarkFleet: serve the loopback fleet in the benchmark's process (its CPU and memory then count as slogfeed's)")
	fleetDurable  = flag.Bool("fleet.durable-create", false, "BenchmarkFleet: create the feeds on the fsynced store too (slower set-up; polls are always fsynced)")
	fleetProgress = flag.Bool("fleet.progress", false, "BenchmarkFleet: log set-up progress")
	fleetHeapProf = flag.String("fleet.heapprofile", "", "BenchmarkFleet: write a heap profile of the end of the measurement to this file (a size's name is added when several are run)")
	fleetKeep     = flag.Int("fleet.keep", 200, "BenchmarkFleet: newest items a feed keeps (the store's default retention, as serve's --keep-items; 0 keeps every item)")
	fleetPrefill  = flag.Int("fleet.prefill", 0, "BenchmarkFleet: items each feed holds before the run, published in the periods before the fleet's own (a node that has run that long; with -fleet.keep, one whose feeds are at their retention)")
	fleetPages    = flag.Bool("fleet.pages", false, "BenchmarkFleet: log, at the end, each bucket's pages of the data file and how many of them are resident")
)

const (
	fleetHosts = 8
	fleetItems = 5 // items a feed lists
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
	stored   int // items stored in the measurement
	itemB    int // their bytes, encoded as the store encodes them (JSON)
	measured bool
}

func (st *fleetStats) fetched(ev aggregator.Fetched, idx map[uint64]int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.measured {
		return
	}
	st.polls++
	st.stored += len(ev.Added)
	for i := range ev.Added {
		if data, err := json.Marshal(&ev.Added[i]); err == nil {
			st.itemB += len(data)
		}
	}
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

// rssParts is the process's resident set now, in bytes: anonymous memory
// (the Go heap and stacks) and file pages (bbolt's mapped data file and
// the binary), from /proc/self/status.
func rssParts() (anon, file int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "RssAnon":
			anon = n * 1024
		case "RssFile":
			file = n * 1024
		}
	}
	return anon, file
}

// fleetPublisherEnv asks TestFleetPublisher to serve a fleet.
const fleetPublisherEnv = "SLOGFEED_FLEET_PUBLISHER"

// TestFleetPublisher serves BenchmarkFleet's loopback fleet in a process
// of its own when the benchmark starts it; otherwise it is skipped.
func TestFleetPublisher(t *testing.T) { aggtest.ServeFleetProcess(t, fleetPublisherEnv) }

// startFleet serves the benchmark's fleet, in a process of its own unless
// -fleet.inprocess.
func startFleet(b *testing.B, period time.Duration) *aggtest.Fleet {
	if *fleetInProc {
		return aggtest.StartFleet(b, fleetHosts, period, fleetItems)
	}
	epoch := time.Now().Add(-time.Duration(fleetItems) * period)
	p, _ := aggtest.StartFleetProcess(b, "TestFleetPublisher", fleetPublisherEnv, epoch, period, fleetItems, fleetHosts)
	return p
}

// BenchmarkFleet runs the live loop (default policy, 64 workers) over
// loopback fleets (-fleet.feeds, 1,000 and 100,000 by default) that each
// publish every -fleet.period (300 s), at a phase of their own, on 8
// addresses 127.0.0.x with conditional GET, served by a process of its
// own (this test binary again, TestFleetPublisher) so that what is
// measured is slogfeed's alone; -fleet.inprocess serves it here instead.
// The feeds are created on an unsynced store (-fleet.durable-create: an
// fsynced one), which is then reopened fsynced, as serve runs it, for the
// polls. It runs -fleet.warmup (a period), then measures -fleet.measure
// (a period and a minute) of wall time, and reports the median and
// maximum use latency (publish → stored) of the items published during
// the measurement, polls/s, the feeds none of whose items was stored in
// the last period and a minute (starved; reported only when the
// measurement lasts that long), CPU per poll, the process's peak RSS per
// feed with, at the end, its anonymous memory and its resident file pages
// (bbolt's mapped file) per feed, the data file's pages the measurement
// read or wrote per feed (file-used-B/feed: its working set over the
// measurement), the data file's size and pages in use
// per feed at the end, its growth per feed per day, as the file's size
// and as its pages in use, and its pages in use per stored item. The
// store keeps -fleet.keep items a feed (serve's default retention), and
// -fleet.prefill starts every feed with that many older items.
// -fleet.pages splits the data file by bucket (pages, fill, resident)
// and -fleet.heapprofile writes a heap profile at the end. b.N is
// ignored: one run per size.
func BenchmarkFleet(b *testing.B) {
	if *fleetHeapProf != "" {
		// Per-feed structures are small: sample finely enough to see
		// each of them.
		runtime.MemProfileRate = 4096
	}
	for _, f := range strings.Split(*fleetSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("-fleet.feeds: %q is not a size", f)
		}
		b.Run(fmt.Sprintf("feeds-%d", n), func(b *testing.B) { runFleet(b, n) })
	}
}

func runFleet(b *testing.B, n int) {
	period := *fleetPeriod
	warmup, measure := *fleetWarmup, *fleetMeasure
	if warmup <= 0 {
		warmup = period
	}
	if measure <= 0 {
		measure = period + fleetGrace
	}
	pub := startFleet(b, period)
	path := filepath.Join(b.TempDir(), "fleet.db")
	retain := storage.Retention{MaxItems: *fleetKeep}
	st, err := storage.Open(path, storage.Options{NoSync: !*fleetDurable, DefaultRetention: retain})
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	for i := range n {
		f := storage.Feed{URL: pub.URL(i), Kind: storage.KindRemote, Policy: schedule.DefaultPolicy}
		if err := st.CreateFeed(&f); err != nil {
			b.Fatal(err)
		}
		if *fleetPrefill > 0 {
			if _, err := st.AddItems(f.ID, prefillItems(i, *fleetPrefill, pub.Epoch, period)); err != nil {
				b.Fatal(err)
			}
		}
		if *fleetProgress && (i+1)%100_000 == 0 {
			b.Logf("%d feeds created in %v", i+1, time.Since(began).Round(time.Second))
		}
	}
	st.Close()
	if st, err = storage.Open(path, storage.Options{DefaultRetention: retain}); err != nil {
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
	feeds = nil
	stats := &fleetStats{lastHit: make([]time.Time, n)}
	fetcher := fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	svc, err := aggregator.NewService(aggregator.ServiceOptions{Store: st, Fetcher: fetcher, Scheduler: schedule.Config{Workers: 64}})
	if err != nil {
		b.Fatal(err)
	}
	svc.Watch(aggregator.Watcher{Fetched: func(ev aggregator.Fetched) { stats.fetched(ev, idx) }})
	if err := svc.Load(); err != nil {
		b.Fatal(err)
	}
	if *fleetProgress {
		b.Logf("%d feeds created and loaded in %v", n, time.Since(began).Round(time.Second))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	b.ResetTimer()

	time.Sleep(warmup) // the live loop runs on the wall clock: this is the run
	size0, err := st.Size()
	if err != nil {
		b.Fatal(err)
	}
	used0, err := st.InUse()
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := aggtest.CPUTime()
	refsCleared := clearRefs() == nil
	stats.mu.Lock()
	stats.from, stats.measured = time.Now(), true
	stats.mu.Unlock()
	time.Sleep(measure)
	stats.mu.Lock()
	stats.measured = false
	end := time.Now()
	polls, lat, stored, itemB := stats.polls, slices.Clone(stats.lat), stats.stored, stats.itemB
	starved := 0
	for _, t := range stats.lastHit {
		if t.Before(end.Add(-period - fleetGrace)) {
			starved++
		}
	}
	measured := end.Sub(stats.from)
	stats.mu.Unlock()
	cpu := aggtest.CPUTime() - cpu0
	anon, file := rssParts()
	_, fileRef, refErr := fileReferenced(path)
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
	fleetEndReport(b, n, path)
	runtime.KeepAlive(svc) // its per-feed state is what the report measures

	slices.Sort(lat)
	med, worst := 0.0, 0.0
	if len(lat) > 0 {
		med, worst = lat[len(lat)/2], lat[len(lat)-1]
	}
	b.ReportMetric(med, "median-latency-s")
	b.ReportMetric(worst, "max-latency-s")
	b.ReportMetric(float64(polls)/measured.Seconds(), "polls/s")
	if measured >= period+fleetGrace {
		b.ReportMetric(float64(starved), "starved-feeds")
	}
	if polls > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(polls), "cpu-µs/poll")
	}
	b.ReportMetric(float64(peakRSS())/float64(n), "rss-B/feed")
	b.ReportMetric(float64(anon)/float64(n), "anon-B/feed")
	b.ReportMetric(float64(file)/float64(n), "file-pages-B/feed")
	if refsCleared && refErr == nil {
		// The data file's working set: its pages the measurement used.
		b.ReportMetric(float64(fileRef)/float64(n), "file-used-B/feed")
	}
	b.ReportMetric(float64(size1)/float64(n), "file-B/feed")
	b.ReportMetric(float64(used1)/float64(n), "in-use-B/feed")
	b.ReportMetric(float64(size1-size0)/float64(n)/measured.Hours()*24, "file-B/feed/day")
	// The file's size is its high-water mark (a commit's new pages before
	// the old ones are freed); the pages in use are what is stored.
	b.ReportMetric(float64(used1-used0)/float64(n)/measured.Hours()*24, "data-B/feed/day")
	if stored > 0 {
		b.ReportMetric(float64(used1-used0)/float64(stored), "data-B/item")
		b.ReportMetric(float64(itemB)/float64(stored), "item-B")
	}
	where := "in its own process"
	if *fleetInProc {
		where = "in this process (counted)"
	}
	b.Logf("%d feeds, publisher %s: %d items published in the measurement stored (%d items in all), %d polls in %v; at the end %d MiB anonymous, %d MiB file pages resident",
		n, where, len(lat), stored, polls, measured.Round(time.Second), anon>>20, file>>20)
}

// fleetEndReport logs where the process's memory is at the end of a
// measurement: the Go runtime's split of it, and with -fleet.pages each
// bucket's pages of the data file at path and those resident; it writes
// -fleet.heapprofile.
func fleetEndReport(b *testing.B, n int, path string) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	per := func(v uint64) float64 { return float64(v) / float64(n) }
	b.Logf("Go runtime per feed: heap allocated %.0f B (live and not yet collected), heap in use %.0f B, heap idle not released %.0f B, stacks %.0f B, other runtime %.0f B; next GC at %.0f B",
		per(ms.HeapAlloc), per(ms.HeapInuse), per(ms.HeapIdle-ms.HeapReleased), per(ms.StackInuse),
		per(ms.MSpanInuse+ms.MCacheInuse+ms.BuckHashSys+ms.GCSys+ms.OtherSys), per(ms.NextGC))
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.Logf("Go runtime per feed after a collection: heap live %.0f B", per(ms.HeapAlloc))
	if *fleetHeapProf != "" {
		name := *fleetHeapProf
		if strings.Contains(*fleetSizes, ",") {
			name = fmt.Sprintf("%s.%d", name, n)
		}
		if f, err := os.Create(name); err != nil {
			b.Errorf("heap profile: %v", err)
		} else {
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Errorf("heap profile: %v", err)
			}
			f.Close()
		}
	}
	if !*fleetPages {
		return
	}
	parts, err := fileBuckets(path)
	if err != nil {
		b.Errorf("data file's pages: %v", err)
		return
	}
	psz := float64(os.Getpagesize())
	var all, res int64
	var tab strings.Builder
	for _, p := range parts {
		if p.pages == 0 {
			fmt.Fprintf(&tab, "\n  %-36s bytes in use %7.0f B/feed", p.name, float64(p.used)/float64(n))
			continue
		}
		all += p.pages
		res += p.resident
		fill := 0.0
		if p.pages > 0 {
			fill = 100 * float64(p.used) / (float64(p.pages) * psz)
		}
		fmt.Fprintf(&tab, "\n  %-36s %9d pages %7.0f B/feed (%3.0f%% full), resident %9d pages %7.0f B/feed", p.name, p.pages, float64(p.pages)*psz/float64(n), fill, p.resident, float64(p.resident)*psz/float64(n))
	}
	fmt.Fprintf(&tab, "\n  %-36s %9d pages %7.0f B/feed,             resident %9d pages %7.0f B/feed", "data file", all, float64(all)*psz/float64(n), res, float64(res)*psz/float64(n))
	// On standard error: a benchmark's log keeps its first lines only.
	fmt.Fprintf(os.Stderr, "%s: the data file by bucket:%s\n", b.Name(), tab.String())
}

// prefillItems are the k items feed i held before the fleet's own, one a
// period, the newest a period before epoch, shaped like the fleet's.
func prefillItems(i, k int, epoch time.Time, period time.Duration) []storage.Item {
	items := make([]storage.Item, k)
	for j := range items {
		at := epoch.Add(-time.Duration(k-j) * period)
		id := fmt.Sprintf("p%d-%d", i, j)
		items[j] = storage.Item{ID: id, GUID: id, Title: fmt.Sprintf("reading p%d", j),
			Summary: fmt.Sprintf("%d.%d C", i%40, j%10), Published: at, Fetched: at}
	}
	return items
}
