package aggregator

import (
	"context"
	"errors"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/storage/cluster"
)

// DefaultResync is how often a clustered service (an Owner other than
// cluster.Everything) lists the store's feeds to pick up the ones other
// nodes created or deleted in its shards, when ServiceOptions.Resync is
// zero.
const DefaultResync = 15 * time.Second

// busyRetry is how soon a feed the service could not schedule again yet
// (its fetch as a lost feed was still under way) is tried again.
const busyRetry = time.Second

// owns reports whether this node polls feed id.
func (s *Service) owns(id uint64) bool { return s.opt.Owner.OwnsFeed(id) }

// clustered reports whether other nodes share the feeds.
func (s *Service) clustered() bool { return s.opt.Owner != cluster.Everything }

// drop stops polling feed id here (another node owns it now, or it was
// deleted elsewhere). A fetch under way finishes; the scheduler forgets
// the feed when it returns.
func (s *Service) drop(id uint64) bool {
	s.mu.Lock()
	_, had := s.guards[id]
	delete(s.guards, id)
	s.mu.Unlock()
	s.sched.Remove(int(id))
	return had
}

// owned runs until ctx ends: whenever the Owner's answers change, and
// every Resync, it schedules the owned feeds the service does not poll
// yet, at their learned prediction (their policy relearns the stored
// observations, which every node reads alike), and stops polling the
// feeds it no longer owns.
func (s *Service) owned(ctx context.Context) {
	if !s.clustered() {
		return // a single node owns every feed, for good
	}
	// Changed is read before each reconcile, so a change during one
	// fires the next; the first catches changes since Load.
	changed := s.opt.Owner.Changed()
	for {
		busy, err := s.reconcile()
		if err != nil {
			s.log.Warn("cannot list feeds to follow the cluster's shards", "err", err)
		}
		wait := s.opt.Resync
		if busy || err != nil {
			wait = busyRetry
		}
		var timer <-chan time.Time
		var t schedule.Timer
		if wait > 0 {
			t = s.opt.Clock.NewTimer(wait)
			timer = t.C()
		}
		select {
		case <-ctx.Done():
		case <-changed:
			changed = s.opt.Owner.Changed()
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// reconcile makes the scheduled feeds the owned remote feeds of the store.
// busy reports a feed that could not be scheduled yet (its fetch from
// before it was lost is still under way).
func (s *Service) reconcile() (busy bool, err error) {
	feeds, err := s.opt.Store.Feeds()
	if err != nil {
		return false, err
	}
	now := s.opt.Clock.Now()
	listed := make(map[uint64]bool, len(feeds))
	took, lost := 0, 0
	for _, f := range feeds {
		if f.Kind != storage.KindRemote {
			continue
		}
		listed[f.ID] = true
		has := s.guard(f.ID) != nil
		switch own := s.owns(f.ID); {
		case own && !has:
			err := s.schedule(f, now, true)
			switch {
			case err == nil:
				took++
			case errors.Is(err, schedule.ErrFeedBusy):
				s.mu.Lock()
				delete(s.guards, f.ID)
				s.mu.Unlock()
				busy = true
			default:
				s.mu.Lock()
				delete(s.guards, f.ID)
				s.mu.Unlock()
				s.log.Error("cannot schedule feed", "feed", f.ID, "url", RedactURL(f.URL), "err", err)
			}
		case !own && has:
			if s.drop(f.ID) {
				lost++
			}
		}
	}
	// Feeds deleted on another node.
	s.mu.Lock()
	var gone []uint64
	for id := range s.guards {
		if !listed[id] {
			gone = append(gone, id)
		}
	}
	s.mu.Unlock()
	for _, id := range gone {
		if _, err := s.opt.Store.Feed(id); errors.Is(err, storage.ErrFeedNotFound) {
			s.drop(id)
			s.removed(id)
		}
	}
	if took > 0 || lost > 0 {
		s.log.Info("feeds follow the cluster's shards", "taken", took, "lost", lost, "polled_here", s.sched.Len())
	}
	return busy, nil
}
