package cluster

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"time"
)

// Timing is the lease timing every node of a cluster uses.
type Timing struct {
	// TTL is how long a lease lasts without renewal, as observed: another
	// node claims a lease it has seen unchanged for TTL while its own KV
	// writes succeed.
	TTL time.Duration
	// Renew is how often a holder renews its leases (and its member key);
	// well inside TTL, TTL/3 by default.
	Renew time.Duration
	// Margin is how long before TTL (counted from the renewal's send
	// time) a holder stops acting on a shard it could not renew; it covers
	// different clock rates and a poll about to start.
	Margin time.Duration
}

// DefaultTiming: a dead node's shards are claimed about TTL after its last
// renewal (≤ 10 s with a 1 s tick), inside the 15 s failover target, while
// a JetStream re-election (seconds) passes without any lease moving.
var DefaultTiming = Timing{TTL: 9 * time.Second, Renew: 3 * time.Second, Margin: 500 * time.Millisecond}

// Lease is one shard's lease as a node sees it.
type Lease struct {
	// Holder and Instance name the node process that wrote the lease;
	// Holder is empty when the shard is free (never written, or
	// released).
	Holder, Instance string
	// Revision is the KV revision of the lease's current value (or of its
	// delete marker); 0 when the key was never written.
	Revision uint64
	// Seen is when this node first saw Revision, on its own clock.
	Seen time.Time
}

// Member is a node's member key as this node sees it.
type Member struct {
	Name, Instance string
	Revision       uint64
	Seen           time.Time // when this node first saw Revision
}

// View is everything Decide looks at: one node's picture of the lease
// bucket at Now.
type View struct {
	Self, Instance string
	Now            time.Time
	// Healthy is whether this node's KV writes succeed. While they fail
	// no lease or member looks expired and nothing is claimed or released;
	// when they succeed again the node moves the Seen times of whatever had
	// not expired yet to that moment (ResumeSeen), so a re-election does
	// not make leases expire.
	Healthy bool
	// Leases has one entry per shard.
	Leases []Lease
	// Members are the member keys, this node's own included or not.
	Members []Member
	// Renewed[s] is when this node sent its last successful write of shard
	// s's lease (zero when it holds none). The holder counts its TTL from
	// there.
	Renewed []time.Time
}

// Step is one write Decide asks for.
type Step struct {
	Shard int
	// Revision is the lease's revision the write is conditional on (0:
	// the key must not exist, or be deleted).
	Revision uint64
	// Takeover is set on claims of a lease another live-looking process
	// held until it expired.
	Takeover bool
}

// Plan is what a node should write now: renewals first, then releases,
// then claims.
type Plan struct {
	Renew, Release, Claim []Step
}

// Empty reports whether the plan writes nothing.
func (p Plan) Empty() bool { return len(p.Renew)+len(p.Release)+len(p.Claim) == 0 }

// ResumeGrace is how long a lease that had not expired when KV writes
// began failing stays unexpired once they succeed again: Renew/2 (1.5 s
// by default). A live holder's renewals are overdue by then; its driver
// probes the bucket Tick/4 after each failed write (each bounded by
// Tick/2) and renews every overdue lease as soon as one probe succeeds, so
// it shows itself within about Tick of the bucket's return, inside the
// grace. The lease of a
// holder that died with the bucket's leader (a SIGKILLed --nats-embed
// node) is claimed ResumeGrace after the re-election, which itself takes
// NATS's Raft election timeout, 4–9 s: failover then fits the 15 s target
// even when the election needs a second round.
func (t Timing) ResumeGrace() time.Duration { return t.Renew / 2 }

// ResumeSeen is the observation time of a value seen at seen once KV
// writes succeed again at now after failing since lostAt. A value that
// had expired by lostAt stays as it was. One that had not keeps the age
// it had, the outage included, but expires no sooner than ResumeGrace
// after now. Safety does not rest on this: a holder stops acting
// TTL−Margin after its last successful write, before any observer that
// saw that write can count TTL from it, and a later observation only
// delays a claim; a grace too short would only move a live holder's
// shards.
func ResumeSeen(seen, lostAt, now time.Time, t Timing) time.Time {
	if lostAt.Sub(seen) >= t.TTL {
		return seen
	}
	if floor := now.Add(t.ResumeGrace() - t.TTL); seen.Before(floor) { // expiry at now + grace
		return floor
	}
	return seen
}

// NextExpiry is the earliest time after v.Now at which a lease held by
// another process, or another member's key, will have been seen unchanged
// for TTL: the next moment Decide's plan can change with the clock alone
// besides this node's own renewals. A driver that re-decides then claims
// a dead node's shards the moment they expire rather than at its next
// tick. Zero when nothing will expire, and while writes fail (nothing
// expires then).
func NextExpiry(v View, t Timing) time.Time {
	var next time.Time
	consider := func(seen time.Time) {
		if at := seen.Add(t.TTL); at.After(v.Now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	if !v.Healthy {
		return next
	}
	for _, l := range v.Leases {
		if l.Holder != "" && !v.mine(l) {
			consider(l.Seen)
		}
	}
	for _, m := range v.Members {
		if m.Name != v.Self && m.Name != "" {
			consider(m.Seen)
		}
	}
	return next
}

// mine reports whether l was written by this node process.
func (v *View) mine(l Lease) bool { return l.Holder == v.Self && l.Instance == v.Instance }

// expired reports whether l is held by another process that this node has
// seen unchanged for a TTL of healthy writes.
func (v *View) expired(l Lease, t Timing) bool {
	return l.Holder != "" && !v.mine(l) && v.Healthy && v.Now.Sub(l.Seen) >= t.TTL
}

// Live returns the names of the live members, sorted: this node, and
// every member whose key this node has seen written within TTL (every
// member with a key while writes fail).
func (v *View) Live(t Timing) []string {
	live := []string{v.Self}
	for _, m := range v.Members {
		if m.Name == v.Self || m.Name == "" {
			continue
		}
		if !v.Healthy || v.Now.Sub(m.Seen) < t.TTL {
			live = append(live, m.Name)
		}
	}
	slices.Sort(live)
	return slices.Compact(live)
}

// Owned reports, per shard, whether this node may act on it now: the lease
// names this process and was renewed less than TTL−Margin ago.
func Owned(v View, t Timing) []bool {
	own := make([]bool, len(v.Leases))
	for s, l := range v.Leases {
		own[s] = v.mine(l) && s < len(v.Renewed) && !v.Renewed[s].IsZero() &&
			v.Now.Before(v.Renewed[s].Add(t.TTL-t.Margin))
	}
	return own
}

// Lapsed reports, per shard, whether this node's lease on it lapsed: the
// lease names this process and was renewed, but not within TTL−Margin,
// so the node may not act on it (Owned is false). A renewal only
// succeeds at a revision this process wrote, so after another node's
// claim only a claim of this process names it again: a lease owned again
// without a claim of this process in between (the same tenure, Lapser)
// was held by no other node meanwhile. A lease whose renewal
// was refused, or that this node gave back, is not lapsed: its driver
// forgets the renewal (Renewed is zero).
func Lapsed(v View, t Timing) []bool {
	lapsed := make([]bool, len(v.Leases))
	for s, l := range v.Leases {
		lapsed[s] = v.mine(l) && s < len(v.Renewed) && !v.Renewed[s].IsZero() &&
			!v.Now.Before(v.Renewed[s].Add(t.TTL-t.Margin))
	}
	return lapsed
}

// Share is the even share of n shards over m members: every member should
// hold between Floor and Ceil.
func Share(n, m int) (floor, ceil int) {
	if m < 1 {
		m = 1
	}
	floor = n / m
	ceil = floor
	if n%m != 0 {
		ceil++
	}
	return floor, ceil
}

// Decide returns the writes this node should make now. It is pure: the
// same view gives the same plan.
//
//  1. Renew this process's leases whose last renewal is Renew old.
//  2. Release leases above the even share's ceiling; or, when holding
//     more than the floor while no shard is free and some live member holds
//     fewer than the floor, release one.
//  3. Claim free shards (never written, released, or expired) up to the
//     ceiling, or only up to the floor while another live member is below
//     the floor (so the needy one gets them).
//
// Claims and releases prefer shards by a rendezvous hash of (node, shard):
// nodes that start together ask for different shards, and a node keeps the
// shards it prefers. While membership is stable and every node is within
// [floor, ceil] with no free shard, only renewals are planned: no churn.
// While KV writes fail (not Healthy) only renewals are planned.
func Decide(v View, t Timing) Plan {
	var p Plan
	n := len(v.Leases)
	var mine, free []int
	held := map[string]int{}
	for s, l := range v.Leases {
		switch {
		case v.mine(l):
			mine = append(mine, s)
			held[v.Self]++
		case l.Holder == "" || v.expired(l, t):
			free = append(free, s)
		default:
			held[l.Holder]++
		}
	}
	for _, s := range mine {
		var last time.Time
		if s < len(v.Renewed) {
			last = v.Renewed[s]
		}
		if last.IsZero() || v.Now.Sub(last) >= t.Renew {
			p.Renew = append(p.Renew, Step{Shard: s, Revision: v.Leases[s].Revision})
		}
	}
	if !v.Healthy {
		return p
	}
	live := v.Live(t)
	floor, ceil := Share(n, len(live))
	needy := false
	for _, name := range live {
		if name != v.Self && held[name] < floor {
			needy = true
		}
	}
	// The shards this node likes least go first.
	byPreference(v.Self, mine)
	switch {
	case len(mine) > ceil:
		for _, s := range mine[ceil:] {
			p.Release = append(p.Release, Step{Shard: s, Revision: v.Leases[s].Revision})
		}
		p.Renew = dropShards(p.Renew, mine[ceil:])
		return p
	case len(mine) > floor && needy && len(free) == 0:
		s := mine[len(mine)-1]
		p.Release = append(p.Release, Step{Shard: s, Revision: v.Leases[s].Revision})
		p.Renew = dropShards(p.Renew, []int{s})
		return p
	}
	want := ceil
	if needy {
		want = floor
	}
	if len(mine) >= want || len(free) == 0 {
		return p
	}
	byPreference(v.Self, free)
	for _, s := range free[:min(want-len(mine), len(free))] {
		l := v.Leases[s]
		p.Claim = append(p.Claim, Step{Shard: s, Revision: l.Revision, Takeover: l.Holder != ""})
	}
	return p
}

// Forgotten returns the members whose key this node has seen unchanged
// for after (while its writes succeed): nodes gone long enough that their
// member key is deleted, so they drop out of Status. Its own key is never
// among them.
func Forgotten(v View, after time.Duration) []Member {
	if !v.Healthy {
		return nil
	}
	var out []Member
	for _, m := range v.Members {
		if m.Name != v.Self && v.Now.Sub(m.Seen) >= after {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// byPreference sorts shards by node's rendezvous score, highest first.
func byPreference(node string, shards []int) {
	slices.SortFunc(shards, func(a, b int) int {
		return cmp.Or(cmp.Compare(score(node, b), score(node, a)), cmp.Compare(a, b))
	})
}

func score(node string, shard int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(shard))
	h.Write(b[:])
	return h.Sum64()
}

func dropShards(steps []Step, shards []int) []Step {
	return slices.DeleteFunc(steps, func(st Step) bool { return slices.Contains(shards, st.Shard) })
}
