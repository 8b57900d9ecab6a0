package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2006, time.November, 13, 0, 0, 0, 0, time.UTC)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5106feed)) }

func gaps(items []Item) []time.Duration {
	var g []time.Duration
	for i := 1; i < len(items); i++ {
		g = append(g, items[i].Published.Sub(items[i-1].Published))
	}
	return g
}

// TestModelMarkovStatistics checks the model's loss chain and jitter over a
// long run against their exact distributions. The tolerances are five
// standard errors of the estimates for the sample at hand.
func TestModelMarkovStatistics(t *testing.T) {
	const lambda = 60 * time.Second
	tests := []struct {
		name     string
		pss, pfs float64
		a, b     time.Duration
	}{
		{"fig23 chain", 0.95, 0.80, 0, 2 * time.Second},
		{"memoryless half loss", 0.5, 0.5, time.Second, 3 * time.Second},
		{"bursty losses", 0.9, 0.1, -2 * time.Second, time.Second},
		{"lossy recovering", 0.3, 0.9, 500 * time.Millisecond, 4 * time.Second},
		{"lossless, no jitter", 1, 1, 0, 0},
		{"lossless, constant offset", 1, 0, 250 * time.Millisecond, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := Model{Period: lambda, Pss: tc.pss, Pfs: tc.pfs, JitterLoc: tc.a, JitterScale: tc.b}
			items := m.Generate(newRNG(1), t0, t0.Add(200_000*lambda))
			if !slices.IsSortedFunc(items, cmpPublished) {
				t.Fatal("items not sorted")
			}
			var tries, first, second int
			var sumJ, sumAbs float64
			g := gaps(items)
			for _, d := range g {
				n := int(math.Round(float64(d-tc.a) / float64(lambda))) // k+1
				j := d - time.Duration(n)*lambda
				if tc.b == 0 && j != tc.a {
					t.Fatalf("gap %v: jitter %v, want exactly %v", d, j, tc.a)
				}
				tries += n
				switch n {
				case 1:
					first++
				case 2:
					second++
				}
				sumJ += j.Seconds()
				sumAbs += math.Abs((j - tc.a).Seconds())
			}
			N := float64(len(g))

			pi := m.Stationary()
			frac := N / float64(tries)
			rho := tc.pss - tc.pfs
			tol := 5 * math.Sqrt(pi*(1-pi)*(1+rho)/(1-rho)/float64(tries))
			if math.Abs(frac-pi) > tol {
				t.Errorf("success fraction %.5f, want %.5f ± %.5f", frac, pi, tol)
			}
			// After each item, k = 0 with probability Pss and k = 1 with
			// (1−Pss)·Pfs, independently of the past.
			for _, c := range []struct {
				name string
				got  float64
				want float64
			}{
				{"P(k=0)", float64(first) / N, tc.pss},
				{"P(k=1)", float64(second) / N, (1 - tc.pss) * tc.pfs},
			} {
				tol := 5 * math.Sqrt(c.want*(1-c.want)/N)
				if math.Abs(c.got-c.want) > tol {
					t.Errorf("%s = %.5f, want %.5f ± %.5f", c.name, c.got, c.want, tol)
				}
			}
			a, b := tc.a.Seconds(), tc.b.Seconds()
			if got, tol := sumJ/N, 5*b*math.Sqrt2/math.Sqrt(N)+1e-9; math.Abs(got-a) > tol {
				t.Errorf("mean jitter %.4fs, want %.4fs ± %.4f", got, a, tol)
			}
			if got, tol := sumAbs/N, 5*b/math.Sqrt(N)+1e-9; math.Abs(got-b) > tol {
				t.Errorf("mean |j−a| %.4fs, want %.4fs ± %.4f", got, b, tol)
			}
		})
	}
}

func TestModelDeterminism(t *testing.T) {
	m := Model{Period: time.Minute, Pss: 0.9, Pfs: 0.6, JitterScale: 3 * time.Second, RandomPhase: true,
		OutageProb: 0.01, OutageMin: time.Hour, OutageMax: 2 * time.Hour, PhaseShiftOnRestart: true, DriftPPM: 40}
	end := t0.Add(48 * time.Hour)
	a := m.Generate(newRNG(7), t0, end)
	b := m.Generate(newRNG(7), t0, end)
	c := m.Generate(newRNG(8), t0, end)
	if len(a) < 1000 {
		t.Fatalf("only %d items in two days", len(a))
	}
	if !slices.Equal(a, b) {
		t.Error("same seed, different items")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds, same items")
	}
}

func TestStreamEqualsGenerate(t *testing.T) {
	models := []struct {
		name string
		m    Model
	}{
		{"plain", Model{Period: time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 2 * time.Second}},
		{"everything", Model{Period: 500 * time.Second, Pss: 0.7, Pfs: 0.4, JitterLoc: time.Second,
			JitterScale: 10 * time.Second, RandomPhase: true, OutageProb: 0.02, OutageMin: time.Hour,
			OutageMax: 5 * time.Hour, DriftPPM: -80}},
		{"phase shifts", Model{Period: time.Hour, Pss: 1, Phase: 20 * time.Minute, OutageProb: 0.1,
			OutageMin: 3 * time.Hour, OutageMax: 9 * time.Hour, PhaseShiftOnRestart: true}},
	}
	for _, tc := range models {
		t.Run(tc.name, func(t *testing.T) {
			end := t0.Add(30 * 24 * time.Hour)
			want := tc.m.Generate(newRNG(3), t0, end)
			s := tc.m.Stream(newRNG(3), t0)
			var got []Item
			for s.Peek().Before(end) {
				got = append(got, s.Pop())
			}
			if !slices.Equal(got, want) {
				t.Fatalf("stream gave %d items, generate %d; they differ", len(got), len(want))
			}
			if len(want) == 0 {
				t.Fatal("no items")
			}
		})
	}
}

func TestModelOutages(t *testing.T) {
	const lambda = time.Minute
	for _, shift := range []bool{false, true} {
		t.Run(map[bool]string{false: "same grid", true: "phase shift"}[shift], func(t *testing.T) {
			m := Model{Period: lambda, Pss: 1, Pfs: 1, OutageProb: 0.02, OutageMin: time.Hour,
				OutageMax: 3 * time.Hour, PhaseShiftOnRestart: shift}
			items := m.Generate(newRNG(11), t0, t0.Add(365*24*time.Hour))
			var outages, offGrid int
			for _, d := range gaps(items) {
				if d < time.Hour {
					if d != lambda {
						t.Fatalf("gap %v outside an outage, want %v", d, lambda)
					}
					continue
				}
				outages++
				if d > 3*time.Hour+lambda {
					t.Fatalf("outage gap %v longer than OutageMax + λ", d)
				}
				if d%lambda != 0 {
					offGrid++
				}
			}
			n := float64(len(items) - 1)
			if tol := 5 * math.Sqrt(0.02*0.98/n); math.Abs(float64(outages)/n-0.02) > tol {
				t.Errorf("outage fraction %.4f, want 0.02 ± %.4f", float64(outages)/n, tol)
			}
			wantOff := 0
			if shift {
				wantOff = outages
			}
			if offGrid != wantOff {
				t.Errorf("%d of %d outages end off the grid, want %d", offGrid, outages, wantOff)
			}
		})
	}
}

func TestModelDriftAndPhase(t *testing.T) {
	tests := []struct {
		name      string
		m         Model
		firstAt   time.Duration
		gap       time.Duration
		wantItems int
	}{
		{"no drift", Model{Period: time.Minute, Pss: 1, Phase: 15 * time.Second}, 15 * time.Second, time.Minute, 60},
		{"fast clock", Model{Period: time.Minute, Pss: 1, DriftPPM: 100}, 0, 60006 * time.Millisecond, 60},
		{"slow clock", Model{Period: time.Minute, Pss: 1, DriftPPM: -50, Phase: time.Second}, time.Second, 59997 * time.Millisecond, 60},
		{"offset jitter", Model{Period: time.Minute, Pss: 1, JitterLoc: -time.Second}, 0, 59 * time.Second, 62},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items := tc.m.Generate(newRNG(1), t0, t0.Add(time.Hour))
			if len(items) != tc.wantItems {
				t.Fatalf("%d items, want %d", len(items), tc.wantItems)
			}
			if got := items[0].Published.Sub(t0); got != tc.firstAt {
				t.Errorf("first item at +%v, want +%v", got, tc.firstAt)
			}
			for _, g := range gaps(items) {
				if g != tc.gap {
					t.Fatalf("gap %v, want %v", g, tc.gap)
				}
			}
		})
	}
}

func TestModelRandomPhase(t *testing.T) {
	m := Model{Period: time.Hour, Pss: 1, RandomPhase: true}
	seen := map[time.Duration]bool{}
	for seed := range uint64(50) {
		items := m.Generate(newRNG(seed), t0, t0.Add(3*time.Hour))
		if len(items) != 3 {
			t.Fatalf("seed %d: %d items, want 3", seed, len(items))
		}
		off := items[0].Published.Sub(t0)
		if off < 0 || off >= time.Hour {
			t.Fatalf("seed %d: first item at +%v, want within one period", seed, off)
		}
		seen[off] = true
	}
	if len(seen) != 50 {
		t.Errorf("%d distinct phases over 50 seeds", len(seen))
	}
}

func TestModelStops(t *testing.T) {
	// Pfs = 0: the chain's stationary state is failure, so the publisher
	// never publishes.
	m := Model{Period: time.Minute, Pss: 0.9, Pfs: 0}
	if s := m.Stream(newRNG(5), t0); !s.Done() {
		t.Fatal("Pfs = 0 publisher publishes")
	}
	if got := m.Generate(newRNG(5), t0, t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("Pfs = 0 publisher generated %d items", len(got))
	}
	// A publisher that loses its chain's recovery mid-run stops at its
	// first lost try.
	s := Model{Period: time.Minute, Pss: 1, Pfs: 1}.Stream(newRNG(5), t0)
	s.pss, s.pfs = 0.9, 0
	n := 0
	for !s.Done() {
		s.Pop()
		if n++; n > 10_000 {
			t.Fatal("publisher with Pfs = 0 never stopped")
		}
	}
	if !s.Peek().Equal(Never()) || !s.Pop().Published.Equal(Never()) {
		t.Error("a stopped stream must report Never()")
	}
	if n < 2 {
		t.Errorf("stream stopped after %d items, want a few", n)
	}
}

func TestModelValidate(t *testing.T) {
	ok := Model{Period: time.Minute, Pss: 0.9, Pfs: 0.5}
	tests := []struct {
		name   string
		change func(*Model)
	}{
		{"zero period", func(m *Model) { m.Period = 0 }},
		{"pss above 1", func(m *Model) { m.Pss = 1.5 }},
		{"pfs NaN", func(m *Model) { m.Pfs = math.NaN() }},
		{"negative scale", func(m *Model) { m.JitterScale = -1 }},
		{"negative phase", func(m *Model) { m.Phase = -time.Second }},
		{"outage prob", func(m *Model) { m.OutageProb = -0.1 }},
		{"outage range", func(m *Model) { m.OutageProb, m.OutageMin, m.OutageMax = 0.1, time.Hour, time.Minute }},
		{"drift", func(m *Model) { m.DriftPPM = -1e6 }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid model: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := ok
			tc.change(&m)
			if err := m.Validate(); !errors.Is(err, ErrInvalidModel) {
				t.Errorf("Validate() = %v, want ErrInvalidModel", err)
			}
			if items := m.Generate(newRNG(1), t0, t0.Add(time.Hour)); items != nil {
				t.Errorf("invalid model generated %d items", len(items))
			}
		})
	}
}

func TestDTN(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name                 string
		d                    DTN
		wantBatches          []int // sizes of the batches, in order
		wantLive, wantHeldAt int   // live items; hour of the batches
	}{
		{"contact at dusk", DTN{Model: Model{Period: 10 * time.Minute, Pss: 1}, NightStart: 20, NightEnd: 6, BatchAt: 20},
			[]int{84, 84, 84}, 180, 20},
		{"contact during the day", DTN{Model: Model{Period: 10 * time.Minute, Pss: 1}, NightStart: 20, NightEnd: 6, BatchAt: 18},
			[]int{73, 84, 84}, 180, 18}, // the 18:00 reading goes with its own contact
		{"night inside the day", DTN{Model: Model{Period: 10 * time.Minute, Pss: 1}, NightStart: 1, NightEnd: 5, BatchAt: 23.5},
			[]int{118, 120, 120}, 72, 23},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items := tc.d.Generate(newRNG(1), t0, t0.Add(3*day))
			var batches []int
			live := 0
			for i, it := range items {
				if i > 0 {
					p := items[i-1]
					if it.Published.Before(p.Published) || it.Published.Equal(p.Published) && it.Observed.Before(p.Observed) {
						t.Fatalf("item %d out of order", i)
					}
				}
				if it.Published.Equal(it.Observed) && tc.d.night(it.Observed) {
					live++
					continue
				}
				if tc.d.night(it.Observed) || it.Published.Hour() != tc.wantHeldAt || it.Published.Before(it.Observed) ||
					it.Published.Sub(it.Observed) > day {
					t.Fatalf("item observed %v published %v", it.Observed, it.Published)
				}
				if i > 0 && items[i-1].Published.Equal(it.Published) && len(batches) > 0 {
					batches[len(batches)-1]++
				} else {
					batches = append(batches, 1)
				}
			}
			if live != tc.wantLive || !slices.Equal(batches, tc.wantBatches) {
				t.Errorf("live %d, batches %v; want %d, %v", live, batches, tc.wantLive, tc.wantBatches)
			}
		})
	}
}

func TestDTNWithLossAndJitter(t *testing.T) {
	d := DTN{Model: Model{Period: 5 * time.Minute, Pss: 0.9, Pfs: 0.5, JitterScale: 20 * time.Second, RandomPhase: true},
		NightStart: 22, NightEnd: 5, BatchAt: 22}
	items := d.Generate(newRNG(9), t0, t0.Add(10*24*time.Hour))
	readings := d.Model.Generate(newRNG(9), t0, t0.Add(10*24*time.Hour))
	var live, held int
	for _, it := range items {
		if d.night(it.Observed) {
			if !it.Published.Equal(it.Observed) {
				t.Fatalf("night reading %v published at %v", it.Observed, it.Published)
			}
			live++
			continue
		}
		want := midnight(it.Observed).Add(22 * time.Hour)
		if !it.Published.Equal(want) {
			t.Fatalf("day reading %v published at %v, want %v", it.Observed, it.Published, want)
		}
		held++
	}
	if live+held != len(readings) || live == 0 || held == 0 {
		t.Errorf("live %d + held %d, want all %d readings", live, held, len(readings))
	}
	if err := (DTN{Model: d.Model, NightStart: 25}).Validate(); !errors.Is(err, ErrInvalidModel) {
		t.Errorf("hour 25 accepted: %v", err)
	}
}

func BenchmarkGenerate(b *testing.B) {
	m := Model{Period: time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 2 * time.Second}
	rng := newRNG(1)
	for b.Loop() {
		m.Generate(rng, t0, t0.Add(1000*time.Minute))
	}
}
