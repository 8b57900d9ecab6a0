package aggregator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// DefaultResync is how often a clustered service (an Owner other than
// cluster.Everything) lists the store's feed IDs to pick up the ones other
// nodes created or deleted in its shards, when ServiceOptions.Resync is
// zero.
const DefaultResync = 15 * time.Second

// busyRetry is how soon a feed the service could not schedule yet (its
// fetch as a lost feed was still under way, or its state could not be
// read) is tried again.
const busyRetry = time.Second

// Settling after a change of the owned shards: a takeover's claims come a
// tick (200 ms) or a few apart, and each would cost a load of its own, so
// the service waits until none came for settleQuiet, at most settleMax
// after the first, and loads them all at once.
const (
	settleQuiet = 600 * time.Millisecond
	settleMax   = 3 * time.Second
)

// perFeedTake is up to how many feeds a reconcile reads one by one (a KV
// get and the observations each); more are read with one
// storage.StateLoader call, whose passes read every feed's record and
// observation once.
const perFeedTake = 16

// maxAlone bounds the feeds a reconcile reads one by one after a load
// left them out; the rest wait for the next try, a second later.
const maxAlone = 256

// ownState is what a clustered service remembers between reconciles.
type ownState struct {
	mu sync.Mutex
	// skip holds listed feeds that are never polled: sensors' and
	// pipes' output feeds (not remote), and deleted feeds, whose keys
	// a JetStream listing keeps (IDs are never reused).
	skip map[uint64]bool

	// The progress of the last change of the owned shards (Ownership).
	// pending and failed are the feeds of the last take not scheduled:
	// to be tried again soon, or at the next Resync.
	pending, failed int
	changed, loaded time.Time
	took            time.Duration // loaded − changed of the last change loaded
	taken, lost     int           // feeds scheduled and dropped since changed
	deferredN       int           // feeds queued from a digest, policy not read yet
	// loadedShards are the shards owned when the last reconcile that
	// scheduled every feed it listed began: their digests may be
	// written (digest.go).
	loadedShards map[int]bool
	// park holds the lapsed shards, whose feeds are parked (lapse.go).
	park parkState
}

// setLoadedShards records the shards whose feeds are all scheduled.
func (o *ownState) setLoadedShards(shards []int) {
	set := make(map[int]bool, len(shards))
	for _, sh := range shards {
		set[sh] = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.loadedShards = set
}

// keepLoaded forgets the loaded shards not among owned (ascending: those
// owned when a reconcile begins): a shard lost and owned again counts as
// loaded only once its feeds are scheduled anew, even while feeds of
// other shards still wait for their records (shardsLoaded waits too).
func (o *ownState) keepLoaded(owned []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// A new set: loadedShardSet's callers may be reading the old one.
	kept := make(map[int]bool, len(o.loadedShards))
	for sh := range o.loadedShards {
		if _, ok := slices.BinarySearch(owned, sh); ok {
			kept[sh] = true
		}
	}
	o.loadedShards = kept
}

// forgetLoaded forgets shard sh loaded: its parked feeds were dropped,
// and it counts as loaded again once they are scheduled anew.
func (o *ownState) forgetLoaded(sh int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.loadedShards[sh] {
		return
	}
	// A new set: loadedShardSet's callers may be reading the old one.
	kept := maps.Clone(o.loadedShards)
	delete(kept, sh)
	o.loadedShards = kept
}

// loadedShardSet returns the shards whose feeds are all scheduled (not
// to be modified).
func (o *ownState) loadedShardSet() map[int]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.loadedShards
}

// OwnershipStatus is how far a clustered service has come in scheduling
// the feeds of the shards its node owns (Service.Ownership).
type OwnershipStatus struct {
	// Clustered is false for a single node (cluster.Everything), which
	// owns every feed for good: Pending is 0 and the times are zero.
	Clustered bool
	// Polled counts the feeds scheduled here.
	Polled int
	// Pending counts the feeds of the owned shards that the last listing
	// found and that are not scheduled yet: a load under way, or one to
	// be tried again within a second. It is set before a load starts and
	// falls as the feeds are scheduled. While a change is being listed
	// it is 0, with Loaded zero.
	Pending int
	// Failed counts the feeds of the owned shards the last load could
	// not schedule for good (a policy this version does not know); they
	// are logged and tried again at the next Resync. They do not hold
	// Loaded back.
	Failed int
	// Changed is when the service saw the change of its owned shards
	// that it is loading, or loaded last (its start counts as one). A
	// change seen while an earlier one is still loading belongs to it
	// (a takeover's claims come a lease tick or a few apart), so
	// Changed stays at the first.
	Changed time.Time
	// Loaded is when, after Changed, every feed the listing found was
	// scheduled (Pending reached 0 with no change seen since the
	// listing); zero while the change is loading. Loaded.Sub(Changed)
	// is what the change cost.
	Loaded time.Time
	// Took is Loaded − Changed of the last change that was loaded; it
	// is kept while the next one loads.
	Took time.Duration
	// Taken and Lost count the feeds scheduled here and dropped since
	// Changed.
	Taken, Lost int
	// Deferred counts the feeds scheduled from their shard's schedule
	// digest whose records (policy states) are not read yet: the load
	// reads them in due order, and one that comes due first reads its
	// own before its fetch. Loaded waits for them.
	Deferred int
	// Parked counts the feeds of shards whose lease lapsed (not renewed
	// in time, no other holder seen): kept with their learned state and
	// counted in Polled, but not fetched until a renewal succeeds
	// (lapse.go).
	Parked int
}

// Loading reports whether a change of the owned shards is not yet loaded.
func (o OwnershipStatus) Loading() bool { return o.Clustered && o.Loaded.IsZero() }

// Feeds counts the remote feeds of the owned shards the service knows
// of: those it polls, those listed and not scheduled yet, and those it
// could not schedule. Parked feeds count (in Polled): the cluster's
// status lists a lapsed shard as this node's, its lease naming it.
func (o OwnershipStatus) Feeds() int { return o.Polled + o.Pending + o.Failed }

// Ownership reports how far the service has come in scheduling the feeds
// of its node's shards: how many it polls, how many of the last change
// are still to be scheduled, and when that change was loaded. It is
// cheap and safe to call at any time.
func (s *Service) Ownership() OwnershipStatus {
	st := OwnershipStatus{Clustered: s.clustered(), Polled: s.sched.Len()}
	if !st.Clustered {
		return st
	}
	s.own.mu.Lock()
	defer s.own.mu.Unlock()
	st.Pending, st.Failed = s.own.pending, s.own.failed
	st.Changed, st.Loaded, st.Took = s.own.changed, s.own.loaded, s.own.took
	st.Taken, st.Lost = s.own.taken, s.own.lost
	st.Deferred = s.own.deferredN
	st.Parked = s.own.park.parked()
	return st
}

// changeSeen notes a change of the owned shards seen at now: it starts a
// change to load unless one is still loading (then it is part of it).
func (o *ownState) changeSeen(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.changed.IsZero() && o.loaded.IsZero() {
		return
	}
	o.changed, o.loaded, o.taken, o.lost = now, time.Time{}, 0, 0
}

// deferredCount is how many feeds queued from a schedule digest have
// not had their policy read yet.
func (o *ownState) deferredCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deferredN
}

// deferred counts feeds queued from a schedule digest (n > 0) and
// deferred feeds given their policy or dropped (n < 0), and returns how
// many are left.
func (o *ownState) deferred(n int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deferredN = max(o.deferredN+n, 0)
	return o.deferredN
}

// setPending sets the feeds about to be loaded.
func (o *ownState) setPending(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = n
}

// scheduled counts a feed of a load scheduled.
func (o *ownState) scheduled() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = max(o.pending-1, 0)
	o.taken++
}

// settle sets what a take left unscheduled.
func (o *ownState) settle(pending, failed int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending, o.failed = pending, failed
}

// dropped counts feeds no longer polled here.
func (o *ownState) dropped(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lost += n
}

// loadedAt marks the change loading loaded at now, when nothing is
// pending; ok is false when no change was loading or feeds are pending.
func (o *ownState) loadedAt(now time.Time) (st OwnershipStatus, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.changed.IsZero() || !o.loaded.IsZero() || o.pending > 0 || o.deferredN > 0 {
		return st, false
	}
	o.loaded, o.took = now, now.Sub(o.changed)
	return OwnershipStatus{Clustered: true, Failed: o.failed, Changed: o.changed, Loaded: o.loaded, Took: o.took, Taken: o.taken, Lost: o.lost}, true
}

func (o *ownState) skipped(id uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.skip[id]
}

func (o *ownState) setSkip(id uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.skip == nil {
		o.skip = map[uint64]bool{}
	}
	o.skip[id] = true
}

// owns reports whether this node polls feed id.
func (s *Service) owns(id uint64) bool { return s.opt.Owner.OwnsFeed(id) }

// ownsNow returns whether this node owns a feed as of one reading of its
// Owner: with a shardedOwner, the shards it owns read once (a feed's
// shard looked up, without the lease lock and clock reading of an
// OwnsFeed call, which a reconcile would make for each of a million
// feeds), else Owner.OwnsFeed. A feed is checked again before each fetch
// (begin), so a shard lost meanwhile costs no poll.
func (s *Service) ownsNow() func(id uint64) bool {
	o, ok := s.opt.Owner.(shardedOwner)
	if !ok || !s.clustered() || o.Shards() <= 0 {
		return s.owns
	}
	return s.ownsShards(o.Owned())
}

// ownsShards is ownsNow with the shards owned read (ascending); with an
// Owner not by shards, Owner.OwnsFeed.
func (s *Service) ownsShards(owned []int) func(id uint64) bool {
	o, ok := s.opt.Owner.(shardedOwner)
	if !ok || !s.clustered() || o.Shards() <= 0 {
		return s.owns
	}
	n := o.Shards()
	set := make([]bool, n)
	for _, sh := range owned {
		if sh >= 0 && sh < n {
			set[sh] = true
		}
	}
	return func(id uint64) bool { return set[cluster.ShardOf(cluster.KindFeed, id, n)] }
}

// clustered reports whether other nodes share the feeds.
func (s *Service) clustered() bool { return s.opt.Owner != cluster.Everything }

// drop stops polling feed id here (another node owns it now, or it was
// deleted elsewhere). A fetch under way finishes; the scheduler forgets
// the feed when it returns.
func (s *Service) drop(id uint64) bool { return s.dropGuard(id, nil) }

// dropGuard is drop for the feed of guard g only (nil: whichever guard
// it has): when the feed has another guard by now (its shard lost and
// owned again), it keeps it.
func (s *Service) dropGuard(id uint64, g *feedGuard) bool {
	s.mu.Lock()
	had, ok := s.guards[id]
	if g != nil && had != g {
		s.mu.Unlock()
		return false
	}
	delete(s.guards, id)
	s.mu.Unlock()
	if ok {
		s.undefer(had)
		s.clearUnstored(id) // another node polls it, or nobody
	}
	s.sched.Remove(int(id))
	return ok
}

// polled lists the feeds this service schedules.
func (s *Service) polled() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint64, 0, len(s.guards))
	for id := range s.guards {
		ids = append(ids, id)
	}
	return ids
}

// owned runs until ctx ends: whenever the Owner's answers change (once
// they settle), and every Resync, it schedules the owned feeds the
// service does not poll yet, at their learned prediction (their policy
// relearns the stored observations, which every node reads alike), and
// stops polling the feeds it no longer owns.
func (s *Service) owned(ctx context.Context) {
	if !s.clustered() {
		return // a single node owns every feed, for good
	}
	// Changed is read before each reconcile, so a change during one
	// fires the next; the first catches changes since Load.
	changed := s.opt.Owner.Changed()
	sharded, _ := s.opt.Owner.(shardedOwner)
	for {
		var shards []int
		if sharded != nil {
			shards = sharded.Owned()
			s.own.keepLoaded(shards)
		}
		busy, err := s.reconcile(ctx)
		if err != nil {
			s.log.Warn("cannot list feeds to follow the cluster's shards", "err", err)
		}
		clean := !busy && err == nil
		if clean {
			s.shardsLoaded(shards, changed)
		}
		wait := s.opt.Resync
		if !clean {
			wait = busyRetry
		}
		if at := s.own.park.deadline(); !at.IsZero() {
			// A lapse that lasts ends at maxLapse.
			if d := max(at.Sub(s.opt.Clock.Now()), time.Millisecond); wait <= 0 || d < wait {
				wait = d
			}
		}
		var timer <-chan time.Time
		var t schedule.Timer
		if wait > 0 {
			t = s.opt.Clock.NewTimer(wait)
			timer = t.C()
		}
	waiting:
		for {
			select {
			case <-ctx.Done():
			case <-changed:
				s.own.changeSeen(s.opt.Clock.Now())
				changed = s.settle(ctx)
			case <-timer:
			case <-s.restored:
				// The records of the feeds queued from digests
				// are read (restoring).
				if clean {
					s.shardsLoaded(shards, changed)
				}
				continue waiting
			}
			break
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// shardsLoaded marks shards (those owned when the last reconcile began,
// which scheduled every feed it listed) loaded once no feed queued from a
// digest waits for its record any more: from then on their digests are
// this node's to write (digest.go), and the change is loaded unless
// another one came since (changed is closed).
func (s *Service) shardsLoaded(shards []int, changed <-chan struct{}) {
	if s.own.deferredCount() > 0 {
		return
	}
	s.own.setLoadedShards(shards)
	s.loaded(changed)
}

// loaded marks the change of the owned shards loaded once a reconcile
// scheduled every feed it listed, unless another change came since the
// reconcile began (changed is closed: the next one follows it).
func (s *Service) loaded(changed <-chan struct{}) {
	select {
	case <-changed:
		return
	default:
	}
	st, ok := s.own.loadedAt(s.opt.Clock.Now())
	if !ok {
		return
	}
	s.log.Info("the feeds of this node's shards are scheduled", "taken", st.Taken, "lost", st.Lost,
		"failed", st.Failed, "polled_here", s.sched.Len(), "since_change", st.Took)
}

// settle waits, after a change of the owned shards, until no other came
// for settleQuiet (at most settleMax), and returns the Changed channel
// the next reconcile is to follow.
func (s *Service) settle(ctx context.Context) <-chan struct{} {
	deadline := s.opt.Clock.Now().Add(settleMax)
	for {
		changed := s.opt.Owner.Changed()
		wait := min(settleQuiet, deadline.Sub(s.opt.Clock.Now()))
		if wait <= 0 {
			return changed
		}
		t := s.opt.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return changed
		case <-changed:
			t.Stop()
		case <-t.C():
			return changed
		}
	}
}

// reconcile makes the scheduled feeds the owned remote feeds of the
// store. busy reports feeds that could not be scheduled yet (a fetch
// from before the feed was lost still under way, a load that failed or
// did not return every feed listed): the caller tries again soon.
//
// It lists the store's feed IDs (on JetStream one request to the defs
// bucket's leader, not a get per feed), drops the feeds it no longer owns
// or that were deleted, and loads the owned feeds it does not poll yet:
// up to perFeedTake one by one, more with one storage.StateLoader call.
// A feed listed but missing from what the load returned (written after
// its pass began, or deleted) is read on its own or tried again at once,
// never left for a whole Resync.
func (s *Service) reconcile(ctx context.Context) (busy bool, err error) {
	var owned []int
	var holds []cluster.Hold
	if lp, _, _, ok := s.lapsing(); ok {
		// The owned and the lapsed shards from one reading: a renewal
		// between two readings would show a shard neither.
		holds = lp.Holds()
		for sh, h := range holds {
			if h.Owned {
				owned = append(owned, sh)
			}
		}
	} else if o, ok := s.opt.Owner.(shardedOwner); ok {
		owned = o.Owned()
	}
	owns := s.ownsShards(owned)
	// The feeds of lapsed shards are parked, not dropped (lapse.go).
	lapses := s.reviewLapses(holds)
	parked, resumedFeeds := map[int]int{}, map[int]int{}
	lost, ended := 0, 0
	for _, id := range s.polled() {
		sh, v := lapses.of(id)
		switch {
		case v == lapseEnded:
			if s.drop(id) {
				lost++
				ended++
			}
		case owns(id):
			if v == resumed {
				resumedFeeds[sh]++
			}
		case v == stillParked && s.parkable(id):
			parked[sh]++
		default:
			if s.drop(id) {
				lost++
			}
		}
	}
	s.own.dropped(lost)
	busy = s.settleLapses(lapses, parked, resumedFeeds, ended)
	ids, err := s.feedIDs()
	if err != nil {
		if lost > 0 {
			s.log.Info("feeds follow the cluster's shards", "taken", 0, "lost", lost, "polled_here", s.sched.Len())
		}
		return false, err
	}
	// ids is ascending (FeedIDLister, Feeds): a feed polled here is
	// looked up in it, rather than a set of a million IDs built each
	// resync.
	var take []uint64
	for _, id := range ids {
		if owns(id) && s.guard(id) == nil && !s.own.skipped(id) {
			take = append(take, id)
		}
	}
	// Feeds deleted on another node.
	for _, id := range s.polled() {
		if _, listed := slices.BinarySearch(ids, id); listed {
			continue
		}
		if _, err := s.opt.Store.Feed(id); errors.Is(err, storage.ErrFeedNotFound) {
			s.drop(id)
			s.removed(id)
			s.own.setSkip(id)
		}
	}
	took, takeBusy := s.take(ctx, take, owns)
	if took > 0 || lost > 0 {
		s.log.Info("feeds follow the cluster's shards", "taken", took, "lost", lost, "polled_here", s.sched.Len())
	}
	return busy || takeBusy, nil
}

// feedIDs lists the store's feed IDs: storage.FeedIDLister's, else from
// the whole records (whose kinds are noted on the way).
func (s *Service) feedIDs() ([]uint64, error) {
	if l, ok := s.opt.Store.(storage.FeedIDLister); ok {
		return l.FeedIDs()
	}
	feeds, err := s.opt.Store.Feeds()
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, 0, len(feeds))
	for _, f := range feeds {
		if f.Kind != storage.KindRemote {
			s.own.setSkip(f.ID)
		}
		ids = append(ids, f.ID)
	}
	return ids, nil
}

// stateTaker is a clustered store whose feed records carry their
// feeds' policy states (storage/jetstream's Backend): it reads the
// records of the feeds ids in batches and hands each over with its
// state (nil when the record has none); the feeds feed asks to replay
// get their observations handed to obs, and the states their replays
// reached (reached) stored for the next takeover. A feed whose record
// cannot be decoded is given to unreadable (with its storage.ErrCorrupt
// error) instead of feed.
type stateTaker interface {
	TakeFeedStates(ctx context.Context, ids []uint64, feed func(f storage.Feed, st *storage.PolicyState) (replay bool), obs func(id uint64, o storage.Observation), reached func(id uint64) *storage.PolicyState, unreadable func(id uint64, err error)) error
}

// loadStates rebuilds the policies of the feeds of ids (nil: every feed
// listed) that want accepts: from their records' policy states with a
// stateTaker, replaying only the feeds without one; else it reads their
// records and observations in passes and replays every policy, with a
// storage.StateStreamer as the pass reads them (holding a policy per
// feed, not its observations), else with one storage.StateLoader call.
// seen holds every feed the load returned, replayed or not (a feed
// never polled, a policy name this version does not know). ok is false
// when the store offers none of these.
func (s *Service) loadStates(ctx context.Context, ids []uint64, want func(id uint64) bool) (replays map[uint64]*replay, seen map[uint64]bool, ok bool, err error) {
	if st, isTaker := s.opt.Store.(stateTaker); isTaker {
		listed := ids == nil
		if listed {
			if ids, err = s.feedIDs(); err != nil {
				return nil, nil, true, err
			}
		}
		ids = slices.DeleteFunc(slices.Clone(ids), func(id uint64) bool { return !want(id) })
		if listed {
			s.own.setPending(len(ids)) // a start's load (Load)
		}
		replays, seen, err = s.takeStates(ctx, st, ids)
		return replays, seen, true, err
	}
	replays, seen = map[uint64]*replay{}, map[uint64]bool{}
	start := func(f storage.Feed) bool {
		if !s.admitFeed(f, seen) {
			return false
		}
		r := s.replayFor(f)
		if r == nil {
			return false
		}
		replays[f.ID] = r
		return true
	}
	if st, isStreamer := s.opt.Store.(storage.StateStreamer); isStreamer {
		err = st.StreamFeedStates(want, start, func(id uint64, o storage.Observation) {
			if r := replays[id]; r != nil {
				r.add(o)
			}
		})
		if err != nil {
			return nil, nil, true, err
		}
		return replays, seen, true, nil
	}
	loader, isLoader := s.opt.Store.(storage.StateLoader)
	if !isLoader {
		return nil, nil, false, nil
	}
	states, err := loader.FeedStates(want, 0)
	if err != nil {
		return nil, nil, true, err
	}
	ids = make([]uint64, 0, len(states))
	for id := range states {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if start(states[id].Feed) {
			for _, o := range states[id].Observations {
				replays[id].add(o)
			}
		}
	}
	return replays, seen, true, nil
}

// takeStates is loadStates with a stateTaker: the feeds whose records
// hold a policy state are restored from it, the others replayed, and
// the states their replays reached stored in their records.
func (s *Service) takeStates(ctx context.Context, st stateTaker, ids []uint64) (replays map[uint64]*replay, seen map[uint64]bool, err error) {
	replays, seen = map[uint64]*replay{}, map[uint64]bool{}
	restored, replayed, unreadable := 0, 0, 0
	var firstErr error
	feed := func(f storage.Feed, ps *storage.PolicyState) bool {
		if !s.admitFeed(f, seen) {
			return false
		}
		if ps != nil {
			r, err := restoreFeed(f, ps)
			if err == nil {
				replays[f.ID] = r
				restored++
				return false
			}
			// A policy this version lacks is logged by replayFor;
			// a state it cannot read is replayed instead.
			if !errors.Is(err, schedule.ErrUnknownPolicy) {
				unreadable++
				if firstErr == nil {
					firstErr = fmt.Errorf("feed %d: %w", f.ID, err)
				}
			}
		}
		r := s.replayFor(f)
		if r == nil {
			return false
		}
		replays[f.ID] = r
		replayed++
		return true
	}
	obs := func(id uint64, o storage.Observation) {
		if r := replays[id]; r != nil {
			r.add(o)
		}
	}
	reached := func(id uint64) *storage.PolicyState {
		r := replays[id]
		if r == nil {
			return nil
		}
		sp, ok := r.g.policy.(schedule.Stateful)
		if !ok {
			return nil
		}
		return &storage.PolicyState{Next: r.next, Last: r.g.prevPoll.time(), Policy: sp.AppendState(nil)}
	}
	// A record that cannot be decoded is seen, with no replay: the take
	// counts its feed failed (tried again at the next Resync) rather than
	// read it alone, however many there are.
	corrupt := 0
	var firstCorrupt error
	bad := func(id uint64, err error) {
		seen[id] = true
		corrupt++
		if firstCorrupt == nil {
			firstCorrupt = err
		}
	}
	if err := st.TakeFeedStates(ctx, ids, feed, obs, reached, bad); err != nil {
		return nil, nil, err
	}
	s.load.replay.Add(int64(replayed))
	if unreadable > 0 {
		s.log.Warn("stored policy states this version cannot restore; those feeds are replayed from their observations", "feeds", unreadable, "first", firstErr)
	}
	if corrupt > 0 {
		s.log.Error("cannot read the records of feeds this node came to own; they are not polled until a write makes them readable", "feeds", corrupt, "first", firstCorrupt)
	}
	s.log.Debug("feed states loaded", "feeds", len(ids), "restored", restored, "replayed", replayed)
	return replays, seen, nil
}

// take schedules the feeds ids (owned, not polled yet) from their stored
// state. busy reports some that could not be, to be tried again soon.
//
// owns is the reconcile's view of the owned feeds (ownsNow).
func (s *Service) take(ctx context.Context, ids []uint64, owns func(id uint64) bool) (took int, busy bool) {
	// Pending is set before the load starts: a big one takes seconds.
	s.own.setPending(len(ids))
	if len(ids) == 0 {
		s.own.settle(0, 0)
		return 0, false
	}
	// failed are the feeds whose policy cannot be built: not pending,
	// tried again at the next Resync.
	failed := map[uint64]bool{}
	all := ids
	// A record read while its shard was lost and owned again may predate
	// the other owner's polls: such a feed is read again.
	before := s.tenures()
	defer func() { s.own.settle(s.unscheduled(all, failed, owns), len(failed)) }()
	// Feeds their shards' schedule digests list are queued at once, and
	// their records read after the others' (digest.go).
	ids, deferred, took := s.takeFromDigests(ids, owns, s.opt.Clock.Now())
	if len(deferred) > 0 {
		s.restoreQ.add(deferred)
		if len(ids) == 0 {
			return took, false
		}
	}
	var replays map[uint64]*replay
	var seen map[uint64]bool
	// A store whose records carry policy states is read in one batch
	// whatever the count: no observation is read for a feed with one.
	if _, isTaker := s.opt.Store.(stateTaker); isTaker || len(ids) > perFeedTake {
		want := make(map[uint64]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
		var err error
		var ok bool
		replays, seen, ok, err = s.loadStates(ctx, ids, func(id uint64) bool { return want[id] && owns(id) })
		if ok && err != nil && ctx.Err() != nil {
			return 0, true // stopping
		}
		if ok && err != nil {
			s.log.Warn("cannot load the state of the feeds this node came to own; trying again", "feeds", len(ids), "err", err)
			return 0, true
		}
	}
	for id := range seen {
		if replays[id] == nil && !s.own.skipped(id) {
			failed[id] = true // logged by replayFor
		}
	}
	// Feeds to read one by one: all when few, else those the load did
	// not return (a pass reads up to what the leader held when it began).
	alone := map[uint64]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		if len(alone) == maxAlone {
			busy = true
			break
		}
		alone[id] = true
	}
	if seen != nil && len(alone) > 0 {
		// Deleted feeds (listed, never loaded; once read they are
		// skipped), or feeds written after the load's pass began.
		s.log.Debug("feeds listed were not in the load of their state; reading them one by one", "feeds", len(alone))
	}
	now := s.opt.Clock.Now()
	slices.Sort(ids)
	for _, id := range ids {
		var err error
		r := replays[id]
		switch {
		case r != nil:
			if !s.owns(id) {
				continue // lost since
			}
			if !s.heldSince(before, id) {
				busy = true // read again a second later (busyRetry)
				continue
			}
			err = s.install(r, now, true)
		case !alone[id] || !s.owns(id):
			continue
		default:
			f, ferr := s.opt.Store.Feed(id)
			switch {
			case errors.Is(ferr, storage.ErrFeedNotFound):
				s.own.setSkip(id) // deleted; IDs are not reused
				continue
			case errors.Is(ferr, storage.ErrCorrupt):
				// Unreadable: tried again at the next Resync (a
				// rewrite may fix it); the others go on.
				s.log.Error("cannot read a feed this node came to own", "feed", id, "err", ferr)
				failed[id] = true
				continue
			case ferr != nil:
				s.log.Warn("cannot read a feed this node came to own; trying again", "feed", id, "err", ferr)
				busy = true
				continue
			case f.Kind != storage.KindRemote:
				s.own.setSkip(id)
				continue
			}
			err = s.schedule(f, now, true)
		}
		switch {
		case err == nil:
			took++
			s.own.scheduled()
		case errors.Is(err, schedule.ErrFeedExists):
			s.own.scheduled() // by a subscription meanwhile
		case errors.Is(err, schedule.ErrFeedBusy):
			busy = true
		default:
			s.log.Error("cannot schedule feed", "feed", id, "err", err)
			// A read that failed (a stream re-electing its leader)
			// is tried again soon; a policy name this version does
			// not know, at the next Resync (an edit may fix it).
			if errors.Is(err, schedule.ErrUnknownPolicy) {
				failed[id] = true
			} else {
				busy = true
			}
		}
	}
	return took, busy
}

// tenured is an Owner that tells a shard held throughout a read from one
// lost and owned again meanwhile (lease.Node).
type tenured interface {
	Tenure(shard int) uint64
}

// tenures notes the tenure of every shard now (nil with an Owner that
// keeps none).
func (s *Service) tenures() []uint64 {
	o, ok := s.opt.Owner.(shardedOwner)
	t, isTenured := s.opt.Owner.(tenured)
	if !ok || !isTenured || !s.clustered() || o.Shards() <= 0 {
		return nil
	}
	out := make([]uint64, o.Shards())
	for sh := range out {
		out[sh] = t.Tenure(sh)
	}
	return out
}

// heldSince reports whether the shard of feed id has the tenure it had
// at before (tenures): with the feed owned now, its shard was not lost
// and owned again since (a lease that lapsed and was renewed keeps its
// tenure: no other node claimed it). Without tenures (nil) it reports
// true.
func (s *Service) heldSince(before []uint64, id uint64) bool {
	t, ok := s.opt.Owner.(tenured)
	if before == nil || !ok {
		return true
	}
	sh := cluster.ShardOf(cluster.KindFeed, id, len(before))
	return t.Tenure(sh) == before[sh]
}

// unscheduled counts the feeds of ids still owned, not scheduled, not
// skipped and not failed: those a take left to try again.
func (s *Service) unscheduled(ids []uint64, failed map[uint64]bool, owns func(id uint64) bool) int {
	n := 0
	for _, id := range ids {
		if !failed[id] && owns(id) && s.guard(id) == nil && !s.own.skipped(id) {
			n++
		}
	}
	return n
}

// admitFeed marks f seen by a load and says whether it is scheduled here:
// only remote feeds are; the others are marked skipped.
func (s *Service) admitFeed(f storage.Feed, seen map[uint64]bool) bool {
	seen[f.ID] = true
	if f.Kind != storage.KindRemote {
		s.own.setSkip(f.ID)
		return false
	}
	return true
}

// replayFor is a new replay of f's policy, or nil (logged) when f's
// policy cannot be built.
func (s *Service) replayFor(f storage.Feed) *replay {
	r, err := newReplay(f)
	if err != nil {
		s.log.Error("cannot schedule feed", "feed", f.ID, "url", sanitize.RedactURL(f.URL), "err", err)
		return nil
	}
	return r
}
