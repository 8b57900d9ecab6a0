package aggregator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// DefaultPendingWrites is ServiceOptions.PendingWrites when unset: four
// full group commits' worth of polls waiting for their write.
const DefaultPendingWrites = 4 * storage.MaxBatch

// The live loop is pipelined. A poll has two halves:
//
//   - begin, on one of the Workers fetch slots: the feed record, the
//     conditional GET, older pages, parsing and sanitising;
//   - complete, on a completer goroutine: the poll's one write (items,
//     observation and feed counters in one transaction, group-committed
//     with other polls' writes), then everything that reports the poll:
//     metrics, watchers, OnNewItems, the feed's guard, and the
//     observation to the scheduler (Done), which is what lets the feed
//     be granted again.
//
// Completers are long-lived: a poll handed over goes to an idle one, and
// a new one starts only when none is idle, so there are never more than
// the polls waiting for their write. A goroutine per poll would grow its
// stack from the start through the record's encoding and the commit at
// every poll (6% of a 304 pass's CPU went to copying stacks).
//
// A fetch slot is free for the next fetch as soon as its poll is handed
// to complete, so the slots do not sit idle while a group commit waits
// for its fsyncs. In flight at any time are at most Workers + PendingWrites
// polls (the scheduler's in-flight cap), at most Workers of them fetching
// and the rest waiting for their write; with that many in flight no grant
// is made until a poll completes (back-pressure: memory stays bounded,
// the pending documents are parsed, a few KiB each). Nothing of a
// poll is reported before its write is on disk, and a feed is never
// granted again before its previous poll completed. At shutdown the loop
// stops granting, lets the fetches finish or abandon, and waits for every
// pending write to complete.

// Run fetches feeds as the scheduler grants them until ctx is cancelled,
// then waits for in-flight fetches to finish or abandon and for the
// pending writes to be stored. It returns nil after a cancellation.
func (s *Service) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return schedule.ErrRunning
	}
	defer s.running.Store(false)
	ownCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.owned(ownCtx) })
	wg.Go(func() { s.writeDigests(ownCtx) })
	wg.Go(func() { s.writeSnapshots(ownCtx) })
	wg.Go(func() { s.restoring(ownCtx) })
	wg.Go(func() { s.sweepRetention(ownCtx) })
	defer wg.Wait()
	defer stop()
	err := s.loop(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// signal wakes the live loop: the scheduler may have a grant.
func (s *Service) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop grants due feeds to free fetch slots on the service's clock until
// ctx ends (see the comment above Run).
func (s *Service) loop(ctx context.Context) error {
	clock := s.opt.Clock
	work := make(chan schedule.Grant, s.fetchers)
	// freed receives one token per grant a fetch slot is done with: at
	// most s.fetchers are outstanding, so sends never block.
	freed := make(chan struct{}, s.fetchers)
	var fetchers, writes sync.WaitGroup
	// jobs hands a poll's second half to an idle completer; with none
	// idle, handOff starts one (see the comment above Run).
	jobs := make(chan func())
	handOff := func(job func()) {
		select {
		case jobs <- job:
		default:
			writes.Go(func() {
				job()
				for job := range jobs {
					job()
				}
			})
		}
	}
	for range s.fetchers {
		fetchers.Go(func() {
			for g := range work {
				s.serveGrant(ctx, g, handOff)
				freed <- struct{}{}
			}
		})
	}
	timer := clock.NewTimer(time.Hour)
	timer.Stop()
	busy := 0 // grants handed to fetch slots and not freed
	var grants []schedule.Grant
	for ctx.Err() == nil {
	drain:
		for {
			select {
			case <-freed:
				busy--
			default:
				break drain
			}
		}
		grants = grants[:0]
		if free := s.fetchers - busy; free > 0 {
			grants = s.sched.AppendDueN(grants, clock.Now(), free)
			for _, g := range grants {
				work <- g
			}
			busy += len(grants)
		}
		var wait <-chan time.Time
		if busy < s.fetchers {
			if t, ok := s.sched.NextWakeup(); ok {
				d := t.Sub(clock.Now())
				if d <= 0 && len(grants) > 0 {
					continue
				}
				// Nothing was granted although something is due: the
				// budget decides at the next instant, so do not spin.
				timer.Reset(max(d, time.Millisecond))
				wait = timer.C()
			}
		}
		// With every slot busy, only a freed slot matters; otherwise a
		// due time, a freed slot, or a change in the scheduler (a poll
		// completed, a feed added or brought forward).
		select {
		case <-ctx.Done():
		case <-wait:
		case <-freed:
			busy--
		case <-s.wake:
		}
		timer.Stop()
	}
	close(work)
	fetchers.Wait()
	close(jobs)
	writes.Wait()
	return ctx.Err()
}

// serveGrant runs the first half of grant g's poll on a fetch slot and
// hands the second half, when there is a write, to a completer (handOff).
func (s *Service) serveGrant(ctx context.Context, g schedule.Grant, handOff func(func())) {
	if ctx.Err() != nil {
		_ = s.sched.Cancel(g.ID)
		s.signal()
		return
	}
	obs, pd, ok, panicked := s.safeBegin(ctx, uint64(g.ID))
	switch {
	case panicked:
		s.done(g.ID, schedule.Observation{}) // a miss
	case !ok:
		_ = s.sched.Cancel(g.ID) // abandoned at shutdown: keep the turn
		s.signal()
	case pd == nil:
		s.done(g.ID, obs)
	default:
		handOff(func() { s.done(g.ID, s.safeComplete(pd)) })
	}
}

// done reports feed id's poll to the scheduler, which plans the next.
func (s *Service) done(id int, obs schedule.Observation) {
	defer s.signal()
	if obs.At.IsZero() {
		obs.At = s.opt.Clock.Now()
	}
	if _, err := s.sched.Done(id, obs); err != nil {
		// The observation's time was unusable: learn a miss at the
		// clock's time so that the feed is not lost, or at least put it
		// back.
		if _, err := s.sched.Done(id, schedule.Observation{At: s.opt.Clock.Now()}); err != nil {
			_ = s.sched.Cancel(id)
		}
	}
	s.resleep(uint64(id))
}

// safeBegin is begin with a panic turned into a miss (panicked).
func (s *Service) safeBegin(ctx context.Context, id uint64) (obs schedule.Observation, pd *pendingPoll, ok, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("poll panicked", "feed", id, "panic", p)
			obs, pd, ok, panicked = schedule.Observation{}, nil, true, true
		}
	}()
	obs, pd, ok = s.begin(ctx, id)
	return obs, pd, ok, false
}

// safeComplete is complete with a panic turned into a miss.
func (s *Service) safeComplete(pd *pendingPoll) (obs schedule.Observation) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("poll panicked", "feed", pd.p.f.ID, "panic", p)
			obs = schedule.Observation{}
		}
	}()
	return s.complete(pd)
}
