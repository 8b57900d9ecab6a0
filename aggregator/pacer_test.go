package aggregator

import (
	"testing"
	"time"
)

func TestPacer(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		rate float64
		asks []time.Duration // when each feed is subscribed, after t0
		want []time.Duration // its first fetch, after t0
	}{
		{"no pacing", 0, []time.Duration{0, 0, 0}, []time.Duration{0, 0, 0}},
		{"a burst is spread", 4, []time.Duration{0, 0, 0, 0, 0}, []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second}},
		{"slower than the rate: at once", 4, []time.Duration{0, time.Second, 2 * time.Second}, []time.Duration{0, time.Second, 2 * time.Second}},
		{"a second burst queues behind the first", 2, []time.Duration{0, 0, 0, 500 * time.Millisecond}, []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Pacer{Rate: tc.rate}
			for i, a := range tc.asks {
				if got := p.Next(t0.Add(a)).Sub(t0); got != tc.want[i] {
					t.Errorf("feed %d asked at +%v: first fetch at +%v, want +%v", i, a, got, tc.want[i])
				}
			}
		})
	}
}

// A slot given back as unused goes to the next feed when it was the last
// handed out; an earlier one stays taken.
func TestPacerUnused(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := Pacer{Rate: 10}
	a := p.Next(t0)
	b := p.Next(t0)
	p.Unused(b) // the last: given back
	if c := p.Next(t0); !c.Equal(b) {
		t.Errorf("after the last slot was given back: %v, want %v", c.Sub(t0), b.Sub(t0))
	}
	p.Unused(a) // not the last: stays taken
	if d := p.Next(t0); !d.Equal(t0.Add(200 * time.Millisecond)) {
		t.Errorf("after an earlier slot was given back: %v, want 200ms", d.Sub(t0))
	}
}
