package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/aggregator/aggtest"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// What BenchmarkPolling needs at a million feeds: the fleet in a process
// of its own, the feed records written concurrently (optionally with
// learned policy states), progress logs, the memory split between the
// JetStream servers and the nodes, and the takeover of a killed node's
// third.

// pollPublisherEnv asks TestPollingPublisher to serve a fleet.
const pollPublisherEnv = "SLOGFEED_POLL_PUBLISHER"

// TestPollingPublisher serves BenchmarkPolling's loopback fleet in a
// process of its own when the benchmark starts it; otherwise it is
// skipped.
func TestPollingPublisher(t *testing.T) { aggtest.ServeFleetProcess(t, pollPublisherEnv) }

// startPollFleet serves the benchmark's fleet, in this process with
// -poll.inprocess, else in a process of its own (this test binary again),
// whose ID it returns.
func startPollFleet(b testing.TB, period time.Duration) (*aggtest.Fleet, int) {
	items := max(*pollDocItems, 1)
	// Items published before the run: enough for a full document, and for
	// the polls of a learned state.
	epoch := time.Now().Add(-time.Duration(max(items, learnPolls)) * period)
	if *pollInProc {
		if items == pollItems {
			return aggtest.StartFleet(b, pollHosts, period, pollItems), 0
		}
		p, stop, err := aggtest.ServeFleet(epoch, period, items, pollHosts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stop)
		return p, 0
	}
	return aggtest.StartFleetProcess(b, "TestPollingPublisher", pollPublisherEnv, epoch, period, items, pollHosts)
}

// feedRecord is a feed's value in the defs bucket as the JetStream store
// writes it: the feed and its policy state (storage/jetstream's record).
type feedRecord struct {
	storage.Feed
	State *recordState `json:"policy_state,omitempty"`
}

type recordState struct {
	Next   time.Time `json:"next,omitzero"`
	Last   time.Time `json:"last,omitzero"`
	Policy []byte    `json:"policy,omitempty"`
}

// learnedRecord is feed i's record (ID i+1) as a node that polled it
// pollFirstDelay after each of its learnPolls newest publishes by now
// left it: the first poll found the document's items, each later one the
// newest item, and aggregator.Learn folded each observation into the
// policy state. writeFeeds stores the items the document lists
// (learnedItems).
func learnedRecord(pub *aggtest.Fleet, i int, now time.Time) (feedRecord, error) {
	f := storage.Feed{ID: uint64(i + 1), URL: pub.URL(i), Kind: storage.KindRemote, Policy: schedule.DefaultPolicy, Created: now, Updated: now}
	k := pub.Latest(i, now)
	if k < 0 {
		return feedRecord{Feed: f, State: &recordState{}}, nil
	}
	var ps storage.PolicyState
	first := max(k-learnPolls+1, 0)
	for j := first; j <= k; j++ {
		at := pub.Published(i, j).Add(pollFirstDelay)
		if at.After(now) {
			at = now
		}
		o := storage.Observation{At: at, Status: 200, Hit: true}
		from := j
		if j == first {
			from = max(j-pub.Items+1, 0) // the whole document
		}
		for h := from; h <= j; h++ { // oldest first, as a poll records them
			p := pub.Published(i, h)
			o.Published = append(o.Published, p)
			o.LatencyS = append(o.LatencyS, at.Sub(p).Seconds())
		}
		f.Polls++
		f.Hits++
		f.Items += int64(len(o.Published))
		f.LastFetch, f.LastHit, f.ETag = at, at, pub.ETag(i, j)
		var ok bool
		if ps, ok = aggregator.Learn(&f, &ps, &o); !ok {
			return feedRecord{}, fmt.Errorf("feed %d: policy %q keeps no state", f.ID, f.Policy)
		}
	}
	return feedRecord{Feed: f, State: &recordState{Next: ps.Next, Last: ps.Last, Policy: ps.Policy}}, nil
}

// learnPolls is how many polls a learned record has learned from.
const learnPolls = 5

// learnedItems are the messages of the items of feed i's document at
// its last learned poll at (at most pub.Items), as the JetStream store
// publishes them: on the feed's subject, with the item's key and time
// headers (no message ID: the duplicate window has nothing to catch).
func learnedItems(pub *aggtest.Fleet, i int, at time.Time) []*nats.Msg {
	k := pub.Latest(i, at)
	var out []*nats.Msg
	for j := max(k-pub.Items+1, 0); j <= k && k >= 0; j++ {
		guid := strconv.Itoa(i) + "-" + strconv.Itoa(j)
		p := pub.Published(i, j)
		data, err := json.Marshal(&storage.Item{ID: guid, FeedID: uint64(i + 1), GUID: guid, Title: "reading " + strconv.Itoa(j),
			Summary: fmt.Sprintf("%d.%d C", j%40, i%10), Published: p, Fetched: at})
		if err != nil {
			panic(err) // a storage.Item always encodes
		}
		m := nats.NewMsg("slogfeed.items." + strconv.Itoa(i+1))
		m.Header.Set(sjs.ItemKeyHeader, sjs.MsgID(uint64(i+1), guid))
		m.Header.Set(sjs.ItemTimeHeader, strconv.FormatInt(p.UnixNano(), 10))
		m.Data = data
		out = append(out, m)
	}
	return out
}

// pollFirstDelay is how long after a feed's newest publish the learned
// records' first fetch came.
const pollFirstDelay = 2 * time.Second

// writeFeeds writes the records of the fleet's feeds 0..n-1 (IDs 1..n)
// straight into the defs bucket with asynchronous KV puts, workers at a
// time, as a Store stores them (compressed): a fresh policy state each, as CreateFeed writes it, or with
// learned the state of a first fetch (learnedRecord) and the items it
// stored (learnedItems). CreateFeed's
// unique-index keys and ID sequence are not written: nothing in the run
// reads them.
func writeFeeds(b testing.TB, ctx context.Context, nc *nats.Conn, pub *aggtest.Fleet, n int, learned bool, workers int) {
	b.Helper()
	now := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	workers = max(workers, 1)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			js, err := jetstream.New(nc)
			if err != nil {
				errs[w] = err
				return
			}
			var acks []jetstream.PubAckFuture
			flush := func() error {
				select {
				case <-js.PublishAsyncComplete():
				case <-ctx.Done():
					return fmt.Errorf("writing feeds: %w", ctx.Err())
				}
				for _, a := range acks {
					select {
					case err := <-a.Err():
						return err
					default:
					}
				}
				acks = acks[:0]
				return nil
			}
			for i := w; i < n; i += workers {
				rec := feedRecord{Feed: storage.Feed{ID: uint64(i + 1), URL: pub.URL(i), Kind: storage.KindRemote, Policy: schedule.DefaultPolicy, Created: now, Updated: now}, State: &recordState{}}
				if learned {
					if rec, err = learnedRecord(pub, i, now); err != nil {
						errs[w] = err
						return
					}
				}
				data, err := json.Marshal(&rec)
				if err != nil {
					errs[w] = err
					return
				}
				a, err := js.PublishAsync("$KV."+sjs.DefsBucket+".feed."+strconv.Itoa(i+1), sjs.PackRecord(data))
				if err != nil {
					errs[w] = err
					return
				}
				acks = append(acks, a)
				if learned {
					// The items that first fetch stored.
					for _, m := range learnedItems(pub, i, rec.Feed.LastFetch) {
						if a, err = js.PublishMsgAsync(m); err != nil {
							errs[w] = err
							return
						}
						acks = append(acks, a)
					}
				}
				if len(acks) >= 1000 {
					if errs[w] = flush(); errs[w] != nil {
						return
					}
				}
				if *pollProgress > 0 && w == 0 && (i/workers+1)%(100_000/workers) == 0 {
					fmt.Fprintf(os.Stderr, "polling: %d feed records written in %v\n", i+1, time.Since(now).Round(time.Second))
				}
			}
			errs[w] = flush()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if learned {
		// How far the learned predictions lie from the next publishes.
		var off []float64
		for i := 0; i < n; i += max(1, n/1000) {
			rec, _ := learnedRecord(pub, i, now)
			if rec.State != nil && !rec.State.Next.IsZero() {
				off = append(off, rec.State.Next.Sub(pub.Published(i, pub.Latest(i, now)+1)).Seconds())
			}
		}
		slices.Sort(off)
		if len(off) > 0 {
			logf(b, "learned states: next poll − next publish on %d feeds: min %.1f s, median %.1f s, max %.1f s", len(off), off[0], off[len(off)/2], off[len(off)-1])
		}
	}
}

// procStatus reads fields (in kB, as bytes) of /proc/self/status.
func procStatus(keys ...string) map[string]int64 {
	out := map[string]int64{}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !slices.Contains(keys, k) {
			continue
		}
		if f := strings.Fields(v); len(f) > 0 {
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			out[k] = kb << 10
		}
	}
	return out
}

// procCPU is process pid's user + system CPU time (0: pid 0 or unknown).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: state is the 3rd
	// field of the line, utime and stime the 14th and 15th.
	_, rest, ok := strings.Cut(string(data), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+stt) * time.Second / 100 // USER_HZ
}

// logProgress logs, every d, the feeds fetched once, the polls, the
// resident set and the load on standard error (a benchmark's own log is
// printed at its end), and marks the run aborted when the resident set
// passes -poll.maxrss-gib. stop ends it.
func (st *pollStats) logProgress(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	limit := int64(*pollMaxRSS * (1 << 30))
	if d <= 0 && limit <= 0 {
		return func() {}
	}
	every := d
	if every <= 0 {
		every = 10 * time.Second
	}
	start := time.Now()
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		lastPolls, last := 0, start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				ps := procStatus("VmRSS", "VmHWM")
				if limit > 0 && ps["VmRSS"] > limit {
					st.abort.Store(fmt.Sprintf("resident set %.2f GiB passed -poll.maxrss-gib %.1f", float64(ps["VmRSS"])/(1<<30), *pollMaxRSS))
				}
				if d <= 0 {
					continue
				}
				st.mu.Lock()
				fetched, total := st.nFetched, st.total
				st.mu.Unlock()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				fmt.Fprintf(os.Stderr, "polling: %v: %d of %d feeds fetched, %d polls (%.1f/s); VmRSS %.2f GiB (peak %.2f), heap in use %.2f GiB; load %s\n",
					now.Sub(start).Round(time.Second), fetched, len(st.fetched), total, float64(total-lastPolls)/now.Sub(last).Seconds(),
					float64(ps["VmRSS"])/(1<<30), float64(ps["VmHWM"])/(1<<30), float64(ms.HeapInuse)/(1<<30), loadAvg())
				lastPolls, last = total, now
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// heapShares splits the live heap (a memory profile read after two
// collections, scaled as pprof scales it) by who allocated it: the first
// frame, from the allocation up, of the JetStream server (nats-server),
// of the nodes (slogfeed's packages and the nats.go client), or of this
// benchmark's own bookkeeping (this package, aggtest); other is
// allocations with none of those on their stack.
type heapShares struct {
	servers, nodes, harness, other float64
}

func readHeapShares() heapShares {
	runtime.GC()
	runtime.GC()
	var recs []runtime.MemProfileRecord
	for {
		k, ok := runtime.MemProfile(recs, false)
		if ok {
			recs = recs[:k]
			break
		}
		recs = make([]runtime.MemProfileRecord, k+100)
	}
	rate := float64(runtime.MemProfileRate)
	var h heapShares
	for _, r := range recs {
		count, size := float64(r.InUseObjects()), float64(r.InUseBytes())
		if count == 0 || size == 0 {
			continue
		}
		if rate > 1 {
			size *= 1 / (1 - math.Exp(-size/count/rate))
		}
		switch heapOwner(r.Stack()) {
		case "server":
			h.servers += size
		case "node":
			h.nodes += size
		case "harness":
			h.harness += size
		default:
			h.other += size
		}
	}
	return h
}

// heapOwner names who allocated at the stack: "server", "node",
// "harness" or "".
func heapOwner(stack []uintptr) string {
	frames := runtime.CallersFrames(stack)
	for {
		fr, more := frames.Next()
		fn := fr.Function
		switch {
		case strings.HasPrefix(fn, "github.com/nats-io/nats-server/"):
			return "server"
		case strings.HasPrefix(fn, "github.com/slogfeed/slogfeed/storage/jetstream/e2e."),
			strings.HasPrefix(fn, "github.com/slogfeed/slogfeed/aggregator/aggtest."):
			return "harness"
		case strings.HasPrefix(fn, "github.com/slogfeed/slogfeed/"),
			strings.HasPrefix(fn, "github.com/nats-io/nats.go"):
			return "node"
		}
		if !more {
			return ""
		}
	}
}

// reportMemory reports the process's memory per feed at the end of a
// measurement: its peak (VmHWM) and present (VmRSS) resident set, the Go
// heap in use and live, and the live heap split between the JetStream
// servers and the nodes, per server and per node.
func (st *pollStats) reportMemory(b *testing.B, label string) {
	n := float64(len(st.fetched))
	ps := procStatus("VmRSS", "VmHWM", "RssAnon", "RssFile")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	inuse := ms.HeapInuse
	h := readHeapShares()
	runtime.ReadMemStats(&ms)
	live := ms.HeapAlloc
	servers := st.nodes // a JetStream server per node (none on bbolt)
	b.ReportMetric(float64(ps["VmHWM"])/n, label+"peak-rss-B/feed")
	b.ReportMetric(float64(ps["VmRSS"])/n, label+"rss-B/feed")
	b.ReportMetric(float64(inuse)/n, label+"heap-inuse-B/feed")
	b.ReportMetric(float64(live)/n, label+"heap-live-B/feed")
	if h.servers > 0 {
		b.ReportMetric(h.servers/n/float64(servers), label+"server-heap-B/feed/server")
	}
	b.ReportMetric(h.nodes/n/float64(st.nodes), label+"node-heap-B/feed/node")
	logf(b, "%smemory: VmHWM %.2f GiB, VmRSS %.2f GiB (anonymous %.2f, file %.2f), heap in use %.2f GiB, live %.2f GiB after a collection; live heap by owner (memory profile, scaled): servers %.2f GiB (%.0f B/feed per server), nodes %.2f GiB (%.0f B/feed per node), benchmark bookkeeping %.2f GiB, other %.2f GiB; Go runtime: stacks %.0f MiB, other runtime %.0f MiB",
		label, gib(ps["VmHWM"]), gib(ps["VmRSS"]), gib(ps["RssAnon"]), gib(ps["RssFile"]), gib(int64(inuse)), gib(int64(live)),
		h.servers/(1<<30), h.servers/n/float64(max(servers, 1)), h.nodes/(1<<30), h.nodes/n/float64(st.nodes), h.harness/(1<<30), h.other/(1<<30),
		float64(ms.StackInuse)/(1<<20), float64(ms.MSpanInuse+ms.MCacheInuse+ms.BuckHashSys+ms.GCSys+ms.OtherSys)/(1<<20))
	if *pollHeapProf != "" {
		name := *pollHeapProf + "." + strings.ReplaceAll(b.Name(), "/", "_") + label
		f, err := os.Create(name)
		if err != nil {
			b.Error(err)
			return
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Error(err)
		}
	}
}

// startCPUProfile starts a CPU profile written to path; stop ends it.
func startCPUProfile(tb testing.TB, path string) (stop func()) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		tb.Fatalf("%v (a profile of the takeover cannot run with -test.cpuprofile)", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			tb.Error(err)
		}
	}
}

func gib(v int64) float64 { return float64(v) / (1 << 30) }

// takeoverResult is what takeOver measured: the feeds of the killed
// node's shards, when the survivors owned every shard, when they had
// scheduled every one of those feeds again, per feed how long after its
// shard was owned, the cold starts and the feeds replayed from their
// observations; and what the survivors' own signal (Service.Ownership)
// said: when the last of them reported its change loaded, how long
// each took by its own clock, and how many feeds taken over were not
// scheduled yet when the harness first saw every survivor loaded.
type takeoverResult struct {
	shards, feeds     int
	owned, loaded     time.Duration // after the kill
	median, worst     float64       // per feed, loaded after its shard was owned, s
	cold, replayed    int
	nodeDead, srvDead time.Duration // how long the kill and the server's stop took
	// signal: the latest survivor's Loaded after the kill; seen: the
	// first change a survivor saw, after the kill; nodeTook: the
	// longest Loaded − Changed a survivor reported; early: feeds taken
	// over that no owning survivor scheduled when every survivor
	// reported its change loaded; taken: the feeds the survivors
	// reported taken in their last changes (a survivor whose claims
	// came more than a settling apart loaded them as two changes).
	signal, seen, nodeTook time.Duration
	early, taken           int
	survivors              string // each survivor's Ownership, times after the kill
}

// killAndTakeOver kills nodes[2] as SIGKILL would (no lease given back)
// and, with stopServer, stops JetStream server 2, then measures, with the
// survivors' own signals, when they own every shard (lease.Node.Owns),
// when each feed taken over (of the feeds 1..n) is scheduled again from
// its loaded state (the aggregator's NextFetch answers for it, checked
// every 100 ms), and which of those restarted from nothing (their
// policy's State has learned no publish: cold starts). It also waits for
// the survivors' ownership signal: every survivor that holds a shard of
// the killed node reports its change loaded after the kill
// (Service.Ownership: Pending 0, Loaded set), and counts the feeds
// taken over that were not scheduled yet when it first saw that.
func killAndTakeOver(tb testing.TB, st *pollStats, c *jstest.Cluster, nodes []*node, n int, stopServer bool) takeoverResult {
	tb.Helper()
	victim, survivors := nodes[2], nodes[:2]
	lost := victim.lease.Owned()
	lostSet := map[int]bool{}
	for _, s := range lost {
		lostSet[s] = true
	}
	// The feeds taken over, with their shards (hashed once: the sweep
	// below runs on the survivors' cores).
	type takenFeed struct {
		id    uint64
		shard int
	}
	var taken []uint64
	var pending []takenFeed
	for id := uint64(1); id <= uint64(n); id++ {
		if sh := cluster.ShardOf(cluster.KindFeed, id, pollShards); lostSet[sh] {
			taken = append(taken, id)
			pending = append(pending, takenFeed{id, sh})
		}
	}
	res := takeoverResult{shards: len(lost), feeds: len(taken)}
	replayed0 := 0
	for _, nd := range survivors {
		replayed0 += nd.svc.LoadProgress().Replayed
	}
	if *pollTakeProf != "" {
		stop := startCPUProfile(tb, *pollTakeProf)
		defer stop()
	}
	killed := time.Now()
	victim.kill()
	res.nodeDead = time.Since(killed)
	if stopServer {
		c.Stop(2)
	}
	res.srvDead = time.Since(killed) - res.nodeDead
	nodes[2] = nil

	ownedAt := map[int]time.Time{}
	var allOwned, lastLoaded time.Time
	var afterOwn []float64
	deadline := killed.Add(10 * time.Minute)
	signalled := false
	for len(pending) > 0 || allOwned.IsZero() || !signalled {
		if time.Now().After(deadline) {
			tb.Fatalf("takeover: %d of %d shards owned, %d of %d feeds loaded, survivors loaded by their own signal: %v, after %v; ownership: %s",
				len(ownedAt), len(lost), len(taken)-len(pending), len(taken), signalled, time.Since(killed), ownershipOf(survivors))
		}
		now := time.Now()
		// Each sweep looks a feed up on the survivor that owns its
		// shard now (at a million feeds a sweep is 330,000 lookups, on
		// the survivors' CPU).
		holder := make([]*node, pollShards)    // by shard
		since := make([]time.Time, pollShards) // by shard: owned since
		for _, s := range lost {
			for _, nd := range survivors {
				if nd.lease.Owns(s) {
					holder[s] = nd
					if _, ok := ownedAt[s]; !ok {
						ownedAt[s] = now
					}
					since[s] = ownedAt[s]
				}
			}
		}
		if allOwned.IsZero() && len(ownedAt) == len(lost) {
			allOwned = now
		}
		pending = slices.DeleteFunc(pending, func(f takenFeed) bool {
			at, nd := since[f.shard], holder[f.shard]
			if nd == nil {
				return false
			}
			if _, sched := nd.svc.NextFetch(f.id); sched {
				afterOwn = append(afterOwn, now.Sub(at).Seconds())
				lastLoaded = now
				return true
			}
			return false
		})
		if !allOwned.IsZero() && !signalled {
			signalled = takeoverSignalled(&res, survivors, lostSet, taken, killed)
		}
		st.pause(tb, 100*time.Millisecond)
	}
	for _, id := range taken {
		for _, nd := range survivors {
			if s, ok := nd.svc.State(id); ok && nd.lease.OwnsFeed(id) {
				if !s.HasPublish {
					res.cold++
				}
				break
			}
		}
	}
	res.replayed = -replayed0
	for _, nd := range survivors {
		res.replayed += nd.svc.LoadProgress().Replayed
	}
	slices.Sort(afterOwn)
	if len(afterOwn) > 0 {
		res.median, res.worst = afterOwn[len(afterOwn)/2], afterOwn[len(afterOwn)-1]
	}
	res.owned, res.loaded = allOwned.Sub(killed), lastLoaded.Sub(killed)
	st.nodes = len(survivors)
	return res
}

// takeoverSignalled reports whether every survivor that holds a shard of
// the killed node (lost) says, through its Ownership, that it loaded a
// change seen after the kill and has nothing pending. The first time it
// does, it notes the survivors' figures in res and counts the feeds
// taken over that no owning survivor schedules yet (res.early: the
// signal came before the feeds it announces).
func takeoverSignalled(res *takeoverResult, survivors []*node, lost map[int]bool, taken []uint64, killed time.Time) bool {
	var last, firstSeen time.Time
	var took time.Duration
	sum := 0
	var each strings.Builder
	for _, nd := range survivors {
		holds := slices.ContainsFunc(nd.lease.Owned(), func(s int) bool { return lost[s] })
		o := nd.svc.Ownership()
		if !holds {
			if o.Pending > 0 {
				return false
			}
			continue
		}
		if o.Pending > 0 || o.Loading() || !o.Changed.After(killed) {
			return false
		}
		if o.Loaded.After(last) {
			last = o.Loaded
		}
		if firstSeen.IsZero() || o.Changed.Before(firstSeen) {
			firstSeen = o.Changed
		}
		took = max(took, o.Took)
		sum += o.Taken
		fmt.Fprintf(&each, "%s: change seen %v, loaded %v, %d feeds taken, %d dropped, %d polled; ", nd.name,
			o.Changed.Sub(killed).Round(time.Millisecond), o.Loaded.Sub(killed).Round(time.Millisecond), o.Taken, o.Lost, o.Polled)
	}
	if last.IsZero() {
		return false
	}
	for _, id := range taken {
		scheduled := false
		for _, nd := range survivors {
			if _, ok := nd.svc.NextFetch(id); ok && nd.lease.OwnsFeed(id) {
				scheduled = true
				break
			}
		}
		if !scheduled {
			res.early++
		}
	}
	res.signal, res.seen, res.nodeTook, res.taken = last.Sub(killed), firstSeen.Sub(killed), took, sum
	res.survivors = strings.TrimSuffix(each.String(), "; ")
	return true
}

// ownershipOf lists the nodes' Ownership for a failure's message.
func ownershipOf(nodes []*node) string {
	var b strings.Builder
	for _, nd := range nodes {
		o := nd.svc.Ownership()
		fmt.Fprintf(&b, "%s: polled %d, pending %d, failed %d, loading %v, changed %v, loaded %v; ",
			nd.name, o.Polled, o.Pending, o.Failed, o.Loading(), o.Changed.Format(time.StampMilli), o.Loaded.Format(time.StampMilli))
	}
	return b.String()
}

// takeOver is killAndTakeOver in the benchmark: it reports the takeover,
// then measures -poll.after of polling by the survivors.
func takeOver(b *testing.B, st *pollStats, c *jstest.Cluster, nodes []*node, n int) {
	victim := nodes[2].name
	r := killAndTakeOver(b, st, c, nodes, n, *pollKillSrv)
	what := "and stopped its JetStream server"
	if !*pollKillSrv {
		what = "(its JetStream server kept)"
	}
	logf(b, "killed %s (%d shards, %d feeds) in %v %s in %v", victim, r.shards, r.feeds, r.nodeDead.Round(time.Millisecond), what, r.srvDead.Round(time.Millisecond))
	b.ReportMetric(r.owned.Seconds(), "owned-s")
	b.ReportMetric(r.loaded.Seconds(), "loaded-s")
	b.ReportMetric((r.loaded - r.owned).Seconds(), "loaded-after-owned-s")
	b.ReportMetric(r.worst, "max-feed-loaded-after-its-shard-s")
	b.ReportMetric(float64(r.feeds), "taken-over-feeds")
	b.ReportMetric(float64(r.cold), "cold-starts")
	b.ReportMetric(r.signal.Seconds(), "signal-loaded-s")
	b.ReportMetric(r.nodeTook.Seconds(), "node-change-load-s")
	b.ReportMetric(float64(r.early), "signal-early-feeds")
	logf(b, "takeover of %d feeds in %d shards: every shard owned %v after the kill; every feed scheduled again %v after the kill, %v after the last shard was owned; per feed, scheduled after its shard was owned: median %.2f s, max %.2f s (checked every 100 ms); %d cold starts, %d feeds replayed from their observations",
		r.feeds, r.shards, r.owned.Round(time.Millisecond), r.loaded.Round(time.Millisecond), (r.loaded - r.owned).Round(time.Millisecond), r.median, r.worst, r.cold, r.replayed)
	logf(b, "the survivors' own signal (Ownership): first change seen %v after the kill, the last survivor loaded %v after the kill (every feed scheduled again, per feed: %v); longest change by a survivor's clock %v; %d feeds taken in their last changes, %d feeds taken over not scheduled yet when the harness saw them all loaded (%s)",
		r.seen.Round(time.Millisecond), r.signal.Round(time.Millisecond), r.loaded.Round(time.Millisecond), r.nodeTook.Round(time.Millisecond), r.taken, r.early, r.survivors)
	st.measure(b, "after-kill-", *pollAfter)
	st.reportMemory(b, "after-kill-")
}

// logf logs to the benchmark's log and to standard error: a benchmark's
// log keeps its first lines only.
func logf(b testing.TB, format string, args ...any) {
	b.Helper()
	b.Logf(format, args...)
	fmt.Fprintf(os.Stderr, "%s: %s\n", b.Name(), fmt.Sprintf(format, args...))
}

// TestPollingTakeover runs BenchmarkPolling's million-feed path at a
// test size: 300 feeds written with the learned state and the items of a
// first fetch, three nodes with short leases polling them at their
// predictions, then one node killed with its JetStream server. The
// survivors own every shard, schedule every feed taken over from its
// learned state (no cold start, no replay) and poll each of them again
// within a period.
func TestPollingTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("about 20 s of real time")
	}
	const n = 300
	period := 8 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pub := aggtest.StartFleet(t, pollHosts, period, pollItems)
	c := jstest.NewCluster(t, 3)
	st := newPollStats(pub, 0, n, 3)
	nc, _, _ := connect(t, ctx, c, 0)
	writeFeeds(t, ctx, nc, pub, n, true, 2)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opt := nodeOptions{workers: 4, shards: pollShards, watch: st.watcher(), tick: 100 * time.Millisecond,
		timing: cluster.Timing{TTL: 2 * time.Second, Renew: 600 * time.Millisecond, Margin: 200 * time.Millisecond}}
	var nodes []*node
	defer func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.close(t)
			}
		}
	}()
	for k := range 3 {
		nodes = append(nodes, joinNode(t, ctx, c, fmt.Sprintf("n%d", k+1), log, opt))
	}
	WaitFor(t, 30*time.Second, "every shard owned once", func() error { return evenShares(nodes, pollShards) })
	for _, nd := range nodes {
		nd.serve(t, ctx, log, opt)
	}
	// Bounds well above what the steps take alone: a loaded machine's
	// Raft and lease timing stretch them.
	WaitFor(t, period+30*time.Second, "a third of the feeds polled", func() error {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.nFetched < n/3 {
			return fmt.Errorf("%d feeds polled", st.nFetched)
		}
		return nil
	})
	// On a loaded machine a node may have lost its leases to a renewal
	// timeout meanwhile; the kill is to take a node holding its share.
	WaitFor(t, 30*time.Second, "every shard owned once before the kill", func() error { return evenShares(nodes, pollShards) })
	var taken []int // the killed node's feeds
	for i := range n {
		if nodes[2].lease.OwnsFeed(uint64(i + 1)) {
			taken = append(taken, i)
		}
	}
	killed := time.Now()
	r := killAndTakeOver(t, st, c, nodes, n, true)
	t.Logf("%d feeds in %d shards taken over: owned %v after the kill, scheduled again %v after; per feed after its shard: median %.2f s, max %.2f s; %d cold, %d replayed",
		r.feeds, r.shards, r.owned.Round(time.Millisecond), r.loaded.Round(time.Millisecond), r.median, r.worst, r.cold, r.replayed)
	t.Logf("survivors' signal: change seen %v after the kill, every survivor loaded %v after the kill, longest change %v by a survivor's clock, %d feeds taken in their last changes, %d not scheduled when the signal said loaded (%s)",
		r.seen.Round(time.Millisecond), r.signal.Round(time.Millisecond), r.nodeTook.Round(time.Millisecond), r.taken, r.early, r.survivors)
	if r.early != 0 {
		t.Errorf("%d of %d feeds taken over were not scheduled when every survivor reported its change loaded", r.early, r.feeds)
	}
	if r.signal < r.seen || r.nodeTook <= 0 {
		t.Errorf("survivors loaded %v after the kill, their change seen %v after it, longest change %v: want loaded after seen", r.signal, r.seen, r.nodeTook)
	}
	if r.feeds == 0 || r.shards == 0 {
		t.Fatalf("the killed node had %d shards, %d feeds", r.shards, r.feeds)
	}
	if r.cold != 0 || r.replayed != 0 {
		t.Errorf("%d cold starts and %d replays among %d feeds taken over, want none: each record carries its learned state", r.cold, r.replayed, r.feeds)
	}
	if r.feeds != len(taken) {
		t.Errorf("%d feeds taken over, the killed node owned %d", r.feeds, len(taken))
	}
	// Every feed taken over is polled again.
	WaitFor(t, 2*period+30*time.Second, "every feed polled since the kill", func() error {
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, i := range taken {
			if st.lastAt[i].Before(killed) {
				return fmt.Errorf("feed %d last polled %v before the kill", i+1, killed.Sub(st.lastAt[i]).Round(time.Millisecond))
			}
		}
		return nil
	})
}
