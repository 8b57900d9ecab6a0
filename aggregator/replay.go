package aggregator

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// replay rebuilds a feed's policy from its stored observations, fed one
// at a time (a pass over many feeds hands them over as it reads them).
type replay struct {
	f    storage.Feed
	g    *feedGuard
	next time.Time // the policy's answer to the last observation
	n    int
}

func newReplay(f storage.Feed) (*replay, error) {
	p, err := schedule.ByName(f.Policy, f.ID)
	if err != nil {
		return nil, err
	}
	return &replay{f: f, g: &feedGuard{policy: p, respect: !f.IgnoreCache, sleep: f.Sleep}}, nil
}

// add feeds one stored observation (the next oldest) to the policy.
func (r *replay) add(o storage.Observation) {
	r.n++
	if o.Err != "" {
		return // the live policy never learned from errors either
	}
	r.next = r.g.policy.Next(o.Schedule())
	r.g.prevPoll = stampOf(o.At)
	r.g.fedAt = r.g.prevPoll
}

// FirstFetchRate is how many first fetches a second a node starts for
// feeds never polled, subscribed in bulk, imported or found at a load
// (a restart during an import does not fetch the rest of it at once): an
// import of 10^6 feeds reaches them all in under three hours instead of
// asking for a million fetches at once.
const FirstFetchRate = 100

// resumeAt is the feed's first poll when it resumes its learned
// prediction at now: the policy's answer to the last observation, unless
// it is already past (then now), and not before the feed's Retry-After.
func (r *replay) resumeAt(now time.Time) time.Time {
	first := now
	if r.next.After(now) {
		first = r.next
	}
	if r.f.RetryAfter.After(first) {
		first = r.f.RetryAfter
	}
	return first
}

// install schedules the replayed feed; with resume, its first poll is
// the learned prediction.
func (s *Service) install(r *replay, now time.Time, resume bool) error {
	f := r.f
	first := now
	if resume {
		first = r.resumeAt(now)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("feed resumes its learned schedule", "feed", f.ID, "observations", r.n, "prediction", r.next, "first", first)
		}
	}
	return s.installAt(r, now, first)
}

// installAt schedules the replayed feed with its first poll at first. A
// feed scheduled already (a subscription and the cluster's listing that
// found it, at once) is left as it is: schedule.ErrFeedExists.
func (s *Service) installAt(r *replay, now, first time.Time) error {
	host := ""
	if u, err := url.Parse(r.f.URL); err == nil {
		host = u.Hostname()
	}
	return s.installGuard(r.f.ID, r.g, host, r.f.Weight, now, first)
}

// installGuard schedules feed id with guard g, its first poll at first.
// A feed scheduled already is left as it is: schedule.ErrFeedExists.
// When the scheduler refuses it, g is forgotten.
func (s *Service) installGuard(id uint64, g *feedGuard, host string, weight float64, now, first time.Time) error {
	s.mu.Lock()
	if s.guards[id] != nil {
		s.mu.Unlock()
		return fmt.Errorf("feed %d: %w", id, schedule.ErrFeedExists)
	}
	s.guards[id] = g
	s.mu.Unlock()
	// The scheduler places the first poll with First(policy, now): the
	// starter answers with the resumed prediction. A feed never polled
	// (not one queued from a digest, whose record is still to read)
	// waits behind the polled ones under a backlog (schedule.Feed.Fresh).
	g.mu.Lock()
	fresh := g.prevPoll.isZero() && !g.deferred
	g.mu.Unlock()
	if err := s.sched.Add(int(id), schedule.Feed{
		Policy: starter{g, first}, Host: host, Weight: weight, Fresh: fresh,
	}, now); err != nil {
		s.mu.Lock()
		if s.guards[id] == g {
			delete(s.guards, id)
		}
		s.mu.Unlock()
		return err
	}
	s.signal() // the live loop may have a free fetch slot for it
	return nil
}
