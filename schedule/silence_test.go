package schedule

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// A feed that falls silent for good is polled further and further apart,
// then every MaxDelay, however long the silence lasts: the retries'
// exponential backoff saturates rather than wrapping into the past (which
// made every policy poll a feed silent for about a month back to back).
func TestSilentFeedBacksOffForGood(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policies := []struct {
		name string
		new  func() Policy
	}{
		{"auto", func() Policy { return NewAuto(WithSeed(1)) }},
		{"dpt-a", func() Policy { return NewDPT(DPTA, WithSeed(1)) }},
		{"dpt-n", func() Policy { return NewDPT(DPTN, WithSeed(1)) }},
		{"dpt-l", func() Policy { return NewDPT(DPTL, WithSeed(1)) }},
	}
	for _, pc := range policies {
		for _, period := range []time.Duration{time.Second * 90, time.Hour, 24 * time.Hour} {
			t.Run(fmt.Sprint(pc.name, "/", period), func(t *testing.T) {
				p := pc.new()
				now := t0
				for i := range 30 {
					now = t0.Add(time.Duration(i) * period)
					p.Next(Observation{At: now, Hit: true, Published: []time.Time{now}})
				}
				now = now.Add(period / 2)
				for miss := range 200 {
					next := p.Next(Observation{At: now})
					d := next.Sub(now)
					if d < 0 || d > MaxDelay {
						t.Fatalf("miss %d: next fetch in %v", miss, d)
					}
					// Past the fast and period retries, every wait is at
					// least a day (the backoff reaches MaxDelay).
					if miss >= 30 && d < 24*time.Hour {
						t.Fatalf("miss %d, %v after the last publish: next fetch in %v", miss, now.Sub(t0), d)
					}
					now = next.Add(100 * time.Millisecond)
				}
			})
		}
	}
}

func TestAddSeconds(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	tests := []struct {
		name string
		s    float64
		want int64
	}{
		{"a second", 1, base + 1e9},
		{"back a second", -1, base - 1e9},
		{"2^40 hours", math.Exp2(40) * 3600, math.MaxInt64},
		{"past the end of float64's int64", 1e300, math.MaxInt64},
		{"far back", -1e300, math.MinInt64},
		{"+Inf", math.Inf(1), math.MaxInt64},
		{"NaN", math.NaN(), base},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := addSeconds(base, tc.s); got != tc.want {
				t.Errorf("addSeconds(base, %g) = %d, want %d", tc.s, got, tc.want)
			}
		})
	}
}
