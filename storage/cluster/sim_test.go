package cluster

import (
	"fmt"
	"testing"
	"time"
)

// The simulation runs Decide for several nodes over an in-memory
// compare-and-set table on a fake clock: every node sees every write at
// once unless it is partitioned; a partitioned node's writes fail and it
// sees nothing.

type simLease struct {
	holder, inst string
	rev          uint64
}

type simNode struct {
	name, inst string
	alive, cut bool // cut: partitioned from the bucket
	// failUntil: the node's writes fail until then though it sees the
	// bucket (it has not noticed that the bucket is back).
	failUntil  time.Time
	leases     []Lease
	renewed    []time.Time
	members    map[string]Member
	healthy    bool
	lostAt     time.Time
	memberSent time.Time
	// lag delays what the node's watch delivers of other nodes' writes
	// (its consumer lost with a server); acks dates late deliveries by
	// its own acknowledged writes when dateByAcks.
	lag        time.Duration
	pending    []delivery
	acks       Acks
	dateByAcks bool
}

// delivery is a write a lagging node's watch delivers at at: a lease
// (member empty) or a member key.
type delivery struct {
	at     time.Time
	shard  int
	l      simLease
	member string
	rev    uint64
}

type sim struct {
	t       *testing.T
	now     time.Time
	rev     uint64
	table   []simLease
	members map[string]uint64 // name → revision
	nodes   []*simNode
	moves   int // claims + releases
}

func newSim(t *testing.T, shards int) *sim {
	return &sim{t: t, now: t0, table: make([]simLease, shards), members: map[string]uint64{}}
}

func (s *sim) add(name string) *simNode {
	n := &simNode{name: name, inst: fmt.Sprintf("%s-%d", name, len(s.nodes)), alive: true,
		leases: make([]Lease, len(s.table)), renewed: make([]time.Time, len(s.table)),
		members: map[string]Member{}, healthy: true}
	// Load the current table, as the watcher's initial values.
	for i, l := range s.table {
		n.leases[i] = Lease{Holder: l.holder, Instance: l.inst, Revision: l.rev, Seen: s.now}
	}
	for m, rev := range s.members {
		n.members[m] = Member{Name: m, Revision: rev, Seen: s.now}
	}
	s.nodes = append(s.nodes, n)
	return n
}

// publish shows a write of writer to every node that can see the bucket,
// later to a lagging one.
func (s *sim) publish(writer *simNode, shard int, l simLease) {
	for _, n := range s.nodes {
		if !n.alive || n.cut {
			continue
		}
		if n.lag > 0 && n != writer {
			n.pending = append(n.pending, delivery{at: s.now.Add(n.lag), shard: shard, l: l})
			continue
		}
		s.setLease(n, shard, l, s.now)
	}
}

// setLease is node n's watch delivering shard's lease l at now.
func (s *sim) setLease(n *simNode, shard int, l simLease, now time.Time) {
	if l.rev <= n.leases[shard].Revision {
		return
	}
	n.leases[shard] = Lease{Holder: l.holder, Instance: l.inst, Revision: l.rev, Seen: n.seenAt(l.rev, now)}
	if l.holder != n.name || l.inst != n.inst {
		n.renewed[shard] = time.Time{}
	}
}

// setMember is node n's watch delivering member name's key, written at
// revision rev, at now.
func (s *sim) setMember(n *simNode, name string, rev uint64, now time.Time) {
	if m, ok := n.members[name]; ok && rev <= m.Revision {
		return
	}
	n.members[name] = Member{Name: name, Revision: rev, Seen: n.seenAt(rev, now)}
}

// seenAt is when node n counts a value of revision rev delivered at now
// as seen.
func (n *simNode) seenAt(rev uint64, now time.Time) time.Time {
	if n.dateByAcks {
		return n.acks.SeenAt(rev, now)
	}
	return now
}

// deliver hands the lagging nodes what their watch delivers by now.
func (s *sim) deliver() {
	for _, n := range s.nodes {
		k := 0
		for _, d := range n.pending {
			if d.at.After(s.now) {
				break
			}
			k++
			if !n.alive || n.cut {
				continue
			}
			if d.member != "" {
				s.setMember(n, d.member, d.rev, s.now)
				continue
			}
			s.setLease(n, d.shard, d.l, s.now)
		}
		n.pending = n.pending[k:]
	}
}

// reach reports whether n's writes get through, and makes its view
// healthy or unhealthy as the driver does.
func (s *sim) reach(n *simNode) bool {
	if n.cut || s.now.Before(n.failUntil) {
		if n.healthy {
			n.healthy, n.lostAt = false, s.now
		}
		return false
	}
	if !n.healthy {
		n.healthy = true
		for i := range n.leases {
			n.leases[i].Seen = ResumeSeen(n.leases[i].Seen, n.lostAt, s.now, tm)
		}
		for name, m := range n.members {
			m.Seen = ResumeSeen(m.Seen, n.lostAt, s.now, tm)
			n.members[name] = m
		}
	}
	return true
}

// write is a compare-and-set of shard's lease: create succeeds when the
// shard is free, otherwise the write needs the current revision; holder
// false deletes.
func (s *sim) write(n *simNode, shard int, rev uint64, holder, create bool) bool {
	if !s.reach(n) {
		return false
	}
	cur := s.table[shard]
	if create && cur.holder != "" || !create && cur.rev != rev {
		return false
	}
	s.rev++
	l := simLease{rev: s.rev}
	if holder {
		l.holder, l.inst = n.name, n.inst
	}
	s.table[shard] = l
	n.acks.Add(s.rev, s.now)
	s.publish(n, shard, l)
	return true
}

func (s *sim) view(n *simNode) View {
	v := View{Self: n.name, Instance: n.inst, Now: s.now, Healthy: n.healthy,
		Leases: append([]Lease(nil), n.leases...), Renewed: append([]time.Time(nil), n.renewed...)}
	for _, m := range n.members {
		v.Members = append(v.Members, m)
	}
	return v
}

func (s *sim) step(n *simNode) {
	p := Decide(s.view(n), tm)
	for _, st := range p.Renew {
		if s.write(n, st.Shard, st.Revision, true, false) {
			n.renewed[st.Shard] = s.now
		} else if n.cut {
			break
		}
	}
	for _, st := range p.Release {
		n.renewed[st.Shard] = time.Time{}
		if s.write(n, st.Shard, st.Revision, false, false) {
			s.moves++
		}
	}
	for _, st := range p.Claim {
		if s.write(n, st.Shard, st.Revision, true, n.leases[st.Shard].Holder == "") {
			n.renewed[st.Shard] = s.now
			s.moves++
		}
	}
	if s.now.Sub(n.memberSent) >= tm.Renew && s.reach(n) {
		s.rev++
		s.members[n.name] = s.rev
		n.memberSent = s.now
		n.acks.Add(s.rev, s.now)
		for _, o := range s.nodes {
			switch {
			case !o.alive || o.cut:
			case o.lag > 0 && o != n:
				o.pending = append(o.pending, delivery{at: s.now.Add(o.lag), member: n.name, rev: s.rev})
			default:
				s.setMember(o, n.name, s.rev, s.now)
			}
		}
	}
}

// run advances the clock by d in ticks of 500 ms, stepping every live
// node, and checks after each tick that no shard is owned twice.
func (s *sim) run(d time.Duration) {
	s.t.Helper()
	for end := s.now.Add(d); s.now.Before(end); {
		s.now = s.now.Add(500 * time.Millisecond)
		s.deliver()
		for _, n := range s.nodes {
			if n.alive {
				s.step(n)
			}
		}
		for shard, owners := range s.owners() {
			if len(owners) > 1 {
				s.t.Fatalf("at %s shard %d owned by %v", s.now.Sub(t0), shard, owners)
			}
		}
	}
}

// owners lists, per shard, the live nodes that may act on it now.
func (s *sim) owners() [][]string {
	out := make([][]string, len(s.table))
	for _, n := range s.nodes {
		if !n.alive {
			continue
		}
		for shard, ok := range Owned(s.view(n), tm) {
			if ok {
				out[shard] = append(out[shard], n.name)
			}
		}
	}
	return out
}

// counts is how many shards each node owns, and how many nobody owns.
func (s *sim) counts() (map[string]int, int) {
	c := map[string]int{}
	unowned := 0
	for _, o := range s.owners() {
		if len(o) == 0 {
			unowned++
		}
		for _, name := range o {
			c[name]++
		}
	}
	return c, unowned
}

func (s *sim) requireEven(names ...string) {
	s.t.Helper()
	c, unowned := s.counts()
	floor, ceil := Share(len(s.table), len(names))
	if unowned != 0 {
		s.t.Fatalf("at %s: %d shards unowned (counts %v)", s.now.Sub(t0), unowned, c)
	}
	for _, name := range names {
		if c[name] < floor || c[name] > ceil {
			s.t.Fatalf("at %s: %s owns %d shards, want %d…%d (counts %v)", s.now.Sub(t0), name, c[name], floor, ceil, c)
		}
	}
}

// TestSimulatedCluster drives three nodes through start, a stable period,
// a kill, a join, a bucket outage and a partition, checking that no shard
// is ever owned twice, that the share evens out, that a stable cluster
// moves nothing, and that a dead node's shards move within 15 s, or within
// ResumeGrace of the bucket's return when it died with the bucket's
// leader.
func TestSimulatedCluster(t *testing.T) {
	s := newSim(t, 64)
	n1 := s.add("n1")
	s.run(time.Second)
	s.add("n2")
	n3 := s.add("n3")
	s.run(30 * time.Second)
	s.requireEven("n1", "n2", "n3")

	t.Run("stable membership moves nothing", func(t *testing.T) {
		s.t = t
		before := s.moves
		s.run(2 * time.Minute)
		if s.moves != before {
			t.Fatalf("%d claims/releases in 2 stable minutes", s.moves-before)
		}
		s.requireEven("n1", "n2", "n3")
	})

	t.Run("a killed node's shards are owned again within 15 s", func(t *testing.T) {
		s.t = t
		n3.alive = false
		killed := s.now
		for s.now.Sub(killed) < 15*time.Second {
			s.run(500 * time.Millisecond)
			if _, unowned := s.counts(); unowned == 0 {
				t.Logf("re-owned %s after the kill", s.now.Sub(killed))
				break
			}
		}
		if _, unowned := s.counts(); unowned != 0 {
			t.Fatalf("%d shards unowned 15 s after the kill", unowned)
		}
		s.run(20 * time.Second)
		s.requireEven("n1", "n2")
	})

	t.Run("a joining node gets its share", func(t *testing.T) {
		s.t = t
		s.add("n4")
		s.run(30 * time.Second)
		s.requireEven("n1", "n2", "n4")
		before := s.moves
		s.run(time.Minute)
		if s.moves != before {
			t.Fatalf("%d claims/releases after the join settled", s.moves-before)
		}
	})

	t.Run("a bucket outage moves no lease", func(t *testing.T) {
		s.t = t
		before, _ := s.counts()
		moves := s.moves
		for _, n := range s.nodes {
			n.cut = n.alive
		}
		s.run(6 * time.Second) // a re-election
		for _, n := range s.nodes {
			n.cut = false
		}
		s.run(20 * time.Second)
		after, _ := s.counts()
		if s.moves != moves {
			t.Fatalf("%d claims/releases around a 6 s outage (before %v, after %v)", s.moves-moves, before, after)
		}
		s.requireEven("n1", "n2", "n4")
	})

	t.Run("a partitioned node's shards move without overlap", func(t *testing.T) {
		s.t = t
		n1.cut = true
		s.run(20 * time.Second) // run checks that no shard is owned twice
		if c, _ := s.counts(); c["n1"] != 0 {
			t.Fatalf("partitioned n1 still owns %d shards", c["n1"])
		}
		s.requireEven("n2", "n4")
		n1.cut = false
		// n1 missed every write while cut: it catches up as a restarted
		// watcher would, with fresh observation times.
		for i, l := range s.table {
			n1.leases[i] = Lease{Holder: l.holder, Instance: l.inst, Revision: l.rev, Seen: s.now}
			n1.renewed[i] = time.Time{}
		}
		s.run(40 * time.Second)
		s.requireEven("n1", "n2", "n4")
	})

	t.Run("a bucket outage noticed a second apart moves no lease", func(t *testing.T) {
		// The bucket is back for every node at once, but each notices
		// at its own time (a probe in flight, a tick apart): the grace
		// covers a node a whole Tick late.
		s.t = t
		moves := s.moves
		for _, n := range s.nodes {
			n.cut = n.alive
		}
		s.run(8 * time.Second)
		back := s.now
		for i, n := range []*simNode{n1, s.nodes[1], s.nodes[3]} {
			n.cut = false
			n.failUntil = back.Add(time.Duration(i) * 500 * time.Millisecond)
		}
		s.run(20 * time.Second)
		if s.moves != moves {
			t.Fatalf("%d claims/releases around an outage noticed unevenly", s.moves-moves)
		}
		s.requireEven("n1", "n2", "n4")
	})

	t.Run("a node dying with the bucket's leader loses its shards a grace after the re-election", func(t *testing.T) {
		// A SIGKILLed --nats-embed node that led the lease bucket: no
		// write succeeds until the bucket has a new leader (here 10 s
		// later), then the dead node's leases expire ResumeGrace after.
		s.t = t
		for _, n := range s.nodes {
			n.cut = n.alive
		}
		s.nodes[3].alive = false
		s.run(10 * time.Second)
		for _, n := range s.nodes {
			n.cut = false
		}
		back := s.now
		for s.now.Sub(back) < 15*time.Second {
			if _, unowned := s.counts(); unowned == 0 {
				break
			}
			s.run(500 * time.Millisecond)
		}
		took := s.now.Sub(back)
		t.Logf("re-owned %s after the bucket was back", took)
		// Noticed at the first step after back, expired a grace later,
		// claimed at the next step.
		if limit := tm.ResumeGrace() + time.Second; took > limit {
			t.Fatalf("re-owned %s after the bucket was back, want ≤ %s", took, limit)
		}
		s.run(20 * time.Second)
		s.requireEven("n1", "n2")
	})
}

// TestSimulatedLaggingWatch: a survivor whose watch delivers the others'
// writes 6 s late (its consumer lost with a server) sees a dead node's
// last renewals late. Counting their age from the delivery delays the
// takeover by the lag; dating them by the survivor's own acknowledged
// writes (Acks) claims them as if the watch had not lagged, and no shard
// is ever owned twice (run checks every tick) while the lagging node
// claims leases the others renewed meanwhile (its writes fail on their
// revisions).
func TestSimulatedLaggingWatch(t *testing.T) {
	const lag = 6 * time.Second
	for _, dated := range []bool{false, true} {
		t.Run(fmt.Sprintf("dated by acknowledgements %v", dated), func(t *testing.T) {
			s := newSim(t, 64)
			s.add("n1")
			n2, n3 := s.add("n2"), s.add("n3")
			s.run(30 * time.Second)
			s.requireEven("n1", "n2", "n3")
			n2.lag, n2.dateByAcks = lag, dated
			s.run(20 * time.Second)
			s.requireEven("n1", "n2", "n3")
			n3.alive = false
			killed := s.now
			for s.now.Sub(killed) < 30*time.Second {
				s.run(500 * time.Millisecond)
				if _, unowned := s.counts(); unowned == 0 {
					break
				}
			}
			took := s.now.Sub(killed)
			t.Logf("re-owned %s after the kill", took)
			// A dead node's last write is dated by the lagging node's
			// next acknowledged write, at most a Renew later (its member
			// key): expiry a TTL after that.
			limit := tm.TTL + tm.Renew
			if !dated {
				limit += lag // what dating by acknowledgements saves
				if took <= tm.TTL+tm.Renew {
					t.Errorf("re-owned %s after the kill without dating: the lag should show", took)
				}
			}
			if took > limit {
				t.Fatalf("re-owned %s after the kill, want ≤ %s", took, limit)
			}
			n2.lag = 0
			s.run(30 * time.Second)
			s.requireEven("n1", "n2")
		})
	}
}
