package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/slogfeed/slogfeed/storage/cluster"
	sjs "github.com/slogfeed/slogfeed/storage/jetstream"
)

// DefaultBucket is the lease bucket's name.
const DefaultBucket = "slogfeed_cluster"

// DefaultForgetAfter is how long a departed node stays listed in Status.
const DefaultForgetAfter = time.Hour

// DefaultTick is how often a node re-decides when Options.Tick is zero.
const DefaultTick = time.Second

// Options configure a Node.
type Options struct {
	// Name is the node's name, unique in the cluster (see ValidNodeName).
	Name string
	// Addr is the node's HTTP address as others should reach it, shown in
	// Status; informational.
	Addr string
	// Shards is the cluster's shard count; zero means DefaultShards. The
	// first node writes it; a node with another count fails to start
	// with ErrConfigMismatch.
	Shards int
	// Timing is the lease timing; zero fields take DefaultTiming's.
	Timing cluster.Timing
	// Tick is how often the node re-decides (and also the moment a lease
	// or member key it watches expires); zero means DefaultTick, and it is
	// at most Timing.Renew/2. While writes fail the node tries one write
	// Tick/4 after each failed one.
	Tick time.Duration
	// ForgetAfter is how long a member key may go unrenewed before any
	// node deletes it (the node then drops out of Status); zero means
	// DefaultForgetAfter. At least 2×TTL.
	ForgetAfter time.Duration
	// WriteTimeout bounds one KV write; zero means Timing.Renew/2.
	WriteTimeout time.Duration
	// Bucket is the lease bucket; empty means DefaultBucket.
	Bucket string
	// Replicas of the lease bucket when this node creates it; zero means
	// 3 on a JetStream cluster (waiting, within Start's context, until the
	// cluster can place them) and 1 on a single server.
	Replicas int
	// Logger receives takeovers, releases and errors; nil discards.
	Logger *slog.Logger
	// Metrics, when set, records the lease metrics.
	Metrics *Metrics
	// Now is the clock (with a monotonic reading); nil means time.Now.
	Now func() time.Time
	// Features this node advertises in its member key, for the others'
	// AllHave: each names a format or behaviour a node of an older
	// version may not know (such as reading compressed records).
	Features []string
	// Polled, when set, tells how many feeds this node polls (ok false:
	// not known yet, as before its polling service exists); the count
	// goes into its member key at each write, for the other nodes'
	// Status (a cluster's status then needs no read of every feed). It
	// is called without the node's lock held.
	Polled func() (n int, ok bool)
	// StaleMember is the revision of this name's member key that the
	// caller has already seen unchanged for a lease TTL and a Renew
	// (CheckJoin's answer): Start takes that revision over without
	// watching it again. Zero watches any key another instance wrote.
	StaleMember uint64
}

func (o *Options) fill() error {
	if err := cluster.ValidNodeName(o.Name); err != nil {
		return err
	}
	if o.Shards == 0 {
		o.Shards = cluster.DefaultShards
	}
	if o.Shards < 1 || o.Shards > cluster.MaxShards {
		return fmt.Errorf("%w: %d shards (1…%d)", cluster.ErrInvalid, o.Shards, cluster.MaxShards)
	}
	d := cluster.DefaultTiming
	if o.Timing.TTL == 0 {
		o.Timing.TTL = d.TTL
	}
	if o.Timing.Renew == 0 {
		o.Timing.Renew = o.Timing.TTL / 3
	}
	if o.Timing.Margin == 0 {
		o.Timing.Margin = min(d.Margin, o.Timing.TTL/10)
	}
	t := o.Timing
	if t.TTL <= 0 || t.Renew <= 0 || t.Renew > t.TTL/2 || t.Margin < 0 || t.Margin >= t.TTL-t.Renew {
		return fmt.Errorf("%w: lease timing %+v (want 0 < renew ≤ ttl/2, margin < ttl−renew)", cluster.ErrInvalid, t)
	}
	if o.Tick < 0 {
		return fmt.Errorf("%w: tick %s", cluster.ErrInvalid, o.Tick)
	}
	if o.Tick == 0 {
		o.Tick = DefaultTick
	}
	o.Tick = min(o.Tick, t.Renew/2)
	if o.WriteTimeout == 0 {
		o.WriteTimeout = t.Renew / 2
	}
	if o.ForgetAfter == 0 {
		o.ForgetAfter = DefaultForgetAfter
	}
	if o.ForgetAfter < 2*t.TTL {
		return fmt.Errorf("%w: forget-after %s below twice the lease TTL", cluster.ErrInvalid, o.ForgetAfter)
	}
	if o.Bucket == "" {
		o.Bucket = DefaultBucket
	}
	if o.Replicas < 0 || o.Replicas > 5 {
		return fmt.Errorf("%w: %d replicas", cluster.ErrInvalid, o.Replicas)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// leaseValue is a lease's KV value.
type leaseValue struct {
	Node     string `json:"node"`
	Instance string `json:"instance"`
}

// memberValue is a member key's KV value.
type memberValue struct {
	Name     string    `json:"name"`
	Instance string    `json:"instance"`
	Addr     string    `json:"addr,omitempty"`
	Started  time.Time `json:"started"`
	Shards   []int     `json:"shards"`
	Features []string  `json:"features,omitempty"`
	// Polled is how many feeds the node polls (Options.Polled); absent
	// when it does not say.
	Polled *int `json:"polled,omitempty"`
}

type configValue struct {
	Shards int `json:"shards"`
}

// maxValue bounds the values read from the bucket: anything longer is
// not a slogfeed record.
const maxValue = 64 << 10

// Node is this process's membership of the cluster: it holds leases on
// shards, renews them, claims free and expired ones and gives back its
// surplus, and answers "is this shard (feed, pipe) mine?". It is safe for
// concurrent use.
type Node struct {
	opt      Options
	kv       jetstream.KeyValue
	instance string
	started  time.Time
	log      *slog.Logger

	mu         sync.Mutex
	leases     []cluster.Lease
	renewed    []time.Time
	tenure     []uint64 // this node's claims of each shard (Tenure)
	members    map[string]cluster.Member
	memberVals map[string]memberValue
	healthy    bool
	lostAt     time.Time // when lease writes began failing
	lastOK     time.Time // when a lease or member write last succeeded
	memberRev  uint64
	memberSent time.Time
	// acks dates the values the watch delivers late by this node's
	// own acknowledged writes (cluster.Acks.SeenAt).
	acks     cluster.Acks
	owned    []int // shards owned at the last evaluation
	lapsed   []int // shards lapsed at the last evaluation (Lapsed)
	changed  chan struct{}
	err      error
	features atomic.Pointer[featureView] // AllHave
	nc       *nats.Conn

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start joins the cluster: it opens (or creates) the lease bucket, checks
// the shard count, loads the bucket, writes the node's member key and
// starts renewing and rebalancing in the background until Close. It
// returns once the node's view is loaded; the node owns shards from its
// first tick on.
func Start(ctx context.Context, js jetstream.JetStream, opt Options) (*Node, error) {
	if err := opt.fill(); err != nil {
		return nil, err
	}
	kv, err := openBucket(ctx, js, opt)
	if err != nil {
		return nil, err
	}
	if err := checkConfig(ctx, kv, opt.Shards); err != nil {
		return nil, err
	}
	now := opt.Now()
	n := &Node{
		opt: opt, kv: kv, instance: nuid.Next(), started: now, nc: js.Conn(),
		log:        opt.Logger.With("node", opt.Name),
		leases:     make([]cluster.Lease, opt.Shards),
		renewed:    make([]time.Time, opt.Shards),
		tenure:     make([]uint64, opt.Shards),
		members:    map[string]cluster.Member{},
		memberVals: map[string]memberValue{},
		healthy:    true,
		changed:    make(chan struct{}),
	}
	n.countFeatures()
	// The watcher outlives ctx, which only bounds the start.
	lctx, cancel := context.WithCancel(context.Background())
	w, err := watchAll(ctx, lctx, kv)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cluster: watch %s: %w", opt.Bucket, err)
	}
	if err := n.load(ctx, w); err != nil {
		w.Stop()
		cancel()
		return nil, err
	}
	if err := n.joinMember(ctx); err != nil {
		w.Stop()
		cancel()
		return nil, err
	}
	n.cancel = cancel
	n.wg.Add(2)
	go n.watch(lctx, w)
	go n.loop(lctx)
	n.log.Info("cluster: joined", "instance", n.instance, "shards", opt.Shards, "lease_ttl", opt.Timing.TTL)
	return n, nil
}

// joinMember writes the node's member key at start, again while ctx
// lasts if the bucket does not take it (a stream leader being elected as
// the cluster forms); a duplicate name ends it at once.
func (n *Node) joinMember(ctx context.Context) error {
	if err := n.awaitStaleMember(ctx); err != nil {
		return err
	}
	for {
		err := n.writeMember(ctx, n.opt.WriteTimeout)
		if err == nil || errors.Is(err, cluster.ErrDuplicateNode) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(streamLeaderRetry):
		}
	}
}

// awaitStaleMember waits, before this process takes over its name's
// member key when another instance wrote it (awaitStaleMember below).
func (n *Node) awaitStaleMember(ctx context.Context) error {
	_, err := awaitStaleMember(ctx, n.kv, n.opt, n.instance)
	return err
}

// awaitStaleMember waits, when the member key of opt.Name was written by
// an instance other than instance, for a lease TTL and a Renew by its own
// clock, reading the key every half Renew: a live process with the same
// name renews it every Renew, and once it has been seen written twice
// more it fails with cluster.ErrDuplicateNode instead of knocking the
// running process out; the key of a process killed a moment ago (this
// node's previous run) stops changing and is taken over. Twice, so that
// a replica answering before it applied the dead process's last write
// does not pass for a renewal. The server's timestamps are not used: its
// clock need not agree with this one. It returns the key's revision it
// saw unchanged (0: no key, or this instance's), and takes
// opt.StaleMember over at once.
func awaitStaleMember(ctx context.Context, kv jetstream.KeyValue, opt Options, instance string) (uint64, error) {
	key := nodePrefix + opt.Name
	began := opt.Now()
	var seen uint64
	renewals := 0
	for {
		gctx, cancel := context.WithTimeout(ctx, opt.WriteTimeout)
		e, err := kv.Get(gctx, key)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return 0, nil
		case err == nil:
			var other memberValue
			if json.Unmarshal(e.Value(), &other) != nil || other.Instance == instance {
				return 0, nil
			}
			if seen == 0 && opt.StaleMember != 0 && e.Revision() == opt.StaleMember {
				return e.Revision(), nil
			}
			if seen != 0 && e.Revision() > seen {
				renewals++
			}
			if renewals >= 2 {
				return 0, fmt.Errorf("%w: %s (instance %s, since %s, renews its member key)", cluster.ErrDuplicateNode, opt.Name, other.Instance, other.Started.Format(time.RFC3339))
			}
			seen = max(seen, e.Revision())
		}
		if opt.Now().Sub(began) >= opt.Timing.TTL+opt.Timing.Renew {
			return seen, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("cluster: member key %s: %w", key, ctx.Err())
		case <-time.After(opt.Timing.Renew / 2):
		}
	}
}

// CheckJoin tells, without writing anything, whether Start would refuse
// opt on the cluster js reaches: a lease bucket with another shard count
// (cluster.ErrConfigMismatch), or a live process renewing the member key
// of opt.Name (cluster.ErrDuplicateNode, after watching the key as Start
// does). A node that runs its own JetStream server asks this through a
// plain client of the cluster before its server joins, so that a node
// refused leaves nothing behind (a server that joined stays a peer of the
// JetStream meta group). A cluster without the bucket passes. It returns
// the revision of a member key of that name it saw unchanged for a TTL
// and a Renew, for Options.StaleMember; another error means the cluster
// did not answer.
func CheckJoin(ctx context.Context, js jetstream.JetStream, opt Options) (uint64, error) {
	if err := opt.fill(); err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*opt.WriteTimeout)
	defer cancel()
	kv, err := js.KeyValue(rctx, opt.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cluster: %s: %w", opt.Bucket, err)
	}
	e, err := kv.Get(rctx, configKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return 0, fmt.Errorf("cluster: read %s: %w", configKey, err)
	default:
		if err := compareConfig(e.Value(), opt.Shards); err != nil {
			return 0, err
		}
	}
	return awaitStaleMember(ctx, kv, opt, "")
}

// watchAll starts a watcher living as long as life, trying again while
// start lasts: creating it is a JetStream API request that a busy or
// re-electing cluster may time out.
func watchAll(start, life context.Context, kv jetstream.KeyValue) (jetstream.KeyWatcher, error) {
	for {
		w, err := kv.WatchAll(life)
		if err == nil {
			return w, nil
		}
		select {
		case <-start.Done():
			return nil, fmt.Errorf("%w (last error: %v)", start.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// load applies the watcher's initial values, up to the marker that ends
// them.
func (n *Node) load(ctx context.Context, w jetstream.KeyWatcher) error {
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: load %s: %w", n.opt.Bucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("cluster: load %s: watcher stopped", n.opt.Bucket)
			}
			if e == nil {
				return nil
			}
			n.apply(e)
		}
	}
}

func openBucket(ctx context.Context, js jetstream.JetStream, opt Options) (jetstream.KeyValue, error) {
	kv, err := sjs.KeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket:      opt.Bucket,
		Description: "slogfeed cluster: shard leases and members",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    opt.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return kv, nil
}

// streamLeaderRetry is how long a node waits before asking a new bucket
// again whose stream has no leader yet.
const streamLeaderRetry = 200 * time.Millisecond

// checkConfig writes the shard count if the bucket has none and checks it
// otherwise. Each write and read is bounded and asked again while the
// bucket does not answer (its stream electing a leader as the cluster
// forms: a write sent to a leader that steps down is never answered).
func checkConfig(ctx context.Context, kv jetstream.KeyValue, shards int) error {
	want, _ := json.Marshal(configValue{Shards: shards})
	for {
		_, err := sjs.RetryUnanswered(ctx, func(ctx context.Context) (uint64, error) { return kv.Create(ctx, configKey, want) })
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("cluster: write %s: %w", configKey, err)
		}
		e, err := sjs.RetryUnanswered(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, configKey) })
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			// KV reads are direct gets, which any replica answers: one
			// that has not applied the other node's create yet does not
			// have the key. Ask again.
			select {
			case <-ctx.Done():
				return fmt.Errorf("cluster: read %s: %w (%w)", configKey, err, ctx.Err())
			case <-time.After(streamLeaderRetry):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("cluster: read %s: %w", configKey, err)
		}
		return compareConfig(e.Value(), shards)
	}
}

// compareConfig checks the config key's value against this node's shard
// count.
func compareConfig(value []byte, shards int) error {
	var have configValue
	if len(value) > maxValue || json.Unmarshal(value, &have) != nil {
		return fmt.Errorf("%w: unreadable %s %q", cluster.ErrConfigMismatch, configKey, truncate(value))
	}
	if have.Shards != shards {
		return fmt.Errorf("%w: cluster has %d shards, this node %d", cluster.ErrConfigMismatch, have.Shards, shards)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}

// apply folds one watched entry into the view.
func (n *Node) apply(e jetstream.KeyValueEntry) {
	now := n.opt.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	key := e.Key()
	deleted := e.Operation() != jetstream.KeyValuePut
	seen := n.acks.SeenAt(e.Revision(), now)
	if s := parseShardKey(key, n.opt.Shards); s >= 0 {
		n.setLease(s, e.Revision(), e.Value(), deleted, seen)
		return
	}
	if len(key) > len(nodePrefix) && key[:len(nodePrefix)] == nodePrefix {
		name := key[len(nodePrefix):]
		old, ok := n.members[name]
		if ok && e.Revision() <= old.Revision {
			return
		}
		if deleted {
			delete(n.members, name)
			delete(n.memberVals, name)
			n.countFeatures()
			return
		}
		var v memberValue
		if len(e.Value()) > maxValue || json.Unmarshal(e.Value(), &v) != nil || v.Name != name {
			v = memberValue{Name: name, Instance: "(unreadable)"}
		}
		n.members[name] = cluster.Member{Name: name, Instance: v.Instance, Revision: e.Revision(), Seen: seen}
		n.memberVals[name] = v
		n.countFeatures()
		if name == n.opt.Name && v.Instance == n.instance {
			// This process's own write, whatever its answer said (a
			// write that timed out may have been applied): the key's
			// revision to write at next, and a sign writes work.
			n.memberRev = max(n.memberRev, e.Revision())
			n.succeededLocked(now)
		}
	}
}

// setLease records a newer revision of shard s's lease. n.mu is held.
func (n *Node) setLease(s int, rev uint64, value []byte, deleted bool, now time.Time) {
	if rev <= n.leases[s].Revision {
		return
	}
	l := cluster.Lease{Revision: rev, Seen: now}
	if !deleted {
		var v leaseValue
		if len(value) > maxValue || json.Unmarshal(value, &v) != nil || v.Node == "" {
			v = leaseValue{Node: "(unreadable)"}
		}
		l.Holder, l.Instance = v.Node, v.Instance
	}
	n.leases[s] = l
	if l.Holder != n.opt.Name || l.Instance != n.instance {
		n.renewed[s] = time.Time{}
	}
}

// watch applies the bucket's changes until ctx ends, re-watching when the
// watcher stops.
func (n *Node) watch(ctx context.Context, w jetstream.KeyWatcher) {
	defer n.wg.Done()
	for {
		for e := range w.Updates() {
			if e != nil {
				n.apply(e)
				n.evaluate()
			}
		}
		w.Stop()
		for {
			if ctx.Err() != nil {
				return
			}
			var err error
			if w, err = n.kv.WatchAll(ctx); err == nil {
				break
			}
			if n.nc.IsClosed() {
				// Closed for good (the process is leaving): no watch
				// will start again.
				n.log.Warn("cluster: watch ended: the NATS connection is closed")
				return
			}
			n.log.Warn("cluster: re-watch", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(n.opt.Tick):
			}
		}
	}
}

func (n *Node) loop(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			t.Reset(n.step(ctx))
		}
	}
}

// probeEvery is how long a node whose lease writes fail waits after a
// failed write before it tries one more, and probeTimeout bounds that
// write: a node notices the bucket is back
// within about probeEvery+probeTimeout, under a Tick, and renews every
// overdue lease at once, inside cluster.Timing.ResumeGrace (Renew/2,
// while Tick ≤ Renew/2).
func (n *Node) probeEvery() time.Duration   { return n.opt.Tick / 4 }
func (n *Node) probeTimeout() time.Duration { return min(n.opt.WriteTimeout, n.opt.Tick/2) }

// view copies the node's picture for Decide. n.mu is held.
func (n *Node) view(now time.Time) cluster.View {
	v := cluster.View{
		Self: n.opt.Name, Instance: n.instance, Now: now, Healthy: n.healthy,
		Leases: slices.Clone(n.leases), Renewed: slices.Clone(n.renewed),
	}
	for _, m := range n.members {
		v.Members = append(v.Members, m)
	}
	return v
}

// step decides and carries out one round of writes and returns how long
// to wait before the next: a Tick, less when a lease or member key will
// expire sooner (a dead node's shards are claimed the moment they
// expire), probeEvery while writes fail.
func (n *Node) step(ctx context.Context) time.Duration {
	v, ok := n.viewNow()
	if !ok {
		return n.opt.Tick
	}
	if !v.Healthy {
		if !n.probe(ctx) {
			// Shards whose last renewal is now too old stop being
			// owned: the aggregator hears of it.
			n.evaluate()
			return n.probeEvery()
		}
		// Writes succeed again: decide on the resumed view.
		if v, ok = n.viewNow(); !ok {
			return n.opt.Tick
		}
	}
	plan := cluster.Decide(v, n.opt.Timing)
	forget := cluster.Forgotten(v, n.opt.ForgetAfter)

	ok = n.renewAll(ctx, plan.Renew)
	for _, st := range plan.Release {
		if !ok {
			break
		}
		ok = n.release(ctx, st)
	}
	for _, st := range plan.Claim {
		if !ok {
			break
		}
		ok = n.claim(ctx, st)
	}
	for _, m := range forget {
		if !ok {
			break
		}
		ok = n.forget(ctx, m)
	}
	if ok && n.opt.Now().Sub(n.memberSentAt()) >= n.opt.Timing.Renew {
		if err := n.writeMember(ctx, n.opt.WriteTimeout); err != nil {
			if errors.Is(err, cluster.ErrDuplicateNode) {
				n.fail(err)
				return n.opt.Tick
			}
			n.log.Warn("cluster: member key", "err", err)
		}
	}
	n.evaluate()
	if !ok {
		return n.probeEvery()
	}
	return n.untilNext()
}

// viewNow is the node's view at its clock's now; false once the node has
// stopped acting on shards (Err).
func (n *Node) viewNow() (cluster.View, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return cluster.View{}, false
	}
	return n.view(n.opt.Now()), true
}

// untilNext is how long step's caller waits before the next step.
func (n *Node) untilNext() time.Duration {
	v, ok := n.viewNow()
	switch {
	case !ok:
		return n.opt.Tick
	case !v.Healthy:
		return n.probeEvery()
	}
	wait := n.opt.Tick
	if at := cluster.NextExpiry(v, n.opt.Timing); !at.IsZero() {
		wait = min(wait, at.Sub(v.Now))
	}
	return max(wait, time.Millisecond)
}

// probe writes the node's member key while lease writes fail, bounded by
// probeTimeout, and reports whether writes succeed again. (Not a lease: a
// lease whose renewal conflicted stays this node's in its view until the
// watcher delivers the new holder, and would be tried again and again.)
func (n *Node) probe(ctx context.Context) bool {
	if err := n.writeMember(ctx, n.probeTimeout()); errors.Is(err, cluster.ErrDuplicateNode) {
		n.fail(err)
		return false
	}
	return n.Healthy()
}

// renewConcurrency bounds the renewals a node has in flight at once.
const renewConcurrency = 16

// renewAll renews the leases concurrently (a node may hold hundreds) and
// reports whether every write reached the bucket.
func (n *Node) renewAll(ctx context.Context, steps []cluster.Step) bool {
	if len(steps) == 0 {
		return true
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed bool
	)
	sem := make(chan struct{}, renewConcurrency)
	for _, st := range steps {
		sem <- struct{}{}
		mu.Lock()
		stop := failed
		mu.Unlock()
		if stop {
			// The bucket does not take writes: the rest would each
			// wait out a WriteTimeout; the probe takes over.
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if !n.renew(ctx, st) {
				mu.Lock()
				failed = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return !failed
}

func (n *Node) memberSentAt() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.memberSent
}

func (n *Node) leaseValue() []byte {
	b, _ := json.Marshal(leaseValue{Node: n.opt.Name, Instance: n.instance})
	return b
}

// written records the outcome of a write: a success makes the KV view
// healthy again, an unavailable bucket makes it unhealthy. It reports
// whether the round of writes may go on.
func (n *Node) written(err error) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case sjs.IsConflict(err):
		// The server answered, but a stream leader that has lost its
		// quorum answers conflicts too: no sign that writes work again.
		return true
	case errors.Is(err, context.Canceled):
		// The node is stopping: no sign either way.
		return false
	case err == nil:
		n.succeededLocked(n.opt.Now())
		return true
	default:
		if n.healthy {
			n.log.Warn("cluster: lease writes fail; keeping leases, claiming none", "err", err)
			n.healthy, n.lostAt = false, n.opt.Now()
		}
		return false
	}
}

// succeededLocked records that a write of this node reached the bucket at
// now: after a failure the observation times are carried over the outage
// (cluster.ResumeSeen). n.mu is held.
func (n *Node) succeededLocked(now time.Time) {
	n.lastOK = now
	if n.healthy {
		return
	}
	for i := range n.leases {
		n.leases[i].Seen = cluster.ResumeSeen(n.leases[i].Seen, n.lostAt, now, n.opt.Timing)
	}
	for name, m := range n.members {
		m.Seen = cluster.ResumeSeen(m.Seen, n.lostAt, now, n.opt.Timing)
		n.members[name] = m
	}
	n.healthy = true
	n.log.Info("cluster: lease writes succeed again", "after", now.Sub(n.lostAt))
}

func (n *Node) renew(ctx context.Context, st cluster.Step) bool {
	wctx, cancel := context.WithTimeout(ctx, n.opt.WriteTimeout)
	defer cancel()
	sent := n.opt.Now()
	rev, err := n.kv.Update(wctx, shardKey(st.Shard), n.leaseValue(), st.Revision)
	switch {
	case err == nil:
		n.opt.Metrics.renewal("ok")
		n.mu.Lock()
		n.acks.Add(rev, n.opt.Now())
		n.setLease(st.Shard, rev, n.leaseValue(), false, sent)
		n.renewed[st.Shard] = sent
		n.mu.Unlock()
	case sjs.IsConflict(err):
		n.opt.Metrics.renewal("conflict")
		n.log.Warn("cluster: lease lost", "shard", st.Shard)
		n.mu.Lock()
		n.renewed[st.Shard] = time.Time{}
		n.mu.Unlock()
		n.refresh(ctx, st.Shard)
	default:
		n.opt.Metrics.renewal("error")
	}
	return n.written(err)
}

func (n *Node) claim(ctx context.Context, st cluster.Step) bool {
	wctx, cancel := context.WithTimeout(ctx, n.opt.WriteTimeout)
	defer cancel()
	n.mu.Lock()
	prev := n.leases[st.Shard]
	// Every claim attempt starts a tenure, answered or not: a write whose
	// answer times out may still land, and the watch then delivers it as
	// this process's lease, renewed like any other (Tenure).
	n.tenure[st.Shard]++
	n.mu.Unlock()
	sent := n.opt.Now()
	var rev uint64
	var err error
	if prev.Holder == "" {
		rev, err = n.kv.Create(wctx, shardKey(st.Shard), n.leaseValue())
	} else {
		rev, err = n.kv.Update(wctx, shardKey(st.Shard), n.leaseValue(), st.Revision)
	}
	switch {
	case err == nil:
		n.opt.Metrics.claim(st.Takeover)
		n.mu.Lock()
		n.acks.Add(rev, n.opt.Now())
		n.setLease(st.Shard, rev, n.leaseValue(), false, sent)
		n.renewed[st.Shard] = sent
		n.mu.Unlock()
		if st.Takeover {
			n.log.Info("cluster: takeover", "shard", st.Shard, "from", prev.Holder, "from_instance", prev.Instance)
		} else {
			n.log.Debug("cluster: claimed", "shard", st.Shard)
		}
	case sjs.IsConflict(err):
		n.refresh(ctx, st.Shard)
	}
	return n.written(err)
}

func (n *Node) release(ctx context.Context, st cluster.Step) bool {
	// Stop acting on the shard before anyone else may.
	n.mu.Lock()
	n.renewed[st.Shard] = time.Time{}
	n.mu.Unlock()
	n.evaluate()
	wctx, cancel := context.WithTimeout(ctx, n.opt.WriteTimeout)
	defer cancel()
	err := n.kv.Delete(wctx, shardKey(st.Shard), jetstream.LastRevision(st.Revision))
	switch {
	case err == nil:
		n.opt.Metrics.release()
		n.log.Info("cluster: released", "shard", st.Shard)
		n.mu.Lock()
		if n.leases[st.Shard].Revision == st.Revision {
			n.leases[st.Shard].Holder, n.leases[st.Shard].Instance = "", ""
			n.leases[st.Shard].Seen = n.opt.Now()
		}
		n.mu.Unlock()
	case sjs.IsConflict(err):
		n.refresh(ctx, st.Shard)
	}
	return n.written(err)
}

// forget deletes a long-departed member's key, if nobody wrote it since.
func (n *Node) forget(ctx context.Context, m cluster.Member) bool {
	wctx, cancel := context.WithTimeout(ctx, n.opt.WriteTimeout)
	defer cancel()
	err := n.kv.Delete(wctx, nodePrefix+m.Name, jetstream.LastRevision(m.Revision))
	if err == nil {
		n.log.Info("cluster: forgot departed node", "member", m.Name)
		n.mu.Lock()
		if cur, ok := n.members[m.Name]; ok && cur.Revision == m.Revision {
			delete(n.members, m.Name)
			delete(n.memberVals, m.Name)
			n.countFeatures()
		}
		n.mu.Unlock()
	}
	return n.written(err)
}

// refresh re-reads shard s's lease after a conflict: the watcher may not
// have delivered the newer value yet.
func (n *Node) refresh(ctx context.Context, s int) {
	rctx, cancel := context.WithTimeout(ctx, n.opt.WriteTimeout)
	defer cancel()
	e, err := n.kv.Get(rctx, shardKey(s))
	now := n.opt.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case err == nil:
		n.setLease(s, e.Revision(), e.Value(), false, n.acks.SeenAt(e.Revision(), now))
	case errors.Is(err, jetstream.ErrKeyNotFound):
		// Deleted: a claim creates it again whatever the revision.
		if n.leases[s].Holder != "" {
			n.leases[s] = cluster.Lease{Revision: n.leases[s].Revision, Seen: now}
			n.renewed[s] = time.Time{}
		}
	}
}

// writeMember writes the node's member key within timeout, conditional on
// the revision this node last saw, so a second process with the same name
// is noticed.
func (n *Node) writeMember(ctx context.Context, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var polled *int
	if n.opt.Polled != nil {
		if p, ok := n.opt.Polled(); ok {
			polled = &p
		}
	}
	n.mu.Lock()
	v := memberValue{Name: n.opt.Name, Instance: n.instance, Addr: n.opt.Addr, Started: n.started, Shards: n.ownedLocked(n.opt.Now()), Features: n.opt.Features, Polled: polled}
	rev := n.memberRev
	if rev == 0 {
		rev = n.members[n.opt.Name].Revision // a previous run's key
	}
	n.mu.Unlock()
	b, _ := json.Marshal(v)
	key := nodePrefix + n.opt.Name
	sent := n.opt.Now()
	var err error
	var nrev uint64
	if rev == 0 {
		nrev, err = n.kv.Create(wctx, key, b)
	} else {
		nrev, err = n.kv.Update(wctx, key, b, rev)
	}
	n.written(err)
	if sjs.IsConflict(err) {
		e, gerr := n.kv.Get(wctx, key)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			// Deleted (a node forgot this one while it could not
			// write): created again at the next write.
			n.mu.Lock()
			n.memberRev = 0
			delete(n.members, n.opt.Name)
			n.mu.Unlock()
		case gerr != nil || e.Revision() <= rev:
			// No answer, or one from a replica that has not applied
			// the write that moved the key: ask again at the next write.
		default:
			var other memberValue
			if json.Unmarshal(e.Value(), &other) == nil && other.Instance != n.instance {
				return fmt.Errorf("%w: %s (instance %s, since %s)", cluster.ErrDuplicateNode, n.opt.Name, other.Instance, other.Started.Format(time.RFC3339))
			}
			// This process's own write, answered too late.
			n.mu.Lock()
			n.memberRev = max(n.memberRev, e.Revision())
			n.mu.Unlock()
		}
		return fmt.Errorf("cluster: member key %s: %w", key, err)
	}
	if err != nil {
		return fmt.Errorf("cluster: member key %s: %w", key, err)
	}
	n.mu.Lock()
	n.memberRev, n.memberSent = nrev, sent
	n.acks.Add(nrev, n.opt.Now())
	n.mu.Unlock()
	return nil
}

func (n *Node) fail(err error) {
	n.log.Error("cluster: node stops acting on shards", "err", err)
	n.mu.Lock()
	n.err = err
	clear(n.renewed)
	n.mu.Unlock()
	n.evaluate()
}

// renewedLocked reports whether this process holds shard s's lease in
// its view with a renewal it has not forgotten, and whether that renewal
// is recent enough to act on the shard at now (cluster.Owned,
// cluster.Lapsed). n.mu is held.
func (n *Node) renewedLocked(s int, now time.Time) (held, fresh bool) {
	if s < 0 || s >= len(n.leases) || n.err != nil {
		return false, false
	}
	l := n.leases[s]
	if l.Holder != n.opt.Name || l.Instance != n.instance || n.renewed[s].IsZero() {
		return false, false
	}
	return true, now.Before(n.renewed[s].Add(n.opt.Timing.TTL - n.opt.Timing.Margin))
}

// ownedLocked lists the shards this process may act on at now. n.mu is
// held.
func (n *Node) ownedLocked(now time.Time) []int {
	var s []int
	for i := range n.leases {
		if held, fresh := n.renewedLocked(i, now); held && fresh {
			s = append(s, i)
		}
	}
	return s
}

// lapsedLocked lists the shards whose lease lapsed at now (Lapsed). n.mu
// is held.
func (n *Node) lapsedLocked(now time.Time) []int {
	var s []int
	for i := range n.leases {
		if held, fresh := n.renewedLocked(i, now); held && !fresh {
			s = append(s, i)
		}
	}
	return s
}

// evaluate recomputes the owned and the lapsed shards and wakes
// Changed's waiters when either differ.
func (n *Node) evaluate() {
	now := n.opt.Now()
	n.mu.Lock()
	owned := n.ownedLocked(now)
	lapsed := n.lapsedLocked(now)
	v := n.view(now)
	live := len(v.Live(n.opt.Timing))
	healthy := n.healthy
	if !slices.Equal(owned, n.owned) || !slices.Equal(lapsed, n.lapsed) {
		n.owned, n.lapsed = owned, lapsed
		close(n.changed)
		n.changed = make(chan struct{})
	}
	n.mu.Unlock()
	n.opt.Metrics.state(len(owned), len(lapsed), live, healthy)
}

// Shards is the cluster's shard count.
func (n *Node) Shards() int { return n.opt.Shards }

// Name is the node's name.
func (n *Node) Name() string { return n.opt.Name }

// Owns reports whether this node may act on shard s now: it holds the
// lease and renewed it less than TTL−Margin ago.
func (n *Node) Owns(s int) bool {
	now := n.opt.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	held, fresh := n.renewedLocked(s, now)
	return held && fresh
}

// Lapsed reports whether shard s's lease lapsed (cluster.Lapser): the
// node's view still names this process as its holder, and the last
// successful renewal is TTL−Margin old or older, so the node does not
// own it; tenure is Tenure(s). Lapsed turns false when the shard is
// owned again (a renewal succeeded), when the view names another holder
// or none (the watch delivered another node's claim, or a refused
// renewal was read back), when the node gives the lease back, and when
// the node stops. Owned again with the tenure it lapsed with, no other
// node held the shard meanwhile (Tenure).
func (n *Node) Lapsed(s int) (tenure uint64, ok bool) {
	now := n.opt.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if held, fresh := n.renewedLocked(s, now); !held || fresh {
		return 0, false
	}
	return n.tenure[s], true
}

// Holds tells every shard's ownership, lapse and tenure from one reading
// of the node's view (cluster.Lapser).
func (n *Node) Holds() []cluster.Hold {
	now := n.opt.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]cluster.Hold, len(n.leases))
	for s := range out {
		held, fresh := n.renewedLocked(s, now)
		out[s] = cluster.Hold{Owned: held && fresh, Lapsed: held && !fresh, Tenure: n.tenure[s]}
	}
	return out
}

// Tenure counts this node's claim attempts on shard s, each counted as
// it is sent, whether it succeeds, is refused or goes unanswered.
// Renewals keep it. With the same tenure at two moments, no other node
// held s in between while this process held it at both: the only writes
// naming this process are its own claims and renewals; a renewal only
// succeeds at a revision this process wrote, so after another holder's
// write only a claim names this process again, and that claim, answered
// or not, is a new tenure. A caller that notes Tenure(s) before a read
// and finds the same after it, with Owns(s) true then, knows no other
// node claimed s in between.
func (n *Node) Tenure(s int) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s < 0 || s >= len(n.tenure) {
		return 0
	}
	return n.tenure[s]
}

// OwnsFeed reports whether this node may poll the feed with this ID.
func (n *Node) OwnsFeed(id uint64) bool {
	return n.Owns(cluster.ShardOf(cluster.KindFeed, id, n.opt.Shards))
}

// OwnsPipe reports whether this node may run the pipe with this ID.
func (n *Node) OwnsPipe(id uint64) bool {
	return n.Owns(cluster.ShardOf(cluster.KindPipe, id, n.opt.Shards))
}

// Owned lists the shards this node may act on now, ascending.
func (n *Node) Owned() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ownedLocked(n.opt.Now())
}

// Changed returns a channel that is closed at the next change of the
// owned shards (a claim, a release, a lost or lapsed lease) or of the
// lapsed ones (a lapsed lease renewed, or claimed by another node as
// the view shows). Call it again after it fires, then read Owned.
func (n *Node) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.changed
}

// Healthy reports whether the node's lease writes succeed.
func (n *Node) Healthy() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err == nil && n.healthy
}

// Ready is nil while the node's lease writes succeed: it has not stopped
// (Err), its last write did not fail, and one succeeded within the lease
// TTL (a node whose writes hang is not ready either). It answers from the
// node's own state, without a request to the cluster.
func (n *Node) Ready() error {
	now := n.opt.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.err != nil:
		return n.err
	case !n.healthy:
		return fmt.Errorf("cluster lease writes have been failing for %s (no JetStream quorum, or a bucket electing its leader)", now.Sub(n.lostAt).Round(time.Millisecond))
	case now.Sub(n.lastOK) > n.opt.Timing.TTL:
		return fmt.Errorf("no cluster lease write has succeeded for %s (lease TTL %s)", now.Sub(n.lastOK).Round(time.Millisecond), n.opt.Timing.TTL)
	}
	return nil
}

// Err is the error that made the node stop acting on shards
// (ErrDuplicateNode), or nil.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// Status returns the cluster as this node sees it: every member key with
// the shards its leases name, and the shards no live lease names.
func (n *Node) Status() cluster.Status {
	now := n.opt.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	return cluster.StatusOf(n.view(now), n.opt.Timing, func(name string) cluster.MemberInfo {
		v := n.memberVals[name]
		return cluster.MemberInfo{Addr: v.Addr, Polled: v.Polled}
	})
}

// stop ends the background work without giving anything back, as a
// killed process would.
func (n *Node) stop() {
	if n.cancel != nil {
		n.cancel()
	}
	n.wg.Wait()
}

// Close leaves the cluster: it stops renewing, gives back its leases and
// deletes its member key, so its shards move at once instead of after a
// TTL. ctx bounds the writes; leases it could not delete expire.
func (n *Node) Close(ctx context.Context) error {
	n.stop()
	n.mu.Lock()
	var mine []cluster.Step
	for s, l := range n.leases {
		if l.Holder == n.opt.Name && l.Instance == n.instance {
			mine = append(mine, cluster.Step{Shard: s, Revision: l.Revision})
		}
	}
	memberRev := n.memberRev
	if n.err == nil {
		n.err = cluster.ErrClosed
	}
	clear(n.renewed)
	n.mu.Unlock()
	n.evaluate()
	var errs []error
	for _, st := range mine {
		if err := n.kv.Delete(ctx, shardKey(st.Shard), jetstream.LastRevision(st.Revision)); err != nil && !sjs.IsConflict(err) {
			errs = append(errs, fmt.Errorf("shard %d: %w", st.Shard, err))
		} else if err == nil {
			n.opt.Metrics.release()
		}
	}
	if memberRev != 0 {
		if err := n.kv.Delete(ctx, nodePrefix+n.opt.Name, jetstream.LastRevision(memberRev)); err != nil && !sjs.IsConflict(err) {
			errs = append(errs, fmt.Errorf("member key: %w", err))
		}
	}
	n.log.Info("cluster: left", "released", len(mine)-len(errs))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: close: %w", err)
	}
	return nil
}

var (
	_ cluster.Owner  = (*Node)(nil)
	_ cluster.Lapser = (*Node)(nil)
)

// featureView is what AllHave answers from: for each of this node's
// features, whether every member in view advertises it, and when a member
// lacking it was last in view.
type featureView struct {
	common map[string]bool
	lacked map[string]time.Time
}

// AllHave reports whether this node and every member in the cluster's
// bucket advertise feature (Options.Features), and have for ForgetAfter:
// a member key written by an older version, or unreadable, has none, and
// once the last member lacking the feature is gone the answer stays no
// for ForgetAfter, so that an older node restarted (its key deleted by a
// clean stop) or briefly away is back before the feature is used. It
// answers from the node's view, without a request.
func (n *Node) AllHave(feature string) bool {
	v := n.features.Load()
	if v == nil || !v.common[feature] {
		return false
	}
	at, ok := v.lacked[feature]
	return !ok || n.opt.Now().Sub(at) >= n.opt.ForgetAfter
}

// countFeatures recomputes the features this node and every member in
// its view advertise. n.mu is held (or the node is not running yet).
func (n *Node) countFeatures() {
	now := n.opt.Now()
	v := &featureView{common: make(map[string]bool, len(n.opt.Features)), lacked: map[string]time.Time{}}
	prev := n.features.Load()
	for _, f := range n.opt.Features {
		all := true
		for _, m := range n.memberVals {
			if !slices.Contains(m.Features, f) {
				all = false
				break
			}
		}
		v.common[f] = all
		switch {
		case !all, prev != nil && !prev.common[f]:
			v.lacked[f] = now // lacking now, or until now
		case prev != nil:
			if at, ok := prev.lacked[f]; ok {
				v.lacked[f] = at
			}
		}
	}
	n.features.Store(v)
}
