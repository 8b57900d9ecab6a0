package eval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/schedule/sim"
)

// Scale scenario parameters.
const (
	scaleFeeds     = 1_000_000
	scaleMinPeriod = time.Hour
	scaleMaxPeriod = 24 * time.Hour
	scaleDay       = 24 * time.Hour
	// scaleTick is how often the simulation loop asks for grants. Every
	// feed is still fetched at its exact due time (the observation's At);
	// the tick only batches the grants so that they can be processed in
	// parallel.
	scaleTick = time.Second
	// scaleChunk is the unit of parallel work: partial sums are kept per
	// chunk and added in chunk order, so results do not depend on the
	// number of cores.
	scaleChunk = 64
	// scaleGCEvery is how many feeds setup adds between two collections.
	scaleGCEvery = 1 << 16
)

// The scale scenario's limits: a million feeds and their simulated day in
// ScaleMaxWall on two cores, in ScaleMaxBytesPerFeed of the process's peak
// resident memory per feed.
const (
	ScaleMaxWall         = 60 * time.Second
	ScaleMaxBytesPerFeed = 1024
)

// Scale runs a million feeds (periods log-uniform 1 h–24 h, the DPT
// publishing model with p_ss 0.95, p_fs 0.80 and Laplace jitter) for one
// simulated day through the scheduler core with an unlimited budget, each
// polled by the default policy, and reports the cost: wall time, heap bytes
// per feed (scheduler, policy and publisher state), the process's peak RSS
// per feed, allocations during the run, polls.
func Scale() Scenario {
	return scaleScenario(func() schedule.Policy { return schedule.NewAuto() }, scaleFeeds)
}

func scaleScenario(newPolicy func() schedule.Policy, n int) Scenario {
	return Scenario{
		Name:  "scale",
		Usage: fmt.Sprintf("%d feeds (1 h–24 h) for one simulated day through the scheduler core: wall_s, bytes_per_feed, allocs, polls (--jitter b, default 10 s)", n),
		Run: func(ctx context.Context, opt Options) (*Report, error) {
			return runScale(ctx, opt, newPolicy, n)
		},
	}
}

// latHist is a histogram of latencies with bins 1 % wide from 10 ms on
// (bin 0 holds everything below), for percentiles over tens of millions of
// items in constant memory.
type latHist [latBins]int64

const (
	latBins  = 2048
	latFloor = 0.01
)

var latStep = math.Log(1.01)

func (h *latHist) add(s float64) {
	i := 0
	if s >= latFloor {
		i = 1 + int(math.Log(s/latFloor)/latStep)
		if i >= latBins {
			i = latBins - 1
		}
	}
	h[i]++
}

// quantile returns the value of rank round(q·(n−1)) among the n values
// added, to within the bin width (the geometric middle of its bin).
func (h *latHist) quantile(q float64, n int64) float64 {
	if n == 0 {
		return 0
	}
	rank := int64(math.Round(q * float64(n-1)))
	var c int64
	for i, k := range h {
		c += k
		if c > rank {
			if i == 0 {
				return latFloor / 2
			}
			return latFloor * math.Exp((float64(i-1)+0.5)*latStep)
		}
	}
	return latFloor * math.Exp((latBins-1.5)*latStep)
}

// scalePart is one chunk's measurements.
type scalePart struct {
	sum, sumsq  float64
	polls, hits int
	items       int
	err         error
	errID       int
	hasErr      bool
}

type scaleWorker struct {
	hist latHist
	pubs []time.Time
}

// splitmix64 derives independent per-feed seeds cheaply.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func policyName(p schedule.Policy) string {
	if n, ok := p.(interface{ Name() string }); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", p)
}

func runScale(ctx context.Context, opt Options, newPolicy func() schedule.Policy, n int) (*Report, error) {
	clock := schedule.RealClock{}
	wall0 := clock.Now()
	jitter := orDefault(opt.Jitter, 10.0)
	start, end := epoch, epoch.Add(scaleDay)

	var m0, m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)

	// Setup: per feed a publisher (model stream with its own generator),
	// a policy, and the scheduler's entry. Streams and generators live in
	// flat arrays.
	s, err := schedule.New(schedule.Config{})
	if err != nil {
		return nil, err
	}
	s.Grow(n)
	pcgs := make([]rand.PCG, n)
	rngs := make([]rand.Rand, n)
	streams := make([]sim.Stream, n)
	draw := rngFor(opt.Seed, "scale-fleet")
	base := seedFor(opt.Seed, "scale-feed")
	lo, hi := math.Log(scaleMinPeriod.Seconds()), math.Log(scaleMaxPeriod.Seconds())
	name := ""
	for i := range n {
		if i&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		period := time.Duration(math.Exp(lo+draw.Float64()*(hi-lo)) * float64(time.Second)).Round(time.Millisecond)
		m := sim.Model{
			Period: period, Pss: budgetPss, Pfs: budgetPfs,
			JitterScale: time.Duration(math.Min(jitter, period.Seconds()/20) * float64(time.Second)),
			RandomPhase: true,
		}
		k := splitmix64(base + uint64(i))
		pcgs[i] = *rand.NewPCG(k, splitmix64(k))
		rngs[i] = *rand.New(&pcgs[i])
		streams[i] = *m.Stream(&rngs[i], start)
		p := newPolicy()
		if i == 0 {
			name = policyName(p)
		}
		if err := s.Add(i, schedule.Feed{Policy: p}, start); err != nil {
			return nil, err
		}
		if (i+1)%scaleGCEvery == 0 {
			// Setup leaves a little garbage per feed (the publisher
			// stream's constructor returns a pointer): collect it as
			// it comes, so that it is reused instead of growing the
			// heap towards twice what is live.
			runtime.GC()
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	setup := clock.Now().Sub(wall0)
	bytesPerFeed := float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(n)

	// Run.
	nw := max(1, runtime.GOMAXPROCS(0))
	workers := make([]scaleWorker, nw)
	var parts []scalePart
	var total scalePart
	grants := make([]schedule.Grant, 0, 4096)
	process := func(w *scaleWorker, part *scalePart, gs []schedule.Grant) {
		for _, g := range gs {
			st := &streams[g.ID]
			at := g.Due
			w.pubs = w.pubs[:0]
			for !st.Peek().After(at) {
				p := st.Pop().Published
				w.pubs = append(w.pubs, p)
				l := at.Sub(p).Seconds()
				part.sum += l
				part.sumsq += l * l
				w.hist.add(l)
			}
			part.polls++
			part.items += len(w.pubs)
			if len(w.pubs) > 0 {
				part.hits++
			}
			if _, err := s.Done(g.ID, schedule.Observation{At: at, Hit: len(w.pubs) > 0, Published: w.pubs}); err != nil && !part.hasErr {
				part.err, part.errID, part.hasErr = err, g.ID, true
			}
		}
	}
	// Persistent workers: worker w processes chunks w, w+nw, … of each
	// batch; nothing is allocated per batch.
	var batch sync.WaitGroup
	jobs := make([]chan int, nw)
	var crew sync.WaitGroup
	for w := range nw {
		jobs[w] = make(chan int)
		crew.Go(func() {
			for chunks := range jobs[w] {
				for c := w; c < chunks; c += nw {
					process(&workers[w], &parts[c], grants[c*scaleChunk:min((c+1)*scaleChunk, len(grants))])
				}
				batch.Done()
			}
		})
	}
	defer func() {
		for _, j := range jobs {
			close(j)
		}
		crew.Wait()
	}()
	last := end.Add(-1)
	for now := start; !now.After(last); now = now.Add(scaleTick) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if now.Add(scaleTick).After(last) {
			now = last
		}
		for {
			// In batches: all million feeds are due at the start.
			grants = s.AppendDueN(grants[:0], now, cap(grants))
			if len(grants) == 0 {
				break
			}
			chunks := (len(grants) + scaleChunk - 1) / scaleChunk
			if cap(parts) < chunks {
				parts = make([]scalePart, 2*chunks)
			}
			parts = parts[:chunks]
			clear(parts)
			if chunks == 1 || nw == 1 {
				for c := range chunks {
					process(&workers[0], &parts[c], grants[c*scaleChunk:min((c+1)*scaleChunk, len(grants))])
				}
			} else {
				batch.Add(nw)
				for _, j := range jobs {
					j <- chunks
				}
				batch.Wait()
			}
			for c := range parts {
				p := &parts[c]
				if p.hasErr {
					return nil, fmt.Errorf("scale: feed %d: %w", p.errID, p.err)
				}
				total.sum += p.sum
				total.sumsq += p.sumsq
				total.polls += p.polls
				total.hits += p.hits
				total.items += p.items
			}
		}
	}
	runtime.ReadMemStats(&m2)
	wall := clock.Now().Sub(wall0)
	rssPerFeed := float64(peakRSS()) / float64(n)

	var hist latHist
	for w := range workers {
		for i, k := range workers[w].hist {
			hist[i] += k
		}
	}
	row := Row{
		Policy: name,
		Params: map[string]any{"feeds": n, "min_period_s": scaleMinPeriod.Seconds(), "max_period_s": scaleMaxPeriod.Seconds()},
		Polls:  total.polls,
		Items:  total.items,
	}
	if total.polls > 0 {
		row.HitPct = 100 * float64(total.hits) / float64(total.polls)
	}
	if total.items > 0 {
		k := float64(total.items)
		row.MeanLatencyS = total.sum / k
		row.StdLatencyS = math.Sqrt(math.Max(0, total.sumsq/k-row.MeanLatencyS*row.MeanLatencyS))
		row.MedianLatencyS = hist.quantile(0.5, int64(total.items))
		row.P90LatencyS = hist.quantile(0.9, int64(total.items))
	}
	unfetched := 0
	for i := range streams {
		for streams[i].Peek().Before(end) {
			streams[i].Pop()
			unfetched++
		}
	}
	row.Extra = map[string]any{
		"wall_s":         round3(wall.Seconds()),
		"setup_s":        round3(setup.Seconds()),
		"allocs":         int64(m2.Mallocs - m1.Mallocs),
		"bytes_per_feed": math.Round(bytesPerFeed),
		"rss_per_feed":   math.Round(rssPerFeed),
		"polls":          total.polls,
		"unfetched":      unfetched,
		"cores":          nw,
	}
	rep := &Report{
		Scenario: "scale",
		Columns:  []string{"feeds", "wall_s", "setup_s", "bytes_per_feed", "rss_per_feed", "allocs", "polls"},
		Rows:     []Row{row},
	}
	rep.Notes = []string{
		fmt.Sprintf("%d feeds, one simulated day, unlimited budget, %d cores; bytes_per_feed = heap after setup and GC / feeds (scheduler + policy + publisher); rss_per_feed = the process's peak resident set / feeds", n, nw),
		"median and p90 latency from a 1%-bin histogram; mean and std exact",
	}
	// The memory verdict is the process's peak RSS per feed (the heap
	// where the RSS is not known): what a machine has to provide.
	mem, memName := rssPerFeed, "peak RSS"
	if mem == 0 {
		mem, memName = bytesPerFeed, "heap"
	}
	okWall, okMem := wall <= ScaleMaxWall, mem <= ScaleMaxBytesPerFeed
	rep.Notes = append(rep.Notes, fmt.Sprintf("%s: wall %.1f s (limit %.0f s)", okStr(okWall), wall.Seconds(), ScaleMaxWall.Seconds()),
		fmt.Sprintf("%s: %.0f bytes per feed of %s (limit %d; heap %.0f)", okStr(okMem), mem, memName, ScaleMaxBytesPerFeed, bytesPerFeed))
	logf(opt, "scale: %d feeds, %d polls, %.1f s wall, %.0f B/feed heap, %.0f B/feed peak RSS", n, total.polls, wall.Seconds(), bytesPerFeed, rssPerFeed)
	runtime.KeepAlive(pcgs)
	runtime.KeepAlive(rngs)
	return rep, nil
}

func okStr(ok bool) string {
	if ok {
		return "OK"
	}
	return "FAIL"
}
