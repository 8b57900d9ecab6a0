package eval

import (
	"context"
	"fmt"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// FixedSweep reproduces the DPT paper's Fig. 4: a strictly periodic 300 s
// publisher polled at a fixed period and phase. Latency depends on where
// the polls fall relative to the publishes, which is what motivates
// tracking the publish phase instead of polling on a timer.
func FixedSweep() Scenario {
	return Scenario{
		Name:  "fixed-sweep",
		Usage: "Fig. 4: a 300 s publisher polled at periods 60 s…900 s and phases 0…90% of the period",
		Run:   runFixedSweep,
	}
}

func runFixedSweep(ctx context.Context, opt Options) (*Report, error) {
	const source = 300 * time.Second
	periods := []time.Duration{60 * time.Second, 150 * time.Second, 300 * time.Second, 600 * time.Second, 900 * time.Second}
	const phases = 10
	start := epoch
	end := start.Add(1000 * source)
	// A strict grid (no jitter, no loss), published at 100 s past each
	// 300 s boundary.
	m := sim.Model{Period: source, Pss: 1, Pfs: 1, Phase: 100 * time.Second}
	items := m.Generate(rngFor(opt.Seed, "fixed-sweep"), start, end)
	type cell struct {
		period time.Duration
		phase  time.Duration
	}
	var cells []cell
	for _, p := range periods {
		for i := 0; i < phases; i++ {
			cells = append(cells, cell{p, p * time.Duration(i) / phases})
		}
	}
	res, err := parallel(ctx, len(cells), func(i int) sim.Result {
		return sim.Run(schedule.NewFixed(cells[i].period, cells[i].phase), items, start, end)
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: "fixed-sweep", Columns: []string{"period_s", "phase_s"}}
	fig := Figure{Name: "fixed-sweep", Title: "Fixed polling of a 300 s publisher (published at +100 s)", XLabel: "polling phase (fraction of period)", YLabel: "median latency (s)"}
	for pi, p := range periods {
		s := Series{Name: schedule.NewFixed(p, 0).Name()}
		for i := 0; i < phases; i++ {
			c, r := cells[pi*phases+i], res[pi*phases+i]
			rw := row(schedule.NewFixed(c.period, c.phase).Name(), r, map[string]any{
				"period_s": c.period.Seconds(), "phase_s": c.phase.Seconds(),
			})
			rep.Rows = append(rep.Rows, rw)
			s.X = append(s.X, float64(i)/phases)
			s.Y = append(s.Y, rw.MedianLatencyS)
		}
		fig.Series = append(fig.Series, s)
	}
	rep.Figures = []Figure{fig}
	rep.Notes = []string{"latency of fixed polling is set by its phase against the publisher's: from 0 s when polls land just after each publish to a whole period when they land just before"}
	return rep, nil
}

// Bimodal reproduces the DPT paper's Fig. 22: a disruption-tolerant
// publisher sends readings live at night and delivers the day's readings in
// one batch when its link comes up at dusk.
func Bimodal() Scenario {
	return Scenario{
		Name:  "bimodal",
		Usage: "Fig. 22: DTN publisher (10 min readings, live 20:00–08:00, day batched at 20:00): fixed 1 day / 1 h vs DPT-L with and without bimodal mode, and auto",
		Run:   runBimodal,
	}
}

func runBimodal(ctx context.Context, opt Options) (*Report, error) {
	runs := orDefault(opt.Runs, 20)
	b := orDefault(opt.Jitter, 10.0)
	const days = 30
	start := epoch
	end := start.Add(days * 24 * time.Hour)
	names := []string{"fixed-24h", "fixed-1h", "dpt-l-unimodal", "bimodal-dpt-l", "auto"}
	type unit struct{ res []sim.Result }
	units, err := parallel(ctx, runs, func(run int) unit {
		rng := rngFor(opt.Seed, "bimodal", run)
		d := sim.DTN{
			Model: sim.Model{
				Period: 10 * time.Minute, Pss: 0.95, Pfs: 0.8,
				JitterScale: time.Duration(b * float64(time.Second)),
			},
			NightStart: 20, NightEnd: 8, BatchAt: 20,
		}
		items := d.Generate(rng, start, end)
		out := []sim.Result{
			sim.Merge(fixedSet(items, start, end, 24*time.Hour, 4, rng)...),
			sim.Merge(fixedSet(items, start, end, time.Hour, 4, rng)...),
			sim.Run(newLearned("dpt-l-unimodal", seedFor(opt.Seed, run)), items, start, end),
			sim.Run(newLearned("dpt-l", seedFor(opt.Seed, run)), items, start, end),
			sim.Run(newLearned("auto", seedFor(opt.Seed, run)), items, start, end),
		}
		return unit{out}
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: "bimodal", Columns: []string{"days", "runs"}}
	for ni, name := range names {
		rs := make([]sim.Result, runs)
		for r := range rs {
			rs[r] = units[r].res[ni]
		}
		rep.Rows = append(rep.Rows, row(name, sim.Merge(rs...), map[string]any{"days": days, "runs": runs, "jitter_b_s": b}))
	}
	fig := Figure{Name: "bimodal", Title: "DTN publisher: mean latency vs hit %", XLabel: "hit (%)", YLabel: "mean latency (s)", LogY: true}
	for _, r := range rep.Rows {
		fig.Series = append(fig.Series, Series{Name: r.Policy, X: []float64{r.HitPct}, Y: []float64{r.MeanLatencyS}})
	}
	rep.Figures = []Figure{fig}
	var notes []string
	all := true
	get := func(p string) Row { r, ok := require(rep, &notes, p); all = all && ok; return r }
	bi, uni, day := get("bimodal-dpt-l"), get("dpt-l-unimodal"), get("fixed-24h")
	ok := all && bi.HitPct > uni.HitPct && bi.MeanLatencyS <= 1.5*uni.MeanLatencyS && bi.MeanLatencyS < day.MeanLatencyS/4
	verdict := "checks: bimodal DPT-L hit% > unimodal, mean latency ≤ 1.5× unimodal's and far below fixed 1 day"
	if !ok {
		verdict = "FAIL " + verdict
	}
	rep.Notes = append(notes, fmt.Sprintf("%s (bimodal %.1f%% / %.0f s, unimodal %.1f%% / %.0f s, fixed 1 day %.0f s)",
		verdict, bi.HitPct, bi.MeanLatencyS, uni.HitPct, uni.MeanLatencyS, day.MeanLatencyS))
	return rep, nil
}
