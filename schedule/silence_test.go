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

// An m-of-n plan over a source that dies keeps polling the live sources
// and polls the dead one at most every MaxDelay once it has backed off,
// however long it stays dead (its retries wrapped into the past after
// about a month, and the plan then named it alone, at once, every time).
func TestMDPTDeadSource(t *testing.T) {
	w := newMDPTWorld()
	p := NewMDPT(3, 2)
	p.Start(t0)
	const dies = 86400.0 // source 2 publishes nothing after its first day
	var buf []int
	var last float64
	polls := make([]int, 3)
	lastPoll := []float64{-1, -1, -1}
	for {
		when, which := p.Plan(buf[:0])
		buf = which
		now := when.Sub(t0).Seconds()
		if now > 60*86400 {
			break
		}
		if now < last {
			t.Fatalf("plan went back in time: %v after %v", now, last)
		}
		if now == last && len(which) == 1 && which[0] == 2 {
			t.Fatalf("at +%.0fs the dead source is planned again at once", now)
		}
		last = now
		for _, i := range which {
			var o Observation
			if i == 2 && now > dies {
				o = Observation{At: at(now)}
			} else {
				o = w.poll(i, now)
			}
			if i == 2 && now > 40*86400 && lastPoll[2] >= 0 && now-lastPoll[2] < 86400 {
				t.Fatalf("at +%.0fs the dead source is polled %.0fs after its last poll", now, now-lastPoll[2])
			}
			polls[i]++
			lastPoll[i] = now
			p.Observe(i, o)
		}
		if p.Ready() {
			p.Republished()
		}
	}
	if lastPoll[0] < 59*86400 || lastPoll[1] < 59*86400 {
		t.Errorf("the live sources were last polled at +%.0fs and +%.0fs of 60 days", lastPoll[0], lastPoll[1])
	}
}
