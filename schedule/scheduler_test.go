package schedule

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var schBase = time.Date(2025, 3, 3, 12, 0, 0, 0, time.UTC)

func schAt(d time.Duration) time.Time { return schBase.Add(d) }

// schPolicy is a scripted policy for scheduler tests: its first poll is at
// start (now when zero), then every period after each observation, or at
// obs.At+next[i] for the i-th observation while the script lasts.
type schPolicy struct {
	start  time.Time
	period time.Duration
	next   []time.Duration
	mu     sync.Mutex
	seen   []Observation
}

func (p *schPolicy) Start(now time.Time) time.Time {
	if p.start.IsZero() {
		return now
	}
	return p.start
}

func (p *schPolicy) Next(obs Observation) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := len(p.seen)
	p.seen = append(p.seen, obs)
	if i < len(p.next) {
		return obs.At.Add(p.next[i])
	}
	return obs.At.Add(p.period)
}

func (p *schPolicy) observations() []Observation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Observation(nil), p.seen...)
}

// schPredicting adds a publish prediction to schPolicy.
type schPredicting struct {
	schPolicy
	pub time.Time
}

func (p *schPredicting) PredictedPublish() (time.Time, bool) { return p.pub, true }

// schEvery polls every d after each observation.
type schEvery time.Duration

func (d schEvery) Next(obs Observation) time.Time { return obs.At.Add(time.Duration(d)) }

func mustNew(t testing.TB, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustAdd(t testing.TB, s *Scheduler, id int, f Feed, now time.Time) {
	t.Helper()
	if err := s.Add(id, f, now); err != nil {
		t.Fatal(err)
	}
}

// drainOrder grants one feed at a time (rate 1/s, burst 1) and reports the
// order of ids; each granted feed is done at once and not due again soon.
func drainOrder(t *testing.T, s *Scheduler, now time.Time, n int) []int {
	t.Helper()
	var order []int
	for len(order) < n {
		gs := s.Due(now)
		for _, g := range gs {
			order = append(order, g.ID)
			if _, err := s.Done(g.ID, Observation{At: now}); err != nil {
				t.Fatal(err)
			}
		}
		w, ok := s.NextWakeup()
		if !ok {
			t.Fatalf("no wakeup after %v", order)
		}
		if len(gs) == 0 && !w.After(now) {
			t.Fatalf("wakeup %v does not move past %v", w, now)
		}
		now = w
	}
	return order
}

func TestSchedulerGrantOrder(t *testing.T) {
	// Five feeds, all due at base (added an hour before), one grant per
	// second. Priorities W·(now − t_pub) at base+k s:
	//   id0 w1 due −100s: 100+k      id1 w5 due −30s: 5(30+k)
	//   id2 w2 due −50s: 2(50+k)     id3 w10 due −10s: 10(10+k)
	//   id4 w1 due −200s: 200+k
	// k=0: id4 (200); k=1: id1 (155); k=2: id3 (120 > 104 > 102);
	// k=3: id2 (106 > 103); k=4: id0.
	feeds := []struct {
		due    time.Duration
		weight float64
	}{{-100 * time.Second, 1}, {-30 * time.Second, 5}, {-50 * time.Second, 2}, {-10 * time.Second, 10}, {-200 * time.Second, 1}}
	tests := []struct {
		order Order
		want  []int
	}{
		{OrderPriority, []int{4, 1, 3, 2, 0}},
		{OrderFIFO, []int{4, 0, 2, 1, 3}},
		{OrderRoundRobin, []int{0, 1, 2, 3, 4}},
	}
	for _, tc := range tests {
		t.Run(tc.order.String(), func(t *testing.T) {
			s := mustNew(t, Config{Rate: 1, Burst: 1, Order: tc.order})
			for id, f := range feeds {
				p := &schPolicy{start: schAt(f.due), period: 24 * time.Hour}
				mustAdd(t, s, id, Feed{Policy: p, Weight: f.weight}, schAt(-time.Hour))
			}
			got := drainOrder(t, s, schBase, len(feeds))
			if !equalInts(got, tc.want) {
				t.Fatalf("grant order %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSchedulerPriorityTiesAndPrediction(t *testing.T) {
	// Equal priorities: earlier t_pub first, then lower id. Feed 3 polls
	// late (due −10 s) but predicts its publish at −300 s, so it goes first.
	s := mustNew(t, Config{Rate: 1, Burst: 1})
	mustAdd(t, s, 0, Feed{Policy: &schPolicy{start: schAt(-20 * time.Second), period: time.Hour}, Weight: 2}, schAt(-time.Hour))
	mustAdd(t, s, 1, Feed{Policy: &schPolicy{start: schAt(-40 * time.Second), period: time.Hour}}, schAt(-time.Hour))
	mustAdd(t, s, 2, Feed{Policy: &schPolicy{start: schAt(-40 * time.Second), period: time.Hour}}, schAt(-time.Hour))
	// Feed 3 is first polled at −2 h (far from base), learns its prediction
	// and asks to be polled again at −10 s.
	p3 := &schPredicting{schPolicy: schPolicy{start: schAt(-2 * time.Hour), period: time.Hour, next: []time.Duration{2*time.Hour - 10*time.Second}}, pub: schAt(-300 * time.Second)}
	mustAdd(t, s, 3, Feed{Policy: p3}, schAt(-3*time.Hour))
	gs := s.Due(schAt(-2 * time.Hour))
	if len(gs) != 1 || gs[0].ID != 3 {
		t.Fatalf("grants at −2h: %v", gs)
	}
	if next, err := s.Done(3, Observation{At: schAt(-2 * time.Hour)}); err != nil || !next.Equal(schAt(-10*time.Second)) {
		t.Fatalf("Done = %v, %v", next, err)
	}
	// At base+1s (the bucket refills one token per second): feed 0 has
	// 2·21 = 42, feeds 1 and 2 have 41, feed 3 has 301. At base+2s feed 0
	// has 44 > 42: it goes before 1 and 2 though its t_pub is later; 1 and
	// 2 tie and go by id.
	got := drainOrder(t, s, schAt(time.Second), 4)
	if want := []int{3, 0, 1, 2}; !equalInts(got, want) {
		t.Fatalf("grant order %v, want %v", got, want)
	}
}

func TestSchedulerRoundRobinWraps(t *testing.T) {
	s := mustNew(t, Config{Rate: 1, Burst: 1, Order: OrderRoundRobin})
	for id := range 5 {
		mustAdd(t, s, id, Feed{Policy: &schPolicy{start: schBase, period: 24 * time.Hour}}, schAt(-time.Hour))
	}
	// Grant 0, 1, 2; then feed 1 is re-added, due at once: it waits for
	// the next lap, after 3 and 4.
	got := drainOrder(t, s, schBase, 3)
	if !equalInts(got, []int{0, 1, 2}) {
		t.Fatalf("first lap %v", got)
	}
	s.Remove(1)
	mustAdd(t, s, 1, Feed{Policy: &schPolicy{period: 24 * time.Hour}}, schAt(2*time.Second))
	got = drainOrder(t, s, schAt(3*time.Second), 3)
	if !equalInts(got, []int{3, 4, 1}) {
		t.Fatalf("second part %v, want [3 4 1]", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSchedulerTokenBucket(t *testing.T) {
	const (
		rate  = 10.0
		burst = 5
		feeds = 2000
	)
	for _, order := range []Order{OrderPriority, OrderRoundRobin, OrderFIFO} {
		t.Run(order.String(), func(t *testing.T) {
			s := mustNew(t, Config{Rate: rate, Burst: burst, Order: order})
			rng := rand.New(rand.NewPCG(7, uint64(order)))
			for id := range feeds {
				p := &schPolicy{start: schAt(time.Duration(rng.IntN(60)) * time.Second), period: time.Duration(1+rng.IntN(30)) * time.Second}
				mustAdd(t, s, id, Feed{Policy: p, Weight: float64(1 + rng.IntN(3))}, schBase)
			}
			var times []int64
			now := schBase
			end := schAt(30 * time.Second)
			for now.Before(end) {
				for _, g := range s.Due(now) {
					times = append(times, now.UnixNano())
					if _, err := s.Done(g.ID, Observation{At: now}); err != nil {
						t.Fatal(err)
					}
				}
				// Wake at the scheduler's time, or earlier at a random
				// instant (a live loop woken by other events).
				w, _ := s.NextWakeup()
				if j := now.Add(time.Duration(rng.Int64N(int64(150 * time.Millisecond)))); j.Before(w) && rng.IntN(2) == 0 {
					w = j
				}
				if !w.After(now) {
					w = now.Add(time.Nanosecond)
				}
				now = w
			}
			// In any window [times[i], times[j]] at most burst + rate·length.
			for i := range times {
				for j := i; j < len(times); j++ {
					allowed := burst + int(float64(times[j]-times[i])*rate/1e9)
					if j-i+1 > allowed {
						t.Fatalf("%d grants in %v, bucket allows %d", j-i+1, time.Duration(times[j]-times[i]), allowed)
					}
				}
			}
			// The budget binds all the time: it is used in full.
			if want := burst + int(30*rate) - 1; len(times) < want {
				t.Fatalf("%d grants in 30 s, want ≥ %d", len(times), want)
			}
		})
	}
}

func TestSchedulerDoneClampsAndHints(t *testing.T) {
	tests := []struct {
		name    string
		next    time.Duration // policy answer relative to obs.At
		respect bool
		cache   time.Duration
		sleep   SleepPlan
		want    time.Duration
	}{
		{"past is now", -time.Hour, false, 0, SleepPlan{}, 0},
		{"far future capped", 1000 * time.Hour, false, 0, SleepPlan{}, MaxDelay},
		{"plain", 5 * time.Minute, false, 0, SleepPlan{}, 5 * time.Minute},
		{"hint ignored", 5 * time.Minute, false, time.Hour, SleepPlan{}, 5 * time.Minute},
		{"hint respected", 5 * time.Minute, true, time.Hour, SleepPlan{}, time.Hour},
		{"hint below policy", 2 * time.Hour, true, time.Hour, SleepPlan{}, 2 * time.Hour},
		{"huge hint capped", 5 * time.Minute, true, 1e6 * time.Hour, SleepPlan{}, MaxDelay},
		{"sleep moves to wake-up", 5 * time.Minute, false, 0, SleepPlan{SkipHours: 1 << 12}, time.Hour},
		{"past into sleep", -time.Hour, false, 0, SleepPlan{Daily: []DailyWindow{{From: 12 * time.Hour, To: 12*time.Hour + 30*time.Minute}}}, 30 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, Config{})
			p := &schPolicy{start: schAt(-time.Minute), next: []time.Duration{tc.next}}
			mustAdd(t, s, 7, Feed{Policy: p, RespectHints: tc.respect, Sleep: tc.sleep}, schAt(-2*time.Hour))
			gs := s.Due(schBase)
			if len(gs) != 1 || gs[0].ID != 7 || !gs[0].Due.Equal(schAt(-time.Minute)) {
				t.Fatalf("grants %v", gs)
			}
			next, err := s.Done(7, Observation{At: schBase, Hints: Hints{CacheFor: tc.cache}})
			if err != nil {
				t.Fatal(err)
			}
			if !next.Equal(schAt(tc.want)) {
				t.Fatalf("next = %v, want %v", next.Sub(schBase), tc.want)
			}
			if w, ok := s.NextWakeup(); !ok || !w.Equal(next) {
				t.Fatalf("NextWakeup = %v,%v, want %v", w, ok, next)
			}
		})
	}
}

func TestSchedulerAddErrors(t *testing.T) {
	pol := func() Policy { return &schPolicy{period: time.Minute} }
	tests := []struct {
		name string
		id   int
		f    Feed
		want error
	}{
		{"negative id", -1, Feed{Policy: pol()}, ErrFeedID},
		{"id too large", MaxFeedID + 1, Feed{Policy: pol()}, ErrFeedID},
		{"nil policy", 1, Feed{}, ErrNilPolicy},
		{"negative weight", 1, Feed{Policy: pol(), Weight: -1}, ErrWeight},
		{"NaN weight", 1, Feed{Policy: pol(), Weight: math.NaN()}, ErrWeight},
		{"infinite weight", 1, Feed{Policy: pol(), Weight: math.Inf(1)}, ErrWeight},
		{"huge weight", 1, Feed{Policy: pol(), Weight: 2 * MaxWeight}, ErrWeight},
		{"long host", 1, Feed{Policy: pol(), Host: string(make([]byte, MaxHostLen+1))}, ErrHost},
		{"bad sleep", 1, Feed{Policy: pol(), Sleep: SleepPlan{SkipHours: 1 << 30}}, ErrSleepPlan},
		{"duplicate", 0, Feed{Policy: pol()}, ErrFeedExists},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, Config{})
			mustAdd(t, s, 0, Feed{Policy: pol()}, schBase)
			if err := s.Add(tc.id, tc.f, schBase); !errors.Is(err, tc.want) {
				t.Fatalf("Add = %v, want %v", err, tc.want)
			}
			if s.Len() != 1 {
				t.Fatalf("Len = %d after a rejected Add", s.Len())
			}
		})
	}
	t.Run("weight classes", func(t *testing.T) {
		s := mustNew(t, Config{})
		for i := range MaxWeightClasses {
			mustAdd(t, s, i, Feed{Policy: pol(), Weight: float64(i + 1)}, schBase)
		}
		if err := s.Add(MaxWeightClasses, Feed{Policy: pol(), Weight: 0.5}, schBase); !errors.Is(err, ErrWeightClasses) {
			t.Fatalf("Add = %v, want ErrWeightClasses", err)
		}
		mustAdd(t, s, MaxWeightClasses, Feed{Policy: pol(), Weight: 3}, schBase) // an existing class
	})
	t.Run("config", func(t *testing.T) {
		for _, cfg := range []Config{{Rate: -1}, {Rate: math.NaN()}, {Rate: MinRate / 2}, {Burst: -1}, {PerHost: -1}, {Workers: -1}, {Order: 9}} {
			if _, err := New(cfg); !errors.Is(err, ErrConfig) {
				t.Fatalf("New(%+v) = %v, want ErrConfig", cfg, err)
			}
		}
	})
}

func TestSchedulerDoneErrors(t *testing.T) {
	s := mustNew(t, Config{})
	mustAdd(t, s, 0, Feed{Policy: &schPolicy{start: schAt(time.Hour), period: time.Minute}}, schBase)
	tests := []struct {
		name string
		id   int
		obs  Observation
		want error
	}{
		{"unknown", 5, Observation{At: schBase}, ErrUnknownFeed},
		{"negative", -5, Observation{At: schBase}, ErrUnknownFeed},
		{"not granted", 0, Observation{At: schBase}, ErrNotInFlight},
		{"zero time", 0, Observation{}, ErrObservationTime},
		{"year 9999", 0, Observation{At: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}, ErrObservationTime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Done(tc.id, tc.obs); !errors.Is(err, tc.want) {
				t.Fatalf("Done = %v, want %v", err, tc.want)
			}
		})
	}
	if err := s.Cancel(0); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("Cancel = %v, want ErrNotInFlight", err)
	}
}

func TestSchedulerRemove(t *testing.T) {
	// Feed 0 waits, 4 is ready (budget spent), 2 is parked (host full),
	// 3 is in flight on host h, 1 waits after its fetch; all are removed.
	s := mustNew(t, Config{Rate: 1, Burst: 2, PerHost: 1})
	pol := func(start time.Time) Policy { return &schPolicy{start: start, period: time.Hour} }
	mustAdd(t, s, 0, Feed{Policy: pol(schAt(time.Hour))}, schBase)
	mustAdd(t, s, 3, Feed{Policy: pol(schAt(-3 * time.Second)), Host: "h"}, schAt(-time.Hour))
	mustAdd(t, s, 2, Feed{Policy: pol(schAt(-2 * time.Second)), Host: "h"}, schAt(-time.Hour))
	mustAdd(t, s, 1, Feed{Policy: pol(schAt(-time.Second))}, schAt(-time.Hour))
	mustAdd(t, s, 4, Feed{Policy: pol(schAt(-time.Second / 2))}, schAt(-time.Hour))
	// Priority order 3, 2, 1, 4: 3 is granted, 2 parked, 1 granted; the
	// bucket (burst 2) is then empty and 4 stays ready.
	gs := s.Due(schBase)
	if len(gs) != 2 || gs[0].ID != 3 || gs[1].ID != 1 {
		t.Fatalf("grants %v", gs)
	}
	if _, err := s.Done(1, Observation{At: schBase}); err != nil {
		t.Fatal(err)
	}
	if s.feeds[2].state != stParked || s.feeds[0].state != stWaiting || s.feeds[4].state != stReady {
		t.Fatalf("states %d %d %d", s.feeds[2].state, s.feeds[0].state, s.feeds[4].state)
	}
	for _, id := range []int{0, 2, 3, 1, 4} {
		if !s.Remove(id) {
			t.Fatalf("Remove(%d) = false", id)
		}
		if s.Remove(id) {
			t.Fatalf("second Remove(%d) = true", id)
		}
	}
	if s.Len() != 0 || s.InFlight() != 1 {
		t.Fatalf("Len %d InFlight %d, want 0 1", s.Len(), s.InFlight())
	}
	if err := s.Add(3, Feed{Policy: pol(schBase)}, schBase); !errors.Is(err, ErrFeedBusy) {
		t.Fatalf("Add of a removed feed in flight = %v, want ErrFeedBusy", err)
	}
	if next, err := s.Done(3, Observation{At: schBase}); err != nil || !next.IsZero() {
		t.Fatalf("Done of a removed feed = %v, %v", next, err)
	}
	if _, ok := s.hostIdx["h"]; ok || s.InFlight() != 0 {
		t.Fatal("host h still known after its last feed left")
	}
	mustAdd(t, s, 3, Feed{Policy: pol(schBase), Host: "h"}, schBase)
	if w, ok := s.NextWakeup(); !ok || !w.Equal(schBase) {
		t.Fatalf("NextWakeup = %v, %v", w, ok)
	}
}

func TestSchedulerPerHostParking(t *testing.T) {
	// Host a has four due feeds and a limit of 2; host b one feed. With an
	// unlimited rate, a's best two and b's feed go at once; each Done of a
	// releases a's best parked feed.
	s := mustNew(t, Config{PerHost: 2, Order: OrderFIFO})
	for id, d := range []time.Duration{-5, -4, -3, -2, -1} {
		h := "a"
		if id == 4 {
			h = "b"
		}
		mustAdd(t, s, id, Feed{Policy: &schPolicy{start: schAt(d * time.Second), period: time.Hour}, Host: h}, schAt(-time.Hour))
	}
	ids := func(gs []Grant) []int {
		var out []int
		for _, g := range gs {
			out = append(out, g.ID)
		}
		return out
	}
	if got := ids(s.Due(schBase)); !equalInts(got, []int{0, 1, 4}) {
		t.Fatalf("first grants %v", got)
	}
	if got := ids(s.Due(schBase)); len(got) != 0 {
		t.Fatalf("grants with host full %v", got)
	}
	if w, ok := s.NextWakeup(); ok { // only a Done can make progress
		t.Fatalf("wakeup %v with every due feed parked", w)
	}
	_, _ = s.Done(1, Observation{At: schBase})
	if got := ids(s.Due(schBase)); !equalInts(got, []int{2}) {
		t.Fatalf("after a slot freed %v", got)
	}
	_, _ = s.Done(4, Observation{At: schBase}) // host b: nothing for a
	if got := ids(s.Due(schBase)); len(got) != 0 {
		t.Fatalf("after b freed %v", got)
	}
	_, _ = s.Done(0, Observation{At: schBase})
	if got := ids(s.Due(schBase)); !equalInts(got, []int{3}) {
		t.Fatalf("after a slot freed %v", got)
	}
}

func TestSchedulerWorkersCap(t *testing.T) {
	s := mustNew(t, Config{Workers: 2})
	for id := range 5 {
		mustAdd(t, s, id, Feed{Policy: &schPolicy{period: time.Hour}}, schBase)
	}
	if gs := s.Due(schBase); len(gs) != 2 {
		t.Fatalf("%d grants, want 2", len(gs))
	}
	if _, ok := s.NextWakeup(); ok {
		t.Fatal("wakeup while every worker is busy")
	}
	_, _ = s.Done(0, Observation{At: schBase})
	if w, ok := s.NextWakeup(); !ok || !w.Equal(schBase) {
		t.Fatalf("NextWakeup = %v,%v, want now", w, ok)
	}
	if gs := s.Due(schBase); len(gs) != 1 {
		t.Fatalf("%d grants, want 1", len(gs))
	}
}

func TestSchedulerNoAllocs(t *testing.T) {
	const n = 4096
	s := mustNew(t, Config{})
	s.Grow(n)
	for id := range n {
		mustAdd(t, s, id, Feed{Policy: schEvery(5 * time.Second)}, schAt(time.Duration(id)*time.Millisecond-5*time.Second))
	}
	now := schBase
	grants := make([]Grant, 0, n)
	allocs := testing.AllocsPerRun(200, func() {
		now = now.Add(10 * time.Millisecond)
		grants = s.AppendDue(grants[:0], now)
		for _, g := range grants {
			_, _ = s.Done(g.ID, Observation{At: now})
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per step", allocs)
	}
}

func TestRunFetchesAtPolicyTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, Config{Workers: 2})
		periods := []time.Duration{10 * time.Second, 25 * time.Second, time.Minute}
		now := RealClock{}.Now()
		for id, p := range periods {
			mustAdd(t, s, id, Feed{Policy: &schPolicy{start: now.Add(time.Duration(id) * time.Second), period: p}}, now)
		}
		var mu sync.Mutex
		got := map[int][]time.Duration{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- s.Run(ctx, func(ctx context.Context, id int) Observation {
				mu.Lock()
				got[id] = append(got[id], RealClock{}.Now().Sub(now))
				mu.Unlock()
				time.Sleep(time.Second) // the response takes a second
				return Observation{Hit: true}
			})
		}()
		time.Sleep(65 * time.Second)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		// Next poll = response time + period.
		want := map[int][]time.Duration{
			0: {0, 11 * time.Second, 22 * time.Second, 33 * time.Second, 44 * time.Second, 55 * time.Second},
			1: {time.Second, 27 * time.Second, 53 * time.Second},
			2: {2 * time.Second, 63 * time.Second},
		}
		for id, w := range want {
			if len(got[id]) != len(w) {
				t.Fatalf("feed %d fetched at %v, want %v", id, got[id], w)
			}
			for i := range w {
				if got[id][i] != w[i] {
					t.Fatalf("feed %d fetched at %v, want %v", id, got[id], w)
				}
			}
		}
		if s.InFlight() != 0 {
			t.Fatalf("%d in flight after Run", s.InFlight())
		}
	})
}

func TestRunShutdown(t *testing.T) {
	tests := []struct {
		name string
		// fetch behaviour: heed ctx, or finish after 3 s regardless
		heed bool
		// how long Run takes to return after cancel
		wantReturn time.Duration
		wantSeen   int // observations the policy learned
	}{
		{"blocking fetch is cancelled", true, 0, 0},
		{"in-flight fetch finishes", false, 3 * time.Second, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := mustNew(t, Config{Workers: 1})
				now := RealClock{}.Now()
				p := &schPolicy{period: time.Hour}
				mustAdd(t, s, 0, Feed{Policy: p}, now)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error)
				var started atomic.Int32
				go func() {
					done <- s.Run(ctx, func(ctx context.Context, id int) Observation {
						started.Add(1)
						if tc.heed {
							<-ctx.Done()
							return Observation{}
						}
						time.Sleep(4 * time.Second)
						return Observation{Hit: true}
					})
				}()
				time.Sleep(time.Second)
				synctest.Wait()
				if started.Load() != 1 || s.InFlight() != 1 {
					t.Fatalf("started %d, in flight %d", started.Load(), s.InFlight())
				}
				cancel()
				<-done
				if d := (RealClock{}).Now().Sub(now) - time.Second; d != tc.wantReturn {
					t.Fatalf("Run returned %v after cancel, want %v", d, tc.wantReturn)
				}
				if s.InFlight() != 0 || s.Len() != 1 {
					t.Fatalf("after Run: in flight %d, feeds %d", s.InFlight(), s.Len())
				}
				if n := len(p.observations()); n != tc.wantSeen {
					t.Fatalf("policy learned %d observations, want %d", n, tc.wantSeen)
				}
				if tc.heed { // the feed kept its turn: due at once
					gs := s.Due(RealClock{}.Now())
					if len(gs) != 1 || !gs[0].Due.Equal(now) {
						t.Fatalf("after cancel: grants %v, want feed 0 due at %v", gs, now)
					}
				}
			})
		})
	}
}

func TestRunPerHostLimitUnderConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const perHost = 2
		s := mustNew(t, Config{Workers: 8, PerHost: perHost, Rate: 50, Burst: 10})
		now := RealClock{}.Now()
		hosts := []string{"a", "b", "c"}
		for id := range 60 {
			p := &schPolicy{period: time.Duration(1+id%7) * time.Second}
			mustAdd(t, s, id, Feed{Policy: p, Host: hosts[id%3], Weight: float64(1 + id%4)}, now)
		}
		var mu sync.Mutex
		cur := map[string]int{}
		peak := map[string]int{}
		var fetches atomic.Int64
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- s.Run(ctx, func(ctx context.Context, id int) Observation {
				h := hosts[id%3]
				mu.Lock()
				cur[h]++
				peak[h] = max(peak[h], cur[h])
				mu.Unlock()
				fetches.Add(1)
				select {
				case <-time.After(time.Duration(200+id*37%800) * time.Millisecond):
				case <-ctx.Done():
				}
				mu.Lock()
				cur[h]--
				mu.Unlock()
				return Observation{Hit: id%2 == 0}
			})
		}()
		time.Sleep(2 * time.Minute)
		cancel()
		<-done
		for _, h := range hosts {
			if peak[h] != perHost {
				t.Fatalf("host %s peaked at %d concurrent fetches, want %d", h, peak[h], perHost)
			}
		}
		if fetches.Load() < 100 {
			t.Fatalf("only %d fetches", fetches.Load())
		}
	})
}

func TestRunVirtualClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := NewVirtualClock(schBase)
		s := mustNew(t, Config{Workers: 1, Clock: clock})
		mustAdd(t, s, 0, Feed{Policy: &schPolicy{start: schAt(time.Minute), period: 10 * time.Minute}}, schBase)
		var mu sync.Mutex
		var at []time.Time
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- s.Run(ctx, func(ctx context.Context, id int) Observation {
				mu.Lock()
				at = append(at, clock.Now())
				mu.Unlock()
				return Observation{} // stamped with the clock's time
			})
		}()
		for range 30 {
			synctest.Wait()
			clock.Advance(time.Minute)
		}
		synctest.Wait()
		cancel()
		<-done
		want := []time.Time{schAt(time.Minute), schAt(11 * time.Minute), schAt(21 * time.Minute)}
		if len(at) != len(want) {
			t.Fatalf("fetched at %v, want %v", at, want)
		}
		for i := range want {
			if !at[i].Equal(want[i]) {
				t.Fatalf("fetched at %v, want %v", at, want)
			}
		}
	})
}

func TestRunPanickingFetchIsAMiss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, Config{Workers: 1})
		p := &schPolicy{period: time.Minute}
		mustAdd(t, s, 0, Feed{Policy: p}, RealClock{}.Now())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- s.Run(ctx, func(context.Context, int) Observation { panic("bad feed") })
		}()
		time.Sleep(90 * time.Second)
		cancel()
		<-done
		obs := p.observations()
		if len(obs) != 2 || obs[0].Hit || obs[1].Hit {
			t.Fatalf("observations %+v, want two misses", obs)
		}
	})
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := mustNew(t, Config{Workers: 1})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		fetch := func(context.Context, int) Observation { return Observation{} }
		go func() { done <- s.Run(ctx, fetch) }()
		synctest.Wait()
		if err := s.Run(ctx, fetch); !errors.Is(err, ErrRunning) {
			t.Fatalf("second Run = %v, want ErrRunning", err)
		}
		cancel()
		<-done
		if err := s.Run(ctx, nil); !errors.Is(err, ErrConfig) {
			t.Fatalf("Run(nil) = %v", err)
		}
	})
}

// schBlocking blocks in Next until released.
type schBlocking struct {
	entered chan struct{}
	release chan struct{}
}

func (p *schBlocking) Next(obs Observation) time.Time {
	p.entered <- struct{}{}
	<-p.release
	return obs.At.Add(time.Minute)
}

func TestSchedulerRemoveWhileLearning(t *testing.T) {
	s := mustNew(t, Config{PerHost: 1})
	p := &schBlocking{entered: make(chan struct{}), release: make(chan struct{})}
	mustAdd(t, s, 0, Feed{Policy: p, Host: "h", Sleep: SleepPlan{SkipHours: 1 << 3}}, schBase)
	if gs := s.Due(schBase); len(gs) != 1 {
		t.Fatalf("grants %v", gs)
	}
	type result struct {
		next time.Time
		err  error
	}
	done := make(chan result)
	go func() {
		next, err := s.Done(0, Observation{At: schBase})
		done <- result{next, err}
	}()
	<-p.entered // the policy is running, outside the lock
	if _, err := s.Done(0, Observation{At: schBase}); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("second Done = %v, want ErrNotInFlight", err)
	}
	if err := s.Add(0, Feed{Policy: p}, schBase); !errors.Is(err, ErrFeedExists) {
		t.Fatalf("Add while learning = %v, want ErrFeedExists", err)
	}
	if !s.Remove(0) {
		t.Fatal("Remove while learning = false")
	}
	if err := s.Add(0, Feed{Policy: p}, schBase); !errors.Is(err, ErrFeedBusy) {
		t.Fatalf("Add after Remove while learning = %v, want ErrFeedBusy", err)
	}
	close(p.release)
	r := <-done
	if r.err != nil || !r.next.IsZero() {
		t.Fatalf("Done = %v, %v; want the feed forgotten", r.next, r.err)
	}
	if s.Len() != 0 || s.InFlight() != 0 || len(s.sleeps) != 0 || len(s.hostIdx) != 0 {
		t.Fatalf("leftovers: len %d in flight %d sleeps %d hosts %d", s.Len(), s.InFlight(), len(s.sleeps), len(s.hostIdx))
	}
	if _, ok := s.NextWakeup(); ok {
		t.Fatal("wakeup with no feeds")
	}
}

func TestSchedulerBytesPerFeed(t *testing.T) {
	const n = 1 << 17
	pol := schEvery(time.Minute) // one shared policy value: measure the scheduler only
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := mustNew(t, Config{})
	s.Grow(n)
	for id := range n {
		mustAdd(t, s, id, Feed{Policy: pol}, schBase)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("scheduler: %.1f bytes per feed", per)
	// feed 40 + slot 4 + waiting heap entry 12.
	if per > 57 {
		t.Fatalf("%.1f bytes per feed, want ≤ 57", per)
	}
	runtime.KeepAlive(s)
}

// BenchmarkSchedulerCycle1M is the scheduler's steady state at a million
// feeds: grant the earliest due feed, learn its observation, re-queue it.
func BenchmarkSchedulerCycle1M(b *testing.B) {
	const n = 1 << 20
	s := mustNew(b, Config{})
	s.Grow(n)
	rng := rand.New(rand.NewPCG(8, 8))
	for id := range n {
		p := schEvery(time.Duration(1+rng.IntN(86400)) * time.Second)
		mustAdd(b, s, id, Feed{Policy: p}, schAt(time.Duration(rng.Int64N(int64(24*time.Hour)))-24*time.Hour))
	}
	grants := make([]Grant, 0, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now, _ := s.NextWakeup()
		grants = s.AppendDue(grants[:0], now)
		for _, g := range grants {
			_, _ = s.Done(g.ID, Observation{At: now})
		}
	}
}

func TestSchedulerExpedite(t *testing.T) {
	s := mustNew(t, Config{})
	pol := func(start time.Time) Policy { return &schPolicy{start: start, period: time.Hour} }
	mustAdd(t, s, 0, Feed{Policy: pol(schAt(time.Hour))}, schBase)
	mustAdd(t, s, 1, Feed{Policy: pol(schAt(2 * time.Hour))}, schBase)
	night := SleepPlan{Windows: []Window{{Start: schAt(10 * time.Minute), End: schAt(20 * time.Minute)}}}
	mustAdd(t, s, 2, Feed{Policy: pol(schAt(time.Hour)), Sleep: night}, schBase)
	tests := []struct {
		name string
		id   int
		at   time.Time
		want bool
	}{
		{"forward", 1, schAt(5 * time.Minute), true},
		{"never later", 0, schAt(3 * time.Hour), false},
		{"into a sleep window", 2, schAt(15 * time.Minute), false},
		{"out of a sleep window", 2, schAt(25 * time.Minute), true},
		{"unknown feed", 7, schAt(time.Minute), false},
		{"negative id", -1, schAt(time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Expedite(tt.id, tt.at); got != tt.want {
				t.Errorf("Expedite(%d, %v) = %v, want %v", tt.id, tt.at, got, tt.want)
			}
		})
	}
	if w, ok := s.NextWakeup(); !ok || !w.Equal(schAt(5*time.Minute)) {
		t.Fatalf("NextWakeup = %v, want the expedited feed's", w)
	}
	// Waiting reports the queue's time, expedites included.
	for _, w := range []struct {
		id   int
		want time.Time
		ok   bool
	}{{0, schAt(time.Hour), true}, {1, schAt(5 * time.Minute), true}, {2, schAt(25 * time.Minute), true}, {7, time.Time{}, false}, {-1, time.Time{}, false}} {
		if got, ok := s.Waiting(w.id); ok != w.ok || !got.Equal(w.want) {
			t.Errorf("Waiting(%d) = %v, %v; want %v, %v", w.id, got, ok, w.want, w.ok)
		}
	}
	if gs := s.Due(schAt(5 * time.Minute)); len(gs) != 1 || gs[0].ID != 1 {
		t.Fatalf("due at the expedited time: %v", gs)
	}
	if _, ok := s.Waiting(1); ok {
		t.Error("Waiting reports a feed in flight")
	}
	if s.Expedite(1, schBase) {
		t.Error("expedited a feed in flight")
	}
}

// TestSchedulerAppendDueN drains a burst of due feeds in bounded batches:
// each call grants at most max, the rest stay due, and every feed is
// granted once, at its own due time, whatever the budget.
func TestSchedulerAppendDueN(t *testing.T) {
	const n, max = 10, 4
	for _, tc := range []struct {
		name string
		cfg  Config
	}{{"unlimited", Config{}}, {"per-host", Config{PerHost: 100}}, {"workers", Config{Workers: 100}}} {
		cfg := tc.cfg
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, cfg)
			for id := range n {
				p := &schPolicy{start: schAt(time.Duration(id) * time.Second), period: 24 * time.Hour}
				mustAdd(t, s, id, Feed{Policy: p, Host: "h"}, schAt(-time.Hour))
			}
			seen := map[int]bool{}
			var sizes []int
			for {
				gs := s.AppendDueN(nil, schAt(time.Minute), max)
				if len(gs) == 0 {
					break
				}
				sizes = append(sizes, len(gs))
				for _, g := range gs {
					if seen[g.ID] || !g.Due.Equal(schAt(time.Duration(g.ID)*time.Second)) {
						t.Fatalf("grant %+v: again or at the wrong due time", g)
					}
					seen[g.ID] = true
				}
			}
			if len(seen) != n || !equalInts(sizes, []int{4, 4, 2}) {
				t.Fatalf("granted %d feeds in batches %v, want %d in [4 4 2]", len(seen), sizes, n)
			}
		})
	}
}

// A burst of fresh feeds the budget cannot serve at once (1,000 first
// fetches at one grant a second) does not hold back a feed already
// polled: it waits behind them at 1/FreshDivisor of their priority, and
// the fresh feeds still get most of the grants. Without Fresh the polled
// feed waits for the whole burst.
func TestSchedulerFreshFeedsWait(t *testing.T) {
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			s := mustNew(t, Config{Rate: 1, Burst: 1})
			mustAdd(t, s, 0, Feed{Policy: schEvery(5 * time.Second)}, schBase)
			for id := 1; id <= 1000; id++ {
				mustAdd(t, s, id, Feed{Policy: &schPolicy{start: schAt(-100 * time.Second), period: 24 * time.Hour}, Weight: 2, Fresh: fresh}, schAt(-time.Hour))
			}
			if _, _, w, _ := s.Placement(1); w != 2 {
				t.Fatalf("a fresh feed's placement weight %v, want its own 2", w)
			}
			var polled []time.Duration // feed 0's grants
			firsts := 0
			for k := range 300 {
				now := schAt(time.Duration(k) * time.Second)
				for _, g := range s.Due(now) {
					if g.ID == 0 {
						polled = append(polled, now.Sub(schBase))
					} else {
						firsts++
					}
					if _, err := s.Done(g.ID, Observation{At: now}); err != nil {
						t.Fatal(err)
					}
					if c := s.feeds[g.ID].class; c&freshBit != 0 {
						t.Fatalf("feed %d still in a fresh class after its poll", g.ID)
					}
				}
			}
			gap := time.Duration(0)
			for i := 1; i < len(polled); i++ {
				gap = max(gap, polled[i]-polled[i-1])
			}
			t.Logf("feed 0 polled %d times, longest gap %v; %d first fetches", len(polled), gap, firsts)
			if !fresh {
				if len(polled) > 1 {
					t.Fatalf("without Fresh, feed 0 polled %d times behind the burst; want once (the test shows nothing)", len(polled))
				}
				return
			}
			// Priority of the burst at 300 s: 2·400/64 = 12.5, so feed 0
			// (weight 1) waits at most ~13 s past its due.
			if len(polled) < 15 || gap > 20*time.Second || firsts < 200 {
				t.Fatalf("feed 0 polled %d times, longest gap %v; %d first fetches: want ≥ 15, ≤ 20s, ≥ 200", len(polled), gap, firsts)
			}
		})
	}
}

// Fresh feeds take no weight class of their own: MaxWeightClasses
// distinct weights, every feed fresh, all fit, and a fresh feed's
// placement is its own weight.
func TestSchedulerFreshTakesNoClass(t *testing.T) {
	s := mustNew(t, Config{Rate: 1, Burst: 1})
	for id := range MaxWeightClasses {
		mustAdd(t, s, id, Feed{Policy: schEvery(time.Hour), Weight: float64(id + 1), Fresh: true}, schBase)
	}
	if err := s.Add(MaxWeightClasses, Feed{Policy: schEvery(time.Hour), Weight: 1000}, schBase); !errors.Is(err, ErrWeightClasses) {
		t.Fatalf("a weight past the classes: %v, want ErrWeightClasses", err)
	}
	if _, _, w, _ := s.Placement(5); w != 6 {
		t.Fatalf("fresh feed's placement weight %v, want 6", w)
	}
	if got := len(s.Due(schBase)); got != 1 {
		t.Fatalf("%d grants at the start with one token, want 1", got)
	}
}
