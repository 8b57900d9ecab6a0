package eval

import (
	"math"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/schedule/sim"
)

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
	for _, m := range models {
		items = append(items, m.Generate(rng, start, end))
	}
	return runMDPTOracle(items, models, start, from, end, o)
}

func TestMDPTOracleName(t *testing.T) {
	tests := []struct {
		o    mdptOracle
		want string
	}{
		{mdptOracle{Margin: 30 * time.Second}, "oracle-m30s"},
		{mdptOracle{Margin: 40 * time.Second, Retry: 20 * time.Second}, "oracle-m40s-r20s"},
		{mdptOracle{Margin: 1500 * time.Millisecond}, "oracle-m1.5s"},
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
// or losses: every hourly poll lands exactly Margin after a publish and
// hits, every republish waits exactly Margin, and the 500 s source is
// polled once a round.
func TestMDPTOracleExactSources(t *testing.T) {
	for _, o := range []mdptOracle{
		{Margin: 10 * time.Second},
		{Margin: 30 * time.Second},
		{Margin: 30 * time.Second, Retry: 20 * time.Second},
	} {
		t.Run(o.Name(), func(t *testing.T) {
			bk := oracleRun(t, 0, 1, 1, 0, o)
			if bk.Hits != bk.Polls || bk.Polls == 0 {
				t.Fatalf("%d hits in %d polls, want every poll to hit", bk.Hits, bk.Polls)
			}
			// Two hourly publishes an hour over the 7 measured days.
			if got, want := bk.SrcPolls[1]+bk.SrcPolls[2], 2*7*24; got != want {
				t.Errorf("hourly polls %d, want %d", got, want)
			}
			if d := bk.SrcPolls[0] - bk.Items; d < 0 || d > 1 {
				t.Errorf("500 s source polled %d times for %d republishes, want once a round", bk.SrcPolls[0], bk.Items)
			}
			for i, l := range bk.Latencies {
				if l != o.Margin.Seconds() {
					t.Fatalf("republish %d waited %v s, want %v", i, l, o.Margin.Seconds())
				}
			}
		})
	}
}

// TestMDPTOracleRetryCostsALossMiss pins what a retry costs when readings
// are lost but never late: one more hourly poll for each lost reading, and
// each of them a miss, with the same republishes and latencies.
func TestMDPTOracleRetryCostsALossMiss(t *testing.T) {
	for run := range 3 {
		base := oracleRun(t, run, 0.95, 0.8, 0, mdptOracle{Margin: 10 * time.Second})
		retry := oracleRun(t, run, 0.95, 0.8, 0, mdptOracle{Margin: 10 * time.Second, Retry: 20 * time.Second})
		hourly := func(v []int) int { return v[1] + v[2] }
		if hourly(base.SrcLost) == 0 {
			t.Fatalf("run %d: no lost hourly reading to test with", run)
		}
		if hourly(base.SrcEarly)+hourly(retry.SrcEarly) != 0 {
			t.Errorf("run %d: early polls without jitter: %v, %v", run, base.SrcEarly, retry.SrcEarly)
		}
		if got, want := hourly(retry.SrcPolls), hourly(base.SrcPolls)+hourly(base.SrcLost); got != want {
			t.Errorf("run %d: hourly polls with retry %d, want %d", run, got, want)
		}
		if got, want := hourly(retry.SrcLost), 2*hourly(base.SrcLost); got != want {
			t.Errorf("run %d: hourly misses with retry %d, want %d", run, got, want)
		}
		if retry.Items != base.Items {
			t.Errorf("run %d: %d republishes with retry, %d without", run, retry.Items, base.Items)
		}
	}
}

// TestMDPTOracleEarlyShare checks the figure the bound rests on: under
// Laplace jitter b, the poll m after a reading's expected publish is early
// with probability ½·e^(−m/b), so a lossless hourly source has about that
// share of its readings polled too early once. (A reading fetched late
// costs one more hourly poll, which hits, so the share of early polls among
// all polls is a little lower.)
func TestMDPTOracleEarlyShare(t *testing.T) {
	const b = 10.0
	for _, m := range []float64{20, 30, 40} {
		o := mdptOracle{Margin: time.Duration(m * float64(time.Second))}
		t.Run(o.Name(), func(t *testing.T) {
			const runs = 20
			polls, early := 0, 0
			for run := range runs {
				bk := oracleRun(t, run, 1, 1, b, o)
				polls += bk.SrcPolls[1] + bk.SrcPolls[2]
				early += bk.SrcEarly[1] + bk.SrcEarly[2]
			}
			readings := float64(runs * 2 * 7 * 24) // two hourly sources, 7 measured days
			p := 0.5 * math.Exp(-m/b)
			want := p * readings
			tol := 4 * math.Sqrt(readings*p*(1-p))
			t.Logf("%d early polls (%d hourly polls) for %.0f readings, want %.0f ± %.0f", early, polls, readings, want, tol)
			if math.Abs(float64(early)-want) > tol {
				t.Fatalf("%d early polls for %.0f readings, want %.0f ± %.0f", early, readings, want, tol)
			}
		})
	}
}

// TestOracleBoundNote pins the note's choice: the lowest mean among the
// oracle rows at ≥ 96% hit within the poll budget, and the lowest at all.
func TestOracleBoundNote(t *testing.T) {
	oracles := []mdptOracle{{Margin: 30 * time.Second}, {Margin: 30 * time.Second, Retry: 20 * time.Second}, {Margin: 50 * time.Second}}
	tests := []struct {
		name  string
		rows  []Row
		polls int
		want  string
	}{
		{
			name: "over budget or under 96% does not count",
			rows: []Row{
				{Policy: "oracle-m30s", MeanLatencyS: 40, HitPct: 96.5, Polls: 200},
				{Policy: "oracle-m30s-r20s", MeanLatencyS: 35, HitPct: 92, Polls: 100},
				{Policy: "oracle-m50s", MeanLatencyS: 55, HitPct: 96.4, Polls: 100},
			},
			polls: 150,
			want:  "oracle rows (not policies: they know each source's true period and phase): lowest mean at ≥ 96% hit within 150 polls: 55.0 s (oracle-m50s, hit 96.4%, 100 polls); lowest mean at any hit: 35.0 s (oracle-m30s-r20s, hit 92.0%, 100 polls)",
		},
		{
			name:  "no row",
			polls: 150,
			want:  "oracle rows (not policies: they know each source's true period and phase): lowest mean at ≥ 96% hit within 150 polls: none; lowest mean at any hit: none",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := oracleBoundNote(&Report{Rows: tc.rows}, oracles, tc.polls); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
