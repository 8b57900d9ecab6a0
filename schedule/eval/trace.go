package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// tracePolicies are compared on real traces, in table order (fixed-avg
// first, oracle last).
var tracePolicies = []string{"fixed-avg", "dpt-a", "dpt-n", "dpt-l", "auto", "miniflux", "commafeed", "newsblur", "oracle"}

// tracePhases is how many evenly spaced phases fixed polling is averaged
// over; traceBacklog is how many readings a new subscription's first fetch
// sees (they teach every policy and are not measured).
const (
	tracePhases  = 10
	traceBacklog = 20
)

// Trace replays real publishing traces (the ULB format of shared/traces, or
// one Unix timestamp per line): each sensor is one feed, polled by every
// policy; fixed polling uses the trace's own median gap as its period,
// averaged over evenly spaced phases. Every policy subscribes at the
// traceBacklog-th reading and its first fetch sees the readings before, as
// a real subscription's first fetch sees the feed's recent items.
func Trace() Scenario {
	return Scenario{
		Name:  "trace",
		Usage: "trace FILE...: every policy on real publishing traces (ULB format or one Unix timestamp per line), one feed per sensor",
		Run:   runTrace,
	}
}

// ErrNoFiles is returned by the trace scenario when it is given no file.
var ErrNoFiles = errors.New("eval: trace needs at least one trace file")

// traceFeed is one sensor of a trace file.
type traceFeed struct {
	file string
	tr   sim.Trace
}

// loadTraceFeeds reads the sensors of the scenario's trace files that have
// at least min readings.
func loadTraceFeeds(scenario string, files []string, min int) ([]traceFeed, error) {
	if len(files) == 0 {
		return nil, ErrNoFiles
	}
	var feeds []traceFeed
	for _, f := range files {
		trs, err := sim.Load(f)
		if err != nil {
			return nil, fmt.Errorf("eval: %s %s: %w", scenario, f, err)
		}
		for _, tr := range trs {
			if len(tr.Items) >= min {
				feeds = append(feeds, traceFeed{file: filepath.Base(f), tr: tr})
			}
		}
	}
	if len(feeds) == 0 {
		return nil, fmt.Errorf("eval: %s: no sensor with at least %d readings in %v", scenario, min, files)
	}
	return feeds, nil
}

func runTrace(ctx context.Context, opt Options) (*Report, error) {
	feeds, err := loadTraceFeeds("trace", opt.Files, traceBacklog+3)
	if err != nil {
		return nil, err
	}
	results, err := parallel(ctx, len(feeds), func(i int) []sim.Result {
		return runTraceFeed(feeds[i].tr.Items, seedFor(opt.Seed, feeds[i].file, feeds[i].tr.Sensor))
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: "trace", Columns: []string{"file", "sensor"}}
	// Pooled rows per file first, then one row per sensor.
	var files []string
	for _, f := range feeds {
		if !slices.Contains(files, f.file) {
			files = append(files, f.file)
		}
	}
	for _, file := range files {
		for pi, name := range tracePolicies {
			var rs []sim.Result
			for i, f := range feeds {
				if f.file == file {
					rs = append(rs, results[i][pi])
				}
			}
			rep.Rows = append(rep.Rows, row(name, sim.Merge(rs...), map[string]any{"file": file, "sensor": "all"}))
		}
	}
	for i, f := range feeds {
		for pi, name := range tracePolicies {
			rep.Rows = append(rep.Rows, row(name, results[i][pi], map[string]any{"file": f.file, "sensor": f.tr.Sensor}))
		}
	}
	logf(opt, "trace: %d feeds from %d files", len(feeds), len(files))
	rep.Notes = traceChecks(rep)
	for _, file := range files {
		fig := Figure{Name: "trace-" + file, Title: "Median latency vs hit % on " + file, XLabel: "hit (%)", YLabel: "median latency (s)", LogY: true}
		for _, name := range tracePolicies {
			if r, ok := find(rep, name, "file", file, "sensor", "all"); ok && name != "oracle" {
				fig.Series = append(fig.Series, Series{Name: name, X: []float64{r.HitPct}, Y: []float64{max(r.MedianLatencyS, 1e-3)}})
			}
		}
		rep.Figures = append(rep.Figures, fig)
	}
	return rep, nil
}

// runTraceFeed runs every trace policy on one feed's items.
func runTraceFeed(items []sim.Item, seed uint64) []sim.Result {
	start := items[traceBacklog].Published
	backlog := sim.WithBacklog(traceBacklog)
	gaps := make([]float64, 0, len(items)-1)
	for i := 1; i < len(items); i++ {
		if g := items[i].Published.Sub(items[i-1].Published).Seconds(); g > 0 {
			gaps = append(gaps, g)
		}
	}
	slices.Sort(gaps)
	period := time.Duration(gaps[len(gaps)/2] * float64(time.Second))
	period = max(period, time.Second)
	end := items[len(items)-1].Published.Add(period)

	out := make([]sim.Result, 0, len(tracePolicies))
	fixed := make([]sim.Result, tracePhases)
	for i := range fixed {
		phase := time.Duration(math.Round(float64(period) * float64(i) / tracePhases))
		fixed[i] = sim.Run(schedule.NewFixed(period, phase), items, start, end, backlog)
	}
	out = append(out, sim.Merge(fixed...))
	for _, name := range tracePolicies[1:] {
		var p schedule.Policy
		switch name {
		case "miniflux":
			p = schedule.NewMiniflux()
		case "commafeed":
			p = schedule.NewCommaFeed()
		case "newsblur":
			p = schedule.NewNewsBlur()
		case "oracle":
			pubs := make([]time.Time, len(items))
			for i, it := range items {
				pubs[i] = it.Published
			}
			p = schedule.NewOracle(pubs)
		default:
			p = newLearned(name, seed)
		}
		out = append(out, sim.Run(p, items, start, end, backlog))
	}
	return out
}

// traceChecks states whether, on every file (a trace: all its sensors
// pooled), DPT-L's median latency is ≤ 30% of fixed-avg's and auto's is ≤ 5%
// of it with a hit rate at least fixed-avg's minus one point. Sensors where
// auto misses either bound on their own are listed too, for the record.
func traceChecks(rep *Report) []string {
	var notes, perSensor []string
	fails := 0
	for _, r := range rep.Rows {
		if r.Policy != "fixed-avg" {
			continue
		}
		file, sensor := r.Params["file"], r.Params["sensor"]
		l, okL := require(rep, &notes, "dpt-l", "file", file, "sensor", sensor)
		a, okA := require(rep, &notes, "auto", "file", file, "sensor", sensor)
		if !okL || !okA {
			fails++ // a missing row fails its check: zeros would pass it
			continue
		}
		var bad []string
		if l.MedianLatencyS > 0.30*r.MedianLatencyS {
			bad = append(bad, fmt.Sprintf("dpt-l median %.2fs > 30%% of fixed-avg %.2fs", l.MedianLatencyS, r.MedianLatencyS))
		}
		if a.MedianLatencyS > 0.05*r.MedianLatencyS {
			bad = append(bad, fmt.Sprintf("auto median %.2fs > 5%% of fixed-avg %.2fs", a.MedianLatencyS, r.MedianLatencyS))
		}
		if a.HitPct < r.HitPct-1 {
			bad = append(bad, fmt.Sprintf("auto hit %.1f%% < fixed-avg %.1f%% − 1", a.HitPct, r.HitPct))
		}
		for _, b := range bad {
			if sensor == "all" {
				fails++
				notes = append(notes, fmt.Sprintf("FAIL %v: %s", file, b))
			} else {
				perSensor = append(perSensor, fmt.Sprintf("sensor %v of %v: %s", sensor, file, b))
			}
		}
	}
	if fails == 0 {
		notes = append(notes, "checks: on every trace file dpt-l ≤ 30% and auto ≤ 5% of fixed-avg's median latency, auto hit within 1 point of fixed-avg")
	}
	if len(perSensor) > 0 {
		notes = append(notes, fmt.Sprintf("%d single sensors miss a bound on their own (jittery motes):", len(perSensor)))
		notes = append(notes, perSensor...)
	}
	return notes
}
