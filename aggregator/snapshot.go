package aggregator

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// State snapshots (storage.StateSnapshot). A clustered service writes,
// one owned shard at a time so that every shard's turn comes once every
// SnapshotEvery, the learned policy state of each feed it polls there:
// the policy's name, its state, the last poll. A service that comes to
// own a shard and queues its feeds from the shard's schedule digest
// gives each feed listed in a recent snapshot its policy from there at
// once, unless the feed's record was written since snapshotMargin
// before the snapshot (polled, edited, deleted: the store tells which,
// FeedsWrittenSince); those, and the feeds no snapshot holds, read their
// records as digest.go describes. So a takeover reads a few large
// messages a shard and the records of the feeds polled since, not one
// record a feed.

// DefaultSnapshotEvery is how often each owned shard's state snapshot is
// written when ServiceOptions.SnapshotEvery is zero. The auto policy's
// state is about 290 B after five polls and 590 B once its histories
// are full, so at a million feeds a round writes 0.3–0.6 GB for the
// cluster, a shard's (5–9 MB at 64 shards) every few seconds on each
// node. A feed polled since its shard's snapshot reads its record at a
// takeover, so a shorter interval trades writes for record reads.
const DefaultSnapshotEvery = 5 * time.Minute

// snapshotMargin is how long before a snapshot's written time a record
// write still makes the feed's snapshot entry unusable: it covers the
// clocks of the writing node and of the store's servers disagreeing,
// and a write the writing node had not yet folded into its policy (an
// edit it had not heard of yet). A takeover uses at least DigestEvery:
// a feed polled after its shard's last digest (whose due time is then
// stale) is always read from its record, which holds it until its
// learned time.
const snapshotMargin = 30 * time.Second

// writtenMargin is the margin a takeover uses: snapshotMargin, at least
// DigestEvery.
func (s *Service) writtenMargin() time.Duration { return max(snapshotMargin, s.opt.DigestEvery) }

// snapshotSlack is how much older than SnapshotEvery a snapshot a
// takeover uses may be: a writing runs late by the time its shards take
// to write, and a takeover comes seconds after the owner's death. An
// older snapshot (its shard's owner stopped writing it) is not used: the
// writes since it would cost more to read than the records it saves.
const snapshotSlack = 30 * time.Second

// snapshotRetry is how soon a writer that found no loaded shard to
// snapshot looks again.
const snapshotRetry = 10 * time.Second

// snapshots returns the store and owner that state snapshots need, ok
// false when either is missing.
func (s *Service) snapshots() (storage.StateSnapshotter, shardedOwner, bool) {
	sn, ok := s.opt.Store.(storage.StateSnapshotter)
	if !ok || s.opt.SnapshotEvery < 0 {
		return nil, nil, false
	}
	if _, o, ok := s.digests(); ok {
		return sn, o, true
	}
	return nil, nil, false
}

// snapshotFeed is a feed polled here and its guard, as a round of
// snapshots found them.
type snapshotFeed struct {
	id uint64
	g  *feedGuard
}

// writeSnapshots runs until ctx ends, writing the snapshots of the
// owned, loaded shards in rounds: a round lists the feeds polled here
// by shard once, then writes one shard's snapshot every SnapshotEvery
// divided by the shards, so that each shard's turn comes once every
// SnapshotEvery.
func (s *Service) writeSnapshots(ctx context.Context) {
	sn, o, ok := s.snapshots()
	if !ok {
		return
	}
	wait := func(d time.Duration) bool {
		t := s.opt.Clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		}
	}
	for {
		round := s.snapshotRound(o)
		if len(round) == 0 {
			// Nothing loaded yet (a node starting): look again soon,
			// so that a new node's shards have snapshots within about
			// an interval of its start.
			if !wait(min(s.opt.SnapshotEvery, snapshotRetry)) {
				return
			}
			continue
		}
		pause := s.opt.SnapshotEvery / time.Duration(len(round))
		for _, sh := range slices.Sorted(maps.Keys(round)) {
			if !wait(pause) {
				return
			}
			// A lease lost meanwhile: the new owner's snapshot is not
			// overwritten.
			if !slices.Contains(o.Owned(), sh) {
				continue
			}
			d := s.snapshotOf(sh, round[sh])
			if !slices.Contains(o.Owned(), sh) {
				continue
			}
			if err := sn.PutStateSnapshot(d); err != nil {
				s.log.Warn("cannot write the state snapshot of a shard of this node", "shard", sh, "feeds", len(d.Entries), "err", err)
			}
		}
	}
}

// snapshotRound lists the feeds polled here in each owned, loaded shard,
// by ascending ID.
func (s *Service) snapshotRound(o shardedOwner) map[int][]snapshotFeed {
	loaded := s.own.loadedShardSet()
	round := map[int][]snapshotFeed{}
	for _, sh := range o.Owned() {
		if loaded[sh] {
			round[sh] = nil
		}
	}
	if len(round) == 0 {
		return nil
	}
	// Copied under the lock polls take, sorted into shards after it.
	s.mu.Lock()
	feeds := make([]snapshotFeed, 0, len(s.guards))
	for id, g := range s.guards {
		feeds = append(feeds, snapshotFeed{id, g})
	}
	s.mu.Unlock()
	slices.SortFunc(feeds, func(a, b snapshotFeed) int { return cmp.Compare(a.id, b.id) })
	shards := o.Shards()
	for _, f := range feeds {
		sh := cluster.ShardOf(cluster.KindFeed, f.id, shards)
		if list, ok := round[sh]; ok {
			round[sh] = append(list, f)
		}
	}
	return round
}

// snapshotOf builds the snapshot of shard from the policies of its feeds
// (by ascending ID) that can be snapshot: those whose policy
// schedule.NameOf names, without a sleep plan (a snapshot does not carry
// one), not waiting for their records, still polled here.
func (s *Service) snapshotOf(shard int, feeds []snapshotFeed) storage.StateSnapshot {
	d := storage.StateSnapshot{Shard: shard, Written: s.opt.Clock.Now(), Parts: 1, Entries: make([]storage.StateEntry, 0, len(feeds))}
	for _, f := range feeds {
		if s.guard(f.id) != f.g {
			continue // dropped, or polled again under another guard
		}
		if e, ok := f.g.snapshotEntry(f.id); ok {
			d.Entries = append(d.Entries, e)
		}
	}
	return d
}

// snapshotEntry is the feed's snapshot entry, ok false when its policy
// cannot be snapshot.
func (g *feedGuard) snapshotEntry(id uint64) (storage.StateEntry, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deferred || g.policy == nil || !g.sleep.IsZero() {
		return storage.StateEntry{}, false
	}
	sp, ok := g.policy.(schedule.Stateful)
	if !ok {
		return storage.StateEntry{}, false
	}
	name, ok := schedule.NameOf(g.policy, id)
	if !ok {
		return storage.StateEntry{}, false
	}
	state := sp.AppendState(nil)
	if len(state) > storage.MaxSnapshotStateSize {
		return storage.StateEntry{}, false
	}
	return storage.StateEntry{ID: id, Policy: name, Respect: g.respect, Last: g.prevPoll.time(), State: state}, true
}

// snapshotRead tells what snapshotStates read, and how long it took.
type snapshotRead struct {
	shards, writes int           // snapshots used, record writes since
	read, since    time.Duration // reading the snapshots, the writes since
}

// snapshotStates reads the snapshots of shards and returns, of their
// entries, those a takeover can use now: from a snapshot at most
// SnapshotEvery plus snapshotSlack old, of a feed whose record was not
// written since snapshotMargin before it. The snapshots and the writes
// since the oldest snapshot it may use are read at once. It returns nil
// when the store keeps none or cannot tell which records were written
// (then every record is read).
func (s *Service) snapshotStates(shards []int, now time.Time) (map[uint64]*storage.StateEntry, snapshotRead) {
	var st snapshotRead
	sn, _, ok := s.snapshots()
	if !ok {
		return nil, st
	}
	oldest := now.Add(-s.opt.SnapshotEvery - snapshotSlack)
	var written map[uint64]time.Time
	var writtenErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := s.opt.Clock.Now()
		written, writtenErr = sn.FeedsWrittenSince(oldest.Add(-s.writtenMargin()))
		st.since = s.opt.Clock.Now().Sub(start)
	}()
	start := s.opt.Clock.Now()
	snaps, err := sn.StateSnapshots(shards)
	st.read = s.opt.Clock.Now().Sub(start)
	<-done
	if err != nil {
		s.log.Warn("cannot read the state snapshots of the shards this node came to own; reading their records", "shards", len(shards), "err", err)
		return nil, st
	}
	if writtenErr != nil {
		s.log.Warn("cannot tell which feeds were written since their shards' state snapshots; reading their records", "shards", len(snaps), "err", writtenErr)
		return nil, st
	}
	snaps = slices.DeleteFunc(snaps, func(d storage.StateSnapshot) bool { return d.Written.Before(oldest) })
	st.shards, st.writes = len(snaps), len(written)
	out := map[uint64]*storage.StateEntry{}
	for _, d := range snaps {
		from := d.Written.Add(-s.writtenMargin())
		for i := range d.Entries {
			e := &d.Entries[i]
			if at, ok := written[e.ID]; ok && !at.Before(from) {
				continue
			}
			out[e.ID] = e
		}
	}
	return out, st
}

// adoptSnapshots gives the deferred feeds of queued (just queued from
// their digests) that have an entry in states their policies from it,
// and returns those it gave one.
func (s *Service) adoptSnapshots(queued map[uint64]time.Time, states map[uint64]*storage.StateEntry) map[uint64]bool {
	restored := map[uint64]bool{}
	if len(states) == 0 {
		return restored
	}
	for id := range queued {
		e := states[id]
		if e == nil {
			continue
		}
		if g := s.guard(id); g != nil && s.adoptSnapshot(g, e) {
			restored[id] = true
		}
	}
	return restored
}

// adoptSnapshot gives deferred guard g the policy of its snapshot entry
// e; false when g had its policy already or e's cannot be rebuilt (its
// record is read).
func (s *Service) adoptSnapshot(g *feedGuard, e *storage.StateEntry) bool {
	r := restoreFromSnapshot(e)
	if r == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !s.undeferLocked(g) {
		return false
	}
	g.policy, g.respect = r.policy, r.respect
	g.prevPoll, g.fedAt = r.prevPoll, r.fedAt
	return true
}

// restoreFromSnapshot builds the guard of the feed of e from its
// snapshot entry, or returns nil when its policy cannot be rebuilt.
func restoreFromSnapshot(e *storage.StateEntry) *feedGuard {
	p, err := schedule.ByName(e.Policy, e.ID)
	if err != nil {
		return nil
	}
	sp, ok := p.(schedule.Stateful)
	if !ok || sp.RestoreState(e.State) != nil {
		return nil
	}
	g := &feedGuard{policy: p, respect: e.Respect}
	g.prevPoll = stampOf(e.Last)
	g.fedAt = g.prevPoll
	return g
}
