package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slogfeed/slogfeed/aggregator"
	"github.com/slogfeed/slogfeed/reader/fetcher"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
	"github.com/slogfeed/slogfeed/storage/jetstream/lease"
	"github.com/slogfeed/slogfeed/storage/jetstream/member"
	"github.com/slogfeed/slogfeed/transform"
	"github.com/slogfeed/slogfeed/transform/runner"
	"github.com/slogfeed/slogfeed/web"
)

// The simulated feeds (see Publisher) and the cluster's shards.
const (
	nFeeds   = 12
	period   = 20 * time.Second
	jitter   = 2 * time.Second
	docItems = 12
	shards   = 16
	history  = 15 * time.Minute // observations stored before the nodes start
)

// The bounds.
const (
	maxReown = 15 * time.Second // a dead node's shards owned again
	maxRepol = maxReown + period
)

// node is one slogfeed cluster node: its connection, JetStream store,
// lease node and aggregator.
type node struct {
	name    string
	nc      *nats.Conn
	backend *sjs.Backend
	lease   *lease.Node
	svc     *aggregator.Service
	pipes   *runner.Runner
	stop    context.CancelFunc
	done    chan error           // the aggregator's and the runner's Run
	metrics *prometheus.Registry // the store's
}

// pollReads sums slogfeed_jetstream_poll_reads_total of nodes by read
// (record, items): what their polls read that their copies of owned
// feeds' state could not answer.
func pollReads(nodes []*node) map[string]float64 {
	out := map[string]float64{}
	for _, nd := range nodes {
		if nd == nil || nd.metrics == nil {
			continue
		}
		mfs, err := nd.metrics.Gather()
		if err != nil {
			continue
		}
		for _, mf := range mfs {
			if mf.GetName() != "slogfeed_jetstream_poll_reads_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// connect opens a connection to the cluster and the JetStream store on it,
// each call of the backend bounded by callTimeout (0: the default).
func connect(t testing.TB, ctx context.Context, c *jstest.Cluster, callTimeout time.Duration) (*nats.Conn, jetstream.JetStream, *sjs.Backend) {
	t.Helper()
	return connectWith(t, ctx, c, callTimeout, sjs.Options{})
}

// connectWith is connect opening the store with opt.
func connectWith(t testing.TB, ctx context.Context, c *jstest.Cluster, callTimeout time.Duration, opt sjs.Options) (*nats.Conn, jetstream.JetStream, *sjs.Backend) {
	t.Helper()
	nc := c.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sjs.Open(ctx, js, opt)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return nc, js, sjs.NewBackend(st, callTimeout)
}

// nodeOptions are what a node of a test or benchmark varies: the
// aggregator's workers, the cluster's shards (default: shards) and a
// watcher registered before the first fetch, the backend's call timeout
// (0: the default).
type nodeOptions struct {
	workers     int
	callTimeout time.Duration
	resync      time.Duration // ServiceOptions.Resync
	snapshots   time.Duration // ServiceOptions.SnapshotEvery
	shards      int
	watch       aggregator.Watcher
	timing      cluster.Timing // the lease timing (zero: its default)
	tick        time.Duration  // the lease node's tick (zero: its default)
}

func startNode(t testing.TB, ctx context.Context, c *jstest.Cluster, name string, log *slog.Logger, opt nodeOptions) *node {
	t.Helper()
	n := joinNode(t, ctx, c, name, log, opt)
	n.serve(t, ctx, log, opt)
	return n
}

// joinNode connects a node to the cluster and starts its lease node; serve
// then starts its aggregator and pipe runner. Joining every node first
// lets the shards settle before any node loads its feeds.
func joinNode(t testing.TB, ctx context.Context, c *jstest.Cluster, name string, log *slog.Logger, opt nodeOptions) *node {
	t.Helper()
	if opt.shards == 0 {
		opt.shards = shards
	}
	reg := prometheus.NewRegistry()
	nc, js, b := connectWith(t, ctx, c, opt.callTimeout, sjs.Options{Metrics: sjs.NewMetrics(reg)})
	lease, err := lease.Start(ctx, js, lease.Options{Name: name, Shards: opt.shards, Timing: opt.timing, Tick: opt.tick, Logger: log, Features: member.Features()})
	if err != nil {
		t.Fatalf("%s: join: %v", name, err)
	}
	if err := member.Attach(b.Store(), lease); err != nil { // as a serve node does
		t.Fatal(err)
	}
	return &node{name: name, nc: nc, backend: b, lease: lease, metrics: reg, done: make(chan error, 2)}
}

// serve starts the aggregator (after loading the feeds of the node's
// shards) and the pipe runner of a joined node.
func (n *node) serve(t testing.TB, ctx context.Context, log *slog.Logger, opt nodeOptions) {
	t.Helper()
	svc, err := aggregator.NewService(aggregator.ServiceOptions{
		Store: n.backend,
		Fetcher: fetcher.New(fetcher.Options{
			Allow:     []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			UserAgent: fetcher.UserAgent("test", n.name),
		}),
		Scheduler:     schedule.Config{Workers: opt.workers},
		Owner:         n.lease,
		Resync:        opt.resync,
		SnapshotEvery: opt.snapshots,
		Logger:        log.With("node", n.name),
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.Watch(opt.watch)
	if err := svc.Load(); err != nil {
		t.Fatal(err)
	}
	pipes, err := runner.New(runner.Options{Store: n.backend, Owner: n.lease, Logger: log.With("node", n.name)})
	if err != nil {
		t.Fatal(err)
	}
	if err := pipes.Load(); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	n.svc, n.pipes, n.stop = svc, pipes, stop
	go func() { n.done <- svc.Run(rctx) }()
	go func() { n.done <- pipes.Run(rctx) }()
}

// post posts a reading of sensor lab-7 to n's sensor store.
func (n *node) post(t *testing.T, v float64) {
	t.Helper()
	h := web.SensorHandler(n.backend, web.SensorOptions{})
	req := httptest.NewRequest("POST", "/api/v1/sensors/lab-7/readings", strings.NewReader(fmt.Sprintf(`{"value": %v, "unit": "C"}`, v)))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("%s: POST reading %v: %d %s", n.name, v, rec.Code, rec.Body)
	}
}

// kill stops the node as SIGKILL would: the aggregator stops, the
// connection drops, no lease is given back.
func (n *node) kill() {
	n.stop()
	<-n.done
	<-n.done
	n.nc.Close()
}

// close stops the node cleanly.
func (n *node) close(t testing.TB) {
	n.stop()
	// Polls still storing finish within their calls' timeout, which a
	// benchmark may set to minutes: after closeGrace their calls are
	// canceled, as at the end of a serve node's shutdown.
	grace := time.NewTimer(closeGrace)
	defer grace.Stop()
	for range 2 {
		var err error
		select {
		case err = <-n.done:
		case <-grace.C:
			_ = n.backend.Close()
			err = <-n.done
		}
		if err != nil {
			t.Errorf("%s: run: %v", n.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.lease.Close(ctx)
	_ = n.backend.Close()
}

// closeGrace is how long node.close waits for the node's polls under way
// before it cancels their calls.
const closeGrace = 15 * time.Second

// TestNodeKilled: three aggregators on three lease nodes over a 3-server
// JetStream cluster poll simulated feeds whose period they learned (the
// stored observations of 15 minutes). One node is stopped abruptly. Its
// shards are owned again within 15 s; each of its feeds is polled again
// within 15 s plus one period, at the learned prediction (within 2σ of
// the replayed policy's answer) or at once when that passed during the
// outage. Then one NATS server is stopped: every feed is polled and
// stored again within a period plus 15 s. No item is stored twice and
// none published while the feeds were polled is missing. A reading posted
// to one node is in another node's feed of that sensor.
func TestNodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of real time")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	level := slog.LevelWarn
	if l := os.Getenv("SLOGFEED_E2E_LOG"); l != "" {
		_ = level.UnmarshalText([]byte(l))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	c := jstest.NewCluster(t, 3)

	start := time.Now()
	pub := NewPublisher(start.Add(-history), nFeeds, period, jitter, docItems)
	srv := httptest.NewServer(pub)
	defer srv.Close()

	// The feeds, with the observations of the polls a previous owner
	// made 3 s after each publication.
	_, _, seed := connect(t, ctx, c, 0)
	ids := make([]uint64, nFeeds)
	for i := range nFeeds {
		f := storage.Feed{URL: fmt.Sprintf("%s/f/%d.rss", srv.URL, i), Kind: storage.KindRemote, Policy: "auto"}
		if err := seed.CreateFeed(&f); err != nil {
			t.Fatal(err)
		}
		ids[i] = f.ID
		for k := 0; pub.Pub(i, k).Add(3 * time.Second).Before(start); k++ {
			o := storage.Observation{At: pub.Pub(i, k).Add(3 * time.Second), Hit: true, Published: []time.Time{pub.Pub(i, k)}, Status: 200}
			if _, err := seed.RecordPoll(f.ID, o, func(x *storage.Feed) error { x.Polls++; x.LastFetch = o.At; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d feeds with %v of observations stored in %v", nFeeds, history, time.Since(start).Round(time.Millisecond))

	nodes := []*node{
		startNode(t, ctx, c, "n1", log, nodeOptions{workers: 4}),
		startNode(t, ctx, c, "n2", log, nodeOptions{workers: 4}),
		startNode(t, ctx, c, "n3", log, nodeOptions{workers: 4}),
	}
	live := time.Now()
	WaitFor(t, 30*time.Second, "every feed polled by its owner", func() error {
		for i := range nFeeds {
			if len(pub.Polls(i, live)) == 0 {
				return fmt.Errorf("feed #%d not polled yet", i)
			}
		}
		return nil
	})

	// A reading posted to n1 is in n2's feed of the sensor.
	t.Run("reading posted to one node is in another's feed", func(t *testing.T) {
		a := httptest.NewServer(web.SensorHandler(nodes[0].backend, web.SensorOptions{Logger: log}))
		defer a.Close()
		b := httptest.NewServer(web.SensorHandler(nodes[1].backend, web.SensorOptions{Logger: log}))
		defer b.Close()
		resp, err := http.Post(a.URL+"/api/v1/sensors/lab-7/readings", "application/json", strings.NewReader(`{"value": 21.375, "unit": "C"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST to n1: %s", resp.Status)
		}
		resp, err = http.Get(b.URL + "/sensors/lab-7.json")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "21.375") {
			t.Fatalf("n2's feed of the sensor: %s\n%s", resp.Status, body)
		}
	})

	// A pipe republishes lab-7's readings above 20; it runs on the owner
	// of its shard, whichever node it was created and the readings
	// posted on.
	def := transform.Pipe{
		Nodes: []transform.Node{
			{ID: "in", Op: "source", Config: json.RawMessage(`{"feed": "sensor/lab-7"}`)},
			{ID: "hot", Op: "filter", Config: json.RawMessage(`{"rules":[{"field":"value","op":"gt","value":20}]}`)},
		},
		Edges:  []transform.Edge{{From: "in", To: "hot"}},
		Output: transform.Output{Slug: "hot", From: "hot"},
	}
	info, err := nodes[0].pipes.Create(ctx, def)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{25, 15, 30} {
		nodes[0].post(t, v)
	}
	outputs := func(want int) func() error {
		return func() error {
			its, err := seed.Items(info.FeedID, storage.ItemQuery{})
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			for _, it := range its {
				if seen[it.GUID] {
					t.Fatalf("pipe output %s emitted twice", it.GUID)
				}
				seen[it.GUID] = true
			}
			if len(its) != want {
				return fmt.Errorf("%d outputs, want %d", len(its), want)
			}
			return nil
		}
	}
	WaitFor(t, 15*time.Second, "the pipe's outputs", outputs(3)) // 21.375, 25, 30

	// The victim: the node running the pipe when it polls feeds too (the
	// pipe then moves with its shard), else the node polling the most
	// feeds.
	victim := 0
	count := func(n *node) int {
		k := 0
		for _, id := range ids {
			if n.lease.OwnsFeed(id) {
				k++
			}
		}
		return k
	}
	for i, n := range nodes {
		if count(n) > count(nodes[victim]) {
			victim = i
		}
	}
	pipeMoves := false
	for i, n := range nodes {
		if n.lease.OwnsPipe(info.ID) && count(n) > 0 {
			victim, pipeMoves = i, true
		}
	}
	dead := nodes[victim]
	var survivors []*node
	for i, n := range nodes {
		if i != victim {
			survivors = append(survivors, n)
		}
	}
	var lostFeeds []int
	for i, id := range ids {
		if dead.lease.OwnsFeed(id) {
			lostFeeds = append(lostFeeds, i)
		}
	}
	lostShards := dead.lease.Owned()
	if len(lostFeeds) == 0 {
		t.Fatal("the victim polls no feed")
	}
	dead.kill()
	killed := time.Now()
	t.Logf("killed %s with %d shards and %d feeds", dead.name, len(lostShards), len(lostFeeds))

	// Its shards are owned again within 15 s; when each was is the
	// takeover of its feeds.
	takenAt := map[int]time.Time{}
	reown := WaitFor(t, maxReown+5*time.Second, "every shard owned again", func() error {
		missing := 0
		for s := range shards {
			if _, ok := takenAt[s]; ok {
				continue
			}
			for _, n := range survivors {
				if n.lease.Owns(s) {
					takenAt[s] = time.Now()
				}
			}
			if _, ok := takenAt[s]; !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d shards unowned", missing)
		}
		return nil
	})
	t.Logf("shards owned again %v after the kill", reown.Round(10*time.Millisecond))
	if reown > maxReown {
		t.Errorf("shards owned again %v after the kill, want ≤ %v", reown, maxReown)
	}

	// Each of its feeds is polled again by a survivor.
	firstPoll := map[int]Poll{}
	WaitFor(t, maxRepol+5*time.Second, "every lost feed polled again", func() error {
		for _, i := range lostFeeds {
			if _, ok := firstPoll[i]; ok {
				continue
			}
			for _, p := range pub.Polls(i, killed) {
				if p.Node == dead.name {
					return fmt.Errorf("feed #%d polled by the dead node after the kill", i)
				}
				firstPoll[i] = p
				break
			}
			if _, ok := firstPoll[i]; !ok {
				return fmt.Errorf("feed #%d not polled since the kill", i)
			}
		}
		return nil
	})
	for _, i := range lostFeeds {
		p := firstPoll[i]
		after := p.At.Sub(killed)
		if after > maxRepol {
			t.Errorf("feed #%d polled again %v after the kill, want ≤ %v", i, after, maxRepol)
		}
		// The prediction the next owner resumes at: the policy replaying
		// the feed's stored observations, those before its first poll.
		taken := takenAt[cluster.ShardOf(cluster.KindFeed, ids[i], shards)]
		obs, err := survivors[0].backend.Observations(ids[i], 0)
		if err != nil {
			t.Fatal(err)
		}
		pol, err := schedule.ByName("auto", ids[i])
		if err != nil {
			t.Fatal(err)
		}
		var next time.Time
		for _, o := range obs {
			if o.Err == "" && o.At.Before(p.At) {
				next = pol.Next(o.Schedule())
			}
		}
		state := pol.(interface{ State() schedule.State }).State()
		if d := state.Median - period; d < -2*state.Sigma-time.Second || d > 2*state.Sigma+time.Second {
			t.Errorf("feed #%d: learned period %v (σ %v), want %v", i, state.Median, state.Sigma, period)
		}
		switch {
		case next.After(taken):
			off := p.At.Sub(next)
			t.Logf("feed #%d: taken over by %s %v after the kill, polled %v after the kill, %+v from the prediction (σ %v)",
				i, p.Node, taken.Sub(killed).Round(10*time.Millisecond), after.Round(10*time.Millisecond), off.Round(10*time.Millisecond), state.Sigma)
			if math.Abs(float64(off)) > float64(2*state.Sigma) {
				t.Errorf("feed #%d: first poll after the takeover %v off the prediction, want within 2σ = %v", i, off, 2*state.Sigma)
			}
		default:
			// Due during the outage: polled as soon as it is owned.
			late := p.At.Sub(taken)
			t.Logf("feed #%d: due during the outage (%v), taken over by %s %v after the kill, polled %v after the takeover",
				i, next.Sub(killed).Round(10*time.Millisecond), p.Node, taken.Sub(killed).Round(10*time.Millisecond), late.Round(10*time.Millisecond))
			if late > 3*time.Second {
				t.Errorf("feed #%d was due during the outage and polled %v after its takeover, want at once", i, late)
			}
		}
	}

	// The pipe goes on (on its new owner when it moved), each output once.
	for _, v := range []float64{22, 5, 40} {
		survivors[0].post(t, v)
	}
	took := WaitFor(t, 20*time.Second, "the pipe's outputs after the kill", outputs(5))
	t.Logf("pipe moved with its shard: %v; its outputs complete %v after the last reading, each once", pipeMoves, took.Round(10*time.Millisecond))

	// One NATS server stopped: the survivors go on polling and storing
	// every feed (each feed's stored last fetch moves past the stop) and
	// reading.
	c.Stop(0)
	stopped := time.Now()
	took = WaitFor(t, period+maxReown, "every feed polled and stored with a NATS server down", func() error {
		for i, id := range ids {
			f, err := survivors[i%len(survivors)].backend.Feed(id)
			if err != nil {
				return err
			}
			if !f.LastFetch.After(stopped) {
				var owner string
				var next time.Time
				for _, n := range survivors {
					if at, ok := n.svc.NextFetch(id); ok && n.lease.OwnsFeed(id) {
						owner, next = n.name, at
					}
				}
				return fmt.Errorf("feed #%d last stored fetch %v before the stop (errors in a row %d, last %q); owner %q plans it %v after the stop",
					i, f.LastFetch.Sub(stopped).Round(10*time.Millisecond), f.ErrorCount, f.LastError, owner, next.Sub(stopped).Round(10*time.Millisecond))
			}
		}
		return nil
	})
	t.Logf("NATS server 0 stopped: every feed polled and stored again within %v", took.Round(10*time.Millisecond))

	// Every item is stored once, and none published while the nodes
	// polled is missing: each item published from the first live poll
	// to a second before the last stored one. The publisher's last
	// request may belong to a poll that closing the nodes abandoned, or
	// whose write failed: nothing of it was acknowledged, so it bounds
	// nothing.
	for _, n := range survivors {
		n.close(t)
	}
	for i, id := range ids {
		its, err := seed.Items(id, storage.ItemQuery{})
		if err != nil {
			t.Fatal(err)
		}
		obs, err := seed.Observations(id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var stored time.Time // the last poll stored without an error
		for _, o := range obs {
			if o.Err == "" && o.At.After(stored) {
				stored = o.At
			}
		}
		polls := pub.Polls(i, live)
		if last := polls[len(polls)-1].At; last.After(stored) {
			t.Logf("feed #%d: last request %v, last stored poll %v", i, last.Format(time.TimeOnly), stored.Format(time.TimeOnly))
		}
		for _, err := range pub.CheckStored(i, its, polls[0].At, stored) {
			t.Error(err)
		}
	}
}
