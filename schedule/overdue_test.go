package schedule

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// overdueOf is AppendOverdue sorted, for comparisons.
func overdueOf(s *Scheduler, before time.Time) []int {
	ids := s.AppendOverdue(nil, before)
	slices.Sort(ids)
	return ids
}

// TestSchedulerOverdue drives a scheduler through each state a feed can
// be overdue in (waiting, ready behind the rate, parked behind its host,
// in flight) and the ones that end it (Done, Cancel keeps it, Remove),
// asking at each step which feeds are due before a time.
func TestSchedulerOverdue(t *testing.T) {
	type step struct {
		name   string
		do     func(t *testing.T, s *Scheduler)
		before time.Duration // from schBase
		want   []int
	}
	add := func(id int, start time.Duration, host string) func(*testing.T, *Scheduler) {
		return func(t *testing.T, s *Scheduler) {
			mustAdd(t, s, id, Feed{Policy: &schPolicy{start: schAt(start), period: time.Hour}, Host: host}, schAt(-2*time.Hour))
		}
	}
	due := func(at time.Duration, want int) func(*testing.T, *Scheduler) {
		return func(t *testing.T, s *Scheduler) {
			if gs := s.Due(schAt(at)); len(gs) != want {
				t.Fatalf("Due granted %d, want %d", len(gs), want)
			}
		}
	}
	done := func(id int, at time.Duration) func(*testing.T, *Scheduler) {
		return func(t *testing.T, s *Scheduler) {
			if _, err := s.Done(id, Observation{At: schAt(at)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"waiting", Config{}, []step{
			{"empty", func(*testing.T, *Scheduler) {}, 0, nil},
			{"added", func(t *testing.T, s *Scheduler) {
				for id, d := range []time.Duration{-90 * time.Minute, -time.Hour, -30 * time.Second, time.Minute, -time.Hour} {
					add(id, d, "")(t, s)
				}
			}, -time.Minute, []int{0, 1, 4}},
			{"strictly before", func(*testing.T, *Scheduler) {}, -time.Hour, []int{0}},
			{"later", func(*testing.T, *Scheduler) {}, 2 * time.Minute, []int{0, 1, 2, 3, 4}},
			{"removed", func(t *testing.T, s *Scheduler) { s.Remove(1) }, -time.Minute, []int{0, 4}},
		}},
		{"in flight until done", Config{}, []step{
			{"added", func(t *testing.T, s *Scheduler) { add(0, -time.Hour, "")(t, s); add(1, -time.Hour, "")(t, s) }, 0, []int{0, 1}},
			{"granted", due(0, 2), 0, []int{0, 1}},
			{"one done", done(0, 0), 0, []int{1}},
			{"done plans the next", func(*testing.T, *Scheduler) {}, time.Hour + time.Second, []int{0, 1}},
			{"cancelled keeps its time", func(t *testing.T, s *Scheduler) {
				if err := s.Cancel(1); err != nil {
					t.Fatal(err)
				}
			}, 0, []int{1}},
			{"granted again", due(0, 1), 0, []int{1}},
			{"removed in flight", func(t *testing.T, s *Scheduler) { s.Remove(1) }, 0, nil},
			{"forgotten at done", done(1, 0), 0, nil},
		}},
		{"ready behind the rate", Config{Rate: 1, Burst: 1, Order: OrderPriority}, []step{
			{"added", func(t *testing.T, s *Scheduler) {
				for id := range 4 {
					add(id, -time.Duration(4-id)*time.Minute, "")(t, s)
				}
			}, 0, []int{0, 1, 2, 3}},
			{"one granted, three ready", due(0, 1), -150 * time.Second, []int{0, 1}},
			{"the granted one done", done(0, 0), -150 * time.Second, []int{1}},
		}},
		{"ready in FIFO order", Config{Workers: 1, Order: OrderFIFO}, []step{
			{"added", func(t *testing.T, s *Scheduler) {
				for id := range 6 {
					add(id, -time.Duration(6-id)*time.Minute, "")(t, s)
				}
			}, 0, []int{0, 1, 2, 3, 4, 5}},
			{"one granted, five ready", due(0, 1), -3*time.Minute + time.Second, []int{0, 1, 2, 3}},
		}},
		{"parked behind the host", Config{PerHost: 1}, []step{
			{"added", func(t *testing.T, s *Scheduler) {
				add(0, -3*time.Minute, "a")(t, s)
				add(1, -2*time.Minute, "a")(t, s)
				add(2, -time.Minute, "a")(t, s)
				add(3, -time.Minute, "b")(t, s)
			}, -90 * time.Second, []int{0, 1}},
			{"one of a and b granted, a's others parked", due(0, 2), -90 * time.Second, []int{0, 1}},
			{"a's done: one unparked", done(0, 0), 0, []int{1, 2, 3}},
			{"b's done", done(3, 0), 0, []int{1, 2}},
			{"the unparked granted", due(0, 1), -90 * time.Second, []int{1}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, tc.cfg)
			for _, st := range tc.steps {
				st.do(t, s)
				before := schAt(st.before)
				if got := overdueOf(s, before); !slices.Equal(got, st.want) {
					t.Fatalf("%s: overdue before %v: %v, want %v", st.name, st.before, got, st.want)
				}
				if n := s.CountOverdue(before); n != len(st.want) {
					t.Fatalf("%s: CountOverdue %d, want %d", st.name, n, len(st.want))
				}
			}
		})
	}
}

// bruteOverdue is what AppendOverdue reports, by a pass over every feed.
func bruteOverdue(s *Scheduler, before time.Time) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int
	for id, f := range s.feeds {
		switch f.state {
		case stWaiting, stReady, stParked, stInFlight:
			if f.due < before.UnixNano() {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// TestSchedulerOverdueRandom runs random adds, grants, completions,
// cancellations, removals and expedites on a fake clock under every order
// and budget, and checks the overdue feeds against a pass over all feeds.
func TestSchedulerOverdueRandom(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Rate: 2, Burst: 3, PerHost: 2, Workers: 5},
		{Order: OrderFIFO, PerHost: 1},
		{Order: OrderRoundRobin, Workers: 3},
		{Order: OrderPriority, Rate: 5, PerHost: 1},
	} {
		rng := rand.New(rand.NewPCG(7, uint64(cfg.Order)))
		s := mustNew(t, cfg)
		now := schBase
		var flying []int
		for range 5000 {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			switch r := rng.IntN(10); {
			case r < 3:
				id := rng.IntN(200)
				start := now.Add(time.Duration(rng.IntN(600)-300) * time.Second)
				_ = s.Add(id, Feed{Policy: &schPolicy{start: start, period: time.Duration(1+rng.IntN(300)) * time.Second},
					Host: string(rune('a' + rng.IntN(4)))}, now)
			case r < 5:
				for _, g := range s.AppendDueN(nil, now, 1+rng.IntN(8)) {
					flying = append(flying, g.ID)
				}
			case r < 7 && len(flying) > 0:
				i := rng.IntN(len(flying))
				id := flying[i]
				flying = slices.Delete(flying, i, i+1)
				if rng.IntN(4) == 0 {
					_ = s.Cancel(id)
				} else {
					_, _ = s.Done(id, Observation{At: now})
				}
			case r < 8:
				s.Remove(rng.IntN(200))
			case r < 9:
				s.Expedite(rng.IntN(200), now.Add(time.Duration(rng.IntN(120)-60)*time.Second))
			}
			before := now.Add(-time.Duration(rng.IntN(240)) * time.Second)
			got, want := overdueOf(s, before), bruteOverdue(s, before)
			if !slices.Equal(got, want) {
				t.Fatalf("%+v at %v: overdue %v, want %v", cfg, now.Sub(schBase), got, want)
			}
		}
	}
}

// TestSchedulerOverdueCost: the walk reads the overdue prefix of the
// waiting heap, not every feed, so asking of a large schedule with few
// overdue feeds costs about what asking of a small one does.
func TestSchedulerOverdueCost(t *testing.T) {
	tests := []struct {
		feeds, every int // one feed in every is an hour overdue
	}{
		{10_000, 1000},
		{200_000, 1000},
		{200_000, 100_000},
		{50_000, 1},
	}
	for _, tc := range tests {
		s := mustNew(t, Config{})
		s.Grow(tc.feeds)
		for id := range tc.feeds {
			start := schAt(time.Duration(id%3600) * time.Second)
			if id%tc.every == 0 {
				start = schAt(-time.Hour)
			}
			mustAdd(t, s, id, Feed{Policy: &schPolicy{start: start, period: time.Hour}}, schAt(-2*time.Hour))
		}
		want := (tc.feeds + tc.every - 1) / tc.every
		s.mu.Lock()
		reported := 0
		read := s.overdue(schAt(-time.Minute).UnixNano(), func(int32) { reported++ })
		s.mu.Unlock()
		if reported != want || read > 5*reported+1 {
			t.Errorf("%d feeds, one in %d overdue: %d reported (want %d), %d slots read", tc.feeds, tc.every, reported, want, read)
		}
	}
}

// BenchmarkCountOverdue counts the overdue feeds of a million, one in a
// hundred of them an hour late (BenchmarkFleetPages's fleet), against a
// pass over every feed.
func BenchmarkCountOverdue(b *testing.B) {
	const n = 1_000_000
	s := mustNew(b, Config{})
	s.Grow(n)
	for id := range n {
		start := schAt(time.Duration(id%60) * time.Second)
		if id%100 == 0 {
			start = schAt(-time.Hour)
		}
		mustAdd(b, s, id, Feed{Policy: &schPolicy{start: start, period: time.Hour}}, schAt(-2*time.Hour))
	}
	before := schAt(-time.Minute)
	b.Run("prefix", func(b *testing.B) {
		for b.Loop() {
			if c := s.CountOverdue(before); c != n/100 {
				b.Fatal(c)
			}
		}
	})
	b.Run("every-feed", func(b *testing.B) {
		for b.Loop() {
			if c := len(bruteOverdue(s, before)); c != n/100 {
				b.Fatal(c)
			}
		}
	})
}
