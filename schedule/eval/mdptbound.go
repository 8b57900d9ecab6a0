package eval

import (
	"fmt"
	"time"

	"github.com/slogfeed/slogfeed/schedule/sim"
)

// mdptOracle describes the bound rows of the mdpt scenario: a tracker that
// knows each source's true period and how it publishes, so that it aims
// every poll at the exact expected publish, which no policy can learn
// better, but knows neither a jitter draw nor a loss before a poll reveals
// it. It is an oracle, not a policy: it reads the sources' models, and it
// exists to show what polling could reach at best under the scenario's
// accounting. Its margin and retry are given, not learned.
//
// The Fig. 23 publishers put each publish one period after the previous one
// plus a fresh Laplace draw (sim.Model), so the source's exact phase is the
// publish time of its newest fetched reading: the next try is expected one
// period after it (k periods after it when k−1 tries were lost). The
// oracle polls every source but the on-demand one at the expected publish
// plus Margin; after a miss it polls once more Retry later when Retry > 0,
// and otherwise (or when the retry misses too) moves to the next try, Margin
// after the next expected publish. A miss tells it nothing else: the
// simulated publisher sends no hints, and a phase hint would only repeat the
// newest publish time it already knows.
//
// The on-demand source (the 500 s one) is polled only when it would
// complete a round: when exactly one other source has new data and it has
// none, at the first try expected after its last poll plus Margin, or at once
// when that has passed. It is thus polled once a round, the fewest polls
// that keep it in every round.
type mdptOracle struct {
	Margin time.Duration // poll this long after the expected publish
	Retry  time.Duration // 0: no retry; else one retry this long after a miss
	Demand int           // index of the source polled on demand
}

// Name is the row's policy name, e.g. "oracle-m30s" or "oracle-m30s-r20s".
func (o mdptOracle) Name() string {
	n := fmt.Sprintf("oracle-m%gs", o.Margin.Seconds())
	if o.Retry > 0 {
		n += fmt.Sprintf("-r%gs", o.Retry.Seconds())
	}
	return n
}

// oracleSource is the oracle's view of one source.
type oracleSource struct {
	period   time.Duration
	ref      time.Time // publish time of the newest fetched reading (or the try before the first)
	k        int       // the try aimed at is expected at ref + k·period
	retried  bool      // the try aimed at has had its retry
	next     time.Time // next poll (on-demand source: when needed)
	lastPoll time.Time
}

func (s *oracleSource) expected() time.Time { return s.ref.Add(time.Duration(s.k) * s.period) }

// aimAfter sets k to the first try whose poll (expected + margin) is after t.
func (s *oracleSource) aimAfter(t time.Time, margin time.Duration) {
	for !s.expected().Add(margin).After(t) {
		s.k++
	}
}

// observe updates the source after a poll at t that fetched readings
// published at pub (none on a miss); retry is 0 for no retry.
func (s *oracleSource) observe(t time.Time, pub []time.Time, margin, retry time.Duration) {
	s.lastPoll = t
	if len(pub) > 0 {
		s.ref, s.k, s.retried = pub[len(pub)-1], 1, false
	} else if retry > 0 && !s.retried {
		s.retried = true
		s.next = t.Add(retry)
		return
	} else {
		s.retried = false
		s.k++
	}
	s.aimAfter(t, margin)
	s.next = s.expected().Add(margin)
}

// runMDPTOracle drives the oracle against the sources (models[i] generated
// items[i]) under the same republish books as every other mdpt row.
func runMDPTOracle(items [][]sim.Item, models []sim.Model, start, from, end time.Time, o mdptOracle) mdptBook {
	periods := make([]time.Duration, len(models))
	for i, m := range models {
		periods[i] = m.Period
	}
	r := newRepublisher(items, periods, 2, from)
	src := make([]oracleSource, len(items))
	for i, m := range models {
		s := &src[i]
		s.period = m.Period
		s.ref = start.Add(m.Phase - m.Period)
		s.k = 1
		s.lastPoll = start.Add(-time.Nanosecond)
		s.next = s.expected().Add(o.Margin)
	}
	needed := func() bool {
		if r.has[o.Demand] {
			return false
		}
		n := 0
		for i, h := range r.has {
			if h && i != o.Demand {
				n++
			}
		}
		return n == 1
	}
	// demandAt is when the on-demand source is polled while it is needed.
	demandAt := func(now time.Time) time.Time {
		s := &src[o.Demand]
		s.aimAfter(s.lastPoll, o.Margin)
		return later(now, s.expected().Add(o.Margin))
	}
	now := start
	for guard := 0; guard < 10_000_000; guard++ {
		which, at := -1, time.Time{}
		for i := range src {
			t := src[i].next
			if i == o.Demand {
				if !needed() {
					continue
				}
				t = demandAt(now)
			}
			if which < 0 || t.Before(at) {
				which, at = i, t
			}
		}
		if which < 0 || !at.Before(end) {
			break
		}
		now = later(now, at)
		obs := r.poll(which, now)
		retry := o.Retry
		if which == o.Demand {
			retry = 0
		}
		src[which].observe(now, obs.Published, o.Margin, retry)
		r.maybeRepublish(now)
	}
	return r.res
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// mdptOracles is the sweep the mdpt scenario reports: margins from 10 s to
// 60 s, each without a retry and with one retry 20 s after a miss (which
// finds a reading that was late by up to 20 s more with probability
// 1 − e^(−20/b), 86% at b = 10 s).
func mdptOracles() []mdptOracle {
	var out []mdptOracle
	for _, m := range []time.Duration{10, 20, 30, 35, 40, 50, 60} {
		for _, r := range []time.Duration{0, 20} {
			out = append(out, mdptOracle{Margin: m * time.Second, Retry: r * time.Second})
		}
	}
	return out
}

// oracleBoundNote states what the oracle rows reach: the lowest mean
// latency at ≥ 96% hit with at most polls source polls, and the lowest mean
// latency at any hit rate.
func oracleBoundNote(rep *Report, oracles []mdptOracle, polls int) string {
	var within, low Row
	okWithin, okAny := false, false
	for _, o := range oracles {
		r, found := find(rep, o.Name())
		if !found {
			continue
		}
		if !okAny || r.MeanLatencyS < low.MeanLatencyS {
			low, okAny = r, true
		}
		if r.HitPct >= 96 && r.Polls <= polls && (!okWithin || r.MeanLatencyS < within.MeanLatencyS) {
			within, okWithin = r, true
		}
	}
	desc := func(r Row) string {
		return fmt.Sprintf("%.1f s (%s, hit %.1f%%, %d polls)", r.MeanLatencyS, r.Policy, r.HitPct, r.Polls)
	}
	best := "none"
	if okWithin {
		best = desc(within)
	}
	lowest := "none"
	if okAny {
		lowest = desc(low)
	}
	return fmt.Sprintf("oracle rows (not policies: they know each source's true period and phase): lowest mean at ≥ 96%% hit within %d polls: %s; lowest mean at any hit: %s", polls, best, lowest)
}
