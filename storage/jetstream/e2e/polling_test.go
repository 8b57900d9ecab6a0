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
	pollFeeds   = flag.Int("poll.feeds", 20_000, "BenchmarkPolling: loopback feeds")
	pollWorkers = flag.Int("poll.workers", 64, "BenchmarkPolling: aggregator workers per node")
	pollWarmup  = flag.Duration("poll.warmup", pollPeriod, "BenchmarkPolling: time after the first fetches before the measurement")
	pollMeasure = flag.Duration("poll.measure", 2*pollPeriod, "BenchmarkPolling: measured time")
	pollResync  = flag.Duration("poll.resync", 0, "BenchmarkPolling: how often a JetStream node lists the feed IDs (aggregator ServiceOptions.Resync; 0: its default, 15 s; negative: never)")
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
	pub *aggtest.Fleet

	mu        sync.Mutex
	fetched   []bool
	nFetched  int
	measuring bool
	from      time.Time
	polls     int
	lat       []float64
	stored    map[[2]int]bool
}

func newPollStats(pub *aggtest.Fleet, n int) *pollStats {
	return &pollStats{pub: pub, fetched: make([]bool, n), stored: map[[2]int]bool{}}
}

func (st *pollStats) watcher() aggregator.Watcher {
	return aggregator.Watcher{Fetched: st.heard}
}

func (st *pollStats) heard(ev aggregator.Fetched) {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if i, ok := st.pub.FeedOf(ev.Feed.URL); ok && i < len(st.fetched) && !st.fetched[i] {
		st.fetched[i] = true
		st.nFetched++
	}
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
		time.Sleep(200 * time.Millisecond) // the live loop runs on the wall clock
	}
}

// measure runs the measurement window and reports its figures.
func (st *pollStats) measure(b *testing.B) {
	load0 := loadAvg()
	st.mu.Lock()
	st.measuring, st.from = true, time.Now()
	st.mu.Unlock()
	cpu0 := aggtest.CPUTime()
	b.ResetTimer()
	time.Sleep(*pollMeasure) // the live loop runs on the wall clock: this is the run
	b.StopTimer()
	cpu := aggtest.CPUTime() - cpu0
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
	med := 0.0
	if len(lat) > 0 {
		med = lat[len(lat)/2]
	}
	b.ReportMetric(float64(polls)/measured.Seconds(), "polls/s")
	b.ReportMetric(med, "median-latency-s")
	if polls > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(polls), "cpu-µs/poll")
	}
	b.ReportMetric(float64(late), "late-items")
	b.Logf("%d feeds: %d polls in %v; %d items published in it stored, %d of %d published %v before its end late or missing; CPU %v (%.2f cores); load average %s → %s",
		len(st.fetched), polls, measured.Round(time.Second), len(lat), late, due, pollLate,
		cpu.Round(time.Millisecond), cpu.Seconds()/measured.Seconds(), load0, loadAvg())
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
// every 60 s at a phase of their own, on 8 addresses 127.0.0.x with
// conditional GET (aggtest.Fleet), polled in turn by
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
// not stored (late-items). b.N is ignored: one run per setup, about 15
// minutes in all at 20,000 feeds; run it alone with -benchtime 1x.
func BenchmarkPolling(b *testing.B) {
	pub := aggtest.StartFleet(b, pollHosts, pollPeriod, pollItems)
	n := *pollFeeds
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	urls := make([]string, n)
	for i := range urls {
		urls[i] = pub.URL(i)
	}

	b.Run("bbolt", func(b *testing.B) {
		st := newPollStats(pub, n)
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
		runPolling(b, st, created)
	})

	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprintf("jetstream-%d", size), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var c *jstest.Cluster
			if size == 1 {
				c = jstest.NewServer(b)
			} else {
				c = jstest.NewCluster(b, size)
			}
			st := newPollStats(pub, n)
			created := time.Now()
			seedConn, _, seed := connect(b, ctx, c, pollCallTimeout)
			defer seedConn.Close()
			stale := 0
			for _, u := range urls {
				for try := 0; ; try++ {
					err := seed.CreateFeed(&storage.Feed{URL: u, Kind: storage.KindRemote, Policy: schedule.DefaultPolicy})
					if err == nil {
						break
					}
					// On the 3-server cluster the ID sequence's read
					// can come from a replica that lags its last
					// update: every compare-and-set of a CreateFeed
					// then fails (one call did, in one run of 20,000
					// creates); a subscriber tries again.
					if !errors.Is(err, sjs.ErrStale) || try == 4 {
						b.Fatal(err)
					}
					stale++
				}
			}
			if stale > 0 {
				b.Logf("%d CreateFeed calls failed with ErrStale and were tried again", stale)
			}
			var nodes []*node
			defer func() {
				for _, nd := range nodes {
					nd.close(b)
				}
			}()
			for k := range size {
				nodes = append(nodes, startNode(b, ctx, c, fmt.Sprintf("n%d", k+1), log,
					nodeOptions{workers: *pollWorkers, shards: pollShards, watch: st.watcher(), callTimeout: pollCallTimeout, resync: *pollResync}))
			}
			runPolling(b, st, created)
		})
	}
}

// runPolling waits for the first fetches, lets the nodes learn, and
// measures.
func runPolling(b *testing.B, st *pollStats, created time.Time) {
	st.waitFirst(b)
	b.Logf("%d feeds subscribed and fetched once in %v", len(st.fetched), time.Since(created).Round(time.Second))
	time.Sleep(*pollWarmup) // the live loop runs on the wall clock
	st.measure(b)
}
