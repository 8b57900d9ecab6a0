package schedule

import (
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
