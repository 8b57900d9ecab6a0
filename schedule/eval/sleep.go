package eval

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// Sleep measures the learned daily sleep: publishers that sleep through
// the same window every day (solar sensors at night, a sensor that sleeps
// by day), whose window drifts a little every day, and two that do not
// sleep (a steady one, and one with random outages of hours), polled by
// auto with and without sleep learning and by fixed polling at the period.
func Sleep() Scenario {
	return Scenario{
		Name:  "sleep",
		Usage: "sensors that sleep every day (and two that do not), 30 days: auto with vs without daily sleep learning (polls, polls inside the sleep, latency), --runs per publisher (10)",
		Run:   runSleep,
	}
}

// sleepPub is one publisher of the sleep scenario: a Model whose readings
// are kept only while it is awake, from Rise to Set (offsets from midnight
// UTC; Rise > Set: awake over midnight), both moving by Drift a day (the
// awake span grows by 2·Drift a day).
type sleepPub struct {
	name      string
	model     sim.Model
	rise, set time.Duration
	drift     time.Duration
	sleeps    bool
}

var sleepPubs = []sleepPub{
	{name: "solar-10m", model: sim.Model{Period: 10 * time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 10 * time.Second, RandomPhase: true},
		rise: 6 * time.Hour, set: 19 * time.Hour, drift: 2 * time.Minute, sleeps: true},
	{name: "solar-1m", model: sim.Model{Period: time.Minute, Pss: 0.98, Pfs: 0.8, JitterScale: time.Second, RandomPhase: true},
		rise: 7*time.Hour + 30*time.Minute, set: 16*time.Hour + 45*time.Minute, drift: -time.Minute, sleeps: true},
	{name: "day-sleeper-5m", model: sim.Model{Period: 5 * time.Minute, Pss: 0.9, Pfs: 0.8, JitterScale: 5 * time.Second, RandomPhase: true},
		rise: 18 * time.Hour, set: 8 * time.Hour, sleeps: true},
	{name: "steady-5m", model: sim.Model{Period: 5 * time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 5 * time.Second, RandomPhase: true}},
	{name: "outages-5m", model: sim.Model{Period: 5 * time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 5 * time.Second, RandomPhase: true,
		OutageProb: 0.005, OutageMin: 2 * time.Hour, OutageMax: 8 * time.Hour}},
}

const sleepDays = 30

// awake reports whether p publishes at t, on day d of the run.
func (p sleepPub) awake(t time.Time, d int) bool {
	if !p.sleeps {
		return true
	}
	rise := p.rise - time.Duration(d)*p.drift
	set := p.set + time.Duration(d)*p.drift
	y, m, dd := t.Date()
	off := t.Sub(time.Date(y, m, dd, 0, 0, 0, 0, time.UTC))
	if rise < set {
		return off >= rise && off < set
	}
	return off >= rise || off < set
}

// asleepAt reports whether t is inside p's sleep (polls there can find
// nothing new); start is the start of the run.
func (p sleepPub) asleepAt(t time.Time, start time.Time) bool {
	return p.sleeps && !p.awake(t, int(t.Sub(start)/(24*time.Hour)))
}

func runSleep(ctx context.Context, opt Options) (*Report, error) {
	runs := orDefault(opt.Runs, 10)
	names := []string{"fixed-avg", "auto-no-sleep", "auto"}
	start := epoch
	end := start.Add(sleepDays * 24 * time.Hour)
	// Polls inside the sleep are counted from the day after auto can have
	// learned it on.
	from := start.Add((schedule.LearnedSleepDays + 2) * 24 * time.Hour)
	type out struct {
		res    []sim.Result
		inside []int
	}
	units, err := parallel(ctx, len(sleepPubs)*runs, func(u int) out {
		pub, run := sleepPubs[u/runs], u%runs
		rng := rngFor(opt.Seed, "sleep", pub.name, run)
		all := pub.model.Generate(rng, start, end)
		items := all[:0:0]
		for _, it := range all {
			if pub.awake(it.Published, int(it.Published.Sub(start)/(24*time.Hour))) {
				items = append(items, it)
			}
		}
		phase := time.Duration(rng.Int64N(int64(pub.model.Period)))
		seed := seedFor(opt.Seed, "sleep", run)
		policies := []schedule.Policy{
			schedule.NewFixed(pub.model.Period, phase),
			schedule.NewAuto(schedule.WithSeed(seed), schedule.WithoutSleepLearning()),
			schedule.NewAuto(schedule.WithSeed(seed)),
		}
		var o out
		for _, p := range policies {
			r := sim.Run(p, items, start, end, sim.WithPollLog())
			n := 0
			for _, t := range r.PollTimes {
				if !t.Before(from) && pub.asleepAt(t, start) {
					n++
				}
			}
			r.PollTimes = nil
			o.res = append(o.res, r)
			o.inside = append(o.inside, n)
		}
		return o
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{Scenario: "sleep", Columns: []string{"publisher", "polls_inside_sleep", "misses", "polls_vs_no_sleep"}}
	for pi, pub := range sleepPubs {
		var base float64
		for ni, name := range names {
			rs := make([]sim.Result, runs)
			inside := 0
			for r := range rs {
				rs[r] = units[pi*runs+r].res[ni]
				inside += units[pi*runs+r].inside[ni]
			}
			rw := row(name, sim.Merge(rs...), map[string]any{"publisher": pub.name, "days": sleepDays, "runs": runs})
			if name == "auto-no-sleep" {
				base = float64(rw.Polls)
			}
			rw.Extra = map[string]any{"polls_inside_sleep": inside, "misses": rw.Polls - rw.hits()}
			if base > 0 {
				rw.Extra["polls_vs_no_sleep"] = round3(float64(rw.Polls) / base)
			}
			rep.Rows = append(rep.Rows, rw)
		}
	}
	logf(opt, "sleep: %d publishers × %d runs", len(sleepPubs), runs)
	rep.Notes = sleepChecks(rep)
	return rep, nil
}

// sleepChecks states whether auto with sleep learning spends (almost) no
// poll inside the sleep of the publishers that sleep, once it can have
// learned it, with fewer polls than auto without learning and no worse
// latency; and whether on the publishers that do not sleep it changes
// nothing.
func sleepChecks(rep *Report) []string {
	var notes []string
	fails := 0
	check := func(ok bool, format string, args ...any) {
		if !ok {
			fails++
			notes = append(notes, FailPrefix+" "+fmt.Sprintf(format, args...))
		}
	}
	for _, pub := range sleepPubs {
		a, ok1 := require(rep, &notes, "auto", "publisher", pub.name)
		b, ok2 := require(rep, &notes, "auto-no-sleep", "publisher", pub.name)
		if !ok1 || !ok2 {
			fails++
			continue
		}
		inside := a.Extra["polls_inside_sleep"].(int)
		if pub.sleeps {
			// The first poll after the last publish of the day is never
			// moved (the publisher may be awake a little longer than the
			// day before), and a publisher whose sleep grows every day
			// is polled at yesterday's wake-up: a few polls a night.
			nights := (sleepDays - schedule.LearnedSleepDays - 2) * runs(a)
			check(inside <= maxSleepPollsPerNight*nights, "%s: auto polls %d times inside the sleep (%d nights)", pub.name, inside, nights)
			check(inside*4 <= b.Extra["polls_inside_sleep"].(int), "%s: auto polls %d times inside the sleep, > 1/4 of %d without sleep learning", pub.name, inside, b.Extra["polls_inside_sleep"])
			check(a.Polls-a.hits() < b.Polls-b.hits(), "%s: auto misses %d ≥ %d without sleep learning", pub.name, a.Polls-a.hits(), b.Polls-b.hits())
			check(a.MeanLatencyS <= sleepLatencySlack*b.MeanLatencyS, "%s: auto mean latency %.1f s > %.2f × %.1f s without sleep learning", pub.name, a.MeanLatencyS, sleepLatencySlack, b.MeanLatencyS)
		} else {
			check(math.Abs(float64(a.Polls-b.Polls)) <= 0.01*float64(b.Polls), "%s (does not sleep): auto polls %d vs %d without sleep learning", pub.name, a.Polls, b.Polls)
			check(a.MeanLatencyS <= 1.01*b.MeanLatencyS, "%s (does not sleep): auto mean latency %.1f s vs %.1f s without sleep learning", pub.name, a.MeanLatencyS, b.MeanLatencyS)
		}
	}
	if fails == 0 {
		notes = append(notes, fmt.Sprintf("checks: on the sleeping publishers, once learned, auto polls at most %d times a night inside the sleep and at most 1/4 as often as without sleep learning, with fewer misses and a mean latency at most 1.1× as high; on the others it changes polls and mean latency by ≤ 1%%", maxSleepPollsPerNight))
	}
	notes = append(notes, "polls_inside_sleep counts polls inside the true sleep from day "+fmt.Sprint(schedule.LearnedSleepDays+2)+" on; misses = polls that found nothing; polls_vs_no_sleep = polls / auto-no-sleep's polls (more polls with learning can be more hits: the morning's readings fetched one by one instead of in one late batch)")
	return notes
}

// maxSleepPollsPerNight bounds auto's polls inside a learned sleep;
// sleepLatencySlack is how much higher auto's mean latency may be than
// without sleep learning (a mean over few runs moves by a few percent with
// one late reading).
const (
	maxSleepPollsPerNight = 5
	sleepLatencySlack     = 1.1
)

// hits is the number of polls of r that found new items.
func (r Row) hits() int { return int(math.Round(r.HitPct * float64(r.Polls) / 100)) }

func runs(r Row) int {
	if n, ok := r.Params["runs"].(int); ok {
		return n
	}
	return 1
}
