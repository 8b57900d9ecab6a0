package schedule

import (
	"cmp"
	"math"
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
// With WithForecast, MDPT plans from its trackers' forecasts instead (see
// WithForecast): the outputs it owes are set by the publishers, and it
// spends its polls on the sources whose publish is in doubt.
//
// Use it as a loop: Plan, poll the sources it names at that time, Observe
// each result, and when Ready reports true republish and call Republished.
type MDPT struct {
	src   []Policy
	due   []int64 // per source: next poll time its tracker chose
	fresh []bool  // per source: new data since the last republish
	m, c  int
	order []int
	opts  []Option
	track func(i int, opts ...Option) Policy

	// Forecast planning (WithForecast).
	share  float64   // early share aimed at; 0: the paper's planning
	now    int64     // latest time MDPT was told of (Start, Observe)
	cut    int64     // publish time of the newest reading the last republish fused
	newest []int64   // per source: publish time of its newest fetched reading (0: none)
	polled []int64   // per source: time of its last poll (0: none)
	gaps   []gapRing // per source: recent publish-to-publish gaps
	marg   []float64 // per source: margin from gaps, seconds (0: too few, the tracker's)
	given  bool      // WithTrackerMargins: never fit margins from gaps
}

// marginGaps is how many recent publish-to-publish gaps of a source
// forecast planning fits its jitter tail to, and minMarginGaps how many it
// needs before it uses its own fit instead of the tracker's margin. A
// window of recent gaps, refitted to the tracker's current period, keeps
// the residuals of a period not yet learned out of the tail.
const (
	marginGaps    = 128
	minMarginGaps = 16
)

// gapRing holds a source's recent publish-to-publish gaps, seconds.
type gapRing struct {
	v    [marginGaps]float64
	n    int
	next int
}

func (g *gapRing) push(x float64) {
	g.v[g.next] = x
	g.next = (g.next + 1) % marginGaps
	g.n = min(g.n+1, marginGaps)
}

// Forecaster is a source tracker that can tell MDPT when the source's next
// publish is expected and how far after it to poll (Auto is one).
type Forecaster interface {
	Policy
	// PredictedPublish returns when the publish the tracker aims at is
	// expected (false while the period is unknown).
	PredictedPublish() (time.Time, bool)
	// Margin returns how long after that publish to poll for only a share
	// q of publishes to be still to come.
	Margin(q float64) (time.Duration, bool)
	// State gives the tracker's period (Median) and newest publish.
	State() State
}

// likelySlots is how many expected publishes of a source must have passed
// since it was last known to have nothing new before WithForecast counts
// on it having new data: one may be lost, two in a row rarely are.
const likelySlots = 2

// DefaultEarlyShare is the share of a source's publishes that MDPT's
// forecast planning (WithForecast) polls for too early by default.
const DefaultEarlyShare = 0.007

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

// WithForecast makes MDPT plan from its trackers' forecasts (trackers that
// implement Forecaster, such as Auto; any other tracker's sources are
// polled when the tracker says), aiming each poll at the moment when only
// a share q of the source's publishes are still to come (q ≤ 0:
// DefaultEarlyShare). Once a source has minMarginGaps publish-to-publish
// gaps, that moment comes from MDPT's own fit of its jitter tail to its
// recent gaps (see learnGaps; WithTrackerMargins keeps the trackers'). A
// round is what the publishers set: it needs m sources with readings newer
// than every reading the last republish fused.
//
//   - The rendezvous is the m-th earliest of the sources' planned polls.
//     A source for which likelySlots expected publishes have passed since
//     it was last known to have nothing new (a fast source beside slow
//     ones) is not polled on its own schedule: it is counted on, and
//     polled only when its reading completes the round, right after the
//     sources in doubt were found to have published. So its reading is
//     the newest there is when the round is republished, and a fast source
//     costs about one poll a round.
//   - Sources in doubt (their publish may be late or lost) are polled at
//     the rendezvous one at a time, the one due last first: the others
//     only once it has published. When one has nothing, no other source
//     is polled for the round then, and the rendezvous moves on; so a
//     reading is not fetched early for a round that then waits, and the
//     round is not completed with a reading its source has since
//     replaced.
//   - A source that already has new data this round is not polled again.
func WithForecast(q float64) MDPTOption {
	return func(p *MDPT) {
		if !(q > 0 && q < 0.5) {
			q = DefaultEarlyShare
		}
		p.share = q
	}
}

// WithTrackerMargins makes forecast planning use the trackers' own margins
// (Forecaster.Margin) throughout, instead of fitting each source's jitter
// tail to its recent publish-to-publish gaps once enough are known: for
// trackers that know their source's jitter rather than learn it.
func WithTrackerMargins() MDPTOption { return func(p *MDPT) { p.given = true } }

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
	p.newest, p.polled = make([]int64, n), make([]int64, n)
	p.gaps, p.marg = make([]gapRing, n), make([]float64, n)
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
	p.now = now.UnixNano()
	for i := range p.due {
		p.due[i] = now.UnixNano()
	}
}

// Plan returns the time of the next poll round and the sources to poll then,
// appended to buf[:0].
func (p *MDPT) Plan(buf []int) (time.Time, []int) {
	if p.share > 0 {
		return p.planForecast(buf[:0])
	}
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
	at := obs.At.UnixNano()
	p.now = max(p.now, at)
	p.polled[i] = at
	p.due[i] = p.src[i].Next(obs).UnixNano()
	if !obs.Hit {
		return
	}
	if p.share > 0 && !p.given {
		p.learnGaps(i, obs)
	}
	if t, ok := obs.Newest(); ok {
		p.newest[i] = max(p.newest[i], t.UnixNano())
	}
	if p.share == 0 || p.newest[i] > p.cut {
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

// Republished starts a new round: the next needs m sources with readings
// newer than the newest one this republish fused.
func (p *MDPT) Republished() {
	for i, f := range p.fresh {
		if f {
			p.cut = max(p.cut, p.newest[i])
		}
	}
	clear(p.fresh)
}

// Source returns the tracker of source i (for dashboards).
func (p *MDPT) Source(i int) Policy { return p.src[i] }

// planForecast is Plan under WithForecast.
func (p *MDPT) planForecast(out []int) (time.Time, []int) {
	need := p.m
	for _, f := range p.fresh {
		if f {
			need--
		}
	}
	if need <= 0 {
		// Ready: nothing to poll until the caller republishes.
		return p.at(p.now), out
	}
	// Per source not fresh: its planned poll (due) and when it is counted
	// on (likely, MaxInt64: not yet known).
	p.order = p.order[:0]
	for i := range p.src {
		if p.fresh[i] {
			continue
		}
		p.order = append(p.order, i)
	}
	due := func(i int) int64 { return p.forecastDue(i) }
	slices.SortFunc(p.order, func(a, b int) int {
		return cmp.Or(cmp.Compare(due(a), due(b)), cmp.Compare(a, b))
	})
	need = min(need, len(p.order))
	if need == 0 {
		return p.at(p.now), out
	}
	rv := max(due(p.order[need-1]), p.now)
	// Sources counted on by the rendezvous, earliest first.
	nlikely := 0
	var likelyAt int64
	for _, i := range p.order {
		if l := p.likely(i); l <= rv {
			nlikely++
			likelyAt = max(likelyAt, l)
		}
	}
	if nlikely >= need {
		// The round completes from sources counted on: poll need of
		// them, those counted on earliest first.
		slices.SortFunc(p.order, func(a, b int) int {
			return cmp.Or(cmp.Compare(p.likely(a), p.likely(b)), cmp.Compare(a, b))
		})
		at := max(p.likely(p.order[need-1]), p.now)
		return p.at(at), append(out, p.order[:need]...)
	}
	// Poll the source in doubt due last by the rendezvous (the one whose
	// timing sets it); the others in doubt are polled right after it, once
	// it has published, so that none is polled for a round that cannot
	// complete yet.
	last := -1
	for _, i := range p.order {
		if due(i) <= rv && p.likely(i) > rv && (last < 0 || due(i) >= due(last)) {
			last = i
		}
	}
	if last >= 0 {
		out = append(out, last)
	}
	return p.at(rv), out
}

// forecastDue is source i's planned poll under WithForecast: the share's
// margin after the first publish its tracker expects whose poll would
// come after the source's last poll. The tracker's own choice stands when
// it cannot forecast, when it retries within that slot, and when it backs
// off beyond it (a source in a long outage).
func (p *MDPT) forecastDue(i int) int64 {
	own := p.due[i]
	f, ok := p.src[i].(Forecaster)
	if !ok {
		return own
	}
	t, ok1 := f.PredictedPublish()
	d, ok2 := p.margin(i, f)
	per := int64(f.State().Median)
	if !ok1 || !ok2 || per <= 0 {
		return own
	}
	at := t.Add(d).UnixNano()
	if at <= p.polled[i] {
		at += ((p.polled[i]-at)/per + 1) * per
	}
	if (own > p.polled[i] && own < at) || own > at+per/2 {
		return own
	}
	return at
}

// likely is when source i is counted on to have new data: likelySlots of
// its expected publishes (plus the share's margin) after the last time it
// was known to have nothing new for this round (its last poll, or the
// newest reading the last republish fused). MaxInt64 while its tracker
// cannot forecast.
func (p *MDPT) likely(i int) int64 {
	f, ok := p.src[i].(Forecaster)
	if !ok {
		return math.MaxInt64
	}
	st := f.State()
	d, ok := p.margin(i, f)
	if !ok || !st.HasPublish || st.Median <= 0 {
		return math.MaxInt64
	}
	base := max(p.cut, p.polled[i])
	last := st.LastPublish.UnixNano()
	per := int64(st.Median)
	// The first expected publish after base, then likelySlots−1 more; one
	// more when a publish expected before base did not come (the
	// source's losses come in runs).
	k := int64(1)
	if base > last {
		k = (base-last)/per + 1
	}
	k += likelySlots - 1
	if k > likelySlots {
		k++
	}
	return last + k*per + int64(d)
}

// learnGaps adds the gaps between the readings obs brought (and the newest
// one before them) to source i's window and refits its margin: the median
// residual against whole multiples of the tracker's period plus the
// upper tail's scale (the mean of 2·max(r−median, 0), which is b for a
// Laplace tail) times ln(1/(2q)), where only a share q of publishes are
// still to come.
func (p *MDPT) learnGaps(i int, obs Observation) {
	prev := p.newest[i]
	for _, t := range obs.Published {
		ns := t.UnixNano()
		if prev != 0 && ns > prev {
			p.gaps[i].push(float64(ns-prev) / 1e9)
		}
		prev = max(prev, ns)
	}
	f, ok := p.src[i].(Forecaster)
	if !ok {
		return
	}
	per := f.State().Median.Seconds()
	g := &p.gaps[i]
	if per <= 0 || g.n < minMarginGaps {
		p.marg[i] = 0
		return
	}
	var rb [marginGaps]float64
	rs := rb[:0]
	for _, x := range g.v[:g.n] {
		k := math.Round(x / per)
		if k >= 1 && k <= OutagePeriods+1 {
			rs = append(rs, x-k*per)
		}
	}
	if len(rs) < minMarginGaps {
		p.marg[i] = 0
		return
	}
	slices.Sort(rs)
	mid := quantile(rs, 0.5)
	var tail float64
	for _, r := range rs {
		tail += 2 * max(r-mid, 0)
	}
	tail /= float64(len(rs))
	p.marg[i] = min(max(mid+tail*math.Log(1/(2*p.share)), floor(per)), per/2)
}

// margin is source i's forecast margin: its own fit when it has one, else
// the tracker's.
func (p *MDPT) margin(i int, f Forecaster) (time.Duration, bool) {
	if m := p.marg[i]; m > 0 {
		return seconds(m), true
	}
	return f.Margin(p.share)
}
