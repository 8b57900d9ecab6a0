package aggregator_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
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
)

// The ingest benchmark's set-up: benchFeeds loopback feeds of benchItems
// items each, spread over benchHosts publisher addresses (127.0.0.1,
// 127.0.0.2, …).
const (
	benchFeeds = 10000
	benchItems = 20
	benchHosts = 4
	// benchStall fails a pass that makes no progress for this long (a
	// fetch error, a lost poll) instead of hanging the run.
	benchStall = 2 * time.Minute
)

// ingestProfile, when set, is a path prefix: each slogfeed sub-benchmark
// of BenchmarkIngest writes the CPU profile of its passes alone (set-up
// excluded) to PREFIX-KIND-cN.pprof. Use it instead of -cpuprofile, which
// would mix in the set-up's first fetch of every feed.
var ingestProfile = flag.String("ingest.cpuprofile", "", "write each slogfeed `prefix`-KIND-cN.pprof CPU profile of BenchmarkIngest's passes (and PREFIX-KIND-cN.allocs0 and .allocs, the allocation profiles before and after them)")

// ingestNoSync runs BenchmarkIngest's slogfeed side without fsync: not
// durable, and not what slogfeed does; only to see how much of a pass
// the fsyncs take.
var ingestNoSync = flag.Bool("ingest.nosync", false, "run BenchmarkIngest's store without fsync (diagnostic only: not durable)")

// ingestHistory gives every feed a history of observations before the
// passes, and keeps that many: each poll then appends one and drops the
// oldest, as in a store that has run for a while (a feed's observations
// span several pages, so a poll writes the first and the last). Without
// it the feeds are new and their few observations fit in one page.
var ingestHistory = flag.Int("ingest.history", 0, "BenchmarkIngest: give each feed `N` observations before the passes and keep N (storage.Options.MaxObservations)")

// ingestLinger sets storage.Options.CommitLinger (0: the default, negative: none).
var ingestLinger = flag.Duration("ingest.linger", 0, "BenchmarkIngest's storage.Options.CommitLinger (0: the default, negative: none)")

// ingestPending sets ServiceOptions.PendingWrites (0: the default).
var ingestPending = flag.Int("ingest.pending", 0, "BenchmarkIngest's ServiceOptions.PendingWrites (0: the default)")

// ingestNoWrite runs BenchmarkIngest's slogfeed side with poll writes
// that never reach the store (memWrites): not what slogfeed does; only to
// see what the rest of a poll costs, the ceiling any store could reach.
var ingestNoWrite = flag.Bool("ingest.nowrite", false, "BenchmarkIngest: keep the polls' writes in memory, not in the store (diagnostic only: nothing is stored)")

// memWrites is a store whose poll writes (RecordFetch, RecordPoll) update
// feed records held in memory and store nothing: the items are returned as
// added, the observation as given. Reads of a feed see those records;
// every other call goes to the store. For -ingest.nowrite only.
type memWrites struct {
	*storage.Store
	mu    sync.Mutex
	feeds map[uint64]storage.Feed
}

func newMemWrites(st *storage.Store) (*memWrites, error) {
	feeds, err := st.Feeds()
	if err != nil {
		return nil, err
	}
	m := &memWrites{Store: st, feeds: make(map[uint64]storage.Feed, len(feeds))}
	for _, f := range feeds {
		m.feeds[f.ID] = f
	}
	return m, nil
}

func (m *memWrites) Feed(id uint64) (storage.Feed, error) {
	m.mu.Lock()
	f, ok := m.feeds[id]
	m.mu.Unlock()
	if !ok {
		return storage.Feed{}, storage.ErrFeedNotFound
	}
	return f, nil
}

// update applies fn to feed id's record in memory.
func (m *memWrites) update(id uint64, fn func(*storage.Feed) error) (storage.Feed, error) {
	f, err := m.Feed(id)
	if err != nil {
		return storage.Feed{}, err
	}
	if err := fn(&f); err != nil {
		return storage.Feed{}, err
	}
	m.mu.Lock()
	m.feeds[id] = f
	m.mu.Unlock()
	return f, nil
}

func (m *memWrites) RecordFetch(id uint64, items []storage.Item, o storage.Observation, fn func(*storage.Feed, *storage.Observation, []storage.Item) error) (storage.Fetched, error) {
	f, err := m.update(id, func(f *storage.Feed) error { return fn(f, &o, items) })
	if err != nil {
		return storage.Fetched{}, err
	}
	return storage.Fetched{Feed: f, Added: items, Observation: o}, nil
}

func (m *memWrites) RecordPoll(id uint64, o storage.Observation, fn func(*storage.Feed) error) (storage.Feed, error) {
	return m.update(id, fn)
}

// benchKinds are the response kinds of BenchmarkIngest and how far each
// pass moves the publishers' item window: 0 (a 304), 1 (a 200 with 1 new
// item among 20, what a poll that DPT times right sees) or benchItems (a
// backlog of 20 new items).
var benchKinds = []struct {
	name string
	step int64
}{
	{"304", 0},
	{"200-1new", 1},
	{"200-20new", benchItems},
}

// benchPublisher serves /f/{i} on several loopback addresses: the
// benchItems items base … base+benchItems−1 of feed i (base is the same for
// every feed), with an ETag naming base, and a 304 to an If-None-Match of
// the current ETag. Moving base by 1 makes one item new, by benchItems all
// of them.
type benchPublisher struct {
	epoch   time.Time // item n is published at epoch + n seconds
	base    atomic.Int64
	servers []*http.Server
	hosts   []string // host:port of each address
}

func newBenchPublisher(b *testing.B) *benchPublisher {
	p := &benchPublisher{epoch: time.Now().UTC().Add(-time.Hour).Truncate(time.Second)}
	for h := 1; h <= benchHosts; h++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", h))
		if err != nil {
			b.Fatalf("publisher address %d: %v", h, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: time.Minute}
		go func() { _ = srv.Serve(ln) }()
		p.servers = append(p.servers, srv)
		p.hosts = append(p.hosts, ln.Addr().String())
	}
	return p
}

func (p *benchPublisher) close() {
	for _, s := range p.servers {
		_ = s.Close()
	}
}

// urls returns the benchFeeds feed URLs, feed i on host i mod benchHosts.
func (p *benchPublisher) urls() []string {
	out := make([]string, benchFeeds)
	for i := range out {
		out[i] = "http://" + p.hosts[i%len(p.hosts)] + "/f/" + strconv.Itoa(i)
	}
	return out
}

func (p *benchPublisher) serve(w http.ResponseWriter, r *http.Request) {
	i := strings.TrimPrefix(r.URL.Path, "/f/")
	base := p.base.Load()
	etag := `"` + i + "-" + strconv.FormatInt(base, 10) + `"`
	if r.Header.Get("If-None-Match") == etag {
		w.Header().Set("ETag", etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	var sb strings.Builder
	sb.Grow(400 * benchItems)
	fmt.Fprintf(&sb, `<?xml version="1.0"?><rss version="2.0"><channel><title>feed %s</title><link>http://127.0.0.1/</link><description>bench</description>`, i)
	for k := int64(benchItems - 1); k >= 0; k-- {
		// Item n is the same document fragment in every response that
		// lists it, as a real publisher's items are.
		n := base + k
		fmt.Fprintf(&sb, `<item><title>reading %d</title><link>http://127.0.0.1/f/%s/%d</link><guid isPermaLink="false">%s-%d</guid><pubDate>%s</pubDate><description>value &lt;b&gt;%d.%d&lt;/b&gt; C</description></item>`,
			n, i, n, i, n, p.epoch.Add(time.Duration(n)*time.Second).Format(time.RFC1123Z), n%50, n%10)
	}
	sb.WriteString(`</channel></rss>`)
	w.Header().Set("Content-Type", "application/rss+xml")
	w.Header().Set("ETag", etag)
	_, _ = io.WriteString(w, sb.String())
}

// benchPass counts the polls of one pass over all feeds as the service's
// watcher hears of them, checking each against what the pass expects.
type benchPass struct {
	want    int64 // polls in the pass
	newWant int   // new items each poll must store; 0 means a 304
	done    atomic.Int64
	mu      sync.Mutex
	err     error
	finish  chan struct{}
}

func (p *benchPass) fetched(ev aggregator.Fetched) {
	var err error
	switch {
	case p.newWant == 0 && !ev.NotModified:
		err = fmt.Errorf("feed %d: a 200 with %d new items, want a 304", ev.Feed.ID, len(ev.Added))
	case p.newWant > 0 && len(ev.Added) != p.newWant:
		err = fmt.Errorf("feed %d: %d new items (not modified %v), want %d", ev.Feed.ID, len(ev.Added), ev.NotModified, p.newWant)
	}
	if err != nil {
		p.mu.Lock()
		if p.err == nil {
			p.err = err
		}
		p.mu.Unlock()
	}
	if p.done.Add(1) == p.want {
		close(p.finish)
	}
}

// wait waits for the pass to end, failing when polls stop coming.
func (p *benchPass) wait(b *testing.B) {
	last := int64(-1)
	for {
		select {
		case <-p.finish:
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.err != nil {
				b.Fatal(p.err)
			}
			return
		case <-time.After(benchStall):
			n := p.done.Load()
			if n == last {
				b.Fatalf("pass stalled after %d of %d polls (a fetch failed?)", n, p.want)
			}
			last = n
		}
	}
}

// benchEnv is the live aggregator of one concurrency, shared by the kinds
// of BenchmarkIngest so that subscribing and the first fetch of 10,000
// feeds happen once.
type benchEnv struct {
	svc    *aggregator.Service
	st     *storage.Store
	ids    []uint64
	pass   atomic.Pointer[benchPass]
	cancel context.CancelFunc
	done   chan error
}

func newBenchEnv(b *testing.B, pub *benchPublisher, workers int) *benchEnv {
	path := filepath.Join(b.TempDir(), "bench.db")
	// Subscribing is set-up: create the feeds without fsync, then
	// reopen the file with the durable settings slogfeed runs with.
	st, err := storage.Open(path, storage.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, u := range pub.urls() {
		if err := st.CreateFeed(&storage.Feed{URL: u, Kind: storage.KindRemote, Policy: "cron:0 0 1 1 *"}); err != nil {
			b.Fatal(err)
		}
	}
	if *ingestHistory > 0 {
		fillHistory(b, st, *ingestHistory)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if st, err = storage.Open(path, storage.Options{NoSync: *ingestNoSync, CommitLinger: *ingestLinger,
		MaxObservations: *ingestHistory}); err != nil {
		b.Fatal(err)
	}
	fetcher := fetcher.New(fetcher.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	var store aggregator.Store = st
	if *ingestNoWrite {
		if store, err = newMemWrites(st); err != nil {
			b.Fatal(err)
		}
	}
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store: store, Fetcher: fetcher, Scheduler: schedule.Config{Workers: workers},
		PendingWrites: *ingestPending,
	})
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{svc: svc, st: st, done: make(chan error, 1)}
	feeds, err := st.Feeds()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range feeds {
		e.ids = append(e.ids, f.ID)
	}
	svc.Watch(aggregator.Watcher{Fetched: func(ev aggregator.Fetched) {
		if p := e.pass.Load(); p != nil {
			p.fetched(ev)
		}
	}})
	// The first fetch of every feed (Load schedules them now).
	first := e.start(0)
	if err := svc.Load(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.done <- svc.Run(ctx) }()
	if *ingestHistory > 0 {
		// Feeds with a history are not new: Load plans them by their
		// policy, not now.
		e.expedite(b)
	}
	first.wait(b)
	return e
}

// fillHistory adds n misses an hour apart, ending a day ago, to every
// feed of st.
func fillHistory(b *testing.B, st *storage.Store, n int) {
	feeds, err := st.Feeds()
	if err != nil {
		b.Fatal(err)
	}
	end := time.Now().Add(-24 * time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	next := make(chan uint64)
	for range 64 {
		wg.Go(func() {
			for id := range next {
				for i := range n {
					o := storage.Observation{At: end.Add(time.Duration(i-n) * time.Hour), Status: http.StatusNotModified}
					if err := st.AddObservation(id, o); err != nil {
						select { // the first error is reported; keep draining next
						case errs <- err:
						default:
						}
						break
					}
				}
			}
		})
	}
	for _, f := range feeds {
		next <- f.ID
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// start begins counting a pass whose polls store newWant new items each
// (0: a 304).
func (e *benchEnv) start(newWant int) *benchPass {
	p := &benchPass{want: int64(len(e.ids)), newWant: newWant, finish: make(chan struct{})}
	if newWant == 0 && e.pass.Load() == nil {
		p.newWant = benchItems // the first fetch stores every item
	}
	e.pass.Store(p)
	return p
}

// run makes every feed due now, so that the scheduler's workers poll each
// once, and waits until every poll is stored.
func (e *benchEnv) run(b *testing.B, newWant int) {
	p := e.start(newWant)
	e.expedite(b)
	p.wait(b)
}

// expedite makes every feed due now.
func (e *benchEnv) expedite(b *testing.B) {
	now := time.Now()
	for _, id := range e.ids {
		for !e.svc.Expedite(id, now) {
			// The last polls of the previous pass may still be handing
			// their observation to the scheduler (the watcher hears of
			// a poll before that): the feed is not waiting yet.
			if time.Since(now) > benchStall {
				b.Fatalf("feed %d could not be brought forward", id)
			}
			runtime.Gosched()
		}
	}
}

func (e *benchEnv) close() {
	e.cancel()
	if err := <-e.done; err != nil && !errors.Is(err, context.Canceled) {
		panic(err)
	}
	_ = e.st.Close()
}

// BenchmarkIngest measures the live loop at ingest: the scheduler's workers
// fetch 10,000 loopback feeds of 20 items (conditional GET), parse,
// sanitise, deduplicate and store what they find (items, observation and
// feed counters in bbolt, fsync included), beside a bare Go HTTP client
// fetching the same URLs at the same concurrency in the same run. One
// iteration is one pass over all feeds; subscribing and the first fetch
// are set-up. KIND is 304 (nothing new), 200-1new (1 new item among 20)
// or 200-20new (20 new items); cN is the number of fetches in flight.
// Each sub-benchmark reports feeds/s; divide slogfeed's by the bare
// client's for the ratio. With b.Loop, -benchtime 3x is three passes and
// the set-up runs once.
func BenchmarkIngest(b *testing.B) {
	pub := newBenchPublisher(b)
	defer pub.close()
	urls := pub.urls()
	for _, c := range []int{1, 64} {
		var env *benchEnv
		getEnv := func(b *testing.B) *benchEnv {
			if env == nil {
				env = newBenchEnv(b, pub, c)
			}
			return env
		}
		for _, kind := range benchKinds {
			b.Run(fmt.Sprintf("slogfeed/%s/c%d", kind.name, c), func(b *testing.B) {
				env := getEnv(b)
				newWant := int(kind.step)
				stop := startIngestProfile(b, fmt.Sprintf("%s-c%d", kind.name, c))
				cpu, gc := aggtest.CPUTime(), newGCShare()
				commits := env.st.CommitStats()
				for b.Loop() {
					pub.base.Add(kind.step)
					env.run(b, newWant)
				}
				reportIngest(b, aggtest.CPUTime()-cpu)
				gc.report(b)
				stop()
				reportCommits(b, commits, env.st.CommitStats())
			})
		}
		if c > 1 {
			for _, kind := range benchKinds {
				b.Run(fmt.Sprintf("paired/%s/c%d", kind.name, c), func(b *testing.B) {
					benchPaired(b, pub, getEnv(b), newBareClient(urls, c), kind.step)
				})
			}
		}
		if env != nil {
			env.close()
		}
		for _, kind := range benchKinds {
			b.Run(fmt.Sprintf("bare-client/%s/c%d", kind.name, c), func(b *testing.B) {
				benchBare(b, pub, newBareClient(urls, c), kind.step)
			})
		}
	}
}

// benchPaired measures the goal's ratio directly: each iteration is a
// round of one slogfeed pass and one bare-client pass over the same
// documents, back to back (taking turns to go first, each on a collected
// heap), so that both sides see the machine in the same state (on shared
// cores, the rate of the moment can move by a quarter between
// sub-benchmarks run minutes apart). It reports each
// side's feeds/s over the rounds and share-%, the median over the rounds
// of slogfeed's feeds/s as a percentage of the bare client's.
func benchPaired(b *testing.B, pub *benchPublisher, env *benchEnv, bare *bareClient, step int64) {
	defer bare.close()
	if err := bare.pass(0); err != nil { // its validators, as slogfeed's first fetch
		b.Fatal(err)
	}
	want := bareWant(step)
	// Each pass starts on a collected heap, so that neither side pays for
	// the other's garbage, and the sides take turns going first.
	timed := func(pass func()) time.Duration {
		b.StopTimer()
		runtime.GC()
		b.StartTimer()
		t := time.Now()
		pass()
		return time.Since(t)
	}
	slogfeedPass := func() { env.run(b, int(step)) }
	barePass := func() {
		if err := bare.pass(want); err != nil {
			b.Fatal(err)
		}
	}
	var ours, theirs time.Duration
	var shares []float64
	for b.Loop() {
		pub.base.Add(step)
		var o, t time.Duration
		if len(shares)%2 == 0 {
			o, t = timed(slogfeedPass), timed(barePass)
		} else {
			t, o = timed(barePass), timed(slogfeedPass)
		}
		ours, theirs = ours+o, theirs+t
		shares = append(shares, 100*t.Seconds()/o.Seconds())
	}
	feeds := float64(len(shares) * benchFeeds)
	b.ReportMetric(feeds/ours.Seconds(), "slogfeed-feeds/s")
	b.ReportMetric(feeds/theirs.Seconds(), "bare-feeds/s")
	slices.Sort(shares)
	b.ReportMetric(median(shares), "share-%")
}

// median returns the median of sorted xs (0 for none).
func median(xs []float64) float64 {
	switch n := len(xs); {
	case n == 0:
		return 0
	case n%2 == 1:
		return xs[n/2]
	default:
		return (xs[n/2-1] + xs[n/2]) / 2
	}
}

// startIngestProfile starts the CPU profile of a sub-benchmark's passes
// when -ingest.cpuprofile is set, and returns what stops it.
func startIngestProfile(b *testing.B, name string) (stop func()) {
	if *ingestProfile == "" {
		return func() {}
	}
	f, err := os.Create(*ingestProfile + "-" + name + ".pprof")
	if err != nil {
		b.Fatal(err)
	}
	// The allocations of the passes alone: the profile before them is the
	// base of the one after (go tool pprof -base PREFIX-KIND-cN.allocs0
	// PREFIX-KIND-cN.allocs).
	writeAllocs(b, *ingestProfile+"-"+name+".allocs0")
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
		writeAllocs(b, *ingestProfile+"-"+name+".allocs")
	}
}

// writeAllocs writes the allocation profile so far to path.
func writeAllocs(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC() // the profile is as of the last collection
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Error(err)
	}
	if err := f.Close(); err != nil {
		b.Error(err)
	}
}

// reportCommits reports the group committer's work over the passes: the
// writes a group carried on average, and how much of the wall time the
// single writer was committing (fsyncs included).
func reportCommits(b *testing.B, before, after storage.CommitStats) {
	if g := after.Groups - before.Groups; g > 0 {
		b.ReportMetric(float64(after.Writes-before.Writes)/float64(g), "writes/group")
	}
	if w := after.Writes - before.Writes; w > 0 {
		b.ReportMetric(float64(after.Pages-before.Pages)/float64(w), "pages/write")
	}
	b.ReportMetric(100*(after.Busy-before.Busy).Seconds()/b.Elapsed().Seconds(), "writer-busy-%")
}

// bareClient is the bare Go client: c goroutines fetch every URL once per
// pass with conditional GET, read the body and check the status.
type bareClient struct {
	tr     *http.Transport
	client *http.Client
	urls   []string
	etags  []string
	c      int
}

func newBareClient(urls []string, c int) *bareClient {
	tr := &http.Transport{MaxIdleConns: 2 * c, MaxIdleConnsPerHost: c, IdleConnTimeout: 90 * time.Second}
	return &bareClient{tr: tr, client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		urls: urls, etags: make([]string, len(urls)), c: c}
}

func (bc *bareClient) close() { bc.tr.CloseIdleConnections() }

// get fetches URL i, and fails unless the status is want (0: any).
func (bc *bareClient) get(i int, want int) error {
	req, err := http.NewRequest(http.MethodGet, bc.urls[i], nil)
	if err != nil {
		return err
	}
	if bc.etags[i] != "" {
		req.Header.Set("If-None-Match", bc.etags[i])
	}
	resp, err := bc.client.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if want != 0 && resp.StatusCode != want {
		return fmt.Errorf("%s: status %d, want %d", bc.urls[i], resp.StatusCode, want)
	}
	bc.etags[i] = resp.Header.Get("ETag")
	return nil
}

// pass fetches every URL once, c at a time.
func (bc *bareClient) pass(want int) error {
	var next atomic.Int64
	errs := make(chan error, bc.c)
	for range bc.c {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bc.urls) {
					errs <- nil
					return
				}
				if err := bc.get(i, want); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range bc.c {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// bareWant is the status the bare client must see for a kind's step.
func bareWant(step int64) int {
	if step == 0 {
		return http.StatusNotModified
	}
	return http.StatusOK
}

// benchBare runs the bare client alone: one pass per iteration.
func benchBare(b *testing.B, pub *benchPublisher, bc *bareClient, step int64) {
	defer bc.close()
	if err := bc.pass(0); err != nil { // validators, as slogfeed's first fetch
		b.Fatal(err)
	}
	want := bareWant(step)
	cpu, gc := aggtest.CPUTime(), newGCShare()
	for b.Loop() {
		pub.base.Add(step)
		if err := bc.pass(want); err != nil {
			b.Fatal(err)
		}
	}
	reportIngest(b, aggtest.CPUTime()-cpu)
	gc.report(b)
}

// gcShare is the collector's CPU time and the process's, as the runtime
// estimates them, at the start of a benchmark's passes.
type gcShare struct{ gc, busy time.Duration }

func newGCShare() gcShare {
	gc, busy := aggtest.GCTime()
	return gcShare{gc, busy}
}

// report reports the collector's share of the CPU time over the passes
// (gc-cpu-%): the part of the work that the collector's target (GOGC)
// trades against memory.
func (s gcShare) report(b *testing.B) {
	gc, busy := aggtest.GCTime()
	if d := busy - s.busy; d > 0 {
		b.ReportMetric(100*(gc-s.gc).Seconds()/d.Seconds(), "gc-cpu-%")
	}
}

// reportIngest reports a pass's feeds/s and the process's CPU time (user
// and system, the in-process publisher's included) per feed polled: on a
// two-core machine shared with other work, feeds/s follows the machine's
// load, CPU per feed much less.
func reportIngest(b *testing.B, cpu time.Duration) {
	feeds := float64(b.N * benchFeeds)
	b.ReportMetric(feeds/b.Elapsed().Seconds(), "feeds/s")
	b.ReportMetric(float64(cpu.Microseconds())/feeds, "cpu-µs/feed")
}
