package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule"
)

// script is a policy that answers with a fixed list of times and records
// what it was told.
type script struct {
	times []time.Time
	seen  []schedule.Observation
}

func (s *script) Next(obs schedule.Observation) time.Time {
	obs.Published = slices.Clone(obs.Published) // Run reuses the buffer
	s.seen = append(s.seen, obs)
	if len(s.seen) > len(s.times) {
		return obs.At.Add(1000 * time.Hour)
	}
	return s.times[len(s.seen)-1]
}

// startingScript is a script whose first poll is at first.
type startingScript struct {
	script
	first time.Time
}

func (s *startingScript) Start(time.Time) time.Time { return s.first }

// fixed polls every Interval from the start.
type fixed struct{ Interval time.Duration }

func (f fixed) Next(obs schedule.Observation) time.Time { return obs.At.Add(f.Interval) }

// sec is t0 plus s seconds.
func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func secs(ss ...float64) []time.Time {
	out := make([]time.Time, len(ss))
	for i, s := range ss {
		out[i] = sec(s)
	}
	return out
}

func itemsAt(ss ...float64) []Item {
	var out []Item
	for _, t := range secs(ss...) {
		out = append(out, Item{Published: t, Observed: t})
	}
	return out
}

func TestRunAccounting(t *testing.T) {
	// One item before the start (ignored), a duplicate at 20 s, one item
	// after the last poll (unfetched) and one at the end (outside the run).
	items := itemsAt(-5, 10, 20, 20, 50, 95, 200, 300)
	script5 := secs(30, 30, 60, 100, 350) // second answer: poll again now
	type want struct {
		polls, hits, items, unfetched int
		lat                           []float64
		at                            []time.Time
		hit                           []bool
		published                     [][]time.Time
		hints                         []schedule.Hints
	}
	tests := []struct {
		name   string
		first  *time.Time
		script []time.Time
		opts   []Option
		want   want
	}{
		{
			name: "plain", script: script5,
			want: want{polls: 5, hits: 3, items: 5, unfetched: 1,
				lat: []float64{20, 10, 10, 10, 5}, at: secs(0, 30, 30, 60, 100),
				hit:       []bool{false, true, false, true, true},
				published: [][]time.Time{nil, secs(10, 20, 20), nil, secs(50), secs(95)},
				hints:     make([]schedule.Hints, 5)},
		},
		{
			// The request at 30 s is answered at 32 s; "again at 30 s" is
			// before that and is taken as "now" (32 s).
			name: "fetch delay", script: script5, opts: []Option{WithFetchDelay(2 * time.Second)},
			want: want{polls: 5, hits: 3, items: 5, unfetched: 1,
				lat: []float64{22, 12, 12, 12, 7}, at: secs(2, 32, 34, 62, 102),
				hit:       []bool{false, true, false, true, true},
				published: [][]time.Time{nil, secs(10, 20, 20), nil, secs(50), secs(95)},
				hints:     make([]schedule.Hints, 5)},
		},
		{
			name: "phase hint and desync", script: script5, opts: []Option{WithPhaseHint(), WithDesync(7 * time.Second)},
			want: want{polls: 5, hits: 3, items: 5, unfetched: 1,
				lat: []float64{20, 10, 10, 10, 5}, at: secs(0, 30, 30, 60, 100),
				hit:       []bool{false, true, false, true, true},
				published: [][]time.Time{nil, secs(10, 20, 20), nil, secs(50), secs(95)},
				hints: []schedule.Hints{
					{Desync: 7 * time.Second, HasPhase: true, Phase: 5 * time.Second},
					{Desync: 7 * time.Second, HasPhase: true, Phase: 10 * time.Second},
					{Desync: 7 * time.Second, HasPhase: true, Phase: 10 * time.Second},
					{Desync: 7 * time.Second, HasPhase: true, Phase: 10 * time.Second},
					{Desync: 7 * time.Second, HasPhase: true, Phase: 5 * time.Second},
				}},
		},
		{
			name: "starter", first: new(sec(25)), script: secs(199, 350),
			want: want{polls: 2, hits: 2, items: 5, unfetched: 1,
				lat: []float64{15, 5, 5, 149, 104}, at: secs(25, 199),
				hit:       []bool{true, true},
				published: [][]time.Time{secs(10, 20, 20), secs(50, 95)},
				hints:     make([]schedule.Hints, 2)},
		},
		{
			name: "answers in the past are now", script: secs(-100, 60, 350),
			want: want{polls: 3, hits: 1, items: 4, unfetched: 2,
				lat: []float64{50, 40, 40, 10}, at: secs(0, 0, 60),
				hit:       []bool{false, false, true},
				published: [][]time.Time{nil, nil, secs(10, 20, 20, 50)},
				hints:     make([]schedule.Hints, 3)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{times: tc.script}
			var p schedule.Policy = s
			if tc.first != nil {
				ss := &startingScript{script: script{times: tc.script}, first: *tc.first}
				p, s = ss, &ss.script
			}
			for _, in := range [][]Item{items, reversed(items)} {
				s.seen = nil
				r := Run(p, in, t0, sec(300), tc.opts...)
				w := tc.want
				if r.Polls != w.polls || r.Hits != w.hits || r.Items != w.items || r.Unfetched != w.unfetched || r.Forced != 0 {
					t.Errorf("polls/hits/items/unfetched/forced = %d/%d/%d/%d/%d, want %d/%d/%d/%d/0",
						r.Polls, r.Hits, r.Items, r.Unfetched, r.Forced, w.polls, w.hits, w.items, w.unfetched)
				}
				if !slices.Equal(r.Latencies, w.lat) {
					t.Errorf("latencies %v, want %v", r.Latencies, w.lat)
				}
				if r.PollTimes != nil {
					t.Errorf("poll log without WithPollLog")
				}
				if len(s.seen) != len(w.at) {
					t.Fatalf("%d observations, want %d", len(s.seen), len(w.at))
				}
				for i, o := range s.seen {
					if !o.At.Equal(w.at[i]) || o.Hit != w.hit[i] || !slices.Equal(o.Published, w.published[i]) ||
						o.Hints != w.hints[i] || o.MoreData {
						t.Errorf("observation %d = %+v, want At %v hit %v published %v hints %+v",
							i, o, w.at[i], w.hit[i], w.published[i], w.hints[i])
					}
				}
			}
		})
	}
}

func reversed(items []Item) []Item {
	r := slices.Clone(items)
	slices.Reverse(r)
	return r
}

func TestRunPollLog(t *testing.T) {
	r := Run(fixed{Interval: 45 * time.Second}, itemsAt(10, 100), t0, sec(200), WithPollLog())
	if want := secs(0, 45, 90, 135, 180); !slices.Equal(r.PollTimes, want) {
		t.Errorf("poll times %v, want %v", r.PollTimes, want)
	}
	if !slices.Equal(r.Latencies, []float64{35, 35}) || r.Polls != 5 || r.Hits != 2 {
		t.Errorf("got %+v", r)
	}
}

// stuck always asks to poll again at once.
type stuck struct{}

func (stuck) Next(obs schedule.Observation) time.Time { return obs.At }

func TestRunStuckGuard(t *testing.T) {
	r := Run(stuck{}, itemsAt(0.5, 5), t0, sec(10), WithPollLog())
	// 1,001 polls at the start, then one per millisecond until the end.
	if r.Polls != 11_000 || r.Forced != 10_000 || r.Hits != 2 || r.Items != 2 {
		t.Errorf("polls %d forced %d hits %d items %d; want 11000 10000 2 2", r.Polls, r.Forced, r.Hits, r.Items)
	}
	if !r.PollTimes[1000].Equal(t0) || !r.PollTimes[1001].Equal(t0.Add(StuckStep)) {
		t.Errorf("polls 1000, 1001 at %v, %v", r.PollTimes[1000], r.PollTimes[1001])
	}
	if !slices.Equal(r.Latencies, []float64{0, 0}) {
		t.Errorf("latencies %v", r.Latencies)
	}
}

func TestRunFixedInterval(t *testing.T) {
	// A periodic publisher at phase 15 s polled every period from the start:
	// every item waits 45 s.
	m := Model{Period: time.Minute, Pss: 1, Phase: 15 * time.Second}
	items := m.Generate(newRNG(1), t0, t0.Add(time.Hour))
	r := Run(fixed{Interval: time.Minute}, items, t0, t0.Add(time.Hour))
	if r.Polls != 60 || r.Hits != 59 || r.Items != 59 || r.Unfetched != 1 {
		t.Errorf("polls %d hits %d items %d unfetched %d; want 60 59 59 1", r.Polls, r.Hits, r.Items, r.Unfetched)
	}
	for _, l := range r.Latencies {
		if l != 45 {
			t.Fatalf("latency %v, want 45", l)
		}
	}
}

func TestRunNoAllocsPerPoll(t *testing.T) {
	m := Model{Period: time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 2 * time.Second}
	items := m.Generate(newRNG(1), t0, t0.Add(1000*time.Minute))
	p := fixed{Interval: 7 * time.Second}
	allocs := testing.AllocsPerRun(20, func() {
		Run(p, items, t0, t0.Add(1000*time.Minute), WithPhaseHint())
	})
	// Latencies, the Published buffer (which may grow a couple of times),
	// the option: nothing per poll (8,500 polls here).
	if allocs > 6 {
		t.Errorf("%v allocations per run", allocs)
	}
}

func BenchmarkRun(b *testing.B) {
	m := Model{Period: time.Minute, Pss: 0.95, Pfs: 0.8, JitterScale: 2 * time.Second}
	items := m.Generate(newRNG(1), t0, t0.Add(1200*time.Minute))
	if len(items) < 1000 {
		b.Fatalf("%d items", len(items))
	}
	items = items[:1000]
	end := items[len(items)-1].Published.Add(time.Minute)
	p := fixed{Interval: 30 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		Run(p, items, t0, end)
	}
}

func TestRunDateResolution(t *testing.T) {
	tests := []struct {
		name string
		res  time.Duration
		want []time.Time
	}{
		{"exact", 0, secs(10.25, 20.75)},
		{"whole seconds", time.Second, secs(10, 20)},
		{"whole minutes", time.Minute, secs(0, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{times: secs(30)}
			r := Run(s, itemsAt(10.25, 20.75), t0, sec(100), WithDateResolution(tc.res))
			if got := s.seen[1].Published; !slices.Equal(got, tc.want) {
				t.Errorf("told %v, want %v", got, tc.want)
			}
			// Latencies are measured from the true publish times.
			if !slices.Equal(r.Latencies, []float64{19.75, 9.25}) {
				t.Errorf("latencies %v", r.Latencies)
			}
		})
	}
}
