package eval

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// epoch is where every simulated clock starts: a Monday at midnight UTC, so
// daily and weekly patterns line up with the calendar.
var epoch = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// seedFor derives a reproducible seed for one unit of work from the run's
// seed and the unit's coordinates.
func seedFor(seed uint64, parts ...any) uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, seed)
	for _, p := range parts {
		fmt.Fprintf(h, "|%v", p)
	}
	return h.Sum64()
}

func rngFor(seed uint64, parts ...any) *rand.Rand {
	s := seedFor(seed, parts...)
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// parallel runs fn(i) for i in [0, n) on GOMAXPROCS workers and returns the
// results in index order, so the outcome does not depend on scheduling.
func parallel[T any](ctx context.Context, n int, fn func(i int) T) ([]T, error) {
	out := make([]T, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i] = fn(i)
			}
		}()
	}
	var err error
feed:
	for i := 0; i < n; i++ {
		select {
		case work <- i:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(work)
	wg.Wait()
	return out, err
}

// row turns a simulation result into a report row.
func row(policy string, r sim.Result, params map[string]any) Row {
	s := r.Stats()
	return Row{
		Policy:         policy,
		Params:         params,
		MedianLatencyS: s.MedianS,
		MeanLatencyS:   s.MeanS,
		P90LatencyS:    s.P90S,
		StdLatencyS:    s.StdS,
		HitPct:         s.HitPct,
		Polls:          s.Polls,
		Items:          s.Items,
	}
}

// fixedSet simulates fixed-interval polling with the given period at
// `phases` random phases and returns one result per phase.
func fixedSet(items []sim.Item, start, end time.Time, period time.Duration, phases int, rng *rand.Rand, opts ...sim.Option) []sim.Result {
	out := make([]sim.Result, phases)
	for i := range out {
		phase := time.Duration(rng.Int64N(int64(period)))
		out[i] = sim.Run(schedule.NewFixed(period, phase), items, start, end, opts...)
	}
	return out
}

// bestWorst picks the phases with the lowest and highest median latency.
func bestWorst(rs []sim.Result) (best, worst sim.Result) {
	bi, wi := 0, 0
	bm, wm := 0.0, 0.0
	for i, r := range rs {
		m := r.Stats().MedianS
		if i == 0 || m < bm {
			bi, bm = i, m
		}
		if i == 0 || m > wm {
			wi, wm = i, m
		}
	}
	return rs[bi], rs[wi]
}

func logf(opt Options, format string, args ...any) {
	if opt.Log != nil {
		fmt.Fprintf(opt.Log, format+"\n", args...)
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
