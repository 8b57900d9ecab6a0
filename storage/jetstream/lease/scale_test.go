package lease

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// The many-feeds measurement: three nodes, each with its own connection,
// JetStream Store and lease Node, over an embedded 3-server JetStream
// cluster (R3). N feeds are written into the defs bucket, every node
// polls the feeds of its shards (RecordFetch with one new item, the
// observation and the record's counters, as the aggregator records a
// poll), each node loads the state of its feeds (FeedStates), then one
// node is killed and the survivors take its shards over and load the
// state of every feed in them, the record and the observations the
// aggregator replays to resume each feed at its learned prediction.

// scaleConfig is one run of the measurement.
type scaleConfig struct {
	feeds   int
	rounds  int // polls per feed
	workers int // concurrent polls per node
	timing  cluster.Timing
	tick    time.Duration
	// perFeedSample bounds how many taken-over feeds the per-feed loader
	// (a KV get and Observations per feed) is timed on, beside FeedStates
	// on the same feeds.
	perFeedSample int
	maxStore      int64 // per server
	// settle is how long a survivor waits, after its last newly owned
	// shard, before it loads them (0: at once, one load per change).
	settle time.Duration
	// replay stores the feeds as a cluster without policy states did
	// (no Learner, records without a state): a takeover replays every
	// feed's observations. Otherwise every node learns as the polling
	// service does, and a takeover restores the states from the
	// records.
	replay bool
}

// scaleResult is what a run measured.
type scaleResult struct {
	feeds, polls  int
	pollTook      time.Duration
	retries       int     // polls tried again after a failure (a timeout)
	defsWrites    float64 // KV writes to the defs bucket, all results
	defsConflicts float64
	obsPublishes  float64 // observation publishes
	itemCalls     float64 // item publish calls (AddItems with something new)
	serverHeap    float64 // bytes per feed per JetStream server (heap)
	serverRSS     float64 // bytes per feed per JetStream server (RSS)
	// mem is the process's memory per feed per JetStream server, split
	// as the runtime sees it (the growth over the poll phase).
	mem         memSplit
	nodeHeap    float64 // bytes per owned feed, the node's loaded states
	initialLoad time.Duration
	takenOver   int // feeds in the killed node's shards
	ownedAfter  time.Duration
	loadedAfter time.Duration
	loads       int // TakeFeedStates calls of the survivors during takeover
	restored    int // feeds of those loads restored from their records' states
	replayed    int // feeds of those loads replayed from their observations
	sampled     int
	perFeedTook time.Duration // per-feed loader on the sample
	passTook    time.Duration // FeedStates on the same sample
	takeTook    time.Duration // TakeFeedStates on the same sample
}

type scaleNode struct {
	*testNode
	st *sjs.Store
	b  *sjs.Backend
}

func startScaleNode(tb testing.TB, c *jstest.Cluster, name string, cfg scaleConfig) *scaleNode {
	tb.Helper()
	n := startNode(tb, c, name, func(o *Options) {
		o.Shards = cluster.DefaultShards
		o.Timing = cfg.timing
		o.Tick = cfg.tick
	})
	js, err := jetstream.New(n.nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := sjs.Open(ctx, js, sjs.Options{Metrics: sjs.NewMetrics(n.reg), Shards: cluster.DefaultShards, DuplicateWindow: *scaleDupWindow})
	if err != nil {
		tb.Fatal(err)
	}
	if !cfg.replay {
		st.SetLearner(aggregator.Learn)
	}
	return &scaleNode{testNode: n, st: st, b: sjs.NewBackend(st, 0)}
}

// testNodes returns the lease nodes of nodes.
func testNodes(nodes []*scaleNode) []*testNode {
	out := make([]*testNode, len(nodes))
	for i, n := range nodes {
		out[i] = n.testNode
	}
	return out
}

// owners maps each of the shards to the nodes that own it now.
func owners(nodes []*scaleNode, shards int) [][]string { return ownershipOf(testNodes(nodes), shards) }

// gathered sums the samples (counters) or sample counts (histograms) of
// the metric name whose labels include match.
func gathered(tb testing.TB, reg *prometheus.Registry, name string, match map[string]string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for k, v := range match {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
					continue metrics
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// heap returns the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// memSplit is the process's memory as the runtime accounts for it, in
// bytes (or bytes per feed, once divided with per).
type memSplit struct {
	live     float64 // heap objects reachable after a collection
	inuse    float64 // heap spans in use (live plus fragmentation)
	idle     float64 // heap spans free but not returned to the OS
	released float64 // heap spans returned to the OS
	stacks   float64 // goroutine stacks
	other    float64 // runtime metadata, buffers (Sys less the above)
	rss      float64 // the process's resident set
}

// readMemSplit collects and then reads the runtime's memory statistics.
func readMemSplit() memSplit {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSplit{
		live: float64(ms.HeapAlloc), inuse: float64(ms.HeapInuse), idle: float64(ms.HeapIdle - ms.HeapReleased),
		released: float64(ms.HeapReleased), stacks: float64(ms.StackSys),
		other: float64(ms.Sys - ms.HeapSys - ms.StackSys), rss: float64(rss()),
	}
}

func (m memSplit) sub(o memSplit) memSplit {
	return memSplit{m.live - o.live, m.inuse - o.inuse, m.idle - o.idle, m.released - o.released, m.stacks - o.stacks, m.other - o.other, m.rss - o.rss}
}

func (m memSplit) per(n float64) memSplit {
	return memSplit{m.live / n, m.inuse / n, m.idle / n, m.released / n, m.stacks / n, m.other / n, m.rss / n}
}

func (m memSplit) String() string {
	return fmt.Sprintf("live heap %.0f B, heap in use %.0f B, heap idle (kept) %.0f B, heap released %.0f B, stacks %.0f B, other runtime %.0f B; RSS %.0f B",
		m.live, m.inuse, m.idle, m.released, m.stacks, m.other, m.rss)
}

// rss returns the process's resident set (0 where /proc is missing).
func rss() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// scaleDupWindow is the streams' duplicate window in the many-feeds
// measurement (Options.DuplicateWindow; 0: the store's default).
var scaleDupWindow = flag.Duration("scale.dupwindow", 0, "BenchmarkManyFeeds: the streams' duplicate window (0: the store's default)")

// scaleIdle is how long the many-feeds measurement waits after the polls
// before it measures the servers' memory (0: at once).
var scaleIdle = flag.Duration("scale.idle", 0, "BenchmarkManyFeeds: idle time after the polls before the memory measure")

var scaleT0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

const scalePeriod = time.Minute

// createFeeds writes feeds 1..n into the defs bucket with asynchronous KV
// puts, as setup: CreateFeed's unique-index key and ID sequence are not
// written, nothing in the run reads them. With states, each record holds
// a fresh policy state, as CreateFeed writes it.
func createFeeds(tb testing.TB, js jetstream.JetStream, n int, states bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for id := 1; id <= n; id++ {
		f := storage.Feed{
			ID: uint64(id), Kind: storage.KindRemote, URL: "http://127.0.0.1:1/sensor/" + strconv.Itoa(id) + ".xml",
			Title: "sensor " + strconv.Itoa(id), Policy: "auto", Retention: storage.Retention{MaxItems: 100},
			Created: scaleT0, Updated: scaleT0,
		}
		data, err := json.Marshal(&f)
		if err != nil {
			tb.Fatal(err)
		}
		if states {
			data = append(data[:len(data)-1], `,"policy_state":{}}`...)
		}
		if _, err := js.PublishAsync("$KV."+sjs.DefsBucket+".feed."+strconv.Itoa(id), data); err != nil {
			tb.Fatal(err)
		}
		if id%1000 == 0 || id == n {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				tb.Fatal("creating feeds: ", ctx.Err())
			}
		}
	}
}

// poll records one simulated poll of feed id in round r: one new reading,
// the observation, the record's counters and validators.
func poll(ctx context.Context, st *sjs.Store, id uint64, r int) error {
	at := scaleT0.Add(time.Duration(r) * scalePeriod)
	v := float64(id%97) + float64(r)/10
	items := []storage.Item{{
		ID: "r" + strconv.Itoa(r), Title: fmt.Sprintf("reading %.1f", v), Published: at.Add(-5 * time.Second),
		Fetched: at, Reading: &storage.Reading{Value: v, Unit: "µg/m³", Time: at.Add(-5 * time.Second)},
	}}
	o := storage.Observation{At: at, Status: 200}
	_, err := st.RecordFetch(ctx, id, items, o, func(x *storage.Feed, o *storage.Observation, added []storage.Item) error {
		o.Hit = len(added) > 0
		o.Published, o.LatencyS = nil, nil
		for _, it := range added {
			o.Published = append(o.Published, it.Published)
			o.LatencyS = append(o.LatencyS, o.At.Sub(it.Published).Seconds())
		}
		x.Polls++
		x.LastFetch = o.At
		x.ETag = `"` + strconv.Itoa(r) + `"`
		if o.Hit {
			x.Hits++
			x.LastHit = o.At
			x.Items += int64(len(added))
			for _, l := range o.LatencyS {
				x.LatencySumS += l
				x.LatencyCount++
			}
		}
		return nil
	})
	return err
}

// checkState fails unless st is what cfg.rounds polls left.
func checkState(st *sjs.FeedState, rounds int) error {
	if st.Feed.Polls != int64(rounds) || len(st.Observations) != rounds {
		return fmt.Errorf("feed %d: %d polls, %d observations; want %d", st.Feed.ID, st.Feed.Polls, len(st.Observations), rounds)
	}
	if last := st.Observations[rounds-1]; !last.At.Equal(scaleT0.Add(time.Duration(rounds-1)*scalePeriod)) || !last.Hit {
		return fmt.Errorf("feed %d: last observation %+v", st.Feed.ID, last)
	}
	return nil
}

func runScale(tb testing.TB, cfg scaleConfig) scaleResult {
	tb.Helper()
	res := scaleResult{feeds: cfg.feeds}
	var opts []jstest.Option
	if cfg.maxStore > 0 {
		opts = append(opts, jstest.WithMaxStore(cfg.maxStore))
	}
	c := jstest.NewCluster(tb, 3, opts...)
	nodes := make([]*scaleNode, 3)
	for i := range nodes {
		nodes[i] = startScaleNode(tb, c, "n"+strconv.Itoa(i+1), cfg)
	}
	waitFor(tb, 60*time.Second, "even share", func() error { return evenOf(testNodes(nodes), cluster.DefaultShards) })
	heap1, rss1 := heap(), rss()
	split1 := readMemSplit()
	js, err := jetstream.New(nodes[0].nc)
	if err != nil {
		tb.Fatal(err)
	}
	createFeeds(tb, js, cfg.feeds, !cfg.replay)

	// Every node polls the feeds of its shards, cfg.rounds times each.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	owned := make([][]uint64, len(nodes))
	for id := uint64(1); id <= uint64(cfg.feeds); id++ {
		for i, n := range nodes {
			if n.OwnsFeed(id) {
				owned[i] = append(owned[i], id)
			}
		}
	}
	start := time.Now()
	var retries atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes)*cfg.workers)
	for i, n := range nodes {
		for w := range cfg.workers {
			wg.Go(func() {
				for r := range cfg.rounds {
					for j := w; j < len(owned[i]); j += cfg.workers {
						// Each poll bounded as a Backend call is; one that
						// fails is tried again (its writes are idempotent),
						// as the aggregator polls a feed again.
						var err error
						for try := 0; try < 3; try++ {
							pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
							err = poll(pctx, n.st, owned[i][j], r)
							cancel()
							if err == nil {
								break
							}
							retries.Add(1)
						}
						if err != nil {
							errs <- fmt.Errorf("%s: poll %d of feed %d: %w", n.Name(), r, owned[i][j], err)
							return
						}
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	res.pollTook = time.Since(start)
	res.retries = int(retries.Load())
	for _, n := range nodes {
		res.polls += len(owned[slices.Index(nodes, n)]) * cfg.rounds
		res.defsWrites += gathered(tb, n.reg, "slogfeed_jetstream_kv_writes_total", map[string]string{"bucket": sjs.DefsBucket})
		res.defsConflicts += gathered(tb, n.reg, "slogfeed_jetstream_kv_writes_total", map[string]string{"bucket": sjs.DefsBucket, "result": "conflict"})
		res.obsPublishes += gathered(tb, n.reg, "slogfeed_jetstream_publish_seconds", map[string]string{"op": "observation"})
		res.itemCalls += gathered(tb, n.reg, "slogfeed_jetstream_publish_seconds", map[string]string{"op": "items"})
	}
	if *scaleIdle > 0 {
		// As between the polls of an hourly fleet: the servers drop
		// their block caches, their per-block subject indexes and the
		// message IDs older than the duplicate window.
		time.Sleep(*scaleIdle)
	}
	heap2, rss2 := heap(), rss()
	res.serverHeap = float64(int64(heap2)-int64(heap1)) / float64(cfg.feeds) / 3
	res.serverRSS = float64(int64(rss2)-int64(rss1)) / float64(cfg.feeds) / 3
	res.mem = readMemSplit().sub(split1).per(float64(cfg.feeds) * 3)

	// Each node loads the state of its feeds, as at its start.
	held := make([]map[uint64]*sjs.FeedState, len(nodes))
	for i, n := range nodes {
		if i == 0 {
			writeHeapProfile(tb, "before")
		}
		before := heap()
		t := time.Now()
		held[i], err = n.st.FeedStates(ctx, n.OwnsFeed, 0)
		if err != nil {
			tb.Fatal(err)
		}
		if i == 0 {
			writeHeapProfile(tb, "after")
		}
		res.initialLoad = max(res.initialLoad, time.Since(t))
		res.nodeHeap += float64(int64(heap())-int64(before)) / float64(max(len(held[i]), 1)) / float64(len(nodes))
		if len(held[i]) != len(owned[i]) {
			tb.Fatalf("%s loaded %d feeds, owns %d", n.Name(), len(held[i]), len(owned[i]))
		}
		for _, st := range held[i] {
			if err := checkState(st, cfg.rounds); err != nil {
				tb.Fatal(err)
			}
		}
	}

	// Kill the third node; the survivors load the state of every feed of
	// each shard they take over, as soon as they own it.
	victim, survivors := nodes[2], nodes[:2]
	lost := victim.Owned()
	for _, s := range lost {
		for id := uint64(1); id <= uint64(cfg.feeds); id++ {
			if cluster.ShardOf(cluster.KindFeed, id, cluster.DefaultShards) == s {
				res.takenOver++
			}
		}
	}
	var mu sync.Mutex
	loadedBy := map[int]string{} // shard → survivor that loaded its feeds
	var loadErr error
	done := make(chan struct{})
	var lw sync.WaitGroup
	for _, n := range survivors {
		had := map[int]bool{}
		for _, s := range n.Owned() {
			had[s] = true
		}
		lw.Go(func() {
			for {
				changed := n.Changed()
				fresh := map[int]bool{}
				for _, s := range n.Owned() {
					if !had[s] {
						fresh[s] = true
					}
				}
				if len(fresh) > 0 && cfg.settle > 0 {
					// Claims of a dead node's shards come over a few
					// ticks: load once they stop coming, in one pass.
					select {
					case <-changed:
						continue
					case <-time.After(cfg.settle):
					case <-done:
						return
					}
				}
				if len(fresh) > 0 {
					// As a clustered aggregator takes shards over: list
					// the feed IDs, keep those of the new shards, and
					// load their state (takeLoad).
					var stats sjs.TakeStats
					var err error
					for try := 0; try < 3; try++ { // a lost reply times out; load again
						if stats, err = takeLoad(ctx, n, fresh, cfg.rounds); err == nil {
							break
						}
					}
					mu.Lock()
					res.loads++
					res.restored += stats.Restored
					res.replayed += stats.Replayed
					if err != nil && loadErr == nil {
						loadErr = fmt.Errorf("%s: %w", n.Name(), err)
					}
					for s := range fresh {
						loadedBy[s] = n.Name()
						had[s] = true
					}
					mu.Unlock()
				}
				select {
				case <-changed:
				case <-done:
					return
				}
			}
		})
	}
	killed := time.Now()
	victim.kill()
	res.ownedAfter = waitFor(tb, 5*time.Minute, "shards re-owned", func() error {
		for s, o := range owners(survivors, cluster.DefaultShards) {
			if len(o) != 1 {
				return fmt.Errorf("shard %d owned by %v", s, o)
			}
		}
		return nil
	})
	waitFor(tb, 30*time.Minute, "taken-over feeds loaded", func() error {
		mu.Lock()
		defer mu.Unlock()
		if loadErr != nil {
			tb.Fatal(loadErr)
		}
		o := owners(survivors, cluster.DefaultShards)
		for _, s := range lost {
			if len(o[s]) != 1 || loadedBy[s] != o[s][0] {
				return fmt.Errorf("shard %d owned by %v, loaded by %q", s, o[s], loadedBy[s])
			}
		}
		return nil
	})
	res.loadedAfter = time.Since(killed)
	close(done)
	lw.Wait()

	// Side by side on the same taken-over feeds: a KV get and
	// Observations per feed, and one FeedStates.
	var sample []uint64
	lostSet := map[int]bool{}
	for _, s := range lost {
		lostSet[s] = true
	}
	for id := uint64(1); id <= uint64(cfg.feeds) && len(sample) < cfg.perFeedSample; id++ {
		if lostSet[cluster.ShardOf(cluster.KindFeed, id, cluster.DefaultShards)] {
			sample = append(sample, id)
		}
	}
	res.sampled = len(sample)
	n := survivors[0]
	t := time.Now()
	for _, id := range sample {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		f, err := n.st.Feed(rctx, id)
		if err != nil {
			tb.Fatal(err)
		}
		obs, err := n.st.Observations(rctx, id, 0)
		cancel()
		if err != nil {
			tb.Fatal(err)
		}
		if err := checkState(&sjs.FeedState{Feed: f, Observations: obs}, cfg.rounds); err != nil {
			tb.Fatal(err)
		}
	}
	res.perFeedTook = time.Since(t)
	inSample := map[uint64]bool{}
	for _, id := range sample {
		inSample[id] = true
	}
	t = time.Now()
	states, err := n.st.FeedStates(ctx, func(id uint64) bool { return inSample[id] }, 0)
	res.passTook = time.Since(t)
	if err != nil || len(states) != len(sample) {
		tb.Fatalf("FeedStates of the sample: %d states, %v; want %d", len(states), err, len(sample))
	}
	t = time.Now()
	stats, err := n.st.TakeFeedStates(ctx, sample, sjs.TakeFuncs{
		Feed: func(storage.Feed, *storage.PolicyState) bool { return true },
		Obs:  func(uint64, storage.Observation) {},
	})
	res.takeTook = time.Since(t)
	if err != nil || stats.Records != len(sample) {
		tb.Fatalf("TakeFeedStates of the sample: %+v, %v; want %d records", stats, err, len(sample))
	}
	runtime.KeepAlive(held)
	return res
}

func (r scaleResult) log(tb testing.TB) {
	tb.Helper()
	tb.Logf("feeds %d: polls %d (%d tried again) in %s (%.0f/s); per poll: %.2f defs KV writes (%.0f conflicts), %.2f observation publishes, %.2f item publish calls",
		r.feeds, r.polls, r.retries, r.pollTook.Round(time.Millisecond), float64(r.polls)/r.pollTook.Seconds(),
		r.defsWrites/float64(r.polls), r.defsConflicts, r.obsPublishes/float64(r.polls), r.itemCalls/float64(r.polls))
	tb.Logf("memory per feed: %.0f B heap and %.0f B RSS per JetStream server; %.0f B heap per owned feed in a node (loaded state); initial load of a node's feeds %s",
		r.serverHeap, r.serverRSS, r.nodeHeap, r.initialLoad.Round(time.Millisecond))
	tb.Logf("memory per feed per JetStream server, as the runtime splits it: %s", r.mem)
	tb.Logf("takeover of %d feeds: shards owned %s after the kill, state loaded %s after, %s after ownership (%d loads: %d feeds restored from their records' states, %d replayed)",
		r.takenOver, r.ownedAfter.Round(time.Millisecond), r.loadedAfter.Round(time.Millisecond), (r.loadedAfter - r.ownedAfter).Round(time.Millisecond),
		r.loads, r.restored, r.replayed)
	tb.Logf("on %d of them: per-feed reads %s, FeedStates %s (%.1f×), TakeFeedStates with every observation %s",
		r.sampled, r.perFeedTook.Round(time.Millisecond), r.passTook.Round(time.Millisecond), r.perFeedTook.Seconds()/r.passTook.Seconds(), r.takeTook.Round(time.Millisecond))
}

// TestManyFeedsTakeOver is the many-feeds measurement at a test size (300
// feeds, two polls each, short leases): one poll writes the feed record
// once and publishes one observation, and after a kill the survivors own
// every shard and have loaded the state of every feed they took over.
func TestManyFeedsTakeOver(t *testing.T) {
	for _, replay := range []bool{false, true} {
		t.Run("replay="+strconv.FormatBool(replay), func(t *testing.T) { testManyFeedsTakeOver(t, replay) })
	}
}

func testManyFeedsTakeOver(t *testing.T, replay bool) {
	r := runScale(t, scaleConfig{
		feeds: 300, rounds: 2, workers: 4, perFeedSample: 50,
		timing: cluster.Timing{TTL: 2 * time.Second, Renew: 600 * time.Millisecond, Margin: 200 * time.Millisecond},
		tick:   100 * time.Millisecond, replay: replay,
	})
	r.log(t)
	if r.polls != 600 {
		t.Errorf("%d polls, want 600", r.polls)
	}
	// One record write and one observation publish per poll (a poll tried
	// again after a timeout may have written before it timed out).
	lo, hi := float64(r.polls), float64(r.polls+r.retries)
	if r.defsWrites < lo || r.defsWrites > hi || r.defsConflicts != 0 || r.obsPublishes < lo || r.obsPublishes > hi {
		t.Errorf("per poll: %v defs writes (%v conflicts), %v observation publishes over %d polls; want one write and one publish each",
			r.defsWrites, r.defsConflicts, r.obsPublishes, r.polls)
	}
	if r.takenOver == 0 || r.loads == 0 {
		t.Errorf("nothing taken over: %d feeds, %d loads", r.takenOver, r.loads)
	}
	// Every feed taken over restored from its record's state, or, in a
	// store without states, replayed.
	if got, want := r.restored+r.replayed, r.takenOver; got < want {
		t.Errorf("%d feeds restored and %d replayed; want %d", r.restored, r.replayed, want)
	}
	if replay && r.restored != 0 || !replay && r.replayed != 0 {
		t.Errorf("replay=%v: %d feeds restored, %d replayed", replay, r.restored, r.replayed)
	}
}

// BenchmarkManyFeeds is the many-feeds measurement at 10^4, 10^5 and 10^6
// feeds with the default lease timing (tick 200 ms), three polls per feed.
// A survivor loads the state of its new shards at each change of its
// ownership (load=per-change) or once no new shard came for 600 ms
// (load=settled), from the policy states the records carry; with
// load=settled-replay the store has no states (as one written before
// they were kept) and every feed taken over is replayed:
//
//	go test -run xxx -bench 'BenchmarkManyFeeds/feeds=10000$/load=settled' -benchtime 1x -timeout 2h ./storage/jetstream/lease/
//
// -scale.dupwindow=2m sets the streams' duplicate window; -scale.idle=130s
// measures the servers' memory after two idle minutes, as between the
// polls of an hourly fleet, rather than right after the polls.
func BenchmarkManyFeeds(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run("feeds="+strconv.Itoa(n), func(b *testing.B) {
			for _, load := range []struct {
				name   string
				settle time.Duration
				replay bool
			}{{"per-change", 0, false}, {"settled", 600 * time.Millisecond, false}, {"settled-replay", 600 * time.Millisecond, true}} {
				b.Run("load="+load.name, func(b *testing.B) {
					for range b.N {
						r := runScale(b, scaleConfig{
							feeds: n, rounds: 3, workers: 32, perFeedSample: 2000,
							timing: cluster.DefaultTiming, tick: 200 * time.Millisecond, settle: load.settle, replay: load.replay,
							maxStore: max(256<<20, int64(n)*16<<10),
						})
						r.log(b)
						b.ReportMetric(float64(r.polls)/r.pollTook.Seconds(), "polls/s")
						b.ReportMetric(r.defsWrites/float64(r.polls), "kv-writes/poll")
						b.ReportMetric(r.obsPublishes/float64(r.polls), "obs-publishes/poll")
						b.ReportMetric(r.serverHeap, "server-heap-B/feed")
						b.ReportMetric(r.nodeHeap, "node-heap-B/feed")
						b.ReportMetric(r.ownedAfter.Seconds(), "owned-s")
						b.ReportMetric(r.loadedAfter.Seconds(), "loaded-s")
						b.ReportMetric((r.loadedAfter - r.ownedAfter).Seconds(), "loaded-after-owned-s")
						b.ReportMetric(float64(r.takenOver), "taken-over-feeds")
					}
				})
			}
		})
	}
}

// takeLoad loads, as a clustered aggregator takes shards over, the state
// of the feeds of the shards fresh: it lists the feed IDs, keeps those of
// the shards, and reads them with TakeFeedStates, each feed's policy
// restored from its record's state or, for a record without one,
// rebuilt by replaying its observations (the state reached is stored in
// the record). Each feed must come out having learned its rounds polls.
func takeLoad(ctx context.Context, n *scaleNode, fresh map[int]bool, rounds int) (sjs.TakeStats, error) {
	all, err := n.b.FeedIDs()
	if err != nil {
		return sjs.TakeStats{}, err
	}
	var ids []uint64
	for _, id := range all {
		if fresh[cluster.ShardOf(cluster.KindFeed, id, cluster.DefaultShards)] {
			ids = append(ids, id)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	type learned struct {
		p    schedule.Policy
		next time.Time
		last time.Time
	}
	policies := make(map[uint64]*learned, len(ids))
	var bad error
	stats, err := n.st.TakeFeedStates(lctx, ids, sjs.TakeFuncs{
		Feed: func(f storage.Feed, st *storage.PolicyState) bool {
			p, err := schedule.ByName(f.Policy, f.ID)
			if err != nil {
				bad = cmp.Or(bad, err)
				return false
			}
			l := &learned{p: p}
			policies[f.ID] = l
			if st == nil {
				return true
			}
			if err := p.(schedule.Stateful).RestoreState(st.Policy); err != nil {
				bad = cmp.Or(bad, fmt.Errorf("feed %d: %w", f.ID, err))
			}
			l.next, l.last = st.Next, st.Last
			return false
		},
		Obs: func(id uint64, o storage.Observation) {
			if l := policies[id]; l != nil && o.Err == "" {
				l.next, l.last = l.p.Next(o.Schedule()), o.At
			}
		},
		Reached: func(id uint64) *storage.PolicyState {
			l := policies[id]
			return &storage.PolicyState{Next: l.next, Last: l.last, Policy: l.p.(schedule.Stateful).AppendState(nil)}
		},
	})
	if err != nil {
		return stats, err
	}
	if bad != nil {
		return stats, bad
	}
	if len(policies) != len(ids) {
		return stats, fmt.Errorf("%d feeds loaded of %d", len(policies), len(ids))
	}
	want := scaleT0.Add(time.Duration(rounds-1) * scalePeriod)
	for id, l := range policies {
		if !l.last.Equal(want) || l.next.IsZero() {
			return stats, fmt.Errorf("feed %d: learned up to %v (next %v), want %v", id, l.last, l.next, want)
		}
	}
	return stats, nil
}
