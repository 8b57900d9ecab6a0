package lease

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/slogfeed/slogfeed/storage/cluster"
)

// memberKV is a lease bucket that holds only this test's member key: an
// Update at the wrong revision conflicts, and Get answers what the test
// says a replica holds (which may lag the key).
type memberKV struct {
	jetstream.KeyValue // unused methods panic
	rev                uint64
	getEntry           jetstream.KeyValueEntry
	getErr             error
}

func (kv *memberKV) Update(_ context.Context, _ string, _ []byte, last uint64) (uint64, error) {
	if last != kv.rev {
		return 0, jetstream.ErrKeyExists
	}
	kv.rev++
	return kv.rev, nil
}

func (kv *memberKV) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	return kv.getEntry, kv.getErr
}

// entry is a watched or read KV entry.
type entry struct {
	jetstream.KeyValueEntry
	key   string
	value []byte
	rev   uint64
	op    jetstream.KeyValueOp
}

func (e entry) Key() string                     { return e.key }
func (e entry) Value() []byte                   { return e.value }
func (e entry) Revision() uint64                { return e.rev }
func (e entry) Operation() jetstream.KeyValueOp { return e.op }

func memberEntry(t *testing.T, name, instance string, rev uint64) entry {
	t.Helper()
	b, err := json.Marshal(memberValue{Name: name, Instance: instance})
	if err != nil {
		t.Fatal(err)
	}
	return entry{key: nodePrefix + name, value: b, rev: rev, op: jetstream.KeyValuePut}
}

// bareNode is a Node with no server behind it, for the bookkeeping of
// its writes.
func bareNode(t *testing.T, kv jetstream.KeyValue) *Node {
	t.Helper()
	opt := Options{Name: "me", Shards: 4}
	if err := opt.fill(); err != nil {
		t.Fatal(err)
	}
	return &Node{
		opt: opt, kv: kv, instance: "mine", log: opt.Logger,
		leases: make([]cluster.Lease, opt.Shards), renewed: make([]time.Time, opt.Shards), tenure: make([]uint64, opt.Shards),
		members: map[string]cluster.Member{}, memberVals: map[string]memberValue{},
		healthy: true, changed: make(chan struct{}),
	}
}

// TestWriteMemberConflicts: a member key write at a revision the key has
// moved past is told apart by what a read answers: a newer write of
// another process is a duplicate name; this process's own write (one
// that timed out but was applied) or a lagging replica's answer is not,
// and the next write goes through; a key another node deleted is created
// again.
func TestWriteMemberConflicts(t *testing.T) {
	tests := []struct {
		name     string
		kvRev    uint64 // the key's revision in the bucket
		memRev   uint64 // the revision the node writes at
		getEntry func(t *testing.T) jetstream.KeyValueEntry
		getErr   error
		dup      bool
		wantRev  uint64 // memberRev after the conflict
	}{
		{"another process wrote since", 7, 5, func(t *testing.T) jetstream.KeyValueEntry { return memberEntry(t, "me", "other", 7) }, nil, true, 5},
		{"this process's own write, answered too late", 7, 5, func(t *testing.T) jetstream.KeyValueEntry { return memberEntry(t, "me", "mine", 7) }, nil, false, 7},
		{"a lagging replica answers the revision written at", 7, 5, func(t *testing.T) jetstream.KeyValueEntry { return memberEntry(t, "me", "previous-run", 5) }, nil, false, 5},
		{"no answer", 7, 5, nil, context.DeadlineExceeded, false, 5},
		{"deleted by another node", 7, 5, nil, jetstream.ErrKeyNotFound, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := &memberKV{rev: tt.kvRev, getErr: tt.getErr}
			if tt.getEntry != nil {
				kv.getEntry = tt.getEntry(t)
			}
			n := bareNode(t, kv)
			n.memberRev = tt.memRev
			err := n.writeMember(t.Context(), time.Second)
			if err == nil {
				t.Fatal("a write at a moved revision succeeded")
			}
			if got := errors.Is(err, cluster.ErrDuplicateNode); got != tt.dup {
				t.Fatalf("writeMember = %v, duplicate %v, want %v", err, got, tt.dup)
			}
			if n.memberRev != tt.wantRev {
				t.Fatalf("memberRev = %d, want %d", n.memberRev, tt.wantRev)
			}
			if tt.dup || tt.wantRev != tt.kvRev {
				return
			}
			if err := n.writeMember(t.Context(), time.Second); err != nil {
				t.Fatalf("the next write: %v", err)
			}
		})
	}
}

// TestWatchedOwnWriteEndsOutage: while writes fail, the watcher delivering
// this process's member key write (sent before, answered too late) shows
// that writes reach the bucket: the node is healthy again and the leases
// it saw get the outage's grace; another process's write, or this node's
// name from an earlier run, does not.
func TestWatchedOwnWriteEndsOutage(t *testing.T) {
	tests := []struct {
		name     string
		instance string
		healthy  bool
	}{
		{"this process's write", "mine", true},
		{"an earlier run of this node", "previous-run", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_000_000, 0)
			n := bareNode(t, nil)
			n.opt.Now = func() time.Time { return now }
			lost := now.Add(-5 * time.Second)
			n.healthy, n.lostAt = false, lost
			n.leases[0] = cluster.Lease{Holder: "other", Instance: "x", Revision: 3, Seen: lost.Add(-5 * time.Second)}
			n.apply(memberEntry(t, "me", tt.instance, 9))
			if n.healthy != tt.healthy {
				t.Fatalf("healthy = %v, want %v", n.healthy, tt.healthy)
			}
			if !tt.healthy {
				return
			}
			if n.memberRev != 9 {
				t.Fatalf("memberRev = %d, want 9", n.memberRev)
			}
			// Seen 10 s before now, 5 s before the outage: without
			// the outage it would have expired; it expires a grace
			// from now.
			if got, want := n.leases[0].Seen.Add(n.opt.Timing.TTL), now.Add(n.opt.Timing.ResumeGrace()); !got.Equal(want) {
				t.Fatalf("lease expires at %v, want %v", got.Sub(now), want.Sub(now))
			}
		})
	}
}

// TestLateDeliveryDatedByOwnWrites: a lease value the watch delivers (or a
// read after a conflict answers) at a revision older than one of this
// node's acknowledged writes counts as seen when that write was
// acknowledged, not when it arrived; a newer value counts from its
// arrival.
func TestLateDeliveryDatedByOwnWrites(t *testing.T) {
	acked := time.Unix(1_000_000, 0)
	now := acked
	kv := &memberKV{rev: 20}
	n := bareNode(t, kv)
	n.opt.Now = func() time.Time { return now }
	n.memberRev = 20
	if err := n.writeMember(t.Context(), time.Second); err != nil { // acknowledged at revision 21
		t.Fatal(err)
	}
	now = acked.Add(6 * time.Second) // the watch catches up
	lease := func(shard int, rev uint64) entry {
		return entry{key: shardKey(shard), value: []byte(`{"node":"other","instance":"x"}`), rev: rev, op: jetstream.KeyValuePut}
	}
	n.apply(lease(0, 19))
	n.apply(lease(1, 23))
	kv.getEntry = lease(2, 18)
	n.refresh(t.Context(), 2)
	for _, tt := range []struct {
		shard int
		want  time.Time
	}{{0, acked}, {1, now}, {2, acked}} {
		if got := n.leases[tt.shard].Seen; !got.Equal(tt.want) {
			t.Errorf("shard %d seen %v before now, want %v", tt.shard, now.Sub(got), now.Sub(tt.want))
		}
	}
}

// TestTenure: a claim of a shard starts a new tenure, renewals keep it,
// and a shard claimed again after it was lost has another; shards out of
// range have none.
func TestTenure(t *testing.T) {
	kv := &memberKV{rev: 10}
	n := bareNode(t, kv)
	n.leases[2] = cluster.Lease{Holder: "other", Instance: "theirs", Revision: 10}
	steps := []struct {
		name  string
		write func() bool
		want  uint64
	}{
		{"claimed", func() bool { return n.claim(t.Context(), cluster.Step{Shard: 2, Revision: 10, Takeover: true}) }, 1},
		{"renewed", func() bool { return n.renew(t.Context(), cluster.Step{Shard: 2, Revision: 11}) }, 1},
		{"renewed again", func() bool { return n.renew(t.Context(), cluster.Step{Shard: 2, Revision: 12}) }, 1},
		{"claimed again after another node held it", func() bool {
			n.mu.Lock()
			n.leases[2] = cluster.Lease{Holder: "other", Instance: "theirs", Revision: 14}
			n.renewed[2] = time.Time{}
			n.mu.Unlock()
			kv.rev = 14
			return n.claim(t.Context(), cluster.Step{Shard: 2, Revision: 14, Takeover: true})
		}, 2},
	}
	for _, st := range steps {
		if !st.write() {
			t.Fatalf("%s: the write failed", st.name)
		}
		if got := n.Tenure(2); got != st.want || !n.Owns(2) {
			t.Errorf("%s: tenure %d, owned %v; want %d, owned", st.name, got, n.Owns(2), st.want)
		}
	}
	for _, s := range []int{0, -1, 4} {
		if got := n.Tenure(s); got != 0 {
			t.Errorf("shard %d: tenure %d, want 0", s, got)
		}
	}
}
