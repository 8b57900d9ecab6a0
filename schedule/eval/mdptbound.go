package eval

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// mdptOracle describes the oracle rows of the mdpt scenario: MDPT's
// forecast planning (schedule.WithForecast) given what no policy can
// learn exactly, each source's true period, phase and jitter scale, in
// place of learned trackers (modelTracker). It knows neither a jitter
// draw nor a loss before a poll reveals it. The rows sweep the early share
// the planning aims at.
//
// They are heuristics, not bounds: the best of the plans tried, with the
// knowledge a policy could at most learn. Nothing proves that another use
// of the same knowledge (another choice of which source to poll when, or
// of when to give up on a round) could not do better.
type mdptOracle struct {
	Share float64 // early share aimed at
}

// Name is the row's policy name, e.g. "oracle-q1.2%".
func (o mdptOracle) Name() string {
	return "oracle-q" + strconv.FormatFloat(100*o.Share, 'f', -1, 64) + "%"
}

// modelTracker is a source tracker that knows the source's model: its
// period, the phase (the publish time of its newest fetched reading, or
// the try before the first one), and the jitter scale. The Fig. 23
// publishers put each publish one period after the previous one plus a
// fresh Laplace draw (sim.Model), so the next publish is expected one
// period after the newest one, and a poll m after it is early with
// probability ½·e^(−m/b).
type modelTracker struct {
	period time.Duration
	b      float64 // Laplace scale, seconds
	share  float64
	last   time.Time
}

// Next records obs and polls at the share's margin after the first
// expected publish whose poll is after obs.At.
func (t *modelTracker) Next(obs schedule.Observation) time.Time {
	if n, ok := obs.Newest(); ok && n.After(t.last) {
		t.last = n
	}
	d, _ := t.Margin(t.share)
	at := t.last.Add(t.period + d)
	for !at.After(obs.At) {
		at = at.Add(t.period)
	}
	return at
}

// PredictedPublish is one period after the newest publish.
func (t *modelTracker) PredictedPublish() (time.Time, bool) { return t.last.Add(t.period), true }

// Margin is where only a share q of the Laplace jitter's publishes are
// still to come: b·ln(1/(2q)).
func (t *modelTracker) Margin(q float64) (time.Duration, bool) {
	if t.b <= 0 {
		return 0, true
	}
	return time.Duration(t.b * math.Log(1/(2*q)) * float64(time.Second)), true
}

// State gives the period and the newest publish.
func (t *modelTracker) State() schedule.State {
	return schedule.State{Median: t.period, LastPublish: t.last, HasPublish: true}
}

// runMDPTOracle drives MDPT's forecast planning with model trackers
// against the sources of r (models[i] generated r.items[i]).
func runMDPTOracle(r *republisher, models []sim.Model, start time.Time, o mdptOracle) mdptBook {
	track := func(i int, _ ...schedule.Option) schedule.Policy {
		m := models[i]
		return &modelTracker{period: m.Period, b: m.JitterScale.Seconds(), share: o.Share, last: start.Add(m.Phase - m.Period)}
	}
	return runMDPTPolicy(r, start, 0, schedule.WithTracker(track), schedule.WithForecast(o.Share), schedule.WithTrackerMargins())
}

// mdptOracles is the sweep the mdpt scenario reports: early shares from
// 0.5% to 3%.
func mdptOracles() []mdptOracle {
	var out []mdptOracle
	for _, q := range []float64{0.005, 0.008, 0.01, 0.012, 0.015, 0.02, 0.03} {
		out = append(out, mdptOracle{Share: q})
	}
	return out
}

// oracleNote states what the oracle rows reach: the lowest mean latency at
// ≥ 96% hit (of the source polls and of the owed outputs) with at most
// polls source polls, and the lowest mean latency at any hit rate.
func oracleNote(rep *Report, oracles []mdptOracle, polls int) string {
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
		out, _ := r.Extra["out_hit_pct"].(float64)
		if r.HitPct >= mdptHit && out >= mdptHit && r.Polls <= polls && (!okWithin || r.MeanLatencyS < within.MeanLatencyS) {
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
	return fmt.Sprintf("oracle rows (heuristics, not bounds: MDPT's forecast planning given each source's true period, phase and jitter scale): lowest mean at ≥ 96%% hit within %d polls: %s; lowest mean at any hit: %s", polls, best, lowest)
}
