package schedule

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestQuietOverlap(t *testing.T) {
	tests := []struct {
		f1, n1, f2, n2 int
		from, n        int
	}{
		{1200, 600, 1190, 620, 1200, 600},  // both over midnight
		{1200, 600, 1260, 500, 1260, 500},  // inside
		{1380, 120, 0, 60, 0, 60},          // the second starts after midnight
		{0, 60, 1380, 120, 0, 60},          // and the other way round
		{600, 60, 900, 60, 0, 0},           // apart
		{1300, 400, 1350, 100, 1350, 100},  // wrapping, inside
		{100, 1300, 1300, 300, 1300, 100},  // the longer of two overlaps
		{100, 1300, 1350, 300, 100, 110},   // 100–210 beats 1350–1400
		{0, 1440, 500, 10, 500, 10},        // a whole day
		{1439, 2, 0, 1, 0, 1},              // one minute over midnight
		{720, 60, 720 - 1440, 60, 720, 60}, // a shifted copy
	}
	for _, tc := range tests {
		from, n := overlap(tc.f1, tc.n1, tc.f2, tc.n2)
		if n != tc.n || (n > 0 && from != tc.from) {
			t.Errorf("overlap(%d+%d, %d+%d) = %d+%d, want %d+%d", tc.f1, tc.n1, tc.f2, tc.n2, from, n, tc.from, tc.n)
		}
	}
}

// solarDay returns the publish times (Unix ns) of a sensor publishing every
// period from rise to set (offsets from midnight UTC) on day d after t0,
// with Laplace-like jitter of scale j.
func solarDay(d int, rise, set, period, j time.Duration, rng *rand.Rand) []time.Time {
	var out []time.Time
	base := t0.Add(time.Duration(d) * 24 * time.Hour)
	for off := rise; off < set; off += period {
		jit := time.Duration((rng.ExpFloat64() - rng.ExpFloat64()) * float64(j))
		out = append(out, base.Add(off+jit))
	}
	return out
}

// pollDays runs p against pubs (sorted) from start to end and returns the
// poll times.
func pollDays(p Policy, pubs []time.Time, start, end time.Time) []time.Time {
	var polls []time.Time
	next := 0
	for now := start; now.Before(end); {
		polls = append(polls, now)
		o := Observation{At: now}
		for next < len(pubs) && !pubs[next].After(now) {
			o.Published = append(o.Published, pubs[next])
			next++
		}
		o.Hit = len(o.Published) > 0
		n := p.Next(o)
		if !n.After(now) {
			n = now.Add(time.Second)
		}
		now = n
	}
	return polls
}

// A solar sensor publishes every 10 min from 06:00 to 19:00 UTC: after
// LearnedSleepDays nights auto learns the night as a sleep and polls no more
// inside it; its first poll of the morning lands at the learned wake-up.
// When the sensor starts publishing at night, the sleep is forgotten.
func TestAutoLearnsDailySleep(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rise, set, period := 6*time.Hour, 19*time.Hour, 10*time.Minute
	var pubs []time.Time
	const days = 8
	for d := 0; d < days; d++ {
		pubs = append(pubs, solarDay(d, rise, set, period, 5*time.Second, rng)...)
	}
	// From day 8 on it publishes day and night.
	for off := time.Duration(0); off < 3*24*time.Hour; off += period {
		pubs = append(pubs, t0.Add(days*24*time.Hour+off))
	}
	a := NewAuto(WithSeed(1))
	plain := NewAuto(WithSeed(1), WithoutSleepLearning())
	end := t0.Add((days + 3) * 24 * time.Hour)
	polls := pollDays(a, pubs, t0, end)
	plainPolls := pollDays(plain, pubs, t0, end)

	nightPolls := func(ps []time.Time, d int) int {
		n := 0
		lo := t0.Add(time.Duration(d)*24*time.Hour + set + 30*time.Minute)
		hi := t0.Add(time.Duration(d+1)*24*time.Hour + rise - 30*time.Minute)
		for _, p := range ps {
			if !p.Before(lo) && p.Before(hi) {
				n++
			}
		}
		return n
	}
	for d := LearnedSleepDays + 1; d < days-1; d++ {
		if n := nightPolls(polls, d); n != 0 {
			t.Errorf("night %d: %d polls inside the learned sleep", d, n)
		}
		if n := nightPolls(plainPolls, d); n == 0 {
			t.Errorf("night %d: auto without sleep learning did not poll at night: the test shows nothing", d)
		}
	}
	// The night after the sensor stopped sleeping is polled again.
	if n := nightPolls(polls, days); n < 20 {
		t.Errorf("night %d (publishing all night): %d polls, want the sleep forgotten", days, n)
	}
	if _, ok := a.quiet.window(); ok {
		t.Error("the learned sleep is still in force after publishes inside it")
	}
}

func TestAutoLearnedSleepState(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a := NewAuto(WithSeed(1))
	for d := 0; d < LearnedSleepDays+1; d++ {
		for _, p := range solarDay(d, 6*time.Hour, 19*time.Hour, 10*time.Minute, 0, rng) {
			a.Next(Observation{At: p, Hit: true, Published: []time.Time{p}})
		}
	}
	st := a.State()
	// Last publish 18:50, first 06:00: the window starts on the minute
	// after the one, ends on the minute of the other.
	if !st.HasLearnedSleep || st.LearnedSleep.String() != "18:51-06:00" {
		t.Fatalf("learned sleep %v (%v), want 18:51-06:00", st.LearnedSleep, st.HasLearnedSleep)
	}
	// A poll asked for inside the window moves to its end.
	at := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)
	if w, ok := a.quiet.wake(at); !ok || !w.Equal(time.Date(2026, 3, 2, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("wake(%v) = %v, %v; want 06:00 the next day", at, w, ok)
	}
	if _, ok := a.quiet.wake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)); ok {
		t.Fatal("noon is not asleep")
	}
	off := NewAuto(WithoutSleepLearning())
	rng = rand.New(rand.NewPCG(5, 6))
	for d := 0; d < LearnedSleepDays+1; d++ {
		for _, p := range solarDay(d, 6*time.Hour, 19*time.Hour, 10*time.Minute, 0, rng) {
			off.Next(Observation{At: p, Hit: true, Published: []time.Time{p}})
		}
	}
	if off.State().HasLearnedSleep {
		t.Fatal("WithoutSleepLearning learned a sleep")
	}
}

// A publish inside the learned window near an edge moves that edge past
// it; one deeper inside forgets the window.
func TestQuietCut(t *testing.T) {
	ns := func(h, m int) int64 {
		return t0.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute).UnixNano()
	}
	q := quiet{from: 1131, n: 669, days: 5, lastFrom: 1131, lastN: 669}
	steps := []struct {
		h, m    int
		from, n int
	}{
		{5, 58, 1131, 667},  // 1 minute before the end (18:51–05:58)
		{18, 55, 1136, 662}, // 4 minutes after the start (18:56–05:58)
		{19, 10, 1151, 647}, // 14 minutes after the start: still an edge (19:11–05:58)
		{0, 0, 0, 0},        // midnight, hours from either edge: forgotten
	}
	for i, s := range steps {
		q.learn(ns(s.h, s.m)-int64(time.Minute), ns(s.h, s.m), 60)
		if int(q.from) != s.from || int(q.n) != s.n {
			t.Fatalf("step %d: window %d+%d, want %d+%d", i, q.from, q.n, s.from, s.n)
		}
	}
	if q.active() || q.days != 0 {
		t.Fatalf("window still in force: %+v", q)
	}
}

// Random outages that overlap on consecutive days are not a sleep: the
// quiet intervals must begin and end at about the same time every day.
func TestQuietNeedsAlignedDays(t *testing.T) {
	day := int64(24 * time.Hour)
	ns := func(d, h, m int) int64 {
		return t0.UnixNano() + int64(d)*day + int64(time.Duration(h)*time.Hour+time.Duration(m)*time.Minute)
	}
	tests := []struct {
		name   string
		gaps   [][2]int64 // quiet intervals (prev publish, next publish)
		active bool
	}{
		{"aligned nights", [][2]int64{{ns(0, 19, 0), ns(1, 6, 0)}, {ns(1, 19, 2), ns(2, 5, 58)}, {ns(2, 19, 4), ns(3, 5, 56)}}, true},
		{"overlapping outages", [][2]int64{{ns(0, 10, 0), ns(0, 16, 0)}, {ns(1, 12, 0), ns(1, 18, 0)}, {ns(2, 8, 0), ns(2, 14, 0)}}, false},
		{"a day without a gap", [][2]int64{{ns(0, 19, 0), ns(1, 6, 0)}, {ns(1, 19, 0), ns(2, 6, 0)}, {ns(3, 19, 0), ns(4, 6, 0)}}, false},
		{"two gaps a day", [][2]int64{{ns(0, 19, 0), ns(1, 6, 0)}, {ns(1, 19, 0), ns(2, 6, 0)}, {ns(2, 7, 0), ns(2, 9, 0)}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q quiet
			for _, g := range tc.gaps {
				q.learn(g[0], g[1], 600)
			}
			if q.active() != tc.active {
				t.Fatalf("active %v, want %v (%+v)", q.active(), tc.active, q)
			}
		})
	}
}
