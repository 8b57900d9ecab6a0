package schedule

import (
	"math"
	"time"
)

// Observation is what one poll of a feed saw. It is the only thing a Policy
// learns from: a policy never reads the wall clock, it is told the time of
// the poll in At.
type Observation struct {
	// At is when the poll's response arrived ("now" for the policy).
	At time.Time
	// Hit reports that the poll found at least one new item.
	Hit bool
	// Published holds the publish times of the new items, oldest first.
	// It may be empty on a hit when nothing better than At is known; the
	// aggregator fills it in the order DESIGN.md gives (publisher's phase
	// hint, Last-Modified, plausible item date, miss/hit bracket).
	Published []time.Time
	// MoreData reports that the source said more data is waiting (a
	// truncated feed, a paged API): DPT pulls again immediately.
	MoreData bool
	// Hints are what the publisher told its subscribers.
	Hints Hints
}

// Hints are publisher-provided scheduling hints. Zero values mean "not given".
// Encoded as JSON (a stored observation's hints), a field that is zero is
// left out.
type Hints struct {
	// Desync is the publisher's intentional desynchronisation interval:
	// subscribers spread their polls uniformly over [0, Desync) after the
	// predicted publish time so that they do not all arrive at once.
	Desync time.Duration `json:",omitzero"`
	// Phase is the publisher's phase adjustment: the age of its newest item
	// when the request arrived. When HasPhase is set the newest publish time
	// is At-Phase, which beats any other estimate.
	Phase    time.Duration `json:",omitzero"`
	HasPhase bool          `json:",omitzero"`
	// CacheFor is the HTTP cache lifetime (Cache-Control max-age, Expires,
	// RSS <ttl>) or a Retry-After delay: a lower bound on the next poll for
	// feeds that honour it. Policies ignore it; see Respect.
	CacheFor time.Duration `json:",omitzero"`
	// Period is the update interval the publisher states (RSS syndication
	// module: sy:updatePeriod / sy:updateFrequency). It is a hint, not a
	// bound: many publishers state a default ("hourly") whatever they
	// do. Auto's cold-start probes are never further apart than it
	// until ColdPeriods of it have passed without the data it expects.
	Period time.Duration `json:",omitzero"`
	// Due is the publisher's planned next update, as a delay after At,
	// when HasDue is set: the publisher knows it from its own schedule (a
	// pipe's next fetch of the inputs it waits for, a cron trigger), not
	// from statistics over its past publishes. Auto polls right then.
	Due    time.Duration `json:",omitzero"`
	HasDue bool          `json:",omitzero"`
}

// Newest returns the best estimate of the publish time of the newest item
// seen by obs: the publisher's phase hint first, then the newest entry of
// Published, then the poll time itself. ok is false on a miss.
func (o *Observation) Newest() (t time.Time, ok bool) {
	if !o.Hit {
		return time.Time{}, false
	}
	if o.Hints.HasPhase && o.Hints.Phase >= 0 {
		return o.At.Add(-o.Hints.Phase), true
	}
	if n := len(o.Published); n > 0 {
		t = o.Published[n-1]
		if t.After(o.At) { // a publish time in the future is not plausible
			t = o.At
		}
		return t, true
	}
	return o.At, true
}

// Policy decides when to poll one feed next. Implementations are
// deterministic state machines: the same sequence of observations always
// yields the same sequence of times, so the very same code runs live and in
// simulation. A Policy is not safe for concurrent use; the scheduler owns it.
type Policy interface {
	// Next records obs and returns the time of the next poll. The result is
	// never before obs.At (returning obs.At means "poll again now").
	Next(obs Observation) time.Time
}

// Starter is implemented by policies that want their first poll somewhere
// other than the moment the feed is added (a fixed schedule aligned to its
// phase, a cron expression).
type Starter interface {
	Start(now time.Time) time.Time
}

// First returns the first poll time of p for a feed added at now.
func First(p Policy, now time.Time) time.Time {
	if s, ok := p.(Starter); ok {
		if t := s.Start(now); !t.Before(now) {
			return t
		}
	}
	return now
}

// Respect applies the publisher's cache lifetime to a policy's choice: the
// next poll is not before obs.At+obs.Hints.CacheFor. Feeds that opt out of
// cache hints simply do not call it.
func Respect(next time.Time, obs Observation) time.Time {
	if obs.Hints.CacheFor > 0 {
		if min := obs.At.Add(obs.Hints.CacheFor); next.Before(min) {
			return min
		}
	}
	return next
}

// MaxDelay caps every backoff: no policy waits longer than this between two
// polls of a feed.
const MaxDelay = 48 * time.Hour

// clampNext keeps a policy's answer within [now, now+MaxDelay].
func clampNext(now, next time.Time) time.Time {
	if next.Before(now) {
		return now
	}
	if max := now.Add(MaxDelay); next.After(max) {
		return max
	}
	return next
}

// addSeconds returns base (Unix nanoseconds) plus s seconds, saturating at
// the ends of int64 rather than wrapping: a retry exponentially far off
// (2^40 periods) stays in the future, where clampNext caps it at MaxDelay,
// instead of wrapping into the past and being polled at once. NaN adds
// nothing.
func addSeconds(base int64, s float64) int64 {
	return addNanos(base, s*1e9)
}

// addNanos returns base plus d nanoseconds, saturating (see addSeconds).
func addNanos(base int64, d float64) int64 {
	switch {
	case math.IsNaN(d):
		return base
	case d >= 0:
		if d >= math.MaxInt64 || base > 0 && int64(d) > math.MaxInt64-base {
			return math.MaxInt64
		}
	default:
		if d <= math.MinInt64 || base < 0 && int64(d) < math.MinInt64-base {
			return math.MinInt64
		}
	}
	return base + int64(d)
}
