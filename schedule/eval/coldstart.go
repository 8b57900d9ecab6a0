package eval

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// ColdStart measures how fast a new subscription learns: fresh
// subscriptions to publishers of periods 10 s to 1 day, steady or lossy and
// jittery, either still empty when subscribed (the first reading comes at
// a random instant of the first period) or with a backlog of 20 readings.
// Latency, hit % and polls cover the first 10 periods from the
// subscription. The default of 200 runs per point keeps the sampling
// error of a point's mean latency under about a point of the period: with
// 20 runs, whether two or five runs lose their first readings moves it by
// ±3 points, more than the distance of auto's figures from the goals.
func ColdStart() Scenario {
	return Scenario{
		Name: "cold-start",
		Usage: "fresh subscriptions (periods 10 s…1 day; empty or 20-item backlog; steady or lossy): first 10 periods' latency, polls, time to the first steady hit, --runs per point (200)\n" +
			"auto vs fixed polling at the true period (fixed-avg), dpt-l and the peers' policies",
		Run: runColdStart,
	}
}

// coldStartPolicies are compared in the cold-start scenario, in table order.
var coldStartPolicies = []string{"fixed-avg", "auto", "dpt-l", "miniflux", "commafeed", "newsblur"}

// coldPublisher is one kind of publisher of the cold-start scenario.
type coldPublisher struct {
	name     string
	pss, pfs float64
	jitter   float64 // Laplace scale as a share of the period
}

var coldPublishers = []coldPublisher{
	{name: "steady", pss: 1, pfs: 1, jitter: 0.005},
	{name: "lossy", pss: 0.9, pfs: 0.8, jitter: 0.03},
}

var coldPeriods = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, time.Hour, 24 * time.Hour}

// Acceptance bounds of the cold start, over the first coldPeriodsN periods:
// auto's mean and p90 latency as shares of the period, its polls as a
// multiple of fixed polling at the period.
const (
	coldPeriodsN  = schedule.ColdPeriods
	coldBacklog   = 20
	coldMeanShare = 0.20
	coldP90Share  = 0.50
	coldPollsX    = 3.0
	// coldRuns is the default number of runs per point.
	coldRuns = 200
	// coldSteadyRun is how many hits in a row make a hit "steady".
	coldSteadyRun = 3
)

// coldOutcome is what one policy did on one publisher.
type coldOutcome struct {
	res   sim.Result
	ttfs  float64 // time from the subscription to the first steady hit, in periods (NaN: none)
	polls int
}

func runColdStart(ctx context.Context, opt Options) (*Report, error) {
	runs := orDefault(opt.Runs, coldRuns)
	type point struct {
		period  time.Duration
		backlog int
		pub     coldPublisher
	}
	var points []point
	for _, pub := range coldPublishers {
		for _, bl := range []int{0, coldBacklog} {
			for _, p := range coldPeriods {
				points = append(points, point{p, bl, pub})
			}
		}
	}
	units, err := parallel(ctx, len(points)*runs, func(u int) []coldOutcome {
		pt, run := points[u/runs], u%runs
		rng := rngFor(opt.Seed, "cold-start", pt.pub.name, pt.backlog, pt.period, run)
		start := epoch
		m := sim.Model{
			Period: pt.period, Pss: pt.pub.pss, Pfs: pt.pub.pfs, RandomPhase: true,
			JitterScale: time.Duration(pt.pub.jitter * float64(pt.period)),
		}
		from := start
		if pt.backlog > 0 {
			from = start.Add(-time.Duration(2*pt.backlog) * pt.period)
		}
		window := start.Add(coldPeriodsN * pt.period)
		items := m.Generate(rng, from, window)
		phase := time.Duration(rng.Int64N(int64(pt.period)))
		out := make([]coldOutcome, len(coldStartPolicies))
		for i, name := range coldStartPolicies {
			var p schedule.Policy = schedule.NewFixed(pt.period, phase)
			if name != "fixed-avg" {
				var err error
				if p, err = schedule.ByName(name, seedFor(opt.Seed, name, run)); err != nil {
					panic("eval: cold-start policy " + name + ": " + err.Error())
				}
			}
			out[i] = coldRun(p, items, start, window, pt.period, pt.backlog)
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: "cold-start", Columns: []string{"publisher", "backlog", "period_s", "mean_pct", "p90_pct", "polls_x_fixed", "ttfs_periods"}}
	for pi, pt := range points {
		var fixedPolls float64
		for ni, name := range coldStartPolicies {
			rs := make([]sim.Result, runs)
			var ttfs []float64
			polls := 0
			for r := range rs {
				o := units[pi*runs+r][ni]
				rs[r] = o.res
				polls += o.polls
				if !math.IsNaN(o.ttfs) {
					ttfs = append(ttfs, o.ttfs)
				}
			}
			rw := row(name, sim.Merge(rs...), map[string]any{
				"publisher": pt.pub.name, "backlog": pt.backlog, "period_s": pt.period.Seconds(), "runs": runs,
			})
			rw.Polls = polls
			if name == "fixed-avg" {
				fixedPolls = float64(polls)
			}
			per := pt.period.Seconds()
			var steady any // none when no run had a steady hit
			if len(ttfs) > 0 {
				med, _, _, _ := sim.Summarize(ttfs)
				steady = round3(med)
			}
			rw.Extra = map[string]any{
				"mean_pct":      round1(100 * rw.MeanLatencyS / per),
				"p90_pct":       round1(100 * rw.P90LatencyS / per),
				"polls_x_fixed": round3(float64(polls) / max(fixedPolls, 1)),
				// median over runs; runs without a steady hit in the
				// window are left out and counted in steady_runs
				"ttfs_periods": steady,
				"steady_runs":  len(ttfs),
			}
			rep.Rows = append(rep.Rows, rw)
		}
	}
	logf(opt, "cold-start: %d points × %d runs", len(points), runs)
	rep.Notes = coldStartChecks(rep)
	return rep, nil
}

// coldRun polls items with p from start and measures the window [start,
// window): the latency of every item published in it (an item no poll
// fetched by the end of the run counts with end − publish), the polls
// made in it and the time to the first steady hit. The run goes on two
// periods past the window so that the window's last items are fetched.
func coldRun(p schedule.Policy, items []sim.Item, start, window time.Time, period time.Duration, backlog int, opts ...sim.Option) coldOutcome {
	end := window.Add(2 * period)
	r := sim.Run(p, items, start, end, append([]sim.Option{sim.WithBacklog(backlog), sim.WithPollLog()}, opts...)...)
	lo, _ := slices.BinarySearchFunc(items, start, func(it sim.Item, t time.Time) int { return it.Published.Compare(t) })
	var out coldOutcome
	out.ttfs = math.NaN()
	polls := r.PollTimes
	j := lo // next item to fetch
	run, runStart := 0, time.Time{}
	for _, t := range polls {
		if t.Before(window) {
			out.polls++
		}
		got := 0
		for j < len(items) && !items[j].Published.After(t) {
			out.res.Latencies = append(out.res.Latencies, t.Sub(items[j].Published).Seconds())
			out.res.Items++
			got++
			j++
		}
		if !t.Before(window) {
			continue
		}
		out.res.Polls++
		if got > 0 {
			out.res.Hits++
			if run == 0 {
				runStart = t
			}
			run++
			if run == coldSteadyRun && math.IsNaN(out.ttfs) {
				out.ttfs = runStart.Sub(start).Seconds() / period.Seconds()
			}
		} else {
			run = 0
		}
	}
	for ; j < len(items); j++ {
		out.res.Latencies = append(out.res.Latencies, end.Sub(items[j].Published).Seconds())
		out.res.Items++
		out.res.Unfetched++
	}
	return out
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// coldStartChecks states, for every point, whether auto's mean and p90
// latency over the first 10 periods are within coldMeanShare and
// coldP90Share of the period with at most coldPollsX times the polls of
// fixed polling at the period.
func coldStartChecks(rep *Report) []string {
	var notes []string
	fails := 0
	for _, f := range rep.Rows {
		if f.Policy != "fixed-avg" {
			continue
		}
		kv := []any{"publisher", f.Params["publisher"], "backlog", f.Params["backlog"], "period_s", f.Params["period_s"]}
		a, ok := require(rep, &notes, "auto", kv...)
		if !ok {
			fails++
			continue
		}
		per := f.Params["period_s"].(float64)
		where := fmt.Sprintf("%v publisher, backlog %v, period %v", f.Params["publisher"], f.Params["backlog"], time.Duration(per*float64(time.Second)))
		check := func(ok bool, what string) {
			if !ok {
				fails++
				notes = append(notes, fmt.Sprintf("%s %s: %s", FailPrefix, where, what))
			}
		}
		check(a.MeanLatencyS <= coldMeanShare*per, fmt.Sprintf("auto mean latency %.1f%% of the period > %.0f%%", 100*a.MeanLatencyS/per, 100*coldMeanShare))
		check(a.P90LatencyS <= coldP90Share*per, fmt.Sprintf("auto p90 latency %.1f%% of the period > %.0f%%", 100*a.P90LatencyS/per, 100*coldP90Share))
		check(float64(a.Polls) <= coldPollsX*float64(f.Polls), fmt.Sprintf("auto polls %.2f× fixed polling's > %.0f×", float64(a.Polls)/float64(max(f.Polls, 1)), coldPollsX))
	}
	if fails == 0 {
		notes = append(notes, fmt.Sprintf("checks: at every point auto's mean latency ≤ %.0f%% and p90 ≤ %.0f%% of the period over the first %d periods, with ≤ %.0f× the polls of fixed polling at the period",
			100*coldMeanShare, 100*coldP90Share, coldPeriodsN, coldPollsX))
	}
	notes = append(notes, "latency, polls and hit % over the first 10 periods from the subscription; ttfs_periods = median time to the first of 3 hits in a row, in periods; fixed-avg polls at the true period from a random phase")
	return notes
}
