package eval

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// ColdTrace measures the first periods of new subscriptions to real sensor
// feeds: every sensor of the trace files is replayed, at several speeds
// and from several start offsets, to a policy that subscribes when the
// replay starts. The feed is either empty then (the replay starts at the
// subscription: its first reading is the trace's next one) or already
// running (the first fetch sees the 20 readings before). Latency, hit %
// and polls cover the first 10 periods (the cold start) and the first 25
// (a whole short run, as a live comparison would make), a reading still
// unfetched two periods after them counting with the time waited.
func ColdTrace() Scenario {
	return Scenario{
		Name: "cold-trace",
		Usage: "cold-trace FILE...: new subscriptions to real sensor traces (ULB format or one Unix timestamp per line), replayed at 1×, 2×, 4× and 8× from 10 start offsets, empty or running: first 10 and 25 periods' latency and polls\n" +
			"auto vs fixed polling at the period (fixed-avg) and dpt-l",
		Run: runColdTrace,
	}
}

// Cold start on real traces: speeds, start offsets and windows, and the
// goals for auto over the first coldPeriodsN periods (mean and p90 as
// shares of the period, polls as a multiple of fixed polling at the
// period), pooled over every sensor and offset of a speed.
var coldTraceSpeeds = []float64{1, 2, 4, 8}

// coldTraceDates are the resolutions of the publish dates the policies
// are told: exact (the traces' milliseconds) and whole seconds, as RSS,
// Atom and HTTP dates usually give them.
var coldTraceDates = []time.Duration{0, time.Second}

// dateStepOf is the date resolution in seconds of a report's "dates"
// parameter (0 for exact).
func dateStepOf(v any) float64 {
	for _, d := range coldTraceDates {
		if datesName(d) == v {
			return d.Seconds()
		}
	}
	return 0
}

// datesName names a date resolution in the report.
func datesName(d time.Duration) string {
	if d <= 0 {
		return "exact"
	}
	return d.String()
}

const (
	coldTraceOffsets   = 10
	coldTraceLong      = 25 // periods of the whole-run figures
	coldTraceMeanShare = 0.15
	coldTraceP90Share  = 0.40
	coldTracePollsX    = 2.0
	// coldTraceMinSteps: the goals hold where the period is at least this
	// many steps of the date resolution.
	coldTraceMinSteps = 10
	// coldTraceMinReadings: a sensor needs this many readings to be
	// replayed (a backlog and the long window at its nominal period).
	coldTraceMinReadings = coldBacklog + 2*coldTraceLong
)

// coldTracePolicies are compared, in table order.
var coldTracePolicies = []string{"fixed-avg", "auto", "dpt-l"}

func runColdTrace(ctx context.Context, opt Options) (*Report, error) {
	feeds, err := loadTraceFeeds("cold-trace", opt.Files, coldTraceMinReadings)
	if err != nil {
		return nil, err
	}
	periods := make([]time.Duration, len(feeds)) // each sensor's median gap
	for i, f := range feeds {
		periods[i] = medianGap(f.tr.Items)
	}
	type unit struct {
		feed, speed, offset int
		backlog             int
		dates               time.Duration
	}
	var units []unit
	for fi := range feeds {
		for si := range coldTraceSpeeds {
			for k := range coldTraceOffsets {
				for _, bl := range []int{0, coldBacklog} {
					for _, d := range coldTraceDates {
						units = append(units, unit{fi, si, k, bl, d})
					}
				}
			}
		}
	}
	// Per unit and policy: the short window's outcome, then the long one's.
	res, err := parallel(ctx, len(units), func(u int) [][2]coldOutcome {
		un := units[u]
		f := feeds[un.feed]
		speed := coldTraceSpeeds[un.speed]
		// The same subscription instant for both date resolutions.
		rng := rngFor(opt.Seed, "cold-trace", f.file, f.tr.Sensor, un.speed, un.offset, un.backlog)
		// The subscription's instant in the trace: within the k-th tenth
		// of what leaves room for the backlog before and the long window
		// after, at a random instant.
		its := f.tr.Items
		first := its[coldBacklog].Published
		last := its[len(its)-1].Published.Add(-time.Duration(coldTraceLong+3) * periods[un.feed])
		span := last.Sub(first)
		if span < 0 {
			span = 0
		}
		slot := span / coldTraceOffsets
		t0 := first.Add(time.Duration(un.offset)*slot + time.Duration(rng.Int64N(int64(max(slot, 1)))))
		items, period := replay(its, t0, speed, un.backlog), time.Duration(float64(periods[un.feed])/speed)
		start := epoch
		short := start.Add(coldPeriodsN * period)
		long := start.Add(coldTraceLong * period)
		phase := time.Duration(rng.Int64N(int64(period)))
		out := make([][2]coldOutcome, len(coldTracePolicies))
		for i, name := range coldTracePolicies {
			for w, window := range []time.Time{short, long} {
				var p schedule.Policy
				switch name {
				case "fixed-avg":
					p = schedule.NewFixed(period, phase)
				default:
					p = newLearned(name, seedFor(opt.Seed, name, f.file, f.tr.Sensor, un.speed, un.offset, un.backlog))
				}
				hi, _ := slices.BinarySearchFunc(items, window, func(it sim.Item, t time.Time) int { return it.Published.Compare(t) })
				out[i][w] = coldRun(p, items[:hi], start, window, period, un.backlog, sim.WithDateResolution(un.dates))
			}
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: "cold-trace", Columns: []string{"backlog", "dates", "speed", "period_s", "periods", "mean_pct", "p90_pct", "polls_x_fixed"}}
	for _, bl := range []int{0, coldBacklog} {
		for _, dates := range coldTraceDates {
			for si, speed := range coldTraceSpeeds {
				for w, n := range []int{coldPeriodsN, coldTraceLong} {
					var fixedPolls float64
					for pi, name := range coldTracePolicies {
						var rs []sim.Result
						polls := 0
						var per float64
						for u, un := range units {
							if un.backlog != bl || un.speed != si || un.dates != dates {
								continue
							}
							o := res[u][pi][w]
							rs = append(rs, o.res)
							polls += o.polls
							per = periods[un.feed].Seconds() / speed
						}
						rw := row(name, sim.Merge(rs...), map[string]any{"backlog": bl, "dates": datesName(dates), "speed": speed, "periods": n})
						rw.Polls = polls
						if name == "fixed-avg" {
							fixedPolls = float64(polls)
						}
						// Latencies as shares of the sensors' own periods
						// (every ULB mote has a 60 s median gap).
						rw.Extra = map[string]any{
							"period_s":      round3(per),
							"mean_pct":      round1(100 * rw.MeanLatencyS / per),
							"p90_pct":       round1(100 * rw.P90LatencyS / per),
							"polls_x_fixed": round3(float64(polls) / max(fixedPolls, 1)),
						}
						rep.Rows = append(rep.Rows, rw)
					}
				}
			}
		}
	}
	logf(opt, "cold-trace: %d sensors × %d speeds × %d offsets × 2 backlogs", len(feeds), len(coldTraceSpeeds), coldTraceOffsets)
	rep.Notes = coldTraceChecks(rep)
	return rep, nil
}

// medianGap is the median publish-to-publish gap of items (at least 1 s).
func medianGap(items []sim.Item) time.Duration {
	gaps := make([]time.Duration, 0, len(items))
	for i := 1; i < len(items); i++ {
		if g := items[i].Published.Sub(items[i-1].Published); g > 0 {
			gaps = append(gaps, g)
		}
	}
	if len(gaps) == 0 {
		return time.Second
	}
	slices.Sort(gaps)
	return max(gaps[len(gaps)/2], time.Second)
}

// replay returns the readings of a trace as a publisher replaying it from
// trace time t0 at the given speed publishes them, the replay starting at
// epoch: reading p is published at epoch + (p − t0)/speed. A replay that
// starts empty has nothing before t0; a running one shows the backlog
// readings before it.
func replay(its []sim.Item, t0 time.Time, speed float64, backlog int) []sim.Item {
	lo, _ := slices.BinarySearchFunc(its, t0, func(it sim.Item, t time.Time) int { return it.Published.Compare(t) })
	lo = max(lo-backlog, 0)
	out := make([]sim.Item, 0, len(its)-lo)
	for _, it := range its[lo:] {
		p := epoch.Add(time.Duration(float64(it.Published.Sub(t0)) / speed))
		out = append(out, sim.Item{Published: p, Observed: p})
	}
	return out
}

// coldTraceChecks states, for every speed and both kinds of feed, whether
// auto's mean and p90 over the first 10 periods are within
// coldTraceMeanShare and coldTraceP90Share of the period with at most
// coldTracePollsX times the polls of fixed polling at the period.
func coldTraceChecks(rep *Report) []string {
	var notes []string
	fails := 0
	for _, f := range rep.Rows {
		if f.Policy != "fixed-avg" || f.Params["periods"] != coldPeriodsN {
			continue
		}
		kv := []any{"backlog", f.Params["backlog"], "dates", f.Params["dates"], "speed", f.Params["speed"], "periods", coldPeriodsN}
		a, ok := require(rep, &notes, "auto", kv...)
		if !ok {
			fails++
			continue
		}
		where := fmt.Sprintf("backlog %v, dates %v, speed %v×", f.Params["backlog"], f.Params["dates"], f.Params["speed"])
		mean, _ := a.Extra["mean_pct"].(float64)
		p90, _ := a.Extra["p90_pct"].(float64)
		polls, _ := a.Extra["polls_x_fixed"].(float64)
		per, _ := f.Extra["period_s"].(float64)
		if step := dateStepOf(f.Params["dates"]); per < coldTraceMinSteps*step {
			// Dated to whole seconds, a period of a few seconds cannot be
			// tracked within its own 15%: the publish is somewhere in
			// the dated second.
			notes = append(notes, fmt.Sprintf("%s (not a goal point: the period is under %d date steps): auto mean %.1f%%, p90 %.1f%%, polls %.2f×", where, coldTraceMinSteps, mean, p90, polls))
			continue
		}
		check := func(ok bool, what string) {
			if !ok {
				fails++
				notes = append(notes, fmt.Sprintf("%s %s: %s", FailPrefix, where, what))
			}
		}
		check(mean <= 100*coldTraceMeanShare, fmt.Sprintf("auto mean latency %.1f%% of the period > %.0f%%", mean, 100*coldTraceMeanShare))
		check(p90 <= 100*coldTraceP90Share, fmt.Sprintf("auto p90 latency %.1f%% of the period > %.0f%%", p90, 100*coldTraceP90Share))
		check(polls <= coldTracePollsX, fmt.Sprintf("auto polls %.2f× fixed polling's > %.0f×", polls, coldTracePollsX))
	}
	if fails == 0 {
		notes = append(notes, fmt.Sprintf("checks: at every speed and date resolution (period ≥ %d date steps), empty or running, auto's mean latency ≤ %.0f%% and p90 ≤ %.0f%% of the period over the first %d periods, with ≤ %.0f× the polls of fixed polling at the period",
			coldTraceMinSteps, 100*coldTraceMeanShare, 100*coldTraceP90Share, coldPeriodsN, coldTracePollsX))
	}
	notes = append(notes, fmt.Sprintf("latency, polls and hit %% over the first %d and %d periods from the subscription, pooled over every sensor and %d start offsets; fixed-avg polls at the sensor's median gap from a random phase", coldPeriodsN, coldTraceLong, coldTraceOffsets))
	return notes
}
