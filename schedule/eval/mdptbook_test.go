package eval

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule/sim"
)

// sec is epoch plus s seconds.
func sec(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }

// itemsAt turns per-source publish times (seconds after epoch) into items.
func itemsAt(pubs ...[]float64) [][]sim.Item {
	out := make([][]sim.Item, len(pubs))
	for i, ps := range pubs {
		for _, p := range ps {
			out[i] = append(out[i], sim.Item{Published: sec(p), Observed: sec(p)})
		}
	}
	return out
}

func TestPublisherRounds(t *testing.T) {
	tests := []struct {
		name string
		pubs [][]float64
		m    int
		want []float64
	}{
		{
			// A fast source and two slow ones: a round closes at each slow
			// publish, since the fast one published in between.
			name: "fast and slow",
			pubs: [][]float64{{10, 110, 210, 310}, {100, 300}, {200}},
			m:    2,
			want: []float64{100, 200, 300},
		},
		{
			// Repeated publishes of one source do not close a round.
			name: "one source alone never closes",
			pubs: [][]float64{{1, 2, 3, 4}, {}, {10}},
			m:    2,
			want: []float64{10},
		},
		{
			name: "all of three",
			pubs: [][]float64{{1, 5}, {2, 6}, {3, 4}},
			m:    3,
			want: []float64{3, 6},
		},
		{
			// A tie is taken in source order.
			name: "tie",
			pubs: [][]float64{{5}, {5}, {7}},
			m:    2,
			want: []float64{5},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []float64
			for _, d := range publisherRounds(itemsAt(tc.pubs...), tc.m) {
				got = append(got, d.Sub(epoch).Seconds())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("closes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBooksClose pins the closed accounting on hand-made runs: which
// republish produces which round, and what is missed, stale and waited.
func TestBooksClose(t *testing.T) {
	// Rounds close at 100 (fast + slow1), 200 (fast + slow2), 300 (fast +
	// slow1).
	pubs := [][]float64{{10, 110, 210}, {100, 300}, {200}}
	type step struct {
		at   float64
		poll []int
		out  bool
	}
	tests := []struct {
		name                           string
		steps                          []step
		produced, missed, stale, polls int
		lat, waits                     []float64
	}{
		{
			name: "every round on time",
			steps: []step{
				{at: 105, poll: []int{1, 0}, out: true},
				{at: 205, poll: []int{2, 0}, out: true},
				{at: 305, poll: []int{1, 0}, out: true},
			},
			produced: 3, polls: 6, lat: []float64{5, 5, 5}, waits: []float64{5, 5, 5},
		},
		{
			// Skipping the round of 200 is a missed round, and it waits
			// until the next fresh republish.
			name: "a skipped round is missed and waits",
			steps: []step{
				{at: 105, poll: []int{1, 0}, out: true},
				{at: 305, poll: []int{0, 1, 2}, out: true},
			},
			produced: 2, missed: 1, polls: 5, lat: []float64{5, 5}, waits: []float64{5, 105, 5},
		},
		{
			// At 205 the fast source's newest reading (10) is older than
			// the previous round's close (100): the republish fuses a
			// reading the round of 100 carried.
			name: "a republish from an old reading is stale",
			steps: []step{
				{at: 105, poll: []int{1}, out: false},
				{at: 106, poll: []int{}, out: false},
				{at: 205, poll: []int{2}, out: true},
				{at: 250, poll: []int{0}, out: true},
				{at: 305, poll: []int{1, 0}, out: true},
			},
			produced: 2, missed: 1, stale: 1, polls: 5, lat: []float64{50, 5}, waits: []float64{150, 50, 5},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items := itemsAt(pubs...)
			items[0] = append([]sim.Item{{Published: sec(-500)}}, items[0]...)
			r := newRepublisher(items, []time.Duration{100 * time.Second, 200 * time.Second, 200 * time.Second}, 2, sec(0), sec(400))
			r.poll(0, sec(50)) // the fast source's reading of 10 (and the one before)
			r.res.Polls, r.res.Hits, r.res.SrcPolls[0] = 0, 0, 0
			for _, s := range tc.steps {
				for _, i := range s.poll {
					r.poll(i, sec(s.at))
				}
				if s.out {
					r.republish(sec(s.at))
				}
			}
			bk := r.close(sec(500))
			if bk.Rounds != 3 || bk.Items != tc.produced || bk.Missed != tc.missed || bk.Stale != tc.stale || bk.Polls != tc.polls {
				t.Errorf("rounds %d produced %d missed %d stale %d polls %d, want 3 %d %d %d %d",
					bk.Rounds, bk.Items, bk.Missed, bk.Stale, bk.Polls, tc.produced, tc.missed, tc.stale, tc.polls)
			}
			if !slices.Equal(bk.Latencies, tc.lat) {
				t.Errorf("latencies %v, want %v", bk.Latencies, tc.lat)
			}
			if !slices.Equal(bk.Waits, tc.waits) {
				t.Errorf("waits %v, want %v", bk.Waits, tc.waits)
			}
		})
	}
}

// oracleRun generates the Fig. 23 sources with the given losses and jitter
// for one run and drives the oracle over 8 days, the first not measured.
func oracleRun(t *testing.T, run int, pss, pfs, b float64, o mdptOracle) mdptBook {
	t.Helper()
	models := mdptSources(b)
	for i := range models {
		models[i].Pss, models[i].Pfs = pss, pfs
	}
	start := epoch
	from, end := start.Add(24*time.Hour), start.Add(8*24*time.Hour)
	rng := rngFor(7, "oracle-test", run)
	var items [][]sim.Item
	periods := make([]time.Duration, len(models))
	for i, m := range models {
		items = append(items, m.Generate(rng, start, end.Add(mdptTail)))
		periods[i] = m.Period
	}
	return runMDPTOracle(newRepublisher(items, periods, 2, from, end), models, start, o)
}

func TestMDPTOracleName(t *testing.T) {
	tests := []struct {
		o    mdptOracle
		want string
	}{
		{mdptOracle{Share: 0.012}, "oracle-q1.2%"},
		{mdptOracle{Share: 0.01}, "oracle-q1%"},
		{mdptOracle{Share: 0.005}, "oracle-q0.5%"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.o.Name(); got != tc.want {
				t.Fatalf("Name() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMDPTOracleExactSources pins the oracle on publishers without jitter
// or losses: every poll lands on a publish and hits, every round is
// produced the moment it closes, and the 500 s source is polled once a
// round, when its reading completes the round.
func TestMDPTOracleExactSources(t *testing.T) {
	bk := oracleRun(t, 0, 1, 1, 0, mdptOracle{Share: 0.01})
	if bk.Hits != bk.Polls || bk.Polls == 0 {
		t.Fatalf("%d hits in %d polls, want every poll to hit", bk.Hits, bk.Polls)
	}
	// Two hourly publishes an hour over the 7 measured days, each closing
	// a round.
	if got, want := bk.SrcPolls[1]+bk.SrcPolls[2], 2*7*24; got != want || bk.Rounds != want {
		t.Errorf("hourly polls %d, rounds %d, want %d", got, bk.Rounds, want)
	}
	if bk.SrcPolls[0] != bk.Rounds || bk.Items != bk.Rounds || bk.Missed+bk.Stale != 0 {
		t.Errorf("500 s polls %d, produced %d, missed %d, stale %d of %d rounds", bk.SrcPolls[0], bk.Items, bk.Missed, bk.Stale, bk.Rounds)
	}
	for i, l := range bk.Latencies {
		if l != 0 {
			t.Fatalf("round %d produced %v s after it closed, want 0", i, l)
		}
	}
}

// TestMDPTOracleEarlyShare checks that the oracle aims where it says:
// under Laplace jitter b on lossless sources, a share q of the hourly
// readings is polled for too early.
func TestMDPTOracleEarlyShare(t *testing.T) {
	const b = 10.0
	for _, q := range []float64{0.01, 0.05} {
		o := mdptOracle{Share: q}
		t.Run(o.Name(), func(t *testing.T) {
			const runs = 10
			early := 0
			for run := range runs {
				bk := oracleRun(t, run, 1, 1, b, o)
				early += bk.SrcEarly[1] + bk.SrcEarly[2]
			}
			readings := float64(runs * 2 * 7 * 24) // two hourly sources, 7 measured days
			want := q * readings
			tol := 4 * math.Sqrt(readings*q*(1-q))
			if math.Abs(float64(early)-want) > tol {
				t.Fatalf("%d early polls for %.0f readings, want %.0f ± %.0f", early, readings, want, tol)
			}
		})
	}
}

// TestOracleNote pins the note's choice: the lowest mean among the oracle
// rows at ≥ 96% hit of the polls and of the outputs, within the poll
// budget, and the lowest at all.
func TestOracleNote(t *testing.T) {
	oracles := []mdptOracle{{Share: 0.01}, {Share: 0.02}, {Share: 0.03}}
	out := func(p float64) map[string]any { return map[string]any{"out_hit_pct": p} }
	tests := []struct {
		name  string
		rows  []Row
		polls int
		want  string
	}{
		{
			name: "over budget or under 96% does not count",
			rows: []Row{
				{Policy: "oracle-q1%", MeanLatencyS: 50, HitPct: 96.5, Polls: 100, Extra: out(99)},
				{Policy: "oracle-q2%", MeanLatencyS: 40, HitPct: 96.5, Polls: 200, Extra: out(99)},
				{Policy: "oracle-q3%", MeanLatencyS: 35, HitPct: 96.2, Polls: 100, Extra: out(95)},
			},
			polls: 150,
			want:  "oracle rows (heuristics, not bounds: MDPT's forecast planning given each source's true period, phase and jitter scale): lowest mean at ≥ 96% hit within 150 polls: 50.0 s (oracle-q1%, hit 96.5%, 100 polls); lowest mean at any hit: 35.0 s (oracle-q3%, hit 96.2%, 100 polls)",
		},
		{
			name:  "no row",
			polls: 150,
			want:  "oracle rows (heuristics, not bounds: MDPT's forecast planning given each source's true period, phase and jitter scale): lowest mean at ≥ 96% hit within 150 polls: none; lowest mean at any hit: none",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := oracleNote(&Report{Rows: tc.rows}, oracles, tc.polls); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestBooksBehind pins the freshness rule for a source that publishes
// more than once in a round: a republish must fuse its newest reading at
// the round's close, not an earlier one of the same round.
func TestBooksBehind(t *testing.T) {
	// Rounds close at 100 (fast + slow1) and 200 (fast + slow2); the fast
	// source publishes at 110 and again at 160 inside the second round.
	pubs := [][]float64{{10, 60, 110, 160}, {100}, {200}}
	type step struct {
		at   float64
		poll []int
		out  bool
	}
	tests := []struct {
		name                            string
		steps                           []step
		produced, missed, stale, behind int
		lat                             []float64
	}{
		{
			name: "the fast source's newest reading",
			steps: []step{
				{at: 101, poll: []int{1, 0}, out: true},
				{at: 201, poll: []int{2, 0}, out: true},
			},
			produced: 2, lat: []float64{1, 1},
		},
		{
			// At 201 the fast source's reading is 110, but it published
			// again at 160, before the round closed: stale.
			name: "a reading behind its source's newest is stale",
			steps: []step{
				{at: 101, poll: []int{1, 0}, out: true},
				{at: 120, poll: []int{0}, out: false},
				{at: 201, poll: []int{2}, out: true},
			},
			produced: 1, missed: 1, stale: 1, behind: 1, lat: []float64{1},
		},
		{
			// Polling the fast source again before republishing fixes it.
			name: "re-polled before the republish",
			steps: []step{
				{at: 101, poll: []int{1, 0}, out: true},
				{at: 120, poll: []int{0}, out: false},
				{at: 201, poll: []int{2}, out: true},
				{at: 203, poll: []int{0}, out: true},
			},
			produced: 2, stale: 1, behind: 1, lat: []float64{1, 3},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepublisher(itemsAt(pubs...), []time.Duration{50 * time.Second, 200 * time.Second, 200 * time.Second}, 2, sec(0), sec(400))
			for _, s := range tc.steps {
				for _, i := range s.poll {
					r.poll(i, sec(s.at))
				}
				if s.out {
					r.republish(sec(s.at))
				}
			}
			bk := r.close(sec(500))
			if bk.Rounds != 2 || bk.Items != tc.produced || bk.Missed != tc.missed || bk.Stale != tc.stale || bk.Behind != tc.behind {
				t.Errorf("rounds %d produced %d missed %d stale %d behind %d, want 2 %d %d %d %d",
					bk.Rounds, bk.Items, bk.Missed, bk.Stale, bk.Behind, tc.produced, tc.missed, tc.stale, tc.behind)
			}
			if !slices.Equal(bk.Latencies, tc.lat) {
				t.Errorf("latencies %v, want %v", bk.Latencies, tc.lat)
			}
		})
	}
}
