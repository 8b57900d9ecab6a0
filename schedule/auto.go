package schedule

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// defaultMissRatio is the share of publishes Auto accepts to poll for too
// early: it polls when, by the jitter distribution it has learned, 99% of
// publishes have arrived.
const defaultMissRatio = 0.01

// minMissRatio is the least share of early polls Auto aims for when the
// jitter is small against the period.
const minMissRatio = 0.001

// residualLen is how many jitter residuals Auto keeps for the centre of the
// jitter distribution; tailMemory is how many its tail scale averages over.
const (
	residualLen = 32
	tailMemory  = 256
	// gridGain is how far the grid anchor moves toward each publish: enough
	// to follow clock drift within a few periods, little enough that one
	// glitch does not shift the grid.
	gridGain = 0.25
	// minMargin is the least margin, as a share of the period, between the
	// typical publish and the poll, up to maxMinMargin seconds: timestamps
	// quantised by a coarse timer and glitches of a second or so are not
	// worth a miss that costs a whole period.
	minMargin    = 0.02
	maxMinMargin = 2.0
)

// floor returns the least margin for a period of p seconds.
func floor(p float64) float64 { return min(minMargin*p, maxMinMargin) }

// models is what Auto learns about its two ways of predicting the next
// publish (renewal and grid, see learn): for each, the recent residuals of
// its predictions, their median, and the scale of their upper tail. The
// offsets fitted to them are recomputed when needed (fit), not kept: a
// million feeds keep a million of these. Medians and tails come first and
// the windows after them, so that the pair has no padding.
type models struct {
	mid  [2]float64 // median residual, seconds (set by fit)
	tail [2]float64 // running scale of the upper jitter tail, seconds
	res  [2]window
}

// fitted is one model's fit: the poll offset after its prediction and the
// largest recent residual, seconds.
type fitted struct {
	off, top float64
}

// push adds residual r (seconds) to model i.
func (ms *models) push(i int, r float64) {
	w := &ms.res[i]
	w.push(r)
	// The upper tail's scale: for a Laplace tail the mean of
	// 2·max(r−median, 0) is its scale b. A running mean over the last
	// ~tailMemory residuals is far steadier than a tail fitted to the
	// window alone, and a steady offset is what keeps the miss rate low.
	if w.seen < tailMemory {
		w.seen++
	}
	ms.tail[i] += (2*max(r-ms.mid[i], 0) - ms.tail[i]) / float64(w.seen)
}

// fit returns model i's offset: poll where only missRatio of publishes are
// still to come by the exponential tail; and since a late publish missed
// costs a whole period of latency, wait for the latest recent one too when
// that costs at most 2% of a period. It also returns the median residual;
// ok is false while fewer than 8 residuals are known.
func (ms *models) fit(i int, missRatio, period float64) (f fitted, mid float64, ok bool) {
	var rb [residualLen]float64
	w := &ms.res[i]
	rs := rb[:w.n]
	if len(rs) < 8 {
		return fitted{}, 0, false
	}
	for j := range rs {
		rs[j] = float64(w.v[j])
	}
	slices.Sort(rs)
	mid = quantile(rs, 0.5)
	f.top = rs[len(rs)-1]
	// Never less reliable than a timer: a fixed poller of the same period
	// loses a hit when two jittered publishes fall into one interval,
	// about E|jitter|/(2·period) of the time (the tail scale estimates
	// E|jitter|). Poll early no more often than that, within
	// [minMissRatio, missRatio].
	tail := ms.tail[i]
	ratio := min(missRatio, max(minMissRatio, tail/(2*period)))
	f.off = mid + max(tail*math.Log(1/(2*ratio)), floor(period))
	if f.top > f.off && f.top-f.off <= 0.02*period {
		f.off = f.top
	}
	return f, mid, true
}

// window is a ring of the most recent jitter residuals (seconds), and how
// many residuals the model has seen (caps at tailMemory).
type window struct {
	v    [residualLen]float32
	n    uint8
	next uint8
	seen uint16
}

func (w *window) push(x float64) {
	w.v[w.next] = float32(x)
	w.next = (w.next + 1) % residualLen
	if w.n < residualLen {
		w.n++
	}
}

// WithMissRatio sets the share of publishes Auto may poll for too early
// (default 0.01). Smaller values trade latency for hit rate.
func WithMissRatio(p float64) Option {
	return func(o *options) {
		if p > 0 && p < 0.5 {
			o.missRatio = p
		}
	}
}

// Auto is slogfeed's default policy. It keeps DPT's model (a period, a
// jitter, losses, a second long period) but learns the jitter distribution
// instead of assuming one σ fits all, and it is built to dominate
// fixed-interval polling on latency and hit rate at once:
//
//   - the period is refined from every gap shorter than a long outage (a
//     gap of k periods counts as k samples of the period), so losses do not
//     bias it;
//   - each publish's residual against the prediction (its distance to the
//     nearest whole multiple of the period after the previous publish) goes
//     into a window of the last 64; the poll offset after the expected
//     publish instant is the smaller of an exponential-tail fit and the
//     empirical quantile at which only the miss ratio (1%) of publishes is
//     still to come;
//   - after a miss it retries on every expected publish instant (a lost
//     reading is most likely followed by a good one) for OutagePeriods
//     periods, then backs off exponentially; when losses are rarer than late
//     publishes it first retries once just past the jitter tail, because
//     then a miss most likely means "late", not "lost";
//   - gaps of more than OutagePeriods periods form a second (bimodal)
//     history; during an outage Auto also polls where that long period says
//     the next publish is due, so a batched publisher is caught on its own;
//   - while the period is unknown it probes, within a budget of polls:
//     spaced by the time waited until an item shows, then at offsets from
//     that item that grow past the time the feed is known to have been
//     quiet around it (probeNext, probeAfter); it checks the first gap's
//     middle for a lost reading, and while few residuals are known it
//     probes for a missed publish within the slot;
//   - a publisher quiet through the same window of every day gets a
//     learned daily sleep, and polls after a miss are moved out of it.
//
// See the package documentation for the measurements behind these choices.
//
// Auto is one heap object per feed, in the runtime's 640-byte size class
// (TestAutoSize keeps it there; the next class is 704): the wider fields
// come first, and what is a function of the rest (the models' fitted
// offsets, the tracker's spreads) is recomputed where it is needed
// instead of kept.
type Auto struct {
	tracker
	period    float64 // refined period, seconds
	anchor    int64   // grid model: smoothed instant of the last publish slot, Unix ns
	models    models  // [0] renewal, [1] grid
	off       float64 // poll offset after an expected publish, seconds
	late      float64 // offset of the quick retry, seconds
	lateN     float64 // decayed count of misses that were late publishes
	lostN     float64 // decayed count of misses that were lost publishes
	missAt    int64   // expected instant of the slot a run of misses began on (0: none)
	missRatio float64
	empty     int64 // when a poll first found the feed empty, Unix ns (0: never)
	plan      plan  // the publisher's planned updates (Hints.Due)
	rng       rand.PCG
	slot      uint16 // periods after the last publish the last poll aimed at
	backoff   uint16 // exponential backoff steps taken past OutagePeriods
	btries    uint16 // bimodal tries
	misses    uint16
	probe     float32 // the next learning probe interval, seconds (0: start over)
	// lower: while one publish is known, how long the feed is known to
	// have been quiet around it; once the period rests on batchGaps gaps
	// (it is not read after the first gap), how far past the newest
	// publish the items of the batch being read reach (see gap). Seconds.
	lower   float32
	initial float32 // longest probe interval while learning (WithInitial), seconds
	coldN   uint16  // polls made while the period was unknown
	grid    bool    // the grid model predicts better than the renewal one
	retry   retryFlags
	quiet   quiet // the learned daily sleep
	batch   uint8 // hits in a row that carried a batch (see gap), batchNow and batchMore
	mode    Mode
}

// NewAuto returns slogfeed's default policy.
func NewAuto(opts ...Option) *Auto {
	o := buildOptions(opts)
	// A prior of half a lost miss: quick retries start only once late
	// misses clearly dominate.
	a := &Auto{initial: float32(MaxDelay.Seconds()), missRatio: o.missRatio, lostN: 0.5}
	if o.initialSet {
		a.initial = float32(min(o.initial, MaxDelay).Seconds())
	}
	a.quiet.off = o.noSleep
	a.rng.Seed(o.seed, 0x6175746f) // "auto"
	return a
}

// Name returns "auto".
func (a *Auto) Name() string { return "auto" }

// State returns the policy's current estimates; Median is the refined
// period and Sigma the poll offset after the expected publish.
func (a *Auto) State() State {
	var sp spreads // Sigma is Auto's own
	sp.bmed, sp.bsigma = a.bimodal()
	s := a.tracker.state(a.mode, int(a.misses), sp)
	s.Median, s.Sigma = seconds(a.period), seconds(a.off)
	s.LearnedSleep, s.HasLearnedSleep = a.quiet.window()
	return s
}

// retryFlags are Auto's flags of the polls after a publish.
type retryFlags uint8

const (
	retryQuick retryFlags = 1 << iota // the quick retry for this slot is spent
	retryHalf                         // the last poll looked at the middle of the only known gap
	retryCheck                        // the last poll checked a cycle's long gap one spacing in (see cycled)
)

// batchHits: from the batchHits-th hit in a row that carries a batch
// (see gap) on, its short gaps are taken for the period. In Auto.batch,
// batchNow marks that the hit being observed carries one, batchMore that
// the hit before said more data was waiting (the next hit reads on, and
// is not another hit in a row); the rest is the count of hits.
const (
	batchHits  = 4
	batchNow   = 0x80
	batchMore  = 0x40
	batchCount = batchMore - 1
	// batchSpacing: a publish less than a period over batchSpacing
	// after the one before it is an item of a batch. The learned period
	// can be too long by at most OutagePeriods+1 times (a gap across
	// that many lost readings); publishes closer than that cannot be
	// steps of the period.
	batchSpacing = OutagePeriods + 2
	// batchGaps is how many gaps the period must rest on: a period
	// learned from a gap or two across an outage may be many times too
	// long, and its first real gaps are not a batch.
	batchGaps = 8
)

// gap decides whether a publish of a hit, g seconds after the newest
// publish known and spacing seconds after the publish before it in the
// hit, is a publish event of its own, and learns from it if so. Once the
// period rests on batchGaps gaps, a publish less than a period over
// batchSpacing after the one before it (an item of the batch a hit before
// read included) is not a step of the period but an item of a batch (a
// backfill of stored readings, a burst of corrections): learning its gap
// would score a residual of nearly a period, pull the jitter model's tail
// out of shape for hundreds of periods and, with enough of them, take the
// spacing for the period. Such an item neither is learned nor moves the
// newest publish the next poll is planned from; a.lower keeps how far
// past it the batch reaches. A batch may take more than one hit to read
// (the pages of a publisher saying more data is waiting are one read); a
// publisher whose period really shrank brings such gaps in every hit, so
// from the batchHits-th hit in a row on they are learned.
func (a *Auto) gap(g, spacing float64) bool {
	if a.gaps.len() < batchGaps {
		a.learn(g)
		return true
	}
	inBatch := a.batch&(batchNow|batchCount) != 0
	if spacing < a.period/batchSpacing {
		// The hits in a row before this one: the page of a read that
		// said more data was waiting is judged as the read's first hit.
		n := a.batch & batchCount
		if a.batch&batchMore != 0 && n > 0 {
			n--
		}
		a.batch |= batchNow
		if n < batchHits-1 {
			if inBatch {
				a.lower = max(a.lower, float32(g))
			} else {
				a.lower = float32(g) // a batch begins
			}
			return false
		}
	}
	a.learn(g)
	if inBatch {
		a.lower = 0 // the newest publish moves past the batch
	}
	return true
}

// batchFrom is where the batch being read reaches (Unix ns; 0: no batch),
// the publish the first item of a hit is spaced from.
func (a *Auto) batchFrom() int64 {
	if a.gaps.len() < batchGaps || a.batch&batchCount == 0 || a.lower <= 0 {
		return 0
	}
	return addSeconds(a.last, float64(a.lower))
}

// cycleSlack is how far, as a share of the cycle, a long gap may be from
// the median long gap plus whole cycles.
const cycleSlack = 0.1

// cycled is a cycle's prediction (see Auto.cycle), seconds: the next
// gap, the margin after it, and the cycle's length; long: the next gap is
// the long one between groups.
type cycled struct {
	next, off, length float64
	long              bool
}

// cycle looks for a feed that carries the readings of several sensors,
// each a few seconds after the other once a period: k−1 short gaps inside
// each group of k readings and a long one between groups. The period
// learned from such gaps is the spacing inside a group, and after the
// group's last reading the renewal and grid predictions would poll every
// spacing until the next group came. A cycle is recognised when the gaps
// are of two kinds (every long one at least batchSpacing times every
// short one), at least three long ones came exactly k gaps apart, and
// each long gap is the median long gap plus a whole number of cycles
// (groups lost in between) within cycleSlack of a cycle. Steady
// publishers have gaps of one kind; a lossy one's are whole multiples of
// its period, with no wide step between them; long outages come at
// random places and lengths (and outages that came at regular places are
// caught by the poll choose makes a spacing into each long gap). The next gap is then predicted as the one
// at the same place of the cycle before (the median long gap when that
// comes next), and the margin is three times the median error of that
// prediction over the history, at least the period's least margin for
// the cycle's length and the date's resolution, at most half the gap.
func (a *Auto) cycle() (cycled, bool) {
	n := a.gaps.len()
	if n < 6 {
		return cycled{}, false
	}
	var buf [HistoryLen]float64
	gs := a.gaps.ordered(&buf)
	if slices.Max(gs) < batchSpacing*slices.Min(gs) {
		return cycled{}, false // gaps all of one kind (most feeds: no sort)
	}
	// The two kinds: the widest step between the sorted gaps, at least
	// batchSpacing to one.
	var sorted [HistoryLen]float64
	copy(sorted[:n], gs)
	slices.Sort(sorted[:n])
	split, step := 0.0, 0.0
	for i := 1; i < n; i++ {
		if sorted[i-1] > 0 && sorted[i]/sorted[i-1] > step {
			split, step = sorted[i], sorted[i]/sorted[i-1]
		}
	}
	if step < batchSpacing {
		return cycled{}, false
	}
	var longs [HistoryLen]float64
	nl, k, prev := 0, 0, -1
	for i, g := range gs {
		if g < split {
			continue
		}
		if prev >= 0 {
			if k == 0 {
				k = i - prev
			} else if i-prev != k {
				return cycled{}, false
			}
		}
		longs[nl] = g
		nl++
		prev = i
	}
	if nl < 3 || k < 2 || n-1-prev >= k {
		return cycled{}, false // no cycle, or its last long gap is overdue
	}
	copy(sorted[:nl], longs[:nl])
	medL := median(sorted[:nl])
	length := medL // and the k−1 short gaps before the last long one
	for _, g := range gs[prev-k+1 : prev] {
		length += g
	}
	for _, g := range longs[:nl] {
		r := (g - medL) / length
		if math.Round(r) < 0 || math.Abs(r-math.Round(r)) > cycleSlack {
			return cycled{}, false
		}
	}
	var eb [HistoryLen]float64
	es := eb[:0]
	for i := k; i < n; i++ {
		es = append(es, math.Abs(gs[i]-gs[i-k]))
	}
	c := cycled{next: gs[n-k], length: length}
	if n-1-prev == k-1 {
		c.next, c.long = medL, true // the group is complete: the long gap comes next
	}
	c.off = min(max(3*median(es), floor(length), a.dateStep()), c.next/2)
	return c, true
}

// cycleRetry is the retry after a miss while the feed's gaps follow a
// cycle (see cycle): once just past three margins (a late group), then
// at the same place of each following cycle (a lost group), up to the
// OutagePeriods-th miss; after that the period's backoff goes on.
func (a *Auto) cycleRetry(now int64) (int64, bool) {
	if a.misses > OutagePeriods {
		return 0, false
	}
	c, ok := a.cycle()
	if !ok {
		return 0, false
	}
	if a.misses == 1 && a.retry&retryQuick == 0 {
		a.retry |= retryQuick
		if next := addSeconds(a.last, c.next+3*c.off); next > now {
			return next, true
		}
	}
	for m := 1.0; m <= OutagePeriods+1; m++ {
		if next := addSeconds(a.last, c.next+c.off+m*c.length); next > now {
			return next, true
		}
	}
	return 0, false
}

// learn takes one publish-to-publish gap before the tracker adds it and
// scores both predictions of that publish: renewal (one period after the
// previous publish) and grid (on the smoothed slot grid).
func (a *Auto) learn(g float64) {
	t := a.last + int64(g*1e9)
	a.quiet.learn(a.last, t, a.period)
	p := a.period
	if p <= 0 || g > float64(OutagePeriods+1)*p {
		a.anchor = t // a long outage: the publisher may restart anywhere
		return
	}
	k := max(1, math.Round(g/p))
	rR := g - k*p
	n := max(1, math.Round(float64(t-a.anchor)/1e9/p))
	pred := a.anchor + int64(n*p*1e9)
	rG := float64(t-pred) / 1e9
	if math.Abs(rG) > p/4 {
		// The phase moved (a restart, a re-synchronised clock): rebase.
		a.anchor, rG = t, rR
	} else {
		a.anchor = pred + int64(gridGain*rG*1e9)
	}
	a.models.push(0, rR)
	a.models.push(1, rG)
}

// classify learns why the run of misses that began at a.missAt happened:
// if a publish came within half a period of that slot it was late,
// otherwise the reading was lost.
func (a *Auto) classify(pubs []time.Time, newest time.Time) {
	if a.missAt == 0 {
		return
	}
	half := int64(a.period * 1e9 / 2)
	late := false
	check := func(t int64) {
		if d := t - a.missAt; d > -half && d < half {
			late = true
		}
	}
	for _, p := range pubs {
		check(p.UnixNano())
	}
	check(newest.UnixNano())
	const decay = 0.95
	a.lateN, a.lostN = a.lateN*decay, a.lostN*decay
	if late {
		a.lateN++
	} else {
		a.lostN++
	}
	a.missAt = 0
}

// refresh recomputes the period and the offsets from the histories.
func (a *Auto) refresh() {
	var buf [HistoryLen]float64
	gs := a.gaps.values(&buf)
	slices.Sort(gs)
	// Anchor on a low quantile, not the median: with heavy losses fewer
	// than half the gaps may be one period long, and the median slips to
	// a multiple (or between two).
	rough := quantile(gs, 0.3)
	if rough <= 0 {
		rough = a.med
	}
	n := 0
	for _, g := range gs {
		k := math.Round(g / rough)
		if k >= 1 && k <= OutagePeriods+1 {
			gs[n] = g / k
			n++
		}
	}
	if n > 0 {
		a.period = median(gs[:n])
	} else {
		a.period = a.med
	}

	if a.anchor == 0 {
		a.anchor = a.last
	}
	fR, okR := a.fit(0)
	fG, okG := a.fit(1)
	switch {
	case !okR:
		// Too few residuals for a tail yet: three σ after the period,
		// σ being the spread of the gaps around whole multiples of the
		// refined period (the tracker's σ goes by the raw median, which
		// a lost reading among few gaps moves to a multiple).
		a.grid = false
		sd, n := jitterSpread(a.gaps.values(&buf), a.period)
		a.off = max(3*sd, floor(a.period))
		if n < 2 {
			// One gap: no spread to go by at all.
			a.off = max(a.off, oneGapMargin*a.period)
		}
		a.late = 2 * a.off
	default:
		spreadR, spreadG := fR.off-a.models.mid[0], fG.off-a.models.mid[1]
		a.grid = okG && spreadG < spreadR
		f, spread := fR, spreadR
		if a.grid {
			f, spread = fG, spreadG
		}
		a.off = f.off
		a.late = max(f.top, f.off) + max(spread, floor(a.period))
	}
	// A publish dated to a whole second happened somewhere in that
	// second: never poll within it, or a publisher a fraction of a second
	// past its dated instant is polled just before every publish and
	// fetched a period late, each poll still a hit.
	a.off = max(a.off, a.dateStep())
	if lim := a.period / 2; a.off > lim {
		a.off = lim
	}
	if a.late < a.off {
		a.late = a.off
	}
	if lim := a.period / 2; a.late > lim {
		a.late = lim
	}
}

// fit fits model i at the current period and miss ratio and keeps its
// median residual (the tail's reference).
func (a *Auto) fit(i int) (fitted, bool) {
	f, mid, ok := a.models.fit(i, a.missRatio, a.period)
	if ok {
		a.models.mid[i] = mid
	}
	return f, ok
}

// dateStep is the resolution, in seconds, the newest publish time was
// given in: 1 when it is a whole second (RSS, Atom and HTTP dates often
// are), else 0. One exact-second instant among millisecond dates costs at
// most a second of margin for one period.
func (a *Auto) dateStep() float64 {
	if a.last%int64(time.Second) == 0 {
		return 1
	}
	return 0
}

// quantile returns the q-quantile of sorted xs by linear interpolation.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	pos := q * float64(len(xs)-1)
	i := int(pos)
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	f := pos - float64(i)
	return xs[i]*(1-f) + xs[i+1]*f
}

// at returns the expected instant of publish slot k after the last publish
// plus off. When the grid model predicts better, it is the later of the
// grid's and the renewal model's instants: on a steady grid they agree, and
// when the publisher's phase shifts the renewal model follows at once while
// the grid catches up over a few periods.
func (a *Auto) at(k, off float64) int64 {
	t := addSeconds(a.last, k*a.period+off)
	if a.grid {
		g := addSeconds(a.anchor, k*a.period+off)
		t = max(t, g)
	}
	return t
}

// Next implements Policy. When the publisher plans its next update
// (Hints.Due) Auto polls right after it, unless its last MaxPlanMisses
// plan-placed polls in a row found nothing. It learns from every hit
// either way; a plan-placed poll that misses before Auto's own next poll
// was due leaves Auto's own retry state alone (the publisher was early in
// its expectations, Auto's were not tested), so falling back costs no
// publish.
func (a *Auto) Next(obs Observation) time.Time {
	now := obs.At.UnixNano()
	var own int64
	if !obs.Hit && a.plan.at != 0 && a.plan.own > now {
		own = a.plan.own
	} else {
		own = a.next(obs).UnixNano()
	}
	if obs.Hit && obs.MoreData {
		a.plan = plan{}
		return obs.At
	}
	a.plan.own = own
	return clampNext(obs.At, time.Unix(0, a.plan.next(obs, own)).UTC())
}

// next is Auto's own choice after obs, moved out of the learned sleep.
func (a *Auto) next(obs Observation) time.Time {
	if obs.Hit {
		a.quiet.woke = 0
	}
	t := a.choose(obs)
	if a.misses == 0 {
		// The first poll after a publish: the publisher may be awake
		// later than it was the days before.
		return t
	}
	if w, ok := a.quiet.wake(t); ok {
		// No poll inside a learned sleep: the first lands at wake-up, and
		// the misses after it retry every period (see choose).
		a.quiet.woke = 1
		return clampNext(obs.At, w)
	}
	return t
}

// choose is Auto's own choice after obs, before the learned sleep.
func (a *Auto) choose(obs Observation) time.Time {
	now := obs.At.UnixNano()
	if !a.known() && a.coldN < math.MaxUint16 {
		a.coldN++
	}
	if obs.Hit {
		newest, _ := obs.Newest()
		a.classify(obs.Published, newest)
		learned := a.observe(obs.Published, newest, a.batchFrom(), a.gap, nil)
		switch n := a.batch & batchCount; {
		case a.batch&batchNow == 0:
			a.batch = 0
		case a.batch&batchMore != 0 && n > 0:
			a.batch = n // the same read, on
		default:
			a.batch = min(n+1, batchHits)
		}
		if obs.MoreData && a.batch&batchCount != 0 {
			a.batch |= batchMore
		}
		if learned {
			a.refresh()
		}
		a.slot, a.backoff, a.btries, a.misses, a.retry, a.mode = 1, 0, 0, 0, 0, ModeFast
		if !a.known() {
			// One publish seen, no gap yet. Nothing was published
			// between it and now, nor between the first empty poll and
			// it: the period is most likely longer than both.
			q := max(float64(now-a.last)/1e9, 0)
			if a.empty != 0 && a.last > a.empty {
				q = max(q, float64(a.last-a.empty)/1e9)
			}
			a.lower = float32(q)
		}
		if obs.MoreData {
			return obs.At
		}
		if !a.known() {
			return a.probeAfter(obs)
		}
		a.probe = 0
		if a.gaps.len() == 1 && a.period >= 2*float64(a.lower) {
			// One gap: a reading lost inside it would make it two
			// periods long. Look at its middle first, unless the feed
			// is known to have been quiet for longer than that.
			if h := a.last + int64((a.period/2+a.off)*1e9); h > now {
				a.retry |= retryHalf
				return a.finish(obs, addNanos(h, float64(desync(&a.rng, obs.Hints.Desync))))
			}
		}
		if c, ok := a.cycle(); ok {
			// Before a long gap, one poll where the spacing says the next
			// reading would come: a publisher whose outages happened to
			// come at regular places looks like a cycle, and goes on
			// publishing through the long gap predicted.
			if check := a.at(1, a.off); c.long && check > now && check < addSeconds(a.last, c.next) {
				a.retry |= retryCheck
				return a.finish(obs, addNanos(check, float64(desync(&a.rng, obs.Hints.Desync))))
			}
			if next := addSeconds(a.last, c.next+c.off); next > now {
				return a.finish(obs, addNanos(next, float64(desync(&a.rng, obs.Hints.Desync))))
			}
		}
		next := a.at(1, a.off)
		if next <= now {
			k := math.Floor(float64(now-a.last)/1e9/a.period) + 1
			a.slot = uint16(min(k, math.MaxUint16))
			next = a.at(k, a.off)
		}
		return a.finish(obs, addNanos(next, float64(desync(&a.rng, obs.Hints.Desync))))
	}

	if a.retry&retryHalf != 0 {
		// The middle of the only gap is quiet: the gap is one period.
		a.retry &^= retryHalf
		return a.finish(obs, addNanos(a.at(1, a.off), float64(desync(&a.rng, obs.Hints.Desync))))
	}
	a.batch &^= batchMore // the read ended
	if a.retry&retryCheck != 0 {
		// The check before a cycle's long gap found nothing: the cycle
		// holds, poll where it says.
		a.retry &^= retryCheck
		if c, ok := a.cycle(); ok {
			if next := addSeconds(a.last, c.next+c.off); next > now {
				return a.finish(obs, addNanos(next, float64(desync(&a.rng, obs.Hints.Desync))))
			}
		}
	}
	a.misses = min(a.misses+1, math.MaxUint16-1)
	if !a.known() {
		if a.hasPub {
			return a.probeAfter(obs)
		}
		if a.empty == 0 {
			a.empty = now
		}
		return a.probeNext(obs)
	}
	if a.misses == 1 {
		a.missAt = a.at(float64(a.slot), 0)
	}
	if next, ok := a.cycleRetry(now); ok {
		return a.finish(obs, next)
	}
	// The poll at a learned wake-up missed: the publisher wakes on its own
	// clock, so look again every period for OutagePeriods periods.
	if a.quiet.woke > 0 && a.quiet.woke <= OutagePeriods {
		a.quiet.woke++
		return a.finish(obs, now+int64(a.period*1e9))
	}
	// While too few residuals are known for a jitter tail, a miss is
	// probed for within the slot, at intervals that grow from a small
	// share of the period, rather than a whole period later.
	if next, ok := a.learningProbe(now); ok {
		return a.finish(obs, next)
	}
	// Quick retry, on the first miss of a run only: when misses have
	// almost always (≥ 90%) been late publishes rather than lost ones, this
	// one most likely is too, so look again just past the tail rather than
	// a whole period later. (A retry raises the hit rate only when it
	// succeeds more often than polls do in general.)
	if a.retry&retryQuick == 0 && a.misses == 1 && a.mode != ModeBimodal && a.slot <= OutagePeriods+1 && a.lateN > 9*a.lostN {
		a.retry |= retryQuick
		if next := a.at(float64(a.slot), a.late); next > now {
			return a.finish(obs, next)
		}
	}
	a.retry &^= retryQuick
	var next int64
	bmed, bsigma, haveB := 0.0, 0.0, false
	for i := 0; i < 64; i++ {
		// The next period candidate: every slot up to OutagePeriods+1, then
		// exponentially further apart.
		var k float64
		if a.slot < OutagePeriods+1 {
			k = float64(a.slot) + 1
		} else {
			k = OutagePeriods + 1 + math.Exp2(float64(min(a.backoff, 40)))
		}
		pnext := a.at(k, a.off)
		bnext := int64(math.MaxInt64)
		if a.long.len() > 0 && a.slot >= OutagePeriods+1 {
			if !haveB {
				bmed, bsigma = a.bimodal()
				haveB = true
			}
			bk := math.Exp2(float64(min(a.btries, 40)))
			bnext = addSeconds(a.last, bmed+bsigma+(bk-1)*a.period+a.off)
		}
		if bnext < pnext {
			a.btries = min(a.btries+1, math.MaxUint16-1)
			a.mode = ModeBimodal
			next = bnext
		} else {
			if a.slot < OutagePeriods+1 {
				a.slot++
			} else {
				a.slot = OutagePeriods + 1
				a.backoff = min(a.backoff+1, math.MaxUint16-1)
			}
			a.mode = ModePeriod
			next = pnext
		}
		if next > now {
			break
		}
	}
	if next <= now {
		next = now
	}
	return a.finish(obs, addNanos(next, float64(desync(&a.rng, obs.Hints.Desync))))
}

// Cold start. While no publish-to-publish gap is known, Auto probes; the
// spacing comes from the cold-start budget, ColdPolls polls per period
// over the first ColdPeriods periods of a subscription (the requests of
// fixed polling at the true period, twice over).
const (
	// ProbeStart is the first probe interval of a feed found empty, and
	// the least interval between two probes.
	ProbeStart = 2 * time.Second
	// probeShare: the interval between probes of a feed that has shown
	// no item yet is this share of the time since it was first found
	// empty. From ProbeStart a day is reached in about 13 probes.
	probeShare = 1.3
	// ColdPolls and ColdPeriods: the cold-start budget.
	ColdPolls   = 2
	ColdPeriods = 10
	// coldReserve is the part of the budget kept for the periods after
	// the period is found (one poll each and the retries of a lossy
	// publisher); the rest goes to the search.
	coldReserve = 13
	// After the first publish, the probes' offsets from it grow
	// coarseGrowth times up to the quiet time known around it, then
	// between fineGrowthMin and fineGrowthMax times (see probeAfter).
	coarseGrowth  = 3
	fineGrowthMin = 1.1
	fineGrowthMax = 1.5
	// oneGapMargin is the least margin after the expected publish, as a
	// share of the period, while a single gap is known (no spread yet).
	oneGapMargin = 0.04
	// learningShare is the first probe interval after a miss while the
	// jitter tail is not yet fitted, as a share of the period.
	learningShare  = 1.0 / 8
	learningGrowth = 4
	// learningResiduals: learning probes stop once this many residuals
	// are known (the margin has a spread to go by).
	learningResiduals = 4
)

// limit is the longest interval between two cold-start probes after
// waiting waited seconds: the publisher's cache lifetime when it gives
// one, its stated period as long as no more than ColdPeriods of them
// have been waited for in vain (a stated period is often a default), and
// WithInitial's limit.
func (a *Auto) limit(h Hints, waited float64) float64 {
	l := float64(a.initial)
	if c := h.CacheFor.Seconds(); c > 0 && c < l {
		l = c
	}
	if p := h.Period.Seconds(); p > 0 && p < l && waited <= ColdPeriods*p {
		l = p
	}
	return max(l, ProbeStart.Seconds())
}

// probeNext returns the next probe of a feed that has shown no item yet:
// probeShare of the time since it was first found empty, at least
// ProbeStart, at most limit.
func (a *Auto) probeNext(obs Observation) time.Time {
	waited := float64(obs.At.UnixNano()-a.empty) / 1e9
	d := min(max(waited*probeShare, ProbeStart.Seconds()), a.limit(obs.Hints, waited))
	return clampNext(obs.At, obs.At.Add(time.Duration(d*1e9)))
}

// probeAfter returns the next probe while exactly one publish is known.
// The period is most likely longer than the quiet time known around that
// publish (a.lower): if the feed was empty since its first poll and the
// publish came u later, a period P ≥ u is exceeded by x·u with
// probability about 1/x. So the probes' offsets from the publish grow
// coarseGrowth times while below a.lower (readings lost before it, or a
// publisher that started late, make the period shorter), then by a ratio
// r: about r/(r−1) probes find a period of that distribution. r spends
// what the search has left of the cold-start budget, between
// fineGrowthMin and fineGrowthMax: a short period, found with few probes
// so far, gets fine probes, a long one coarse.
func (a *Auto) probeAfter(obs Observation) time.Time {
	o := max(float64(obs.At.UnixNano()-a.last)/1e9, 0)
	l := float64(a.lower)
	r := fineGrowthMax
	if left := ColdPolls*ColdPeriods - coldReserve - float64(a.coldN); left > 1 {
		r = min(max(left/(left-1), fineGrowthMin), fineGrowthMax)
	}
	var n float64
	if coarseGrowth*o < l {
		n = coarseGrowth * o
	} else {
		n = max(o, l) * r
	}
	d := min(max(n-o, ProbeStart.Seconds()), a.limit(obs.Hints, o))
	return clampNext(obs.At, obs.At.Add(time.Duration(d*1e9)))
}

// learningProbe returns the next probe after a miss while few residuals
// are known (fewer than learningResiduals): intervals that start at
// learningShare of the period (at least the margin floor) and grow
// learningGrowth times, as long as they land before the slot after the
// missed one (two probes at most: a late publish is found, a lost one
// costs little).
func (a *Auto) learningProbe(now int64) (int64, bool) {
	if a.models.res[0].n >= learningResiduals || a.slot > OutagePeriods {
		return 0, false
	}
	d := float64(a.probe)
	if d <= 0 {
		d = max(learningShare*a.period, floor(a.period))
	}
	next := now + int64(d*1e9)
	if next >= a.at(float64(a.slot)+1, a.off) {
		a.probe = 0
		return 0, false
	}
	a.probe = float32(d * learningGrowth)
	return next, true
}

func (a *Auto) finish(obs Observation, next int64) time.Time {
	return clampNext(obs.At, time.Unix(0, next).UTC())
}

// Margin returns how long after the publish PredictedPublish names Auto
// would poll for only a share q of publishes to be still to come, by the
// jitter tail it has learned (its own rule without the floor that keeps a
// feed as reliable as a timer: a multi-source consumer sets q from what a
// late poll costs it). While too few residuals are known for a tail it is
// Auto's own margin; ok is false while the period is unknown.
func (a *Auto) Margin(q float64) (d time.Duration, ok bool) {
	if !a.known() || a.period <= 0 {
		return 0, false
	}
	i := 0
	if a.grid {
		i = 1
	}
	off := a.off
	if a.models.res[i].n >= 8 {
		q = min(max(q, 1e-6), 0.5)
		off = a.models.mid[i] + max(a.models.tail[i]*math.Log(1/(2*q)), floor(a.period))
	}
	return seconds(min(max(off, a.dateStep()), a.period/2)), true
}

// EarliestNext is what a publisher modelling its own output with Auto
// advertises to subscribers (Cache-Control max-age, Slogfeed-Next): the
// predicted publish less twice the jitter spread, a time before which
// nothing new is expected. It is false while the period is unknown and
// once that time has passed: an overdue publish may come at any moment,
// and a subscriber told to wait would miss it by up to a period.
func (a *Auto) EarliestNext(now time.Time) (time.Time, bool) {
	t, ok := a.predicted()
	if !ok {
		return time.Time{}, false
	}
	t = t.Add(-2 * seconds(a.off)) // State's Sigma
	if !t.After(now) {
		return time.Time{}, false
	}
	return t, true
}

// PredictedPublish returns when the publish the next poll aims at is
// expected: the publisher's planned update when the poll follows one,
// else Auto's own prediction (false while the period is unknown). The
// scheduler uses it to rank feeds waiting for the fetch budget.
func (a *Auto) PredictedPublish() (time.Time, bool) {
	if t, ok := a.plan.predicted(); ok {
		return t, true
	}
	return a.predicted()
}

// predicted is Auto's own prediction of the publish its next poll aims at.
func (a *Auto) predicted() (time.Time, bool) {
	if !a.known() || a.period <= 0 {
		return time.Time{}, false
	}
	if a.retry&retryCheck != 0 {
		// The check a spacing into a cycle's long gap.
		return time.Unix(0, a.at(1, 0)).UTC(), true
	}
	if a.misses <= OutagePeriods {
		if c, ok := a.cycle(); ok {
			// The quick retry aims at the same reading, later ones a
			// cycle further each (cycleRetry).
			m := float64(max(int(a.misses)-1, 0))
			return time.Unix(0, addSeconds(a.last, c.next+m*c.length)).UTC(), true
		}
	}
	return time.Unix(0, a.at(float64(max(a.slot, 1)), 0)).UTC(), true
}
