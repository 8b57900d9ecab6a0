package schedule

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// periodic returns n publish times every p seconds from t=0.
func periodic(n int, p float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i) * p
	}
	return out
}

func TestAutoSteadyPublisher(t *testing.T) {
	// A strictly periodic 60 s publisher: no jitter to learn, so the margin
	// is the floor, min(2% of 60 s, 2 s) = 1.2 s.
	pubs := periodic(30, 60)
	tp := pubs[len(pubs)-1]
	p := learn(NewAuto(), pubs...)
	if s := p.State(); s.Median != time.Minute || s.Sigma != 1200*time.Millisecond {
		t.Fatalf("period %v offset %v, want 1m0s and 1.2s", s.Median, s.Sigma)
	}
	off := 1.2
	runSteps(t, p, []step{
		{at: tp, pubs: []float64{tp}, want: tp + 60 + off},
		// Misses: every expected slot up to OutagePeriods+1, then
		// exponential backoff (6+1, 6+2, 6+4 periods).
		{at: tp + 60 + off, want: tp + 120 + off},
		{at: tp + 120 + off, want: tp + 180 + off},
		{at: tp + 180 + off, want: tp + 240 + off},
		{at: tp + 240 + off, want: tp + 300 + off},
		{at: tp + 300 + off, want: tp + 360 + off},
		{at: tp + 360 + off, want: tp + 420 + off},
		{at: tp + 420 + off, want: tp + 480 + off},
		{at: tp + 480 + off, want: tp + 600 + off},
		// Back: the publisher returns on its grid.
		{at: tp + 600 + off, pubs: []float64{tp + 600}, want: tp + 660 + off},
	})
}

func TestAutoPeriodRobustToHeavyLoss(t *testing.T) {
	// 60% of the gaps are lost readings (two or three periods): the median
	// gap is 600, but the period is 300.
	gaps := []float64{300, 600, 900, 300, 600, 600, 300, 900, 600, 300, 600, 300, 600, 900, 300, 600, 300, 600, 600, 300, 300}
	pubs := []float64{0}
	for _, g := range gaps {
		pubs = append(pubs, pubs[len(pubs)-1]+g)
	}
	a := learn(NewAuto(), pubs...)
	d := learn(NewDPT(DPTL), pubs...)
	if got := a.State().Median; got != 300*time.Second {
		t.Fatalf("auto period %v, want 5m0s", got)
	}
	if got := d.State().Median; got != 600*time.Second {
		t.Fatalf("dpt median %v, want 10m0s (the exact DPT takes the raw median)", got)
	}
}

func TestAutoMoreDataAndColdStart(t *testing.T) {
	runSteps(t, NewAuto(), []step{
		// An empty feed: probes 1.3 times the time waited apart, at
		// least ProbeStart (2 s).
		{at: 0, want: 2},
		{at: 2, want: 4.6},
		{at: 4.6, want: 10.58},
		{at: 10.58, want: 24.334},
		// The first publish, at 20: the feed was quiet for the 20 s
		// before it and the 4.334 s after it, so the period is most
		// likely over 20 s. Below that the probes' offsets from the
		// publish triple (3 × 4.334 = 13.002); 6 polls spent leave at
		// most one of the search's 7 (2 polls a period over 10 periods,
		// 13 kept for after the search): the coarse ratio, 1.5.
		{at: 24.334, pubs: []float64{20}, want: 33.002},
		{at: 33.002, want: 50}, // 20 + 1.5 × 20
		// The second publish gives the period (23.25 s): one period after
		// it plus 4% of it while one gap is known (no spread yet). The
		// feed was quiet for 20 s, so no look at the gap's middle.
		{at: 50, pubs: []float64{43.25}, want: 67.43},
		{at: 67.43, pubs: []float64{66.5}, more: true, want: 67.43},
	})
}

func TestAutoColdStartProbes(t *testing.T) {
	tests := []struct {
		name  string
		opts  []Option
		hints Hints
		want  []float64 // intervals between probes of an empty feed, seconds
	}{
		{"a share of the time waited", nil, Hints{}, []float64{2, 2.6, 5.98, 13.754, 31.6342, 72.75866}},
		{"capped by the cache lifetime", nil, Hints{CacheFor: 10 * time.Second}, []float64{2, 2.6, 5.98, 10, 10}},
		// A stated period caps the spacing for 10 periods of waiting,
		// then the probes spread out again.
		{"capped by the stated period", nil, Hints{Period: 5 * time.Second}, []float64{2, 2.6, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 70.98}},
		{"capped by WithInitial", []Option{WithInitial(4 * time.Second)}, Hints{}, []float64{2, 2.6, 4, 4}},
		{"never below ProbeStart", []Option{WithInitial(time.Second)}, Hints{Period: time.Second}, []float64{2, 2, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewAuto(tc.opts...)
			now := t0
			for i, w := range tc.want {
				next := p.Next(Observation{At: now, Hints: tc.hints})
				if got := next.Sub(now).Seconds(); math.Abs(got-w) > 1e-6 {
					t.Fatalf("probe %d: interval %v s, want %v s", i, got, w)
				}
				now = next
			}
		})
	}
	// Waiting for the first item, the probes reach a day in about 13
	// polls; a year of waiting is capped at MaxDelay.
	p := NewAuto()
	now, n := t0, 0
	for now.Sub(t0) < 24*time.Hour {
		now = p.Next(Observation{At: now})
		n++
	}
	if n < 12 || n > 15 {
		t.Errorf("%d probes to wait a day, want 12–15", n)
	}
	for range 40 {
		next := p.Next(Observation{At: now})
		if d := next.Sub(now); d > MaxDelay {
			t.Fatalf("probe interval %v > MaxDelay", d)
		}
		now = next
	}
}

func TestAutoColdStartHalfGap(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{
			// One item at subscription, then one 60 s later: the gap
			// may hold a lost reading. Its middle (+ 4% of 60 s) first.
			name: "middle quiet: back to the gap",
			steps: []step{
				{at: 0, pubs: []float64{0}, want: 2},
				{at: 60, pubs: []float64{60}, want: 92.4},
				{at: 92.4, want: 122.4},
				// Two gaps of 60 s: no spread, the floor (2% of 60 s).
				{at: 122.4, pubs: []float64{120}, want: 181.2},
			},
		},
		{
			// The middle held a publish: the period is 30 s.
			name: "middle holds a publish",
			steps: []step{
				{at: 0, pubs: []float64{0}, want: 2},
				{at: 60, pubs: []float64{60}, want: 92.4},
				// Gaps of 60 and 30.25 s: a period of 30.125 s (60 is
				// two of them), plus the floor, 2% of it.
				{at: 92.4, pubs: []float64{90.25}, want: 120.9775},
			},
		},
		{
			// Dated to whole seconds, the publish at 90 happened
			// somewhere in that second: the margin is at least 1 s.
			name: "whole-second dates",
			steps: []step{
				{at: 0, pubs: []float64{0}, want: 2},
				{at: 60, pubs: []float64{60}, want: 92.4},
				{at: 92.4, pubs: []float64{90}, want: 121},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runSteps(t, NewAuto(), tc.steps) })
	}
}

func TestAutoLearningProbe(t *testing.T) {
	// Two gaps known (period 160 s), no jitter tail yet: a miss at the
	// expected publish is probed for within the slot, from 1/8 of the
	// period (20 s), then 4 times further, until the next probe would
	// reach the next slot; then the next slot.
	p := learn(NewAuto(), 0, 160, 320)
	off := 2.0 // floor: min(2% of 160 s, 2 s)
	runSteps(t, p, []step{
		{at: 320, pubs: []float64{320}, want: 480 + off},
		{at: 480 + off, want: 502},
		{at: 502, want: 582},
		// 582 + 320 would pass the next slot (640 + 2): the slot it is.
		{at: 582, want: 640 + off},
		// A late publish found by a probe: back on the grid of the new
		// publish.
		{at: 642, pubs: []float64{641}, want: 641 + 160 + off},
	})
}

func TestAutoLearnsLateFromLost(t *testing.T) {
	// A 60 s clock-driven publisher whose readings are sometimes 5 s late
	// but never lost: after a few late misses auto retries within the slot
	// instead of waiting a whole period.
	a := NewAuto()
	rng := rand.New(rand.NewPCG(1, 2))
	pub := 0.0
	now := 0.0
	var pending []float64
	quick := 0
	for i := 0; i < 400; i++ {
		next := float64(i) * 60
		if rng.IntN(10) == 0 {
			next += 5
		}
		_ = pub
		pending = append(pending, next)
		// Poll until this publish is fetched.
		for len(pending) > 0 {
			var got []float64
			for len(pending) > 0 && pending[0] <= now {
				got = append(got, pending[0])
				pending = pending[1:]
			}
			if len(pending) == 0 && len(got) == 0 {
				break
			}
			o := obsOf(step{at: now, pubs: got})
			n := a.Next(o).Sub(t0).Seconds()
			if !o.Hit && n-now < 30 {
				quick++
			}
			now = n
			if len(got) > 0 {
				break
			}
		}
	}
	if quick == 0 {
		t.Fatal("auto never retried within the slot although every miss was a late publish")
	}
	if a.lateN <= a.lostN {
		t.Fatalf("late %v ≤ lost %v, want late misses to dominate", a.lateN, a.lostN)
	}
}

func TestAutoStateSize(t *testing.T) {
	// The million-feed simulation keeps one per feed beside its queue entry
	// and publisher: the scale scenario holds the whole under 1 KiB.
	if n := sizeofAuto(); n > 704 {
		t.Fatalf("Auto is %d bytes, want ≤ 704", n)
	}
}

// TestPoliciesNeverGoBack: for any sequence of observations, the next poll
// is never before the poll time and never more than MaxDelay after it.
func TestPoliciesNeverGoBack(t *testing.T) {
	makers := map[string]func() Policy{
		"dpt-a":          func() Policy { return NewDPT(DPTA) },
		"dpt-n":          func() Policy { return NewDPT(DPTN) },
		"dpt-l":          func() Policy { return NewDPT(DPTL) },
		"dpt-l-unimodal": func() Policy { return NewDPT(DPTL, WithoutBimodal()) },
		"auto":           func() Policy { return NewAuto() },
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			for seed := uint64(0); seed < 50; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				p := mk()
				now := t0
				period := time.Duration(1+rng.IntN(7200)) * time.Second
				for i := 0; i < 500; i++ {
					o := Observation{At: now, Hit: rng.IntN(3) > 0, MoreData: rng.IntN(50) == 0}
					if o.Hit {
						for k := rng.IntN(4); k >= 0; k-- {
							// Publish times around and sometimes after now.
							d := time.Duration(rng.Int64N(int64(2*period))) - period/4
							o.Published = append(o.Published, now.Add(-d))
						}
						sortTimes(o.Published)
					}
					if rng.IntN(10) == 0 {
						o.Hints.Desync = time.Duration(rng.Int64N(int64(time.Hour)))
					}
					if rng.IntN(10) == 0 {
						o.Hints.HasPhase, o.Hints.Phase = true, time.Duration(rng.Int64N(int64(period)))
					}
					next := p.Next(o)
					if next.Before(now) || next.Sub(now) > MaxDelay {
						t.Fatalf("seed %d step %d: next %v is %v after now, want within [0, %v]", seed, i, next, next.Sub(now), MaxDelay)
					}
					if next.Equal(now) {
						next = now.Add(time.Second)
					}
					now = next
				}
			}
		})
	}
}

func sortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

func TestQuantile(t *testing.T) {
	tests := []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{nil, 0.5, 0},
		{[]float64{3}, 0.9, 3},
		{[]float64{1, 2, 3, 4}, 0.5, 2.5},
		{[]float64{1, 2, 3, 4}, 1, 4},
		{[]float64{0, 10}, 0.3, 3},
	}
	for _, tc := range tests {
		if got := quantile(tc.xs, tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.xs, tc.q, got, tc.want)
		}
	}
}

// TestAutoWholeSecondDates pins the date-resolution floor: a 15 s
// publisher 0.3 s past each whole second whose dates say only the second.
// With a margin under a second Auto would poll just before every publish
// and fetch each reading a period late, every poll a hit; it must fetch
// every reading within about a second.
func TestAutoWholeSecondDates(t *testing.T) {
	pub := func(k int) float64 { return 15*float64(k) + 0.301 + 0.0005*float64(k) }
	p := NewAuto()
	now, k := 0.0, 0
	for n := 0; n < 400; n++ {
		obs := Observation{At: at(now)}
		for pub(k) <= now {
			if k > 40 {
				if lat := now - pub(k); lat > 1.5 {
					t.Fatalf("reading %d (published at %.3f s) fetched %.2f s late", k, pub(k), lat)
				}
			}
			obs.Published = append(obs.Published, at(math.Floor(pub(k))))
			k++
		}
		obs.Hit = len(obs.Published) > 0
		now = p.Next(obs).Sub(t0).Seconds()
	}
	if k < 300 {
		t.Fatalf("%d readings fetched in 400 polls", k)
	}
}

// TestAutoSize keeps Auto in the 640-byte allocation class: a million feeds
// keep a million of them, and one more byte costs 64 per feed (the next
// class is 704 bytes).
func TestAutoSize(t *testing.T) {
	if n := unsafe.Sizeof(Auto{}); n > 640 {
		t.Fatalf("Auto is %d bytes, more than 640", n)
	}
}

// BenchmarkAutoLiveHeap reports the live heap per feed of Auto policies
// that have learned their feeds (B/feed): the policy's share of a feed's
// memory in a scheduler.
func BenchmarkAutoLiveHeap(b *testing.B) {
	const n = 100_000
	var keep []*Auto
	var per float64
	for b.Loop() {
		keep = make([]*Auto, n) // not counted: a scheduler keeps its own reference
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for i := range keep {
			a := NewAuto(WithSeed(uint64(i)))
			p := 300 + float64(i%7)
			for k := range 40 {
				tp := float64(k) * p
				a.Next(Observation{At: at(tp + 1), Hit: true, Published: []time.Time{at(tp)}})
			}
			keep[i] = a
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		per = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / n
	}
	b.ReportMetric(per, "B/feed")
	runtime.KeepAlive(keep)
}

// BenchmarkLearningNext measures one Next call of Auto and DPT-L on a
// jittered, lossy 10-minute publisher polled where the policy says, and
// one AppendState of the learned Auto (a service stores it with each
// poll).
func BenchmarkLearningNext(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pubs []time.Time
	for i := range 20000 {
		if rng.Float64() < 0.1 {
			continue // a lost reading
		}
		j := time.Duration(rng.NormFloat64() * float64(5*time.Second))
		pubs = append(pubs, blBase.Add(time.Duration(i)*10*time.Minute+j))
	}
	// drive polls a policy where it says; when the publishes run out a
	// new policy starts over.
	drive := func(newPolicy func() Policy, b *testing.B) {
		p, at, i := newPolicy(), blBase, 0
		seen := make([]time.Time, 0, 8)
		for b.Loop() {
			seen = seen[:0]
			for i < len(pubs) && !pubs[i].After(at) {
				seen = append(seen, pubs[i])
				i++
			}
			next := p.Next(Observation{At: at, Hit: len(seen) > 0, Published: seen})
			if i >= len(pubs) {
				p, at, i = newPolicy(), blBase, 0
				continue
			}
			if !next.After(at) {
				next = at.Add(time.Second)
			}
			at = next
		}
	}
	b.Run("auto", func(b *testing.B) { drive(func() Policy { return NewAuto() }, b) })
	b.Run("dpt-l", func(b *testing.B) { drive(func() Policy { return NewDPT(DPTL) }, b) })
	b.Run("auto-append-state", func(b *testing.B) {
		a := NewAuto()
		for _, p := range pubs[:500] {
			a.Next(Observation{At: p.Add(time.Second), Hit: true, Published: []time.Time{p}})
		}
		var buf []byte
		for b.Loop() {
			buf = a.AppendState(buf[:0])
		}
	})
}
