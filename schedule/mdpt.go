package schedule

import (
	"cmp"
	"slices"
	"time"
)

// MDPT is Multi-source DPT (Algorithm 3): a consumer republishes once m of
// its n sources have new data, so it tracks each source with DPT-L, waits
// until the m-th earliest expected arrival and polls only the sources
// expected to be ready by then. Sources that already gave new data this round
// are polled again only when they are expected to have fresher data, so the
// republished result uses the newest readings.
//
// With a candidate threshold c > m, MDPT polls up to c sources at that
// moment (the next-earliest ones besides those expected ready), trading a
// few early polls for fewer republishes delayed by one late source.
//
// Use it as a loop: Plan, poll the sources it names at that time, Observe
// each result, and when Ready reports true republish and call Republished.
type MDPT struct {
	src   []Policy
	due   []int64 // per source: next poll time DPT-L chose (its expected arrival)
	fresh []bool  // per source: new data since the last republish
	m, c  int
	order []int
	opts  []Option
	track func(i int, opts ...Option) Policy
}

// MDPTOption configures MDPT.
type MDPTOption func(*MDPT)

// WithCandidates sets the candidate threshold c (m ≤ c ≤ n).
func WithCandidates(c int) MDPTOption { return func(p *MDPT) { p.c = c } }

// WithTracker replaces the per-source DPT-L tracker with another policy
// (slogfeed's auto, say); newPolicy is called once per source with its
// index and the source options.
func WithTracker(newPolicy func(i int, opts ...Option) Policy) MDPTOption {
	return func(p *MDPT) { p.track = newPolicy }
}

// WithSourceOptions passes options to every source's DPT-L tracker.
func WithSourceOptions(opts ...Option) MDPTOption {
	return func(p *MDPT) { p.opts = append(p.opts, opts...) }
}

// NewMDPT returns an MDPT policy over n sources needing m of them. m and the
// candidate threshold are clamped to [1, n].
func NewMDPT(n, m int, opts ...MDPTOption) *MDPT {
	n = max(n, 1)
	p := &MDPT{
		src:   make([]Policy, n),
		due:   make([]int64, n),
		fresh: make([]bool, n),
		m:     min(max(m, 1), n),
		order: make([]int, 0, n),
	}
	p.c = p.m
	for _, f := range opts {
		f(p)
	}
	p.c = min(max(p.c, p.m), n)
	for i := range p.src {
		opts := append([]Option{WithSeed(uint64(i) + 1)}, p.opts...)
		if p.track != nil {
			p.src[i] = p.track(i, opts...)
		} else {
			p.src[i] = NewDPT(DPTL, opts...)
		}
	}
	return p
}

// Name returns "mdpt".
func (p *MDPT) Name() string { return "mdpt" }

// Start sets every source's first poll to now.
func (p *MDPT) Start(now time.Time) {
	for i := range p.due {
		p.due[i] = now.UnixNano()
	}
}

// Plan returns the time of the next poll round and the sources to poll then,
// appended to buf[:0].
func (p *MDPT) Plan(buf []int) (time.Time, []int) {
	p.order = p.order[:0]
	nfresh := 0
	for i := range p.src {
		if p.fresh[i] {
			nfresh++
		} else {
			p.order = append(p.order, i)
		}
	}
	slices.SortFunc(p.order, func(a, b int) int {
		return cmp.Or(cmp.Compare(p.due[a], p.due[b]), cmp.Compare(a, b))
	})
	need := max(p.m-nfresh, 1)
	need = min(need, len(p.order))
	if need == 0 {
		// Everything is fresh: only re-polls of fresher data remain.
		at := p.due[0]
		for i := range p.due {
			at = min(at, p.due[i])
		}
		return p.at(at), p.expected(buf[:0], at)
	}
	at := p.due[p.order[need-1]]
	out := p.expected(buf[:0], at)
	// Candidates beyond those expected ready, up to c this round.
	polled := 0
	for _, i := range out {
		if !p.fresh[i] {
			polled++
		}
	}
	for _, i := range p.order {
		if polled >= p.c-nfresh {
			break
		}
		if p.due[i] > at {
			out = append(out, i)
			polled++
		}
	}
	return p.at(at), out
}

// expected appends the sources whose expected arrival is at or before at:
// not-yet-fresh sources expected ready, and fresh ones expected to have
// fresher data.
func (p *MDPT) expected(out []int, at int64) []int {
	for i := range p.src {
		if p.due[i] <= at {
			out = append(out, i)
		}
	}
	return out
}

func (p *MDPT) at(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// Observe records the result of polling source i.
func (p *MDPT) Observe(i int, obs Observation) {
	if i < 0 || i >= len(p.src) {
		return
	}
	p.due[i] = p.src[i].Next(obs).UnixNano()
	if obs.Hit {
		p.fresh[i] = true
	}
}

// Ready reports whether m sources have new data since the last republish.
func (p *MDPT) Ready() bool {
	n := 0
	for _, f := range p.fresh {
		if f {
			n++
		}
	}
	return n >= p.m
}

// Republished starts a new round.
func (p *MDPT) Republished() { clear(p.fresh) }

// Source returns the tracker of source i (for dashboards).
func (p *MDPT) Source(i int) Policy { return p.src[i] }
