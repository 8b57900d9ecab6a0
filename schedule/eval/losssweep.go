package eval

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// lossSweepPolicies are the learned policies the loss sweep compares with
// fixed polling, in table order.
var lossSweepPolicies = []string{"dpt-a", "dpt-n", "dpt-l", "auto"}

func newLearned(name string, seed uint64) schedule.Policy {
	switch name {
	case "dpt-a":
		return schedule.NewDPT(schedule.DPTA, schedule.WithSeed(seed))
	case "dpt-n":
		return schedule.NewDPT(schedule.DPTN, schedule.WithSeed(seed))
	case "dpt-l":
		return schedule.NewDPT(schedule.DPTL, schedule.WithSeed(seed))
	case "dpt-l-unimodal":
		return schedule.NewDPT(schedule.DPTL, schedule.WithSeed(seed), schedule.WithoutBimodal())
	case "auto":
		return schedule.NewAuto(schedule.WithSeed(seed))
	}
	panic("eval: unknown learned policy " + name)
}

// LossSweep reproduces the DPT paper's Figs 19–20: a 300 s publisher whose
// readings are lost by a two-state Markov chain, p_ss from 0.60 to 1.00 and
// p_fs 0.6 and 0.8, Laplace jitter; fixed 300 s polling at random phases
// against DPT-A/N/L and auto.
func LossSweep() Scenario {
	return Scenario{
		Name:  "loss-sweep",
		Usage: "Figs 19–20: latency and hit% vs p_ss (0.60…1.00) for p_fs 0.6/0.8, λ=300 s, Laplace jitter b=10 s (--jitter), --runs per point (100)",
		Run:   runLossSweep,
	}
}

const (
	lossPeriod  = 300 * time.Second
	lossPeriods = 600 // publishing periods per run
	lossPhases  = 8   // random phases of fixed polling per run
	lossBacklog = 20  // periods published before the subscription
)

func runLossSweep(ctx context.Context, opt Options) (*Report, error) {
	runs := orDefault(opt.Runs, 100)
	b := orDefault(opt.Jitter, 10.0)
	type point struct{ pss, pfs float64 }
	var points []point
	for _, pfs := range []float64{0.6, 0.8} {
		for i := 0; i <= 8; i++ {
			points = append(points, point{pss: math.Round((0.60+0.05*float64(i))*100) / 100, pfs: pfs})
		}
	}
	names := append([]string{"fixed-avg", "fixed-best", "fixed-worst"}, lossSweepPolicies...)
	type unit struct{ res []sim.Result } // one per name
	start := epoch
	end := start.Add(lossPeriods * lossPeriod)
	units, err := parallel(ctx, len(points)*runs, func(u int) unit {
		pt, run := points[u/runs], u%runs
		rng := rngFor(opt.Seed, "loss", pt.pss, pt.pfs, run)
		m := sim.Model{
			Period: lossPeriod, Pss: pt.pss, Pfs: pt.pfs,
			JitterScale: time.Duration(b * float64(time.Second)),
		}
		// The publisher starts lossBacklog periods before the
		// subscription, whose first fetch sees those readings (as the
		// trace scenario's does): the sweep compares policies that know
		// the feed; cold start is the cold-start scenario's.
		items := m.Generate(rng, start.Add(-lossBacklog*lossPeriod), end)
		backlog := sim.WithBacklog(lossBacklog)
		fixed := fixedSet(items, start, end, lossPeriod, lossPhases, rng, backlog)
		best, worst := bestWorst(fixed)
		res := []sim.Result{sim.Merge(fixed...), best, worst}
		for _, name := range lossSweepPolicies {
			res = append(res, sim.Run(newLearned(name, seedFor(opt.Seed, name, run)), items, start, end, backlog))
		}
		return unit{res}
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: "loss-sweep", Columns: []string{"p_fs", "p_ss"}}
	for pi, pt := range points {
		for ni, name := range names {
			rs := make([]sim.Result, runs)
			for r := range rs {
				rs[r] = units[pi*runs+r].res[ni]
			}
			rep.Rows = append(rep.Rows, row(name, sim.Merge(rs...), map[string]any{
				"p_ss": pt.pss, "p_fs": pt.pfs, "jitter_b_s": b, "runs": runs,
			}))
		}
	}
	logf(opt, "loss-sweep: %d points × %d runs", len(points), runs)
	rep.Figures = sweepFigures(rep, names)
	rep.Notes = lossSweepChecks(rep)
	return rep, nil
}

func sweepFigures(rep *Report, names []string) []Figure {
	var figs []Figure
	for _, pfs := range []float64{0.6, 0.8} {
		lat := Figure{Name: fmt.Sprintf("loss-sweep-latency-pfs%.1f", pfs), Title: fmt.Sprintf("Median latency, p_fs = %.1f", pfs), XLabel: "p_ss", YLabel: "median latency (s)", LogY: true}
		hit := Figure{Name: fmt.Sprintf("loss-sweep-hit-pfs%.1f", pfs), Title: fmt.Sprintf("Hit %%, p_fs = %.1f", pfs), XLabel: "p_ss", YLabel: "hit (%)"}
		for _, n := range names {
			sl, sh := Series{Name: n}, Series{Name: n}
			for _, r := range rep.Rows {
				if r.Policy == n && r.Params["p_fs"] == pfs {
					x := r.Params["p_ss"].(float64)
					sl.X, sl.Y = append(sl.X, x), append(sl.Y, r.MedianLatencyS)
					sh.X, sh.Y = append(sh.X, x), append(sh.Y, r.HitPct)
				}
			}
			lat.Series, hit.Series = append(lat.Series, sl), append(hit.Series, sh)
		}
		figs = append(figs, lat, hit)
	}
	return figs
}

// find returns the row of policy at the given parameter values.
func find(rep *Report, policy string, kv ...any) (Row, bool) {
next:
	for _, r := range rep.Rows {
		if r.Policy != policy {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if r.Params[kv[i].(string)] != kv[i+1] {
				continue next
			}
		}
		return r, true
	}
	return Row{}, false
}

// lossSweepChecks states, for every point with p_ss ≥ 0.80, whether the
// acceptance criteria hold: DPT-L median ≤ 25% of fixed-avg's and hit% ≥
// fixed-avg's − 12; median DPT-A ≤ DPT-N ≤ DPT-L; hit% DPT-A ≤ DPT-L; auto
// hit% ≥ fixed-avg's − 1 and median ≤ 30% of fixed-avg's.
func lossSweepChecks(rep *Report) []string {
	var notes []string
	fails := 0
	for _, r := range rep.Rows {
		if r.Policy != "fixed-avg" || r.Params["p_ss"].(float64) < 0.80-1e-9 {
			continue
		}
		pss, pfs := r.Params["p_ss"], r.Params["p_fs"]
		check := func(ok bool, what string) {
			if !ok {
				fails++
				notes = append(notes, fmt.Sprintf("FAIL p_ss=%.2f p_fs=%.1f: %s", pss, pfs, what))
			}
		}
		gone := false
		get := func(p string) Row {
			x, ok := require(rep, &notes, p, "p_ss", pss, "p_fs", pfs)
			if !ok {
				// A missing row fails its checks: zeros would pass them.
				gone = true
				fails++
			}
			return x
		}
		a, n, l, au := get("dpt-a"), get("dpt-n"), get("dpt-l"), get("auto")
		if gone {
			continue
		}
		check(l.MedianLatencyS <= 0.25*r.MedianLatencyS, fmt.Sprintf("dpt-l median %.1fs > 25%% of fixed-avg %.1fs", l.MedianLatencyS, r.MedianLatencyS))
		check(l.HitPct >= r.HitPct-12, fmt.Sprintf("dpt-l hit %.1f%% < fixed-avg %.1f%% − 12", l.HitPct, r.HitPct))
		check(a.MedianLatencyS <= n.MedianLatencyS && n.MedianLatencyS <= l.MedianLatencyS, "median latency not dpt-a ≤ dpt-n ≤ dpt-l")
		check(a.HitPct <= l.HitPct, "hit% dpt-a > dpt-l")
		check(au.HitPct >= r.HitPct-1, fmt.Sprintf("auto hit %.1f%% < fixed-avg %.1f%% − 1", au.HitPct, r.HitPct))
		check(au.MedianLatencyS <= 0.30*r.MedianLatencyS, fmt.Sprintf("auto median %.1fs > 30%% of fixed-avg %.1fs", au.MedianLatencyS, r.MedianLatencyS))
	}
	if fails == 0 {
		notes = append(notes, "checks: all acceptance criteria hold for p_ss ≥ 0.80 (dpt-l ≤ 25% of fixed-avg latency, hit within 12 points; dpt-a ≤ dpt-n ≤ dpt-l; auto ≤ 30% latency, hit within 1 point)")
	}
	return notes
}
