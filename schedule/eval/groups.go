package eval

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// Groups measures feeds that carry the readings of several sensors: k
// sensors each publish once a minute, the i-th i·spacing after the first
// (±0.1 s), the group with the DPT model's losses and Laplace jitter. A
// single sensor (k = 1) is the reference.
func Groups() Scenario {
	return Scenario{
		Name:  "groups",
		Usage: "feeds of 1, 2, 3 or 5 sensors publishing a few seconds apart once a minute (p_ss 0.95, p_fs 0.80, b = 1 s unless --jitter), one day: auto vs fixed polling at the minute and dpt-l, --runs per point (10)",
		Run:   runGroups,
	}
}

// groupPoints are the scenario's feeds: sensors and their spacing.
var groupPoints = []struct {
	sensors int
	spacing time.Duration
}{
	{1, 0},
	{2, 2 * time.Second}, {2, 5 * time.Second},
	{3, 2 * time.Second}, {3, 5 * time.Second},
	{5, 500 * time.Millisecond}, {5, 2 * time.Second}, {5, 5 * time.Second},
}

// groupPeriod is every sensor's period.
const groupPeriod = time.Minute

func runGroups(ctx context.Context, opt Options) (*Report, error) {
	runs := orDefault(opt.Runs, 10)
	jitter := time.Duration(orDefault(opt.Jitter, 1) * float64(time.Second))
	names := []string{"fixed-avg", "dpt-l", "auto"}
	start := epoch
	end := start.Add(24 * time.Hour)
	units, err := parallel(ctx, len(groupPoints)*runs, func(u int) []sim.Result {
		pt, run := groupPoints[u/runs], u%runs
		rng := rngFor(opt.Seed, "groups", pt.sensors, pt.spacing, run)
		m := sim.Model{Period: groupPeriod, Pss: 0.95, Pfs: 0.8, JitterScale: jitter, RandomPhase: true}
		var items []sim.Item
		for _, it := range m.Generate(rng, start, end) {
			for j := range pt.sensors {
				p := it.Published.Add(time.Duration(j)*pt.spacing + time.Duration(rng.Float64()*0.2e9))
				items = append(items, sim.Item{Published: p, Observed: p})
			}
		}
		slices.SortStableFunc(items, func(a, b sim.Item) int { return a.Published.Compare(b.Published) })
		phase := time.Duration(rng.Int64N(int64(groupPeriod)))
		seed := seedFor(opt.Seed, "groups", run)
		policies := []schedule.Policy{
			schedule.NewFixed(groupPeriod, phase),
			schedule.NewDPT(schedule.DPTL, schedule.WithSeed(seed)),
			schedule.NewAuto(schedule.WithSeed(seed)),
		}
		out := make([]sim.Result, len(policies))
		for i, p := range policies {
			out[i] = sim.Run(p, items, start, end)
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: "groups", Columns: []string{"sensors", "spacing_s", "polls_per_reading"}}
	for pi, pt := range groupPoints {
		for ni, name := range names {
			rs := make([]sim.Result, runs)
			for r := range rs {
				rs[r] = units[pi*runs+r][ni]
			}
			merged := sim.Merge(rs...)
			rw := row(name, merged, map[string]any{"sensors": pt.sensors, "spacing_s": pt.spacing.Seconds(), "runs": runs})
			if merged.Items > 0 {
				rw.Extra = map[string]any{"polls_per_reading": round3(float64(merged.Polls) / float64(merged.Items))}
			}
			rep.Rows = append(rep.Rows, rw)
		}
	}
	logf(opt, "groups: %d feeds × %d runs", len(groupPoints), runs)
	rep.Notes = groupChecks(rep)
	return rep, nil
}

// groupLatency bounds auto's mean latency on every feed, as a share of
// the period; groupPolls bounds its polls per reading on the feeds of
// several sensors.
const (
	groupLatency = 0.1
	groupPolls   = 1.8
)

// groupChecks states whether auto fetches the readings of a feed of
// several sensors about as soon as those of a single sensor's feed (mean
// latency within groupLatency of the period), with about one poll a
// reading and one a group more (the check before the long gap).
func groupChecks(rep *Report) []string {
	var notes []string
	fails := 0
	for _, pt := range groupPoints {
		a, ok := require(rep, &notes, "auto", "sensors", pt.sensors, "spacing_s", pt.spacing.Seconds())
		if !ok {
			fails++
			continue
		}
		if lim := groupLatency * groupPeriod.Seconds(); a.MeanLatencyS > lim {
			fails++
			notes = append(notes, fmt.Sprintf("%s %d sensors %v apart: auto mean latency %.1f s > %.0f s", FailPrefix, pt.sensors, pt.spacing, a.MeanLatencyS, lim))
		}
		if ppr, _ := a.Extra["polls_per_reading"].(float64); pt.sensors > 1 && ppr > groupPolls {
			fails++
			notes = append(notes, fmt.Sprintf("%s %d sensors %v apart: auto polls %.2f times a reading > %.1f", FailPrefix, pt.sensors, pt.spacing, ppr, groupPolls))
		}
	}
	if fails == 0 {
		notes = append(notes, fmt.Sprintf("checks: on every feed auto's mean latency is at most %.0f%% of the period, and on the feeds of several sensors it polls at most %.1f times a reading", 100*groupLatency, groupPolls))
	}
	notes = append(notes, "polls_per_reading = polls / readings fetched; fixed-avg polls once a period from a random phase")
	return notes
}
