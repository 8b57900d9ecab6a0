package aggregator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// Schedule digests (storage.ScheduleDigest). A clustered service writes,
// every DigestEvery, each owned shard's digest: every feed it polls
// there with its due time, host and weight. A service that comes to own
// a shard queues the shard's feeds from its digest at once (one read per
// shard, however many feeds), with guards that hold no policy yet
// ("deferred"); then it reads their records, policy states included,
// in due order, and a deferred feed that comes due first reads its own
// record just before its fetch. The record is the truth: a feed polled
// since the digest was written (by the dead owner, or here) is not
// fetched again before its record's learned prediction, and one due
// earlier than its entry says is brought forward when its record is
// read.

// DefaultDigestEvery is how often a clustered service writes its shards'
// digests when ServiceOptions.DigestEvery is zero. At a million feeds
// over 64 shards a writing is about 6 B a feed, 6 MB for the cluster.
const DefaultDigestEvery = 30 * time.Second

// digestMaxAhead bounds how far past a record's learned prediction a
// deferred feed may be queued without being brought forward.
const digestMaxAhead = time.Second

// restoreBatch is how many deferred feeds one background read covers:
// enough that the store's batched reads run ahead of the decoding (at a
// million feeds, 4,096 left the reads waiting on each other's round
// trips, 36 µs a feed with the machine a third idle).
const restoreBatch = 16384

// deferredRetry is when a deferred feed whose record could not be read
// just before its fetch is tried again, and the first pause before a
// background read that failed is tried again.
const deferredRetry = 5 * time.Second

// restoreRetryMax bounds the pause between background reads that keep
// failing (it doubles from deferredRetry); the feeds due meanwhile read
// their own records before their fetches.
const restoreRetryMax = time.Minute

// restoreTries is how many background reads in a row fail before the
// restorer warns.
const restoreTries = 3

// shardedOwner is a cluster.Owner that tells the cluster's shard count
// and the shards it owns (storage/jetstream/lease's Node).
type shardedOwner interface {
	cluster.Owner
	Shards() int
	Owned() []int
}

// digests returns the store and owner that schedule digests need, ok
// false when either is missing (a single node, a store without them).
func (s *Service) digests() (storage.ScheduleDigester, shardedOwner, bool) {
	d, ok := s.opt.Store.(storage.ScheduleDigester)
	if !ok || !s.clustered() {
		return nil, nil, false
	}
	o, ok := s.opt.Owner.(shardedOwner)
	if !ok || o.Shards() <= 0 {
		return nil, nil, false
	}
	if _, ok := s.opt.Store.(stateTaker); !ok {
		return nil, nil, false // a deferred feed reads its record's state
	}
	return d, o, true
}

// writeDigests runs until ctx ends, writing the digests of the owned
// shards every DigestEvery.
func (s *Service) writeDigests(ctx context.Context) {
	d, o, ok := s.digests()
	if !ok || s.opt.DigestEvery < 0 {
		return
	}
	for {
		t := s.opt.Clock.NewTimer(s.opt.DigestEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		n, err := s.writeDigestsOnce(d, o)
		if err != nil {
			s.log.Warn("cannot write the schedule digests of this node's shards", "shards", n, "err", err)
		}
	}
}

// writeDigestsOnce writes the digest of each shard owned now whose feeds
// the service has scheduled (a shard it came to own and has not loaded
// yet keeps its earlier owner's digest), and returns how many it wrote;
// a shard whose digest cannot be written does not keep the others'.
func (s *Service) writeDigestsOnce(d storage.ScheduleDigester, o shardedOwner) (int, error) {
	now := s.opt.Clock.Now()
	shards := o.Shards()
	loaded := s.own.loadedShardSet()
	byShard := map[int][]storage.DigestEntry{}
	for _, sh := range o.Owned() {
		if loaded[sh] {
			byShard[sh] = nil
		}
	}
	if len(byShard) == 0 {
		return 0, nil
	}
	// In ID order, so that each shard's entries come out sorted.
	ids := s.polled()
	slices.Sort(ids)
	for _, id := range ids {
		sh := cluster.ShardOf(cluster.KindFeed, id, shards)
		entries, owned := byShard[sh]
		if !owned {
			continue
		}
		due, host, weight, ok := s.sched.Placement(int(id))
		if !ok {
			continue
		}
		byShard[sh] = append(entries, storage.DigestEntry{ID: id, Next: due, Host: host, Weight: weight})
	}
	// A lease lost since the digests were built: the new owner's digest
	// is not overwritten.
	owned, loaded := o.Owned(), s.own.loadedShardSet()
	written := 0
	var errs []error
	for _, sh := range slices.Sorted(maps.Keys(byShard)) {
		entries := byShard[sh]
		if !slices.Contains(owned, sh) || !loaded[sh] {
			continue
		}
		if err := d.PutScheduleDigest(storage.ScheduleDigest{Shard: sh, Written: now, Parts: 1, Entries: entries}); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", sh, err))
			continue
		}
		written++
	}
	return written, errors.Join(errs...)
}

// takeFromDigests queues the feeds of ids (ascending, owned, not polled
// here) that the digests of their shards list, deferred, and returns the
// rest, for the usual load, and the deferred ones in due order.
func (s *Service) takeFromDigests(ids []uint64, owns func(id uint64) bool, now time.Time) (rest []uint64, deferred []dueFeed, took int) {
	d, o, ok := s.digests()
	if !ok || len(ids) <= perFeedTake {
		return ids, nil, 0
	}
	shards := o.Shards()
	want := map[int]bool{}
	for _, id := range ids {
		want[cluster.ShardOf(cluster.KindFeed, id, shards)] = true
	}
	taken := slices.Sorted(maps.Keys(want))
	// The shards' state snapshots are read beside their digests.
	start := s.opt.Clock.Now()
	var states map[uint64]*storage.StateEntry
	var snapped snapshotRead
	read := make(chan struct{})
	go func() {
		defer close(read)
		states, snapped = s.snapshotStates(taken, now)
	}()
	digests, err := d.ScheduleDigests(taken)
	digestsRead := s.opt.Clock.Now().Sub(start)
	if err != nil {
		<-read
		s.log.Warn("cannot read the schedule digests of the shards this node came to own; reading their records", "shards", len(want), "err", err)
		return ids, nil, 0
	}
	queued := make(map[uint64]time.Time, len(ids))
	for _, dg := range digests {
		for _, e := range dg.Entries {
			// A weight other than 1 is taken from the record: a
			// digest must not add weight classes (there may be few).
			if _, listed := slices.BinarySearch(ids, e.ID); !listed || e.Weight != 1 ||
				cluster.ShardOf(cluster.KindFeed, e.ID, shards) != dg.Shard || !owns(e.ID) {
				continue
			}
			if latest := now.Add(schedule.MaxDelay); e.Next.After(latest) {
				e.Next = latest
			}
			if err := s.installDeferred(e, now); err != nil {
				continue // read with the rest
			}
			queued[e.ID] = e.Next
			took++
			s.own.scheduled()
		}
	}
	// The feeds not written since their shards' snapshots get their
	// policies from there (snapshot.go); the others' records are read.
	<-read
	restored := s.adoptSnapshots(queued, states)
	if took == 0 {
		return ids, nil, 0
	}
	rest = make([]uint64, 0, len(ids)-took)
	deferred = make([]dueFeed, 0, len(queued)-len(restored))
	for _, id := range ids {
		due, ok := queued[id]
		switch {
		case !ok:
			rest = append(rest, id)
		case !restored[id]:
			deferred = append(deferred, dueFeed{id: id, due: due})
		}
	}
	s.log.Info("feeds of the shards this node came to own queued from their schedule digests", "feeds", took,
		"from_snapshots", len(restored), "records_to_read", len(deferred), "shards", len(digests), "snapshots", snapped.shards,
		"writes_since", snapped.writes, "digests_s", digestsRead.Seconds(), "snapshots_s", snapped.read.Seconds(),
		"writes_since_s", snapped.since.Seconds(), "queued_s", s.opt.Clock.Now().Sub(start).Seconds())
	return rest, deferred, took
}

// installDeferred queues the feed of digest entry e at its due time with
// a guard that has no policy yet.
func (s *Service) installDeferred(e storage.DigestEntry, now time.Time) error {
	g := &feedGuard{deferred: true}
	// Counted before the feed can be granted (and restored).
	s.own.deferred(1)
	if err := s.installGuard(e.ID, g, e.Host, e.Weight, now, e.Next); err != nil {
		s.undefer(g)
		return err
	}
	return nil
}

// undefer ends g's deferred state, counting it once, whoever comes first:
// its record read (adopt), the feed dropped, or its scheduling refused.
// It reports whether g was deferred. The caller does not hold g.mu.
func (s *Service) undefer(g *feedGuard) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return s.undeferLocked(g)
}

func (s *Service) undeferLocked(g *feedGuard) bool {
	if !g.deferred {
		return false
	}
	g.deferred = false
	if s.own.deferred(-1) == 0 {
		// The last one (read by the restorer, or before its fetch):
		// the ownership loop may mark its shards loaded.
		s.signalRestored()
	}
	return true
}

// dueFeed is a deferred feed and the time its digest queued it at.
type dueFeed struct {
	id  uint64
	due time.Time
}

// restoreQueue holds the deferred feeds whose records are still to be
// read, soonest due first. take adds to it; the restorer (Run) reads
// them, so that the ownership loop queues the next change's feeds from
// their digests while the records of an earlier one are being read.
type restoreQueue struct {
	mu    sync.Mutex
	feeds []dueFeed
	wake  chan struct{} // one token: feeds were added
}

// add queues feeds and wakes the restorer. The feeds are sorted by due
// time and merged into those queued, so a takeover's second change costs
// the sort of its own feeds, not of every feed still queued.
func (q *restoreQueue) add(feeds []dueFeed) {
	slices.SortStableFunc(feeds, byDue)
	q.mu.Lock()
	q.feeds = mergeDue(q.feeds, feeds)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func byDue(a, b dueFeed) int { return a.due.Compare(b.due) }

// mergeDue merges two lists sorted by due time; of feeds due together,
// those of a come first.
func mergeDue(a, b []dueFeed) []dueFeed {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]dueFeed, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if byDue(b[0], a[0]) < 0 {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}

// next takes up to n feeds, soonest due first.
func (q *restoreQueue) next(n int) []dueFeed {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.feeds))
	out := q.feeds[:n:n]
	q.feeds = q.feeds[n:]
	if len(q.feeds) == 0 {
		q.feeds = nil // the backing array of a takeover's feeds
	}
	return out
}

// len is how many feeds are queued.
func (q *restoreQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.feeds)
}

// restoring runs until ctx ends: it reads the records of the deferred
// feeds take queues, a batch at a time, soonest due first. The last
// deferred feed given its policy, here or before its fetch, tells the
// ownership loop (undefer). A batch whose read fails goes back to the
// queue and is read again after a pause that doubles up to
// restoreRetryMax; the feeds due meanwhile read their own records.
func (s *Service) restoring(ctx context.Context) {
	st, ok := s.opt.Store.(stateTaker)
	if !ok {
		return
	}
	fails := 0
	for {
		batch := s.restoreQ.next(restoreBatch)
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-s.restoreQ.wake:
			}
			continue
		}
		batch, guards := s.stillDeferred(batch)
		if len(batch) == 0 {
			continue // lost, or given their policy before their fetches
		}
		err := s.restoreDeferred(ctx, st, batch, guards)
		if err == nil {
			if fails >= restoreTries {
				s.log.Info("the records of feeds queued from schedule digests are read again")
			}
			fails = 0
			continue
		}
		if ctx.Err() != nil {
			s.restoreQ.add(batch) // stopping: the read was cut short
			return
		}
		fails++
		s.restoreQ.add(batch)
		pause := min(deferredRetry<<min(fails-1, 8), restoreRetryMax)
		if fails == restoreTries {
			s.log.Warn("cannot read the records of feeds queued from schedule digests; each due meanwhile is read before its fetch", "feeds", s.restoreQ.len(), "retry_in", pause, "err", err)
		} else {
			s.log.Debug("cannot read the records of feeds queued from schedule digests; trying again", "feeds", len(batch), "retry_in", pause, "err", err)
		}
		t := s.opt.Clock.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// stillDeferred keeps of batch the feeds still waiting for their records
// here, with their guards: a feed whose shard was lost (its guard
// dropped), or that read its record before its fetch, is not read.
func (s *Service) stillDeferred(batch []dueFeed) (kept []dueFeed, guards []*feedGuard) {
	kept = batch[:0]
	for _, f := range batch {
		if g := s.guard(f.id); g != nil && g.isDeferred() {
			kept = append(kept, f)
			guards = append(guards, g)
		}
	}
	return kept, guards
}

// signalRestored tells the ownership loop that no feed queued from a
// digest waits for its record.
func (s *Service) signalRestored() {
	select {
	case s.restored <- struct{}{}:
	default:
	}
}

// restoreDeferred reads the records of the deferred feeds of batch and
// gives each its policy, in the guard it had before the read (guards): a
// feed whose shard was lost and owned again meanwhile has a new guard,
// queued again, or, when no reconcile saw the loss, a new tenure and is
// queued again here, so a record read before another node polled it is
// not installed. A feed its record says is due earlier than queued is
// brought forward; one without a record (deleted since its shard's
// digest, or unreadable) or whose policy cannot be built here is
// dropped, and the next reconcile reads it alone (skipped, or reported).
func (s *Service) restoreDeferred(ctx context.Context, st stateTaker, batch []dueFeed, guards []*feedGuard) error {
	ids := make([]uint64, len(batch))
	for i, f := range batch {
		ids[i] = f.id
	}
	before := s.tenures()
	replays, _, err := s.takeStates(ctx, st, ids)
	if err != nil {
		return err
	}
	now := s.opt.Clock.Now()
	var again []dueFeed
	for i, id := range ids {
		g, r := guards[i], replays[id]
		if !s.heldSince(before, id) {
			// Its shard was lost and owned again during the read,
			// before any reconcile saw it lost: read again.
			again = append(again, batch[i])
			continue
		}
		if r == nil {
			s.dropGuard(id, g) // not a remote feed, a policy this version lacks (logged), or no record
			continue
		}
		due, _, _, queued := s.sched.Placement(int(id))
		if !queued {
			due = now
		}
		first, adopted := s.adopt(g, r, now, due)
		if adopted && queued && first.Before(due.Add(-digestMaxAhead)) {
			s.Expedite(id, first)
		}
	}
	if len(again) > 0 {
		s.restoreQ.add(again)
	}
	return nil
}

// adopt gives deferred guard g the policy r rebuilt, and returns the
// feed's learned next fetch (as install resumes it). When that is later
// than due (when the queue has the feed) by more than digestMaxAhead,
// the feed is held until then: its fetch at due is skipped. adopted is
// false when g had its policy already.
func (s *Service) adopt(g *feedGuard, r *replay, now, due time.Time) (first time.Time, adopted bool) {
	first = r.resumeAt(now)
	g.mu.Lock()
	if !s.undeferLocked(g) {
		g.mu.Unlock()
		return first, false
	}
	g.policy = r.g.policy
	g.respect, g.sleep = r.g.respect, r.g.sleep
	g.prevPoll, g.fedAt = r.g.prevPoll, r.g.fedAt
	if first.After(due.Add(digestMaxAhead)) {
		g.override = stampOf(first)
	}
	g.mu.Unlock()
	return first, true
}

// restoreBeforeFetch gives a deferred feed its policy from its record,
// just before its first fetch here (due now). ok is false when the
// record could not be read, or the feed cannot be scheduled here.
func (s *Service) restoreBeforeFetch(ctx context.Context, g *feedGuard, id uint64, now time.Time) (ok bool) {
	st, isTaker := s.opt.Store.(stateTaker)
	if !isTaker {
		return false
	}
	replays, seen, err := s.takeStates(ctx, st, []uint64{id})
	if err != nil && ctx.Err() != nil {
		return false // stopping
	}
	if err != nil {
		s.log.Warn("cannot read the record of a feed queued from a schedule digest; trying again", "feed", id, "err", err)
		return false
	}
	r := replays[id]
	if r == nil {
		if seen[id] {
			s.dropGuard(id, g) // not a remote feed, or a policy this version lacks (logged)
		}
		return false
	}
	s.adopt(g, r, now, now)
	return true
}
