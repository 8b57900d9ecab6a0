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

// Budget scenario parameters.
const (
	budgetFeeds     = 10_000
	budgetMinPeriod = time.Minute
	budgetMaxPeriod = 6 * time.Hour
	budgetShare     = 0.65 // fetch budget as a share of the feeds' demand
	budgetDay       = 24 * time.Hour
	budgetPss       = 0.95
	budgetPfs       = 0.80
)

// budgetWeights are the feed weights and how many feeds in 100 carry each:
// most feeds are ordinary, a few matter a lot.
var budgetWeights = []struct {
	w     float64
	share int
}{{1, 70}, {2, 15}, {5, 10}, {10, 5}}

// budgetOrders are the grant orders compared, in table order.
var budgetOrders = []schedule.Order{schedule.OrderPriority, schedule.OrderRoundRobin, schedule.OrderFIFO}

// Budget compares the scheduler's grant orders when the fetch budget is
// below what the feeds want: 10,000 feeds (periods log-uniform 1 min–6 h,
// weights 1/2/5/10 for 70/15/10/5 % of them, DPT publishing model with
// p_ss 0.95, p_fs 0.80 and Laplace jitter), each polled by the default
// policy, one simulated day on a virtual clock, a token bucket at 65 % of
// the demand. Rows: "priority" (best-effort, Olston & Widom),
// "round-robin" and "fifo" (earliest due first).
func Budget() Scenario {
	return budgetScenario(func() schedule.Policy { return schedule.NewAuto() })
}

func budgetScenario(newPolicy func() schedule.Policy) Scenario {
	return Scenario{
		Name:  "budget",
		Usage: "best-effort fetch budget: 10,000 feeds (1 min–6 h, weights 1/2/5/10) at 65% of demand for one day; priority vs round-robin vs fifo on weighted mean latency (--jitter b, default 10 s)",
		Run: func(ctx context.Context, opt Options) (*Report, error) {
			return runBudget(ctx, opt, newPolicy, budgetFeeds)
		},
	}
}

// fleetFeed is one simulated feed of a fleet.
type fleetFeed struct {
	model  sim.Model
	weight float64
}

// budgetFleet draws the feeds of the budget scenario.
func budgetFleet(seed uint64, n int, jitter float64) []fleetFeed {
	rng := rngFor(seed, "budget-fleet")
	total := 0
	for _, w := range budgetWeights {
		total += w.share
	}
	lo, hi := math.Log(budgetMinPeriod.Seconds()), math.Log(budgetMaxPeriod.Seconds())
	feeds := make([]fleetFeed, n)
	for i := range feeds {
		period := time.Duration(math.Exp(lo+rng.Float64()*(hi-lo)) * float64(time.Second)).Round(time.Millisecond)
		// Jitter is a small fraction of short periods.
		b := time.Duration(math.Min(jitter, period.Seconds()/20) * float64(time.Second))
		k := rng.IntN(total)
		w := budgetWeights[0].w
		for _, x := range budgetWeights {
			if k < x.share {
				w = x.w
				break
			}
			k -= x.share
		}
		feeds[i] = fleetFeed{
			model: sim.Model{
				Period: period, Pss: budgetPss, Pfs: budgetPfs,
				JitterScale: b, RandomPhase: true,
			},
			weight: w,
		}
	}
	return feeds
}

// fleetResult is what one simulated fleet run measured. Latencies are in
// seconds; items still unfetched at the end count with their latency so
// far (end − publish), so that a starved feed is not flattered.
type fleetResult struct {
	lat        []float32
	wlat, wsum float64 // Σ W·latency, Σ W over items
	polls      int
	hits       int
	items      int
	unfetched  int
}

// runFleet polls the streams through s from start to end: at every wake-up
// the granted feeds are fetched at once (a fetch sees every item published
// by then) and their observations go back through Done. weights may be nil
// (all 1). keepLat records every latency for percentiles.
func runFleet(ctx context.Context, s *schedule.Scheduler, streams []*sim.Stream, weights []float64, start, end time.Time, keepLat bool) (fleetResult, error) {
	var r fleetResult
	grants := make([]schedule.Grant, 0, 1024)
	pubs := make([]time.Time, 0, 64)
	record := func(id int, lat float64) {
		w := 1.0
		if weights != nil {
			w = weights[id]
		}
		r.wlat += w * lat
		r.wsum += w
		r.items++
		if keepLat {
			r.lat = append(r.lat, float32(lat))
		}
	}
	for iter := 0; ; iter++ {
		if iter&1023 == 0 && ctx.Err() != nil {
			return r, ctx.Err()
		}
		now, ok := s.NextWakeup()
		if !ok || !now.Before(end) {
			break
		}
		grants = s.AppendDue(grants[:0], now)
		for _, g := range grants {
			st := streams[g.ID]
			pubs = pubs[:0]
			for !st.Peek().After(now) {
				p := st.Pop().Published
				pubs = append(pubs, p)
				record(g.ID, now.Sub(p).Seconds())
			}
			r.polls++
			if len(pubs) > 0 {
				r.hits++
			}
			if _, err := s.Done(g.ID, schedule.Observation{At: now, Hit: len(pubs) > 0, Published: pubs}); err != nil {
				return r, fmt.Errorf("feed %d: %w", g.ID, err)
			}
		}
	}
	for id, st := range streams {
		for st.Peek().Before(end) {
			record(id, end.Sub(st.Pop().Published).Seconds())
			r.unfetched++
		}
	}
	return r, nil
}

// summary is a fleet result's row statistics.
func (r *fleetResult) row(policy string, params map[string]any) Row {
	row := Row{Policy: policy, Params: params, Polls: r.polls, Items: r.items}
	if r.polls > 0 {
		row.HitPct = 100 * float64(r.hits) / float64(r.polls)
	}
	if len(r.lat) > 0 {
		xs := r.lat
		slices.Sort(xs)
		q := func(p float64) float64 {
			pos := p * float64(len(xs)-1)
			i := int(pos)
			if i >= len(xs)-1 {
				return float64(xs[len(xs)-1])
			}
			f := pos - float64(i)
			return float64(xs[i]) + f*(float64(xs[i+1])-float64(xs[i]))
		}
		row.MedianLatencyS, row.P90LatencyS = q(0.5), q(0.9)
		var sum float64
		for _, x := range xs {
			sum += float64(x)
		}
		mean := sum / float64(len(xs))
		var ss float64
		for _, x := range xs {
			d := float64(x) - mean
			ss += d * d
		}
		row.MeanLatencyS, row.StdLatencyS = mean, math.Sqrt(ss/float64(len(xs)))
	}
	row.Extra = map[string]any{"unfetched": r.unfetched}
	if r.wsum > 0 {
		row.Extra["weighted_latency_s"] = r.wlat / r.wsum
	}
	return row
}

// budgetDemand is the fetch rate the feeds want: one poll per publishing
// period for every feed (what a policy that tracks its feed perfectly
// spends; retries after misses come on top).
func budgetDemand(feeds []fleetFeed) float64 {
	var d float64
	for _, f := range feeds {
		d += 1 / f.model.Period.Seconds()
	}
	return d
}

func runBudget(ctx context.Context, opt Options, newPolicy func() schedule.Policy, n int) (*Report, error) {
	jitter := orDefault(opt.Jitter, 10.0)
	feeds := budgetFleet(opt.Seed, n, jitter)
	demand := budgetDemand(feeds)
	rate := budgetShare * demand
	burst := max(1, int(rate)) // at most a second's worth at once
	weights := make([]float64, n)
	for i, f := range feeds {
		weights[i] = f.weight
	}
	start, end := epoch, epoch.Add(budgetDay)
	type out struct {
		res fleetResult
		err error
	}
	outs, err := parallel(ctx, len(budgetOrders), func(k int) out {
		s, err := schedule.New(schedule.Config{Rate: rate, Burst: burst, Order: budgetOrders[k]})
		if err != nil {
			return out{err: err}
		}
		s.Grow(n)
		streams := make([]*sim.Stream, n)
		for i, f := range feeds {
			// The same publisher for every order: its rng depends on the
			// feed only.
			streams[i] = f.model.Stream(rngFor(opt.Seed, "budget-feed", i), start)
			if err := s.Add(i, schedule.Feed{Policy: newPolicy(), Weight: f.weight}, start); err != nil {
				return out{err: err}
			}
		}
		r, err := runFleet(ctx, s, streams, weights, start, end, true)
		return out{r, err}
	})
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Scenario: "budget",
		Columns:  []string{"weighted_latency_s", "unfetched", "budget_per_s", "demand_per_s"},
	}
	params := map[string]any{
		"feeds": n, "budget_per_s": round3(rate), "demand_per_s": round3(demand),
		"burst": burst, "jitter_b_s": jitter,
	}
	for k, o := range outs {
		if o.err != nil {
			return nil, fmt.Errorf("budget %s: %w", budgetOrders[k], o.err)
		}
		rep.Rows = append(rep.Rows, o.res.row(budgetOrders[k].String(), params))
	}
	logf(opt, "budget: %d feeds, budget %.2f/s of demand %.2f/s", n, rate, demand)
	rep.Notes = budgetNotes(rep)
	return rep, nil
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// budgetNotes states how the orders compare on weighted latency.
func budgetNotes(rep *Report) []string {
	wl := map[string]float64{}
	for _, r := range rep.Rows {
		if v, ok := r.Extra["weighted_latency_s"].(float64); ok {
			wl[r.Policy] = v
		}
	}
	notes := []string{
		"demand = Σ 1/period (one poll per publishing period per feed); the token bucket refills at 65% of it, burst one second's worth",
		"weighted latency = Σ W·latency / Σ W over items; items unfetched at the end of the day count with end − publish",
		"priority: P = W·(t_now − t_pub), the weighted lag of the feed's oldest unseen item; t_pub = the policy's predicted publish time or its due time",
	}
	p, best := wl["priority"]
	if !best {
		notes = append(notes, missing("priority"))
	}
	for _, name := range []string{"round-robin", "fifo"} {
		o, ok := wl[name]
		if !ok {
			// A missing row fails the check: it must not pass by absence.
			best = false
			notes = append(notes, missing(name))
			continue
		}
		if !(p < o) {
			best = false
		}
		notes = append(notes, fmt.Sprintf("priority weighted latency %.1f s vs %s %.1f s (%.0f%%)", p, name, o, 100*p/o))
	}
	if best {
		notes = append(notes, "OK: priority has the lowest weighted mean latency")
	} else {
		notes = append(notes, "FAIL: priority does not have the lowest weighted mean latency")
	}
	return notes
}
