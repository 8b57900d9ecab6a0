package aggregator

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Start-up from stored policy states. A store that keeps each feed's
// policy state (storage.Store: the state is folded in by Learn with every
// observation written) is loaded from the feed records and those states
// alone, in order of the feeds' learned next fetch, so the feeds due
// first are polled first. A feed without a state (a store written before
// states were kept, a policy that saves none) is rebuilt by replaying its
// observations, and the state the replay reaches is stored for the next
// start (storage.InitPolicyState).

// stateStore is a Store that keeps policy states.
type stateStore interface {
	SetLearner(storage.Learner)
	StateOrder() ([]storage.StateRef, error)
	FeedsWithStates(ids []uint64, fn func(f storage.Feed, st *storage.PolicyState) error) error
	InitPolicyStates(inits []storage.StateInit) (int, error)
}

// loadChunk is how many feeds one read transaction of a load takes: a
// long read would keep the store from growing its file meanwhile.
const loadChunk = 1024

// Learn is the storage.Learner of the polling service: it folds
// observation o of feed f into its policy state as a replay of the
// feed's observations would (fetch errors are not learned). ok is false
// for a policy that saves no state (schedule.Stateful) or a state it
// cannot restore (one saved under another policy): the feed is then
// rebuilt by replay at the next start.
func Learn(f *storage.Feed, prev *storage.PolicyState, o *storage.Observation) (storage.PolicyState, bool) {
	if o.Err != "" {
		return *prev, true
	}
	p, err := schedule.ByName(f.Policy, f.ID)
	if err != nil {
		return storage.PolicyState{}, false
	}
	sp, ok := p.(schedule.Stateful)
	if !ok {
		return storage.PolicyState{}, false
	}
	if len(prev.Policy) > 0 {
		if err := sp.RestoreState(prev.Policy); err != nil {
			return storage.PolicyState{}, false
		}
	}
	next := p.Next(o.Schedule())
	return storage.PolicyState{Next: next, Last: o.At, Policy: sp.AppendState(nil)}, true
}

// LoadProgress is how far a load has come.
type LoadProgress struct {
	Loading bool // a load is under way
	Done    int  // feeds of the store looked at (scheduled or not)
	Total   int  // feeds of the store
	// Replayed counts the feeds rebuilt from their observations.
	Replayed int
}

// loadState is the progress of the service's load.
type loadState struct {
	loading             atomic.Bool
	done, total, replay atomic.Int64
}

// LoadProgress reports how far the load (Load, LoadInBackground) has
// come.
func (s *Service) LoadProgress() LoadProgress {
	return LoadProgress{
		Loading: s.load.loading.Load(), Done: int(s.load.done.Load()),
		Total: int(s.load.total.Load()), Replayed: int(s.load.replay.Load()),
	}
}

// LoadInBackground is Load while the service runs: on a store that keeps
// policy states it returns at once and schedules the feeds in order of
// their learned next fetch (LoadProgress tells how far it is), each feed
// polled as soon as it is scheduled and due; the channel receives the
// load's error (nil when every feed was looked at) and is closed. Other
// stores are loaded before it returns, as by Load.
func (s *Service) LoadInBackground(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	ss, ok := s.opt.Store.(stateStore)
	if !ok || s.clustered() {
		done <- s.loadAll(ctx)
		close(done)
		return done
	}
	s.load.loading.Store(true)
	go func() {
		defer close(done)
		done <- s.loadStored(ctx, ss)
	}()
	return done
}

// loadStored loads every remote feed this node owns from its record and
// policy state, in order of the learned next fetch.
func (s *Service) loadStored(ctx context.Context, ss stateStore) error {
	s.load.loading.Store(true)
	defer s.load.loading.Store(false)
	refs, err := ss.StateOrder()
	if err != nil {
		return fmt.Errorf("aggregator: load feeds: %w", err)
	}
	s.load.total.Store(int64(len(refs)))
	ids := make([]uint64, 0, loadChunk)
	var restored []*replay
	var replay []storage.Feed
	for at := 0; at < len(refs); at += loadChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		ids, restored, replay = ids[:0], restored[:0], replay[:0]
		for _, r := range refs[at:min(at+loadChunk, len(refs))] {
			ids = append(ids, r.ID)
		}
		err := ss.FeedsWithStates(ids, func(f storage.Feed, st *storage.PolicyState) error {
			if f.Kind != storage.KindRemote || !s.owns(f.ID) || s.guard(f.ID) != nil {
				return nil // not polled, or subscribed since the listing
			}
			if st != nil {
				if r, err := restoreFeed(f, st); err == nil {
					restored = append(restored, r)
					return nil
				}
			}
			replay = append(replay, f)
			return nil
		})
		if err != nil {
			return fmt.Errorf("aggregator: load feeds: %w", err)
		}
		now := s.opt.Clock.Now()
		for _, r := range restored {
			if r.f.Polls == 0 && r.g.prevPoll == 0 && r.next.IsZero() {
				// Never polled (a bulk import cut short by a restart): its
				// first fetch is paced as bulk subscriptions pace theirs.
				if err := s.installAt(r, now, s.firstFetch(r, now)); err != nil {
					s.log.Error("cannot schedule feed", "feed", r.f.ID, "url", sanitize.RedactURL(r.f.URL), "err", err)
				}
				continue
			}
			if err := s.install(r, now, true); err != nil {
				s.log.Error("cannot schedule feed", "feed", r.f.ID, "url", sanitize.RedactURL(r.f.URL), "err", err)
			}
		}
		var inits []storage.StateInit
		for _, f := range replay {
			in, err := s.replayFeed(f, now)
			if err != nil {
				s.log.Error("cannot schedule feed", "feed", f.ID, "url", sanitize.RedactURL(f.URL), "err", err)
			} else if in != nil {
				inits = append(inits, *in)
			}
		}
		if len(inits) > 0 {
			if _, err := ss.InitPolicyStates(inits); err != nil {
				s.log.Warn("cannot store the replayed policy states", "feeds", len(inits), "err", err)
			}
		}
		s.load.done.Add(int64(len(ids)))
	}
	return nil
}

// restoreFeed rebuilds feed f's policy from its stored state.
func restoreFeed(f storage.Feed, st *storage.PolicyState) (*replay, error) {
	r, err := newReplay(f)
	if err != nil {
		return nil, err
	}
	sp, ok := r.g.policy.(schedule.Stateful)
	if !ok {
		return nil, fmt.Errorf("policy %q saves no state", f.Policy)
	}
	if len(st.Policy) > 0 {
		if err := sp.RestoreState(st.Policy); err != nil {
			return nil, err
		}
	}
	r.next = st.Next
	r.g.prevPoll = stampOf(st.Last)
	r.g.fedAt = r.g.prevPoll
	return r, nil
}

// replayFeed schedules feed f with its policy rebuilt from its stored
// observations (a feed never polled at the next of the node's first-fetch slots); when
// the policy saves a state, it returns the state the replay reached, for
// storage.InitPolicyStates.
func (s *Service) replayFeed(f storage.Feed, now time.Time) (*storage.StateInit, error) {
	obs, err := s.opt.Store.Observations(f.ID, 0)
	if err != nil {
		return nil, err
	}
	r, err := newReplay(f)
	if err != nil {
		return nil, err
	}
	for _, o := range obs {
		r.add(o)
	}
	s.load.replay.Add(1)
	var in *storage.StateInit
	if sp, ok := r.g.policy.(schedule.Stateful); ok {
		in = &storage.StateInit{ID: f.ID, State: storage.PolicyState{Next: r.next, Last: r.g.prevPoll.time(), Policy: sp.AppendState(nil)}}
		if n := len(obs); n > 0 {
			in.Newest = obs[n-1].At
		}
	}
	if f.Polls == 0 && len(obs) == 0 {
		return in, s.installAt(r, now, s.firstFetch(r, now))
	}
	return in, s.install(r, now, true)
}

// firstFetch is the first fetch of a feed never polled, loaded at now:
// the next of the node's first-fetch slots, unless the feed waits longer anyway (its
// Retry-After), which then takes no slot.
func (s *Service) firstFetch(r *replay, now time.Time) time.Time {
	if at := r.resumeAt(now); at.After(now) {
		return at
	}
	return s.fresh.next(now)
}
