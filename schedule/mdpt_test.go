package schedule

import (
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"
)

func sizeofAuto() uintptr { return unsafe.Sizeof(Auto{}) }

// mdptWorld is three strictly periodic sources (500 s; 3600 s at 1200 s;
// 3600 s at 2400 s), the Fig. 23 layout without losses or jitter.
type mdptWorld struct {
	period, phase []float64
	seen          []float64 // per source: newest publish already fetched
}

func newMDPTWorld() *mdptWorld {
	return &mdptWorld{period: []float64{500, 3600, 3600}, phase: []float64{0, 1200, 2400}, seen: []float64{-1, -1, -1}}
}

// poll returns what source i shows at time now (seconds after t0).
func (w *mdptWorld) poll(i int, now float64) Observation {
	o := Observation{At: at(now)}
	for k := 0; ; k++ {
		p := w.phase[i] + float64(k)*w.period[i]
		if p > now {
			break
		}
		if p > w.seen[i] {
			o.Published = append(o.Published, at(p))
			w.seen[i] = p
		}
	}
	o.Hit = len(o.Published) > 0
	return o
}

func TestMDPTRendezvous(t *testing.T) {
	w := newMDPTWorld()
	p := NewMDPT(3, 2)
	p.Start(t0)
	var buf []int
	polls, hits, republishes := 0, 0, 0
	var last float64
	for {
		when, which := p.Plan(buf[:0])
		buf = which
		now := when.Sub(t0).Seconds()
		if now > 3*86400 {
			break
		}
		if now < last {
			t.Fatalf("plan went back in time: %v after %v", now, last)
		}
		last = now
		for _, i := range which {
			o := w.poll(i, now)
			polls++
			if o.Hit {
				hits++
			}
			p.Observe(i, o)
		}
		if p.Ready() {
			republishes++
			p.Republished()
			// After the first day every republish happens exactly when the
			// second source published: at :20 (A and B) or :40 (A and C).
			if now > 86400 {
				if m := int(now) % 3600; m != 1200 && m != 2400 {
					t.Fatalf("republish at %.0f s (%d s past the hour), want :20 or :40", now, m)
				}
			}
		}
	}
	// Two republishes an hour; almost every poll finds data once learned.
	if republishes < 2*24*3-8 {
		t.Fatalf("%d republishes in 3 days, want about %d", republishes, 2*24*3)
	}
	if pct := 100 * float64(hits) / float64(polls); pct < 95 {
		t.Fatalf("hit %.1f%% (%d/%d), want ≥ 95%%", pct, hits, polls)
	}
}

func TestMDPTPlansOnlyExpectedSources(t *testing.T) {
	p := NewMDPT(3, 2)
	now := t0
	p.due = []int64{now.Add(100 * time.Second).UnixNano(), now.Add(50 * time.Second).UnixNano(), now.Add(900 * time.Second).UnixNano()}
	when, which := p.Plan(nil)
	if !when.Equal(now.Add(100*time.Second)) || len(which) != 2 || which[0] != 0 || which[1] != 1 {
		t.Fatalf("plan %v %v, want +100s and sources [0 1]", when.Sub(now), which)
	}
	// One source already fresh: only one more is needed, the earliest.
	p.fresh[1] = true
	p.due[1] = now.Add(2000 * time.Second).UnixNano()
	when, which = p.Plan(nil)
	if !when.Equal(now.Add(100*time.Second)) || len(which) != 1 || which[0] != 0 {
		t.Fatalf("plan %v %v, want +100s and source [0]", when.Sub(now), which)
	}
	// Candidate threshold 3: the third source is polled early too.
	q := NewMDPT(3, 2, WithCandidates(3))
	copy(q.due, []int64{now.Add(100 * time.Second).UnixNano(), now.Add(50 * time.Second).UnixNano(), now.Add(900 * time.Second).UnixNano()})
	if _, which := q.Plan(nil); len(which) != 3 {
		t.Fatalf("with c=3 plan polls %v, want all three", which)
	}
}

// forecastWorld runs MDPT with Auto trackers and forecast planning over the
// mdptWorld sources for days, and returns per source its polls after the
// first day, and the republish times after it (seconds after t0).
func forecastWorld(t *testing.T, days float64, opts ...MDPTOption) (polls []int, hits int, outs []float64) {
	t.Helper()
	w := newMDPTWorld()
	opts = append([]MDPTOption{WithTracker(func(_ int, o ...Option) Policy { return NewAuto(o...) }), WithForecast(0)}, opts...)
	p := NewMDPT(3, 2, opts...)
	p.Start(t0)
	polls = make([]int, 3)
	var buf []int
	last := 0.0
	for {
		when, which := p.Plan(buf[:0])
		buf = which
		now := max(when.Sub(t0).Seconds(), last)
		if now > days*86400 {
			return polls, hits, outs
		}
		last = now
		for _, i := range which {
			o := w.poll(i, now)
			if now > 86400 {
				polls[i]++
				if o.Hit {
					hits++
				}
			}
			p.Observe(i, o)
		}
		if p.Ready() {
			if now > 86400 {
				outs = append(outs, now)
			}
			p.Republished()
		}
	}
}

// TestMDPTForecast pins forecast planning on exact sources: once learned,
// every round is republished within the margin floor (2 s) of the hourly
// publish that closes it, the 500 s source is polled once a round (when
// its reading completes it) instead of every 500 s, and every poll hits.
func TestMDPTForecast(t *testing.T) {
	polls, hits, outs := forecastWorld(t, 3)
	if len(outs) < 2*24*2-2 {
		t.Fatalf("%d republishes in the last 2 days, want about %d", len(outs), 2*24*2)
	}
	for _, o := range outs {
		m := math.Mod(o, 3600)
		if !(m >= 1200 && m <= 1202 || m >= 2400 && m <= 2402) {
			t.Fatalf("republish at %.1f s (%.1f s past the hour), want within 2 s after :20 or :40", o, m)
		}
	}
	if polls[0] > len(outs)+2 {
		t.Errorf("500 s source polled %d times for %d rounds, want once a round", polls[0], len(outs))
	}
	total := polls[0] + polls[1] + polls[2]
	if hits != total {
		t.Errorf("%d hits in %d polls, want all", hits, total)
	}
}

// fixedTracker is a tracker that cannot forecast: it polls every period.
type fixedTracker struct{ period time.Duration }

func (f fixedTracker) Next(obs Observation) time.Time { return obs.At.Add(f.period) }

// TestMDPTForecastPlans pins the planning rules on a hand-set state: the
// source in doubt is polled at the rendezvous alone, the one counted on
// right after it has published, and a tracker that cannot forecast keeps
// its own schedule.
func TestMDPTForecastPlans(t *testing.T) {
	// Two Auto trackers learn a 100 s and a 1000 s period from readings
	// until t0+1000 s; the third source's tracker cannot forecast and
	// polls every hour.
	newP := func() *MDPT {
		p := NewMDPT(3, 2, WithForecast(0.01), WithTracker(func(i int, o ...Option) Policy {
			if i == 2 {
				return fixedTracker{period: time.Hour}
			}
			return NewAuto(o...)
		}))
		p.Start(t0)
		// One reading a poll, so that the trackers learn their jitter.
		for k := 0; k <= 10; k++ {
			s := float64(1000*k - 9000)
			p.Observe(1, Observation{At: at(s), Hit: true, Published: []time.Time{at(s)}})
		}
		for k := 0; k <= 100; k++ {
			s := float64(100*k - 9000)
			p.Observe(0, Observation{At: at(s), Hit: true, Published: []time.Time{at(s)}})
		}
		p.Observe(2, Observation{At: at(1000)})
		p.Republished()
		return p
	}
	p := newP()
	when, which := p.Plan(nil)
	// The slow source is next expected at 2000 s; the fast one will have
	// published several times by then: only the slow one is polled.
	if len(which) != 1 || which[0] != 1 {
		t.Fatalf("plan %v at %v, want the slow source alone", which, when.Sub(t0))
	}
	if d := when.Sub(at(2000)); d < 0 || d > 2*time.Minute {
		t.Fatalf("plan at %v, want shortly after 2000 s", when.Sub(t0))
	}
	// It published: the fast source completes the round, polled at once.
	p.Observe(1, Observation{At: when, Hit: true, Published: []time.Time{at(2000)}})
	when2, which2 := p.Plan(nil)
	if !when2.Equal(when) || len(which2) != 1 || which2[0] != 0 {
		t.Fatalf("plan %v at %v, want the fast source at %v", which2, when2.Sub(t0), when.Sub(t0))
	}

	// Had the slow source been silent, the fast one alone is not polled:
	// the next rendezvous is the slow source's next expected publish.
	q := newP()
	w, _ := q.Plan(nil)
	q.Observe(1, Observation{At: w})
	when3, which3 := q.Plan(nil)
	if len(which3) != 1 || which3[0] != 1 {
		t.Fatalf("plan %v at %v, want the slow source again", which3, when3.Sub(t0))
	}
	if d := when3.Sub(at(3000)); d < 0 || d > 2*time.Minute {
		t.Fatalf("plan at %v, want shortly after 3000 s", when3.Sub(t0))
	}
	// The source that cannot forecast is polled on its own schedule when
	// that comes first: after 4000 s of silence from the slow one.
	for k := 0; k < 2; k++ {
		w, _ = q.Plan(nil)
		q.Observe(1, Observation{At: w})
	}
	when4, which4 := q.Plan(nil)
	if !slices.Contains(which4, 2) || !when4.Equal(at(1000).Add(time.Hour)) {
		t.Fatalf("plan %v at %v, want the non-forecasting source at its own 4600 s", which4, when4.Sub(t0))
	}
}

// TestMDPTForecastOneInDoubtAtATime pins that, of the sources in doubt at
// a rendezvous, the one due last is polled first and the others only once
// it has published: a fast source that may have lost its reading is not
// polled for a round the slow source cannot complete yet.
func TestMDPTForecastOneInDoubtAtATime(t *testing.T) {
	newP := func() *MDPT {
		p := NewMDPT(2, 2, WithForecast(0.01), WithTracker(func(_ int, o ...Option) Policy { return NewAuto(o...) }))
		p.Start(t0)
		for k := 0; k <= 10; k++ {
			s := float64(1000*k - 9000)
			p.Observe(1, Observation{At: at(s), Hit: true, Published: []time.Time{at(s)}})
		}
		for k := 0; k <= 100; k++ {
			s := float64(100*k - 9000)
			p.Observe(0, Observation{At: at(s), Hit: true, Published: []time.Time{at(s)}})
		}
		p.Republished()
		// The fast source's reading due at 1900 is not there: whether it
		// has one for the next round is in doubt.
		p.Observe(0, Observation{At: at(1950)})
		return p
	}
	p := newP()
	when, which := p.Plan(nil)
	if len(which) != 1 || which[0] != 1 {
		t.Fatalf("plan %v at %v, want the slow source alone", which, when.Sub(t0))
	}
	// The slow source published: the fast one is polled at once.
	p.Observe(1, Observation{At: when, Hit: true, Published: []time.Time{at(2000)}})
	when2, which2 := p.Plan(nil)
	if !when2.Equal(when) || len(which2) != 1 || which2[0] != 0 {
		t.Fatalf("plan %v at %v, want the fast source at %v", which2, when2.Sub(t0), when.Sub(t0))
	}
	// Had the slow source been silent, the fast one is not polled then.
	q := newP()
	w, _ := q.Plan(nil)
	q.Observe(1, Observation{At: w})
	w3, which3 := q.Plan(nil)
	if w3.Equal(w) || slices.Contains(which3, 0) && !w3.After(w) {
		t.Fatalf("plan %v at %v after the slow source's miss at %v, want no poll of the fast source then", which3, w3.Sub(t0), w.Sub(t0))
	}
}

// TestMDPTForecastFitsMargins pins the margin forecast planning fits to a
// source's recent gaps: the median residual plus the upper tail's scale
// times ln(1/(2q)), and the trackers' own with WithTrackerMargins.
func TestMDPTForecastFitsMargins(t *testing.T) {
	const q = 0.01
	tests := []struct {
		name string
		opts []MDPTOption
		want float64 // seconds; 0: the tracker's margin
	}{
		// Gaps of 3590 and 3610 s: residuals ±10 s around a median of 0,
		// an upper tail of scale 10 s.
		{name: "fitted", want: 10 * math.Log(1/(2*q))},
		{name: "tracker margins", opts: []MDPTOption{WithTrackerMargins()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]MDPTOption{WithForecast(q), WithTracker(func(_ int, o ...Option) Policy { return NewAuto(o...) })}, tc.opts...)
			p := NewMDPT(2, 2, opts...)
			p.Start(t0)
			s := 0.0
			for k := range 41 {
				p.Observe(0, Observation{At: at(s + 30), Hit: true, Published: []time.Time{at(s)}})
				s += 3600 + 10*float64(2*(k%2)-1)
			}
			if got := p.marg[0]; math.Abs(got-tc.want) > 0.5 {
				t.Fatalf("margin %.2f s, want %.2f s", got, tc.want)
			}
			if tc.want == 0 {
				return
			}
			d, ok := p.margin(0, p.src[0].(Forecaster))
			if !ok || math.Abs(d.Seconds()-tc.want) > 0.5 {
				t.Fatalf("margin() = %v, %v; want %.2f s", d, ok, tc.want)
			}
		})
	}
}
