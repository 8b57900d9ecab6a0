package schedule

import (
	"math"
	"math/rand/v2"
	"time"
)

// Variant selects one of the three DPT variants of Algorithm 1.
type Variant uint8

// The DPT variants. They differ in VARIANT_BIAS (where in the jitter spread
// the first poll after a publish lands, in units of σ) and in
// VARIANT_FAST_TRIES (how many retries spaced by σ follow a miss before the
// policy falls back to whole periods).
const (
	DPTA Variant = iota // aggressive: bias −1, 2 fast tries
	DPTN                // neutral: bias 0, 1 fast try
	DPTL                // lazy: bias +1, no fast try
)

// Constants of Algorithms 1–2.
const (
	// PeriodTries is PERIOD_TRIES: retries on whole periods, with
	// exponential backoff, before bimodal mode.
	PeriodTries = 7
	// OutagePeriods is m: a gap of more than m missed periods is a long
	// outage, not jitter; it is kept out of σ and feeds the bimodal history.
	OutagePeriods = 5
	// DefaultInitial is the poll interval while a feed's period is unknown
	// (fewer than one publish-to-publish gap seen).
	DefaultInitial = 5 * time.Minute
	// minFastSpacing keeps fast retries apart when the jitter is tiny.
	minFastSpacing = time.Second
)

// Bias returns VARIANT_BIAS.
func (v Variant) Bias() float64 {
	switch v {
	case DPTA:
		return -1
	case DPTN:
		return 0
	default:
		return 1
	}
}

// FastTries returns VARIANT_FAST_TRIES.
func (v Variant) FastTries() int {
	switch v {
	case DPTA:
		return 2
	case DPTN:
		return 1
	default:
		return 0
	}
}

// String returns the eval name of the variant ("dpt-a", "dpt-n", "dpt-l").
func (v Variant) String() string {
	switch v {
	case DPTA:
		return "dpt-a"
	case DPTN:
		return "dpt-n"
	default:
		return "dpt-l"
	}
}

// Mode is the retry mode of Algorithm 2.
type Mode uint8

// Retry modes, in the order a run of misses goes through them.
const (
	ModeFast    Mode = iota // right after a publish: first poll, then σ-spaced retries
	ModePeriod              // retries on expected publish times, exponential backoff
	ModeBimodal             // retries on the second (long) period
)

func (m Mode) String() string {
	switch m {
	case ModeFast:
		return "fast"
	case ModePeriod:
		return "period"
	default:
		return "bimodal"
	}
}

// Option configures a DPT-family policy.
type Option func(*options)

type options struct {
	seed       uint64
	unimodal   bool
	initial    time.Duration
	initialSet bool
	missRatio  float64 // Auto only
	noSleep    bool    // Auto only
}

// WithSeed seeds the policy's random source (used for the publisher's
// desynchronisation interval only). Policies with the same seed and the same
// observations return the same times.
func WithSeed(seed uint64) Option { return func(o *options) { o.seed = seed } }

// WithoutBimodal switches bimodal mode off: after PERIOD_TRIES period
// retries the period backoff simply goes on (the paper's "DPT-L without
// bimodal").
func WithoutBimodal() Option { return func(o *options) { o.unimodal = true } }

// WithInitial sets the poll interval used while the period is unknown:
// the DPT variants poll at it, doubling after each miss (DefaultInitial
// unless set); Auto probes from ProbeStart and never waits longer than it
// between two probes (MaxDelay unless set).
func WithInitial(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.initial, o.initialSet = d, true
		}
	}
}

func buildOptions(opts []Option) options {
	o := options{initial: DefaultInitial, missRatio: defaultMissRatio}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// tracker is the publish-time tracking state shared by DPT and MDPT: the
// last HistoryLen gaps between distinct publish events, the long gaps that
// feed bimodal mode, and the newest publish time (the phase). Times are Unix
// nanoseconds to keep the state flat and small.
type tracker struct {
	gaps ring // publish-to-publish gaps, seconds
	long ring // gaps of more than OutagePeriods periods, seconds
	last int64
	med  float64 // period estimate (median gap), seconds; set whenever a gap is added
	// hasPub: a publish has been seen (last is set).
	hasPub bool
}

// spreads are the tracker's statistics beyond the period, each a function
// of the histories: DPT keeps them (it reads them on every poll), Auto
// computes them where it needs them (rarely), which keeps its per-feed
// state small.
type spreads struct {
	sigma        float64 // jitter spread around the period, seconds
	bmed, bsigma float64 // bimodal (long) period and its spread, seconds
}

// spreads computes the statistics addGap keeps up to date in a spreads
// value: for a tracker whose histories only addGap has changed the result
// is bit for bit what addGap left there.
func (t *tracker) spreads() spreads {
	var buf [HistoryLen]float64
	sp := spreads{}
	sp.sigma, _ = jitterSpread(t.gaps.values(&buf), t.med)
	sp.bmed, sp.bsigma = t.bimodal()
	return sp
}

// bimodal returns the median of the long gaps and their spread around it
// (0, 0 while there are none).
func (t *tracker) bimodal() (bmed, bsigma float64) {
	if t.long.len() == 0 {
		return 0, 0
	}
	var buf [HistoryLen]float64
	lv := t.long.values(&buf)
	bmed = median(lv)
	for i := range lv {
		lv[i] -= bmed
	}
	return bmed, stddev(lv)
}

// mergeWindow is how close two publish times must be to count as one publish
// event (items of one batch, duplicates a few milliseconds apart).
func (t *tracker) mergeWindow() int64 {
	w := int64(time.Second)
	if t.med > 0 {
		if m := int64(t.med * 1e9 / 100); m < w {
			w = m
		}
	}
	return w
}

// observe adds the publish events of a hit. newest is the phase-adjusted
// publish time of the newest item; pubs are the item publish times (sorted).
// It reports whether at least one new publish event was recorded. onGap, if
// not nil, sees each new gap (seconds) before the histories take it, and
// the spacing from the publish before it in this hit (for the first, from
// from when set, else from the newest publish); when it returns false the
// publish is not a publish event of its own (an item of a batch): no gap
// is recorded and the newest publish stays where it was. sp, if not nil,
// is kept up to date with every gap added.
func (t *tracker) observe(pubs []time.Time, newest time.Time, from int64, onGap func(g, spacing float64) bool, sp *spreads) bool {
	added := false
	prev := max(t.last, from)
	add := func(ns int64) {
		spacing := float64(ns-prev) / 1e9
		prev = max(prev, ns)
		if t.hasPub {
			if ns-t.last <= t.mergeWindow() {
				if ns > t.last {
					t.last = ns
				}
				return
			}
			g := float64(ns-t.last) / 1e9
			if onGap != nil && !onGap(g, spacing) {
				return
			}
			t.addGap(g, sp)
		}
		t.last = ns
		t.hasPub = true
		added = true
	}
	// newest may differ from the newest item date (a phase hint, a date in
	// the future): the hint corrects the publisher's clock, so every item
	// date moves by the same amount.
	nn := newest.UnixNano()
	var shift int64
	if n := len(pubs); n > 0 {
		shift = nn - pubs[n-1].UnixNano()
	}
	for _, p := range pubs {
		if ns := p.UnixNano() + shift; ns < nn {
			add(ns)
		}
	}
	add(nn)
	return added
}

func (t *tracker) addGap(g float64, sp *spreads) {
	if g <= 0 {
		return
	}
	t.gaps.push(g)
	var buf [HistoryLen]float64
	t.med = median(t.gaps.values(&buf))
	long := t.med > 0 && g > float64(OutagePeriods+1)*t.med
	if long {
		t.long.push(g)
	}
	if sp == nil {
		return
	}
	if long {
		sp.bmed, sp.bsigma = t.bimodal()
	}
	// σ: the spread of the publishing jitter around the median.
	sp.sigma, _ = jitterSpread(t.gaps.values(&buf), t.med)
}

func (t *tracker) known() bool { return t.gaps.len() > 0 && t.med > 0 }

// expect returns the time of the k-th expected publish after the last one,
// shifted by bias·σ (all in nanoseconds).
func (d *DPT) expect(k, bias float64) int64 {
	return addSeconds(d.last, k*d.med+bias*d.sp.sigma)
}

// DPT is Data Publication Tracking, Algorithms 1 and 2 of Park & Heidemann:
// it predicts the next publish time from the median gap and its jitter and
// polls right then, retrying in fast, period and bimodal modes after misses.
// See the package documentation for the exact interpretation implemented.
type DPT struct {
	tracker
	sp       spreads
	variant  Variant
	unimodal bool
	mode     Mode
	tries    uint16
	misses   uint16 // polls since the last hit
	initial  time.Duration
	rng      rand.PCG
}

// NewDPT returns a DPT policy of the given variant.
func NewDPT(v Variant, opts ...Option) *DPT {
	o := buildOptions(opts)
	d := &DPT{variant: v, unimodal: o.unimodal, initial: o.initial}
	d.rng.Seed(o.seed, 0x736c6f6766656564) // "slogfeed"
	return d
}

// Name returns the eval name: dpt-a, dpt-n, dpt-l, or dpt-l-unimodal.
func (d *DPT) Name() string {
	if d.unimodal {
		return d.variant.String() + "-unimodal"
	}
	return d.variant.String()
}

// desync draws the intentional desynchronisation offset.
func desync(r *rand.PCG, hint time.Duration) int64 {
	if hint <= 0 {
		return 0
	}
	return int64(r.Uint64() % uint64(hint))
}

// Next implements Policy.
func (d *DPT) Next(obs Observation) time.Time {
	now := obs.At.UnixNano()
	bias := d.variant.Bias()
	if obs.Hit {
		newest, _ := obs.Newest()
		d.observe(obs.Published, newest, 0, nil, &d.sp)
		d.mode, d.tries, d.misses = ModeFast, 0, 0
		if obs.MoreData {
			return obs.At
		}
		if !d.known() {
			return obs.At.Add(d.initial)
		}
		// Phase adjustment: rebase on the publish time just seen. The first
		// poll lands one median (plus the variant's bias) after it; if that
		// is already past, on the next expected publish instead.
		next := d.expect(1, bias)
		if next <= now {
			k := math.Floor(float64(now-d.last)/1e9/d.med) + 1
			next = d.expect(k, bias)
		}
		return d.finish(obs, addNanos(next, float64(desync(&d.rng, obs.Hints.Desync))))
	}

	d.misses++
	if !d.known() {
		// Period unknown: back off from the initial interval.
		shift := min(int(d.misses)-1, 20)
		return clampNext(obs.At, obs.At.Add(d.initial<<shift))
	}
	if d.mode == ModeFast {
		if int(d.tries) < d.variant.FastTries() {
			d.tries++
			step := max(seconds(d.sp.sigma), minFastSpacing)
			return d.finish(obs, now+int64(step))
		}
		d.mode, d.tries = ModePeriod, 0
	}
	if d.mode == ModePeriod && (int(d.tries) >= PeriodTries && !d.unimodal && d.long.len() > 0) {
		d.mode, d.tries = ModeBimodal, 0
	}
	// Skip expected instants that have already passed (a slow fetch, a
	// restart, a bimodal period shorter than the period backoff's reach).
	var next int64
	for {
		k := math.Exp2(float64(min(d.tries, 40)))
		switch d.mode {
		case ModePeriod:
			// Retry i lands on expected publish t_p + (1+2^i)·median +
			// bias·σ: the next period first, then exponentially further
			// apart. Computing it from t_p (not from now) is
			// next_delay_bias: the time already spent in faster modes is
			// not added again.
			next = d.expect(1+k, bias)
		default:
			// Bimodal retry j lands on the expected return t_p + (bimodal
			// median) + bias·σ_b, then on the expected publishes after it,
			// exponentially further apart: + (2^j − 1)·median.
			next = addSeconds(d.last, d.sp.bmed+bias*d.sp.bsigma+(k-1)*d.med)
		}
		if d.tries < math.MaxUint16 {
			d.tries++
		}
		if next > now || d.tries > 48 {
			break
		}
	}
	return d.finish(obs, addNanos(next, float64(desync(&d.rng, obs.Hints.Desync))))
}

func (d *DPT) finish(obs Observation, next int64) time.Time {
	return clampNext(obs.At, time.Unix(0, next).UTC())
}

// State is a read-only view of a tracking policy, for dashboards and the API.
type State struct {
	Median, Sigma time.Duration // period estimate and jitter spread
	BimodalMedian time.Duration // long period (zero when none seen)
	BimodalSigma  time.Duration
	Mode          Mode
	Tries         int // retries made in the current mode
	Gaps          int // gaps in the history
	LastPublish   time.Time
	HasPublish    bool
	// LearnedSleep is the daily window Auto has learned the publisher
	// sleeps through (HasLearnedSleep): no poll lands inside it.
	LearnedSleep    DailyWindow
	HasLearnedSleep bool
}

// State returns the policy's current estimates.
func (d *DPT) State() State { return d.tracker.state(d.mode, int(d.tries), d.sp) }

func (t *tracker) state(m Mode, tries int, sp spreads) State {
	s := State{
		Median: seconds(t.med), Sigma: seconds(sp.sigma),
		BimodalMedian: seconds(sp.bmed), BimodalSigma: seconds(sp.bsigma),
		Mode: m, Tries: tries, Gaps: t.gaps.len(), HasPublish: t.hasPub,
	}
	if t.hasPub {
		s.LastPublish = time.Unix(0, t.last).UTC()
	}
	return s
}

// PredictedPublish returns when the next publish is expected: one median
// after the last one (false while the period is unknown). The scheduler
// uses it to rank feeds waiting for the fetch budget.
func (d *DPT) PredictedPublish() (time.Time, bool) {
	if !d.known() {
		return time.Time{}, false
	}
	return time.Unix(0, d.expect(1, 0)).UTC(), true
}
