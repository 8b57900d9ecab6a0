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

// install schedules the replayed feed; with resume, its first poll is
// the learned prediction.
func (s *Service) install(r *replay, now time.Time, resume bool) error {
	f := r.f
	first := now
	if resume {
		// Resume the prediction: the policy's answer to the last
		// observation, unless it is already past (then poll now).
		if r.next.After(now) {
			first = r.next
		}
		if f.RetryAfter.After(first) {
			first = f.RetryAfter
		}
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
	f, g := r.f, r.g
	s.mu.Lock()
	if s.guards[f.ID] != nil {
		s.mu.Unlock()
		return fmt.Errorf("feed %d: %w", f.ID, schedule.ErrFeedExists)
	}
	s.guards[f.ID] = g
	s.mu.Unlock()
	host := ""
	if u, err := url.Parse(f.URL); err == nil {
		host = u.Hostname()
	}
	// The scheduler places the first poll with First(policy, now): the
	// starter answers with the resumed prediction.
	if err := s.sched.Add(int(f.ID), schedule.Feed{
		Policy: starter{g, first}, Host: host, Weight: f.Weight,
	}, now); err != nil {
		s.mu.Lock()
		if s.guards[f.ID] == g {
			delete(s.guards, f.ID)
		}
		s.mu.Unlock()
		return err
	}
	s.signal() // the live loop may have a free fetch slot for it
	return nil
}
