package schedule

import (
	"math"
	"testing"
	"time"
)

// t0 is the origin of the scripted tests' clocks.
var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(seconds(s)) }

// step is one scripted poll: its time, what it found, and the next poll time
// (seconds after t0) the policy must choose.
type step struct {
	at   float64
	pubs []float64 // publish times of new items; empty = miss
	more bool
	want float64
}

func obsOf(s step) Observation {
	o := Observation{At: at(s.at), Hit: len(s.pubs) > 0, MoreData: s.more}
	for _, p := range s.pubs {
		o.Published = append(o.Published, at(p))
	}
	return o
}

// learn feeds publishes at the given times, each seen by a poll at that
// instant, and returns the policy.
func learn[P Policy](p P, pubs ...float64) P {
	for _, t := range pubs {
		p.Next(Observation{At: at(t), Hit: true, Published: []time.Time{at(t)}})
	}
	return p
}

func runSteps(t *testing.T, p Policy, steps []step) {
	t.Helper()
	for i, s := range steps {
		got := p.Next(obsOf(s))
		want := at(s.want)
		if d := got.Sub(want); d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("step %d (at %.3f, hit %v): next = %.6f s, want %.6f s",
				i, s.at, len(s.pubs) > 0, got.Sub(t0).Seconds(), s.want)
		}
	}
}

// history 0, 300, 610, 900, 1200, 1500: gaps 300 310 290 300 300, median
// 300, jitter 0 10 −10 0 0, σ = √40. The scripted polls start by seeing the
// publish at 1500 again, which adds no gap.
var (
	hist  = []float64{0, 300, 610, 900, 1200, 1500}
	sigma = math.Sqrt(40)
)

func TestDPTVariants(t *testing.T) {
	tests := []struct {
		name  string
		v     Variant
		opts  []Option
		steps []step
	}{
		{
			name: "DPT-L hit lands median+σ after the publish",
			v:    DPTL,
			steps: []step{
				{at: 1500, pubs: []float64{1500}, want: 1800 + sigma},
			},
		},
		{
			name: "DPT-N hit lands on the median",
			v:    DPTN,
			steps: []step{
				{at: 1500, pubs: []float64{1500}, want: 1800},
			},
		},
		{
			name: "DPT-A hit lands median−σ",
			v:    DPTA,
			steps: []step{
				{at: 1500, pubs: []float64{1500}, want: 1800 - sigma},
			},
		},
		{
			name: "phase adjustment rebases on the publish time, not the poll time",
			v:    DPTL,
			steps: []step{
				{at: 1530, pubs: []float64{1500}, want: 1800 + sigma},
			},
		},
		{
			name: "a fetch later than the expected publish aims at the next one",
			v:    DPTL,
			steps: []step{
				{at: 1850, pubs: []float64{1500}, want: 2100 + sigma},
			},
		},
		{
			name: "more data waiting: pull again immediately",
			v:    DPTL,
			steps: []step{
				{at: 1500, pubs: []float64{1500}, more: true, want: 1500},
			},
		},
		{
			name: "DPT-A: two fast retries spaced by σ, then period retries with backoff",
			v:    DPTA,
			steps: []step{
				{at: 1500, pubs: []float64{1500}, want: 1800 - sigma},
				{at: 1800 - sigma, want: 1800},
				{at: 1800, want: 1800 + sigma},
				// PERIOD: t_p + (1+2^i)·median − σ for i = 0, 1, 2, ...
				{at: 1800 + sigma, want: 1500 + 2*300 - sigma},
				{at: 2100 - sigma, want: 1500 + 3*300 - sigma},
				{at: 2400 - sigma, want: 1500 + 5*300 - sigma},
				{at: 3000 - sigma, want: 1500 + 9*300 - sigma},
			},
		},
		{
			name: "DPT-N: one fast retry, then the next period",
			v:    DPTN,
			steps: []step{
				{at: 1500, pubs: []float64{1500}, want: 1800},
				{at: 1800, want: 1800 + sigma},
				{at: 1800 + sigma, want: 2100},
				{at: 2100, pubs: []float64{2100}, want: 2400},
			},
		},
		{
			name: "DPT-L: no fast retry; period retries land on expected publishes",
			v:    DPTL,
			steps: []step{
				{at: 1500, pubs: []float64{1500}, want: 1800 + sigma},
				{at: 1800 + sigma, want: 2100 + sigma},
				{at: 2100 + sigma, want: 2400 + sigma},
				{at: 2400 + sigma, want: 3000 + sigma},
				{at: 3000 + sigma, want: 4200 + sigma},
				{at: 4200 + sigma, want: 6600 + sigma},
				{at: 6600 + sigma, want: 11400 + sigma},
				{at: 11400 + sigma, want: 21000 + sigma},
				// Past PERIOD_TRIES with no long gap ever seen: the backoff
				// goes on (1+2^7 periods).
				{at: 21000 + sigma, want: 1500 + 129*300 + sigma},
			},
		},
		{
			name: "a lost reading is jitter 0, not an outlier: σ stays",
			v:    DPTL,
			steps: []step{
				{at: 1800 + sigma, want: 2100 + sigma},
				// Published at 2100 after the loss at 1800: the gap of 600
				// is jitter 0, so σ only shrinks (six jitters 0 10 −10 0 0
				// 0); over raw gaps it would grow to about 112 s.
				{at: 2100 + sigma, pubs: []float64{2100}, want: 2400 + math.Sqrt(200.0/6)},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := learn(NewDPT(tc.v, tc.opts...), hist...)
			if got := p.State(); got.Median != 300*time.Second || math.Abs(got.Sigma.Seconds()-sigma) > 1e-6 {
				t.Fatalf("after history: median %v σ %v, want 5m0s and %.6fs", got.Median, got.Sigma, sigma)
			}
			runSteps(t, p, tc.steps)
		})
	}
}

func TestDPTSigmaIsJitterNotRawGaps(t *testing.T) {
	// Gaps 300, 600 (one loss), 300, 305, 900 (two losses), 295, 300: over
	// raw gaps σ would be about 230 s; as jitter it is that of
	// 0 0 0 5 0 −5 0.
	p := learn(NewDPT(DPTL), 0, 300, 900, 1200, 1505, 2405, 2700, 3000)
	s := p.State()
	wantSigma := math.Sqrt(50.0 / 7)
	if s.Median != 300*time.Second {
		t.Fatalf("median %v, want 5m0s", s.Median)
	}
	if math.Abs(s.Sigma.Seconds()-wantSigma) > 1e-6 {
		t.Fatalf("σ %v, want %.6fs", s.Sigma, wantSigma)
	}
}

func TestDPTBimodal(t *testing.T) {
	// Live readings every 300 s, then one 12-hour gap (the day's batch
	// delivered at dusk), then live readings again.
	var pubs []float64
	for i := 0; i < 10; i++ {
		pubs = append(pubs, float64(i)*300)
	}
	last := pubs[len(pubs)-1]
	for i := 0; i < 10; i++ {
		pubs = append(pubs, last+43200+float64(i)*300)
	}
	tp := pubs[len(pubs)-1]
	// The hit at tp (already seen: no new gap) aims at tp+300; then the
	// period retries land on tp + (1+2^i)·300.
	missesThroughPeriodMode := func() []step {
		s := []step{{at: tp, pubs: []float64{tp}, want: tp + 300}}
		prev := tp + 300
		for i := 0; i < PeriodTries; i++ {
			next := tp + (1+math.Exp2(float64(i)))*300
			s = append(s, step{at: prev, want: next})
			prev = next
		}
		return s
	}
	t.Run("bimodal retry on the long median after PERIOD_TRIES", func(t *testing.T) {
		p := learn(NewDPT(DPTL), pubs...)
		if st := p.State(); st.BimodalMedian != 12*time.Hour {
			t.Fatalf("bimodal median %v, want 12h", st.BimodalMedian)
		}
		steps := missesThroughPeriodMode()
		prev := steps[len(steps)-1].want
		steps = append(steps,
			step{at: prev, want: tp + 43200},             // bimodal j=0
			step{at: tp + 43200, want: tp + 43200 + 300}, // j=1: next period after the return
			step{at: tp + 43500, want: tp + 43200 + 900}, // j=2: backoff (2²−1 periods)
		)
		runSteps(t, p, steps)
		if st := p.State(); st.Mode != ModeBimodal {
			t.Fatalf("mode %v, want bimodal", st.Mode)
		}
	})
	t.Run("without bimodal the period backoff goes on", func(t *testing.T) {
		p := learn(NewDPT(DPTL, WithoutBimodal()), pubs...)
		steps := missesThroughPeriodMode()
		prev := steps[len(steps)-1].want
		steps = append(steps, step{at: prev, want: tp + 129*300})
		runSteps(t, p, steps)
		if p.Name() != "dpt-l-unimodal" {
			t.Fatalf("name %q", p.Name())
		}
	})
}

func TestDPTColdStart(t *testing.T) {
	p := NewDPT(DPTL, WithInitial(time.Minute))
	runSteps(t, p, []step{
		{at: 0, want: 60},                          // miss, period unknown: initial
		{at: 60, want: 180},                        // backoff doubles
		{at: 180, pubs: []float64{170}, want: 240}, // one publish: still unknown
		{at: 240, pubs: []float64{230}, want: 290}, // gap 60: tracking starts
	})
}

func TestDPTDesync(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		p := learn(NewDPT(DPTN, WithSeed(seed)), 0, 300, 600)
		o := Observation{At: at(900), Hit: true, Published: []time.Time{at(900)}, Hints: Hints{Desync: 30 * time.Second}}
		got := p.Next(o).Sub(t0).Seconds()
		if got < 1200 || got >= 1230 {
			t.Fatalf("seed %d: next %.3f outside [1200, 1230)", seed, got)
		}
		q := learn(NewDPT(DPTN, WithSeed(seed)), 0, 300, 600)
		if again := q.Next(o).Sub(t0).Seconds(); again != got {
			t.Fatalf("seed %d: not deterministic: %.6f then %.6f", seed, got, again)
		}
	}
}

func TestDPTPhaseHint(t *testing.T) {
	p := learn(NewDPT(DPTN), 0, 300, 600)
	// The item's own date says 890 but the publisher says its newest item is
	// 7 s old at 905: the hint wins.
	o := Observation{At: at(905), Hit: true, Published: []time.Time{at(890)}, Hints: Hints{HasPhase: true, Phase: 7 * time.Second}}
	if got := p.Next(o).Sub(t0).Seconds(); got != 1198 {
		t.Fatalf("next %.3f, want 1198", got)
	}
}

func TestDPTBatchIsOnePublishEvent(t *testing.T) {
	// A batch of items with the same publish time (or a few ms apart) is one
	// publish event: no zero gaps enter the history.
	p := learn(NewDPT(DPTN), 0, 300, 600)
	o := Observation{At: at(905), Hit: true, Published: []time.Time{at(900), at(900.002), at(900.004), at(900.004)}}
	p.Next(o)
	if s := p.State(); s.Median != 300*time.Second || s.Gaps != 3 {
		t.Fatalf("median %v gaps %d, want 5m0s and 3", s.Median, s.Gaps)
	}
}
