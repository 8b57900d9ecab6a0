package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// ErrInvalidModel is returned by Model.Validate and DTN.Validate for
// parameters the model cannot run with.
var ErrInvalidModel = errors.New("sim: invalid publishing model")

// Item is one published reading.
type Item struct {
	// Published is when the reading became available to pollers; it drives
	// the use latency.
	Published time.Time
	// Observed is the sensing time. It equals Published unless the
	// publisher batches its readings (DTN).
	Observed time.Time
}

// Model is the DPT paper's publishing model: inter-publish time
// I = (k+1)λ + j, k consecutive failures from a two-state Markov chain
// (Pss = P(success|success), Pfs = P(success|failure)), jitter
// j ~ Laplace(JitterLoc, JitterScale). See the package documentation for
// the details of the start of a run, outages and drift.
type Model struct {
	// Period is λ, the publisher's nominal period. It must be positive.
	Period time.Duration
	// Pss is the probability that a try succeeds after a success, Pfs after
	// a failure. Both must be in [0, 1].
	Pss, Pfs float64
	// JitterLoc is the location a of the Laplace jitter.
	JitterLoc time.Duration
	// JitterScale is the scale b of the Laplace jitter (0 = no jitter).
	JitterScale time.Duration

	// Phase is the offset of the first try from the start of the run.
	Phase time.Duration
	// RandomPhase draws the first try's offset uniformly from [0, λ)
	// instead of using Phase.
	RandomPhase bool

	// OutageProb is the per-publish probability that a long outage starts.
	OutageProb float64
	// OutageMin and OutageMax bound the uniformly distributed length of an
	// outage.
	OutageMin, OutageMax time.Duration
	// PhaseShiftOnRestart makes the publisher restart at a random phase
	// after an outage instead of on its old grid.
	PhaseShiftOnRestart bool
	// DriftPPM is the publisher's clock drift: its period is
	// λ·(1+DriftPPM·1e-6).
	DriftPPM float64
}

// maxGap is the longest inter-publish time a Stream produces; a publisher
// that would stay silent longer (Pfs = 0 after a failure, or a tiny Pfs)
// is treated as having stopped.
const maxGap = 100 * 365 * 24 * time.Hour

// Validate reports whether m can be simulated. Generate and Stream produce
// no items for an invalid model.
func (m Model) Validate() error {
	switch {
	case m.Period <= 0:
		return fmt.Errorf("%w: period %v is not positive", ErrInvalidModel, m.Period)
	case !(m.Pss >= 0 && m.Pss <= 1):
		return fmt.Errorf("%w: Pss %v is not in [0, 1]", ErrInvalidModel, m.Pss)
	case !(m.Pfs >= 0 && m.Pfs <= 1):
		return fmt.Errorf("%w: Pfs %v is not in [0, 1]", ErrInvalidModel, m.Pfs)
	case m.JitterScale < 0:
		return fmt.Errorf("%w: jitter scale %v is negative", ErrInvalidModel, m.JitterScale)
	case m.Phase < 0:
		return fmt.Errorf("%w: phase %v is negative", ErrInvalidModel, m.Phase)
	case !(m.OutageProb >= 0 && m.OutageProb <= 1):
		return fmt.Errorf("%w: outage probability %v is not in [0, 1]", ErrInvalidModel, m.OutageProb)
	case m.OutageProb > 0 && (m.OutageMin < 0 || m.OutageMax < m.OutageMin):
		return fmt.Errorf("%w: outage length [%v, %v] is not a valid range", ErrInvalidModel, m.OutageMin, m.OutageMax)
	case !(m.DriftPPM > -1e6) || math.IsInf(m.DriftPPM, 1):
		return fmt.Errorf("%w: drift %v ppm", ErrInvalidModel, m.DriftPPM)
	}
	return nil
}

// Stationary returns the long-run fraction of tries that succeed,
// Pfs/(1−Pss+Pfs); it is 1 for the degenerate chain Pss = 1, Pfs = 0.
func (m Model) Stationary() float64 {
	d := 1 - m.Pss + m.Pfs
	if d <= 0 {
		return 1
	}
	return m.Pfs / d
}

// Generate returns the items m publishes in [start, end), sorted by
// Published. It takes O(n) time for n items and consumes rng exactly as
// Stream does, so both yield the same items for the same seed.
func (m Model) Generate(rng *rand.Rand, start, end time.Time) []Item {
	s := m.Stream(rng, start)
	if !end.After(start) || s.Done() {
		return nil
	}
	// A rough estimate of n saves most re-allocations; append handles the rest.
	est := float64(end.Sub(start)) / float64(m.Period) * m.Stationary()
	est = math.Min(est, 1<<20)
	items := make([]Item, 0, int(est)+1)
	for s.Peek().Before(end) {
		items = append(items, s.Pop())
	}
	return items
}

// never is what Stream.Peek returns once the publisher has stopped: a time
// after any simulation horizon.
var never = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)

// Never returns the time Stream.Peek reports for a publisher that will not
// publish again. It is later than any time a simulation uses.
func Never() time.Time { return never }

// Stream is a Model publishing one item at a time in O(1) memory, for
// simulations of very many feeds. It is not safe for concurrent use.
//
// A Stream keeps only what drawing the next gap reads, not a whole Model
// (104 bytes instead of 144): simulations of a million feeds keep a million
// of them.
type Stream struct {
	// The Model's parameters that gap reads (Period, Phase and DriftPPM
	// are folded into period and next).
	pss, pfs, outageProb   float64
	jitterLoc, jitterScale time.Duration
	outageMin, outageMax   time.Duration

	rng    *rand.Rand
	period float64 // drifted period in nanoseconds
	next   time.Time
	shift  bool // PhaseShiftOnRestart
	done   bool
}

// Stream returns m's items from start on, one at a time. Popping every item
// before end yields exactly what Generate(rng, start, end) returns for an
// rng in the same state.
func (m Model) Stream(rng *rand.Rand, start time.Time) *Stream {
	s := &Stream{
		pss: m.Pss, pfs: m.Pfs, outageProb: m.OutageProb,
		jitterLoc: m.JitterLoc, jitterScale: m.JitterScale,
		outageMin: m.OutageMin, outageMax: m.OutageMax,
		shift: m.PhaseShiftOnRestart,
		rng:   rng,
	}
	if m.Validate() != nil || rng == nil {
		s.done = true
		return s
	}
	s.period = float64(m.Period) * (1 + m.DriftPPM*1e-6)
	if !(s.period >= 1) {
		s.done = true
		return s
	}
	phase := float64(m.Phase)
	if m.RandomPhase {
		phase = rng.Float64() * s.period
	}
	// The first try succeeds with the stationary probability; otherwise the
	// chain is in the failure state and k0 ≥ 1 tries are lost.
	var k float64
	if pi := m.Stationary(); pi < 1 && rng.Float64() >= pi {
		k = 1 + s.failures()
	}
	s.advance(start, phase+k*s.period)
	return s
}

// Peek returns the publish time of the next item, or Never() once the
// publisher has stopped.
func (s *Stream) Peek() time.Time {
	if s.done {
		return never
	}
	return s.next
}

// Done reports that the publisher will not publish again.
func (s *Stream) Done() bool { return s.done }

// Pop returns the next item and draws the one after it. Once the publisher
// has stopped it returns an Item published at Never().
func (s *Stream) Pop() Item {
	if s.done {
		return Item{Published: never, Observed: never}
	}
	it := Item{Published: s.next, Observed: s.next}
	s.advance(s.next, s.gap())
	return it
}

// advance sets the next publish time to from+gap nanoseconds, stopping the
// publisher when the gap is out of range.
func (s *Stream) advance(from time.Time, gap float64) {
	if !(gap < float64(maxGap)) {
		s.done = true
		return
	}
	if gap < 0 {
		gap = 0
	}
	s.next = from.Add(time.Duration(math.Round(gap)))
	if !s.next.Before(never) {
		s.done = true
	}
}

// gap draws the time in nanoseconds from the item just published to the
// next one.
func (s *Stream) gap() float64 {
	if s.outageProb > 0 && s.rng.Float64() < s.outageProb {
		d := float64(s.outageMin) + s.rng.Float64()*float64(s.outageMax-s.outageMin)
		if s.shift {
			return d + s.rng.Float64()*s.period
		}
		n := math.Max(1, math.Ceil(d/s.period))
		return n*s.period + s.jitter()
	}
	var k float64
	if s.pss < 1 && s.rng.Float64() >= s.pss {
		k = 1 + s.failures()
	}
	return (k+1)*s.period + s.jitter()
}

// failures draws how many more tries fail once the chain is in the failure
// state: a geometric number with success probability Pfs. It returns +Inf
// when the publisher never recovers.
func (s *Stream) failures() float64 {
	p := s.pfs
	switch {
	case p >= 1:
		return 0
	case p <= 0:
		return math.Inf(1)
	}
	u := 1 - s.rng.Float64() // (0, 1]
	return math.Floor(math.Log(u) / math.Log1p(-p))
}

// jitter draws j ~ Laplace(JitterLoc, JitterScale) in nanoseconds.
func (s *Stream) jitter() float64 {
	j := float64(s.jitterLoc)
	if s.jitterScale > 0 {
		e := s.rng.ExpFloat64() * float64(s.jitterScale)
		if s.rng.Uint64()&1 == 0 {
			e = -e
		}
		j += e
	}
	return j
}

// DTN is a disruption-tolerant publisher: readings every Model.Period;
// during the "night" window [NightStart, NightEnd) (hours of the UTC day,
// wrapping over midnight when NightStart > NightEnd) each reading is
// published live (with the Model's jitter and losses), during the day
// readings are held and all published together in one batch at BatchAt
// (hour of the UTC day, the DTN link's contact). A daytime reading is
// published at the first BatchAt at or after its sensing time, so readings
// taken after the day's contact wait for the next day's. Published is the
// batch time and Observed the sensing time. NightStart = NightEnd means
// there is no night (everything is batched); 0 to 24 means everything is
// live.
type DTN struct {
	Model                         Model
	NightStart, NightEnd, BatchAt float64 // hours of the UTC day, in [0, 24]
}

// Validate reports whether d can be simulated. Generate produces no items
// for an invalid DTN.
func (d DTN) Validate() error {
	for _, h := range []float64{d.NightStart, d.NightEnd, d.BatchAt} {
		if !(h >= 0 && h <= 24) {
			return fmt.Errorf("%w: hour %v is not in [0, 24]", ErrInvalidModel, h)
		}
	}
	return d.Model.Validate()
}

// night reports whether t's UTC time of day is in the live window.
func (d DTN) night(t time.Time) bool {
	h := float64(t.Sub(midnight(t))) / float64(time.Hour)
	if d.NightStart <= d.NightEnd {
		return h >= d.NightStart && h < d.NightEnd
	}
	return h >= d.NightStart || h < d.NightEnd
}

// midnight returns the start of t's UTC day.
func midnight(t time.Time) time.Time {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
}

// Generate returns the items d publishes in [start, end): readings sensed
// from start on whose publish time (live or batch) is before end, sorted by
// Published and then by Observed. It takes O(n) time.
func (d DTN) Generate(rng *rand.Rand, start, end time.Time) []Item {
	if d.Validate() != nil {
		return nil
	}
	readings := d.Model.Generate(rng, start, end)
	batchAt := time.Duration(d.BatchAt * float64(time.Hour))
	// Live and batched readings are each sorted by Published (the batch
	// time never decreases with the sensing time), so a merge sorts them.
	live := make([]Item, 0, len(readings))
	held := make([]Item, 0, len(readings))
	for _, r := range readings {
		if d.night(r.Observed) {
			live = append(live, r)
			continue
		}
		b := midnight(r.Observed).Add(batchAt)
		if b.Before(r.Observed) {
			b = b.Add(24 * time.Hour)
		}
		if b.Before(end) {
			held = append(held, Item{Published: b, Observed: r.Observed})
		}
	}
	out := readings[:0] // reuse: len(live)+len(held) ≤ len(readings)
	i, j := 0, 0
	for i < len(live) && j < len(held) {
		// On a tie the batch goes first: its readings were sensed earlier.
		if !live[i].Published.Before(held[j].Published) {
			out = append(out, held[j])
			j++
		} else {
			out = append(out, live[i])
			i++
		}
	}
	out = append(out, live[i:]...)
	out = append(out, held[j:]...)
	return out
}
