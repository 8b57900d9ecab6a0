package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage/cluster"
	"github.com/slogfeed/slogfeed/storage/jetstream/jstest"
)

// skewedNode starts a node whose clock runs ahead of time.Now by what
// the returned counter holds, and waits until it owns every shard.
func skewedNode(t *testing.T, c *jstest.Cluster, name string) (*testNode, *atomic.Int64) {
	t.Helper()
	var ahead atomic.Int64
	n := startNode(t, c, name, func(o *Options) {
		o.WriteTimeout = 300 * time.Millisecond
		o.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	})
	waitFor(t, 10*time.Second, name+" owns everything", func() error {
		if got := len(n.Owned()); got != testShards {
			return fmt.Errorf("%s owns %d", name, got)
		}
		return nil
	})
	return n, &ahead
}

// tenures notes every shard's tenure and checks that none is lapsed.
func tenures(t *testing.T, n *testNode) []uint64 {
	t.Helper()
	out := make([]uint64, testShards)
	for s := range out {
		out[s] = n.Tenure(s)
		if out[s] == 0 {
			t.Fatalf("shard %d owned without a tenure", s)
		}
		if _, lapsed := n.Lapsed(s); lapsed {
			t.Fatalf("shard %d owned and lapsed", s)
		}
	}
	return out
}

// fired waits for ch to be closed.
func fired(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("Changed did not fire when %s", what)
	}
}

// TestLapsedAcrossOutage: while lease writes fail past TTL−Margin, the
// node owns none of its shards and reports each lapsed with the tenure
// it had; once writes work again it renews them and owns them under the
// same tenures, none lapsed. Changed fires at both turns.
func TestLapsedAcrossOutage(t *testing.T) {
	c := jstest.NewServer(t)
	a, ahead := skewedNode(t, c, "a")
	before := tenures(t, a)
	ch := a.Changed()
	c.Stop(0)
	ahead.Store(int64(cluster.DefaultTiming.TTL)) // the last renewals are a TTL old
	fired(t, ch, "the leases lapsed")
	if o := a.Owned(); len(o) != 0 {
		t.Fatalf("owns %v with renewals a TTL old", o)
	}
	holds := a.Holds()
	for s := range testShards {
		if tenure, ok := a.Lapsed(s); !ok || tenure != before[s] {
			t.Errorf("shard %d: Lapsed = %d, %v; want %d, true", s, tenure, ok, before[s])
		}
		if a.Owns(s) {
			t.Errorf("shard %d owned while lapsed", s)
		}
		if want := (cluster.Hold{Lapsed: true, Tenure: before[s]}); holds[s] != want {
			t.Errorf("shard %d: Holds says %+v, want %+v", s, holds[s], want)
		}
	}
	ch = a.Changed()
	c.Restart(0)
	c.WaitReady()
	waitFor(t, 20*time.Second, "the leases renewed", func() error {
		if got := len(a.Owned()); got != testShards {
			return fmt.Errorf("owns %d", got)
		}
		return nil
	})
	fired(t, ch, "the leases were renewed")
	holds = a.Holds()
	for s, tenure := range tenures(t, a) {
		if tenure != before[s] {
			t.Errorf("shard %d renewed after its lapse with tenure %d, had %d", s, tenure, before[s])
		}
		if want := (cluster.Hold{Owned: true, Tenure: before[s]}); holds[s] != want {
			t.Errorf("shard %d: Holds says %+v, want %+v", s, holds[s], want)
		}
	}
}

// pauseRenewals stops n's lease writes (renewals, claims), as a node
// whose writes hang, and keeps its watch, so that its view follows the
// bucket; resume starts the writes again.
func pauseRenewals(t *testing.T, n *testNode) (resume func()) {
	t.Helper()
	n.stop()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	w, err := watchAll(ctx, ctx, n.kv)
	if err != nil {
		t.Fatal(err)
	}
	n.wg.Add(1)
	go n.watch(ctx, w)
	return func() {
		n.wg.Add(1)
		go n.loop(ctx)
	}
}

// TestLapsedEndsWithAnotherClaim: a lapsed lease that another node
// claims stops being lapsed as soon as the watch delivers the claim (and
// Changed fires); the node renews its other lapsed leases under their
// tenures, and a shard it claims back later has a new tenure.
func TestLapsedEndsWithAnotherClaim(t *testing.T) {
	c := jstest.NewServer(t)
	a, ahead := skewedNode(t, c, "a")
	before := tenures(t, a)
	resume := pauseRenewals(t, a)
	ahead.Store(int64(cluster.DefaultTiming.TTL))
	for s := range testShards {
		if tenure, ok := a.Lapsed(s); !ok || tenure != before[s] {
			t.Fatalf("shard %d: Lapsed = %d, %v; want %d, true", s, tenure, ok, before[s])
		}
	}

	// Another node claims shard 3 (as its expired lease allows).
	const taken = 3
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, shardKey(taken))
	if err != nil {
		t.Fatal(err)
	}
	ch := a.Changed()
	other, _ := json.Marshal(leaseValue{Node: "b", Instance: "b1"})
	if _, err := kv.Update(ctx, shardKey(taken), other, e.Revision()); err != nil {
		t.Fatal(err)
	}
	fired(t, ch, "another node claimed a lapsed shard")
	waitFor(t, 5*time.Second, "the claim in a's view", func() error {
		if _, ok := a.Lapsed(taken); ok {
			return errors.New("still lapsed")
		}
		return nil
	})
	for s := range testShards {
		if _, ok := a.Lapsed(s); ok != (s != taken) {
			t.Errorf("shard %d: lapsed %v after another node claimed shard %d", s, ok, taken)
		}
	}

	resume()
	waitFor(t, 10*time.Second, "the other leases renewed", func() error {
		if got := len(a.Owned()); got != testShards-1 {
			return fmt.Errorf("owns %v", a.Owned())
		}
		return nil
	})
	if a.Owns(taken) {
		t.Fatalf("owns shard %d, which another node holds", taken)
	}
	for s := range testShards {
		if _, ok := a.Lapsed(s); ok {
			t.Errorf("shard %d lapsed after the renewals", s)
		}
		if s != taken && a.Tenure(s) != before[s] {
			t.Errorf("shard %d: tenure %d after its lapse, had %d", s, a.Tenure(s), before[s])
		}
	}

	// The other node's lease expires in a's view: a claims it, under a
	// new tenure.
	ahead.Add(int64(2 * cluster.DefaultTiming.TTL))
	waitFor(t, 10*time.Second, "shard claimed back", func() error {
		if !a.Owns(taken) {
			return errors.New("not owned")
		}
		return nil
	})
	if got := a.Tenure(taken); got <= before[taken] {
		t.Errorf("shard %d claimed back with tenure %d, want over %d", taken, got, before[taken])
	}
}

// unansweredUpdate applies an Update of key but, once armed, answers
// DeadlineExceeded: a write that reached the bucket although its answer
// timed out (an overloaded machine).
type unansweredUpdate struct {
	jetstream.KeyValue
	key   string
	armed atomic.Bool
}

func (k *unansweredUpdate) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	r, err := k.KeyValue.Update(ctx, key, v, rev)
	if err == nil && key == k.key && k.armed.CompareAndSwap(true, false) {
		return 0, context.DeadlineExceeded
	}
	return r, err
}

// TestLapsedClaimBackUnanswered: a lapsed lease that another node claims
// and this node claims back through a write that lands but whose answer
// times out (the watch then delivers it, and the node renews it as its
// own) is owned again under a new tenure, not the one it lapsed with:
// another node held the shard meanwhile.
func TestLapsedClaimBackUnanswered(t *testing.T) {
	c := jstest.NewServer(t)
	a, ahead := skewedNode(t, c, "a")
	const sh = 3
	before := a.Tenure(sh)
	resume := pauseRenewals(t, a)
	ahead.Store(int64(cluster.DefaultTiming.TTL))
	if tenure, ok := a.Lapsed(sh); !ok || tenure != before {
		t.Fatalf("shard %d: Lapsed = %d, %v; want %d, true", sh, tenure, ok, before)
	}
	js, err := jetstream.New(c.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, shardKey(sh))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := json.Marshal(leaseValue{Node: "b", Instance: "b1"})
	if _, err := kv.Update(ctx, shardKey(sh), other, e.Revision()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "b's claim in a's view", func() error {
		if _, ok := a.Lapsed(sh); ok {
			return errors.New("still lapsed")
		}
		return nil
	})
	// b's lease expires in a's view; a's claim lands unanswered.
	w := &unansweredUpdate{KeyValue: a.kv, key: shardKey(sh)}
	w.armed.Store(true)
	a.kv = w
	resume()
	ahead.Add(int64(2 * cluster.DefaultTiming.TTL))
	waitFor(t, 15*time.Second, "shard owned again", func() error {
		if !a.Owns(sh) {
			return errors.New("not owned")
		}
		return nil
	})
	if w.armed.Load() {
		t.Fatal("the claim was answered")
	}
	if got := a.Tenure(sh); got == before {
		t.Errorf("shard %d owned again after another node held it, under the tenure it lapsed with (%d)", sh, got)
	}
}
