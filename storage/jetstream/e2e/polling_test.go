package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/aggregator/aggtest"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// BenchmarkPolling's run: the feeds, the aggregator's workers per node,
// and the wall time each setup learns and is measured after its first
// fetch of every feed.
var (
	pollFeeds    = flag.Int("poll.feeds", 20_000, "BenchmarkPolling: loopback feeds")
	pollWorkers  = flag.Int("poll.workers", 64, "BenchmarkPolling: aggregator workers per node")
	pollWarmup   = flag.Duration("poll.warmup", pollPeriod, "BenchmarkPolling: time after the first fetches before the measurement")
	pollMeasure  = flag.Duration("poll.measure", 2*pollPeriod, "BenchmarkPolling: measured time")
	pollResync   = flag.Duration("poll.resync", 0, "BenchmarkPolling: how often a JetStream node lists the feed IDs (aggregator ServiceOptions.Resync; 0: its default, 15 s; negative: never)")
	pollLog      = flag.String("poll.log", "warn", "BenchmarkPolling: the level of the nodes' logs on standard error (debug, info, warn, error)")
	pollSnaps    = flag.Duration("poll.snapshots", 0, "BenchmarkPolling: how often a JetStream node writes each of its shards' state snapshots (aggregator ServiceOptions.SnapshotEvery; 0: its default, 5 min; negative: never)")
	pollEvery    = flag.Duration("poll.period", pollPeriod, "BenchmarkPolling: every feed's publishing period")
	pollSetups   = flag.String("poll.setups", "bbolt,jetstream-1,jetstream-3", "BenchmarkPolling: the setups run, comma-separated")
	pollInProc   = flag.Bool("poll.inprocess", true, "BenchmarkPolling: serve the loopback fleet in the benchmark's process (false: in a process of its own, whose CPU is reported apart)")
	pollDirect   = flag.Bool("poll.direct", false, "BenchmarkPolling: JetStream setups write the feed records straight into the defs bucket, concurrently (-poll.creators), rather than one CreateFeed after the other")
	pollLearned  = flag.Bool("poll.learned", false, "BenchmarkPolling: with -poll.direct, each record carries the policy state a first fetch of the feed right after its newest publish left (aggregator.Learn), so the nodes start at their learned predictions instead of fetching every feed at once")
	pollCreators = flag.Int("poll.creators", 4, "BenchmarkPolling: concurrent writers of -poll.direct")
	pollLateAge  = flag.Duration("poll.late", 0, "BenchmarkPolling: an item published this long before the end of the measurement and not stored is late (0: half a period)")
	pollKill     = flag.Bool("poll.kill", false, "BenchmarkPolling: after the measurement of jetstream-3, kill one node and its JetStream server and measure the takeover, then -poll.after of polling")
	pollKillSrv  = flag.Bool("poll.kill-server", true, "BenchmarkPolling: -poll.kill stops the killed node's JetStream server too")
	pollAfter    = flag.Duration("poll.after", 3*time.Minute, "BenchmarkPolling: measured time after the takeover of -poll.kill")
	pollProgress = flag.Duration("poll.progress", 0, "BenchmarkPolling: log progress (feeds fetched, polls, memory) on standard error this often (0: never)")
	pollMaxRSS   = flag.Float64("poll.maxrss-gib", 0, "BenchmarkPolling: fail when the process's resident set passes this many GiB (0: no limit)")
	pollDocItems = flag.Int("poll.items", pollItems, "BenchmarkPolling: items a document lists")
	pollTakeProf = flag.String("poll.takeprofile", "", "BenchmarkPolling: with -poll.kill, write a CPU profile of the takeover (from the kill until its measurement ends: every feed scheduled and every survivor reporting its change loaded) to this file")
	pollHeapProf = flag.String("poll.heapprofile", "", "BenchmarkPolling: write a heap profile at the end of each measurement to this file (the setup's name is added)")
)

const (
	pollPeriod = 60 * time.Second
	pollHosts  = 8
	pollItems  = 5 // items a document lists
	pollShards = 64
	// pollLate: an item published in the measurement at least this long
	// before its end and not stored by then is counted late.
	pollLate = pollPeriod / 2
	// pollCallTimeout bounds each JetStream backend call. Listing the
	// feeds (Load, and each resync of a clustered aggregator) is one call
	// of a KV get per feed: within serve's 5 s (DefaultCallTimeout) it
	// failed for 1,000 feeds on the 3-server cluster, and 2 minutes were
	// not enough for 20,000.
	pollCallTimeout = 10 * time.Minute
	// pollStall fails a first-fetch pass that makes no progress this long.
	pollStall = 3 * time.Minute
)

// pollStats gathers what the nodes' watchers hear: the feeds fetched at
// least once, and in the measurement the polls, the use latency (publish
// → stored, from the fleet's exact publish time) of the items published
// in it, and which of those were stored.
type pollStats struct {
	pub    *aggtest.Fleet
	pubPID int // the fleet's process (0: this one)
	nodes  int // slogfeed nodes of the setup
	abort  atomic.Value

	mu        sync.Mutex
	lastAt    []time.Time // each feed's last poll heard
	fetched   []bool
	nFetched  int
	measuring bool
	from      time.Time
	polls     int
	total     int // polls since the start
	lat       []float64
	stored    map[[2]int]bool
	// reads, when set, returns the nodes' poll reads by read (pollReads).
	reads func() map[string]float64
}

func newPollStats(pub *aggtest.Fleet, pubPID, n, nodes int) *pollStats {
	return &pollStats{pub: pub, pubPID: pubPID, nodes: nodes, lastAt: make([]time.Time, n), fetched: make([]bool, n), stored: map[[2]int]bool{}}
}

func (st *pollStats) watcher() aggregator.Watcher {
	return aggregator.Watcher{Fetched: st.heard}
}

func (st *pollStats) heard(ev aggregator.Fetched) {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if i, ok := st.pub.FeedOf(ev.Feed.URL); ok && i < len(st.fetched) {
		st.lastAt[i] = now
		if !st.fetched[i] {
			st.fetched[i] = true
			st.nFetched++
		}
	}
	st.total++
	if !st.measuring {
		return
	}
	st.polls++
	for _, it := range ev.Added {
		i, j, ok := st.pub.Item(it.GUID)
		if !ok {
			continue
		}
		if at := st.pub.Published(i, j); !at.Before(st.from) {
			st.lat = append(st.lat, now.Sub(at).Seconds())
			st.stored[[2]int{i, j}] = true
		}
	}
}

// waitFirst waits until every feed was fetched once, failing when no
// feed is fetched for pollStall.
func (st *pollStats) waitFirst(b *testing.B) {
	last, since := -1, time.Now()
	for {
		st.mu.Lock()
		n := st.nFetched
		st.mu.Unlock()
		if n == len(st.fetched) {
			return
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > pollStall {
			b.Fatalf("first fetches stalled at %d of %d feeds", n, len(st.fetched))
		}
		st.pause(b, 200*time.Millisecond) // the live loop runs on the wall clock
	}
}

// measure runs a measurement window of d and reports its figures, each
// metric's name prefixed with label.
func (st *pollStats) measure(b *testing.B, label string, d time.Duration) {
	load0 := loadAvg()
	st.mu.Lock()
	st.measuring, st.from, st.polls, st.lat = true, time.Now(), 0, nil
	clear(st.stored)
	st.mu.Unlock()
	cpu0, pubCPU0 := aggtest.CPUTime(), procCPU(st.pubPID)
	var reads0 map[string]float64
	if st.reads != nil {
		reads0 = st.reads()
	}
	if label == "" {
		b.ResetTimer()
	} else {
		b.StartTimer()
	}
	st.pause(b, d) // the live loop runs on the wall clock: this is the run
	b.StopTimer()
	cpu, pubCPU := aggtest.CPUTime()-cpu0, procCPU(st.pubPID)-pubCPU0
	pollLate := *pollLateAge
	if pollLate <= 0 {
		pollLate = st.pub.Period / 2
	}
	st.mu.Lock()
	st.measuring = false
	end := time.Now()
	from, polls, lat := st.from, st.polls, slices.Clone(st.lat)
	// Items published in the window at least pollLate before its end.
	due, late := 0, 0
	for i := range st.fetched {
		for j := max(st.pub.Latest(i, from), 0); ; j++ {
			at := st.pub.Published(i, j)
			if at.After(end.Add(-pollLate)) {
				break
			}
			if at.Before(from) {
				continue
			}
			due++
			if !st.stored[[2]int{i, j}] {
				late++
			}
		}
	}
	st.mu.Unlock()

	measured := end.Sub(from)
	slices.Sort(lat)
	med, p90 := 0.0, 0.0
	if len(lat) > 0 {
		med, p90 = lat[len(lat)/2], lat[len(lat)*9/10]
	}
	n := len(st.fetched)
	b.ReportMetric(float64(polls)/measured.Seconds(), label+"polls/s")
	b.ReportMetric(med, label+"median-latency-s")
	b.ReportMetric(p90, label+"p90-latency-s")
	if polls > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(polls), label+"cpu-µs/poll")
		if st.pubPID != 0 {
			b.ReportMetric(float64(pubCPU.Microseconds())/float64(polls), label+"fleet-cpu-µs/poll")
		}
	}
	b.ReportMetric(float64(late), label+"late-items")
	if st.reads != nil && polls > 0 {
		reads := st.reads()
		for _, r := range []string{"record", "items"} {
			b.ReportMetric((reads[r]-reads0[r])/float64(polls), label+r+"-reads/poll")
		}
	}
	where := "in this process (its CPU counted)"
	if st.pubPID != 0 {
		where = fmt.Sprintf("in its own process (CPU %v, %.2f cores)", pubCPU.Round(time.Millisecond), pubCPU.Seconds()/measured.Seconds())
	}
	logf(b, "%s%d feeds: %d polls in %v (%.1f/s; the fleet publishes %.1f items/s); %d items published in it stored, median %.2f s, p90 %.2f s; %d of %d published %v before its end late or missing; CPU %v (%.2f cores); fleet %s; load average %s → %s",
		label, n, polls, measured.Round(time.Second), float64(polls)/measured.Seconds(), float64(n)/st.pub.Period.Seconds(),
		len(lat), med, p90, late, due, pollLate,
		cpu.Round(time.Millisecond), cpu.Seconds()/measured.Seconds(), where, load0, loadAvg())
}

// pause waits d (the live loop runs on the wall clock), failing the
// benchmark if the progress logger found the process past
// -poll.maxrss-gib.
func (st *pollStats) pause(tb testing.TB, d time.Duration) {
	end := time.Now().Add(d)
	for {
		if msg, ok := st.abort.Load().(string); ok {
			tb.Fatal(msg)
		}
		left := time.Until(end)
		if left <= 0 {
			return
		}
		time.Sleep(min(left, time.Second))
	}
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// BenchmarkPolling is the polling benchmark: the same loopback
// fleet of -poll.feeds feeds (20,000 by default) that each publish an item
// every -poll.period (60 s) at a phase of their own, on 8 addresses
// 127.0.0.x with conditional GET (aggtest.Fleet), polled in turn by the
// setups -poll.setups names (all by default)
//
//   - bbolt: one aggregator on a bbolt file (fsynced, as serve runs it);
//   - jetstream-1: one node (lease node and aggregator) on one embedded
//     JetStream server;
//   - jetstream-3: three nodes on an in-process 3-server JetStream cluster
//     (R3), the feeds split over 64 shards;
//
// each node with -poll.workers workers (64); a JetStream node lists every
// feed each -poll.resync (the aggregator's default, 15 s). Subscribing and the first
// fetch of every feed are set-up; then the nodes run -poll.warmup (60 s)
// to learn, and -poll.measure (2 min) is measured: polls/s, the median
// use latency (publish → stored, as the watcher hears of the stored
// poll) of the items published in the measurement, the process's CPU
// time per poll (the publisher and the JetStream servers run in this
// process too) and the items published at least 30 s before the end and
// not stored (late-items, -poll.late: half a period), with the p90
// latency and, at the end, the process's peak and present resident set
// per feed, its Go heap in use and live, and the live heap split between
// the JetStream servers and the nodes (readHeapShares). b.N is ignored:
// one run per setup, about 15 minutes in all at 20,000 feeds; run it
// alone with -benchtime 1x.
//
// For a million feeds: -poll.inprocess=false serves the fleet from a
// process of its own (its CPU reported apart); -poll.learned writes the
// feed records concurrently, each with the policy state and the items of
// a first fetch right after its newest publish, so the nodes start at
// their learned predictions rather than fetching a million feeds at
// once; the three nodes join before any loads its feeds. -poll.kill then
// kills one node and stops its JetStream server, reports the takeover
// (killAndTakeOver) and measures -poll.after of polling; -poll.progress
// logs on standard error, and -poll.maxrss-gib stops a run that grows
// past its memory:
//
//	go test -c -o /tmp/e2e.test ./storage/jetstream/e2e/
//	GOMEMLIMIT=12GiB /tmp/e2e.test -test.run '^$' -test.bench BenchmarkPolling -test.benchtime 1x -test.timeout 3h \
//	    -poll.feeds 1000000 -poll.items 1 -poll.period 1h -poll.setups jetstream-3 -poll.learned -poll.inprocess=false \
//	    -poll.kill -poll.warmup 15m -poll.measure 30m -poll.after 5m -poll.late 2m -poll.progress 1m -poll.maxrss-gib 14
func BenchmarkPolling(b *testing.B) {
	period := *pollEvery
	pub, pubPID := startPollFleet(b, period)
	n := *pollFeeds
	var level slog.Level
	if err := level.UnmarshalText([]byte(*pollLog)); err != nil {
		b.Fatalf("-poll.log: %v", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	urls := make([]string, n)
	for i := range urls {
		urls[i] = pub.URL(i)
	}
	setups := map[string]bool{}
	for _, s := range strings.Split(*pollSetups, ",") {
		setups[strings.TrimSpace(s)] = true
	}

	if setups["bbolt"] {
		b.Run("bbolt", func(b *testing.B) {
			st := newPollStats(pub, pubPID, n, 1)
			path := filepath.Join(b.TempDir(), "poll.db")
			// Subscribing without fsync, then the durable settings.
			db, err := storage.Open(path, storage.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			created := time.Now()
			for _, u := range urls {
				if err := db.CreateFeed(&storage.Feed{URL: u, Kind: storage.KindRemote, Policy: schedule.DefaultPolicy}); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			if db, err = storage.Open(path, storage.Options{}); err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			svc, err := aggregator.NewService(aggregator.ServiceOptions{
				Store:     db,
				Fetcher:   fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
				Scheduler: schedule.Config{Workers: *pollWorkers},
				Logger:    log,
			})
			if err != nil {
				b.Fatal(err)
			}
			svc.Watch(st.watcher())
			if err := svc.Load(); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- svc.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					b.Error(err)
				}
			}()
			runPolling(b, st, created, false, nil)
		})
	}

	for _, size := range []int{1, 3} {
		name := fmt.Sprintf("jetstream-%d", size)
		if !setups[name] {
			continue
		}
		b.Run(name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var c *jstest.Cluster
			if size == 1 {
				c = jstest.NewServer(b)
			} else {
				// Room for the feeds' items, observations and records.
				c = jstest.NewCluster(b, size, jstest.WithMaxStore(max(256<<20, int64(n)*16<<10)))
			}
			st := newPollStats(pub, pubPID, n, size)
			created := time.Now()
			seedConn, _, seed := connect(b, ctx, c, pollCallTimeout)
			defer seedConn.Close()
			if *pollDirect || *pollLearned {
				writeFeeds(b, ctx, seedConn, pub, n, *pollLearned, *pollCreators)
			} else {
				createFeeds(b, seed, urls)
			}
			logf(b, "%d feeds created in %v", n, time.Since(created).Round(time.Millisecond))
			var nodes []*node
			defer func() {
				for _, nd := range nodes {
					if nd != nil {
						nd.close(b)
					}
				}
			}()
			opt := nodeOptions{workers: *pollWorkers, shards: pollShards, watch: st.watcher(), callTimeout: pollCallTimeout, resync: *pollResync, snapshots: *pollSnaps}
			// Every node joins before any loads its feeds, so that each
			// loads its own share rather than all of them first.
			for k := range size {
				nodes = append(nodes, joinNode(b, ctx, c, fmt.Sprintf("n%d", k+1), log, opt))
			}
			st.reads = func() map[string]float64 { return pollReads(nodes) }
			joined := time.Now()
			WaitFor(b, 2*time.Minute, "every shard owned once", func() error { return evenShares(nodes, pollShards) })
			logf(b, "%d nodes joined, shards shared in %v", size, time.Since(joined).Round(time.Millisecond))
			for _, nd := range nodes {
				loading := time.Now()
				nd.serve(b, ctx, log, opt)
				logf(b, "%s loaded %d feeds in %v", nd.name, nd.svc.Scheduler().Len(), time.Since(loading).Round(time.Millisecond))
			}
			runPolling(b, st, created, *pollLearned, func() {
				if *pollKill && size == 3 {
					takeOver(b, st, c, nodes, n)
				}
			})
		})
	}
}

// createFeeds creates the feeds of urls one after the other, as a
// subscriber does.
func createFeeds(b *testing.B, seed *sjs.Backend, urls []string) {
	stale := 0
	for _, u := range urls {
		for try := 0; ; try++ {
			err := seed.CreateFeed(&storage.Feed{URL: u, Kind: storage.KindRemote, Policy: schedule.DefaultPolicy})
			if err == nil {
				break
			}
			// On the 3-server cluster the ID sequence's read can come
			// from a replica that lags its last update: every
			// compare-and-set of a CreateFeed then fails (one call did,
			// in one run of 20,000 creates); a subscriber tries again.
			if !errors.Is(err, sjs.ErrStale) || try == 4 {
				b.Fatal(err)
			}
			stale++
		}
	}
	if stale > 0 {
		b.Logf("%d CreateFeed calls failed with ErrStale and were tried again", stale)
	}
}

// evenShares is nil once every shard has exactly one owner among nodes
// and their counts differ by at most one.
func evenShares(nodes []*node, shards int) error {
	lo, hi := shards, 0
	for s := range shards {
		owners := 0
		for _, nd := range nodes {
			if nd.lease.Owns(s) {
				owners++
			}
		}
		if owners != 1 {
			return fmt.Errorf("shard %d has %d owners", s, owners)
		}
	}
	for _, nd := range nodes {
		k := len(nd.lease.Owned())
		lo, hi = min(lo, k), max(hi, k)
	}
	if hi-lo > 1 {
		return fmt.Errorf("nodes own %d to %d shards", lo, hi)
	}
	return nil
}

// runPolling waits for the first fetches (unless the feeds start from
// learned states, at their predictions), lets the nodes learn, measures,
// and runs then (if not nil).
func runPolling(b *testing.B, st *pollStats, created time.Time, learned bool, then func()) {
	stop := st.logProgress(*pollProgress)
	defer stop()
	if !learned {
		st.waitFirst(b)
		logf(b, "%d feeds subscribed and fetched once in %v", len(st.fetched), time.Since(created).Round(time.Second))
	} else {
		logf(b, "%d feeds subscribed and loaded from their learned states in %v", len(st.fetched), time.Since(created).Round(time.Second))
	}
	st.pause(b, *pollWarmup) // the live loop runs on the wall clock
	st.measure(b, "", *pollMeasure)
	st.reportMemory(b, "")
	if then != nil {
		then()
	}
}
