package eval

import (
	"context"
	"testing"

	"github.com/slogfeed/slogfeed/schedule"
)

func newAuto() schedule.Policy { return schedule.NewAuto() }

func budgetRows(t *testing.T, rep *Report) map[string]Row {
	t.Helper()
	if rep.Scenario != "budget" {
		t.Fatalf("scenario %q", rep.Scenario)
	}
	want := []string{"priority", "round-robin", "fifo"}
	if len(rep.Rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(want))
	}
	rows := map[string]Row{}
	for i, r := range rep.Rows {
		if r.Policy != want[i] {
			t.Fatalf("row %d is %q, want %q", i, r.Policy, want[i])
		}
		if _, ok := r.Extra["weighted_latency_s"].(float64); !ok {
			t.Fatalf("row %s has no weighted_latency_s: %v", r.Policy, r.Extra)
		}
		rows[r.Policy] = r
	}
	return rows
}

func TestBudgetPriorityWins(t *testing.T) {
	n := budgetFeeds
	if testing.Short() || raceEnabled {
		n = 2000
	}
	rep, err := runBudget(t.Context(), Options{Seed: 1}, newAuto, n)
	if err != nil {
		t.Fatal(err)
	}
	rows := budgetRows(t, rep)
	p := rows["priority"].Extra["weighted_latency_s"].(float64)
	for _, other := range []string{"round-robin", "fifo"} {
		o := rows[other].Extra["weighted_latency_s"].(float64)
		t.Logf("weighted latency: priority %.1f s, %s %.1f s", p, other, o)
		if !(p < o) {
			t.Errorf("priority weighted latency %.1f s is not below %s %.1f s", p, other, o)
		}
	}
	// The budget binds: every order spends all of it (the rate in Params
	// is rounded to 1e-3/s, hence the 0.1% slack).
	budget := rep.Rows[0].Params["budget_per_s"].(float64) * budgetDay.Seconds()
	for _, r := range rep.Rows {
		if float64(r.Polls) < 0.999*budget || float64(r.Polls) > 1.001*budget {
			t.Errorf("%s polled %d times, budget %.0f", r.Policy, r.Polls, budget)
		}
	}
	if last := rep.Notes[len(rep.Notes)-1]; last != "OK: priority has the lowest weighted mean latency" {
		t.Errorf("last note %q", last)
	}
}

func TestBudgetDeterministic(t *testing.T) {
	run := func(seed uint64) *Report {
		rep, err := runBudget(t.Context(), Options{Seed: seed}, newAuto, 300)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	a, b, c := run(3), run(3), run(4)
	for i := range a.Rows {
		ra, rb := a.Rows[i], b.Rows[i]
		if ra.Polls != rb.Polls || ra.Items != rb.Items || ra.MeanLatencyS != rb.MeanLatencyS ||
			ra.Extra["weighted_latency_s"] != rb.Extra["weighted_latency_s"] {
			t.Fatalf("%s differs between runs with one seed: %+v vs %+v", ra.Policy, ra, rb)
		}
	}
	if a.Rows[0].Items == c.Rows[0].Items && a.Rows[0].MeanLatencyS == c.Rows[0].MeanLatencyS {
		t.Fatal("seeds 3 and 4 gave the same run")
	}
}

func TestBudgetCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := runBudget(ctx, Options{Seed: 1}, newAuto, 100); err == nil {
		t.Fatal("cancelled run returned no error")
	}
}

func TestBudgetFleet(t *testing.T) {
	feeds := budgetFleet(9, 20000, 10)
	count := map[float64]int{}
	for _, f := range feeds {
		if f.model.Period < budgetMinPeriod || f.model.Period > budgetMaxPeriod {
			t.Fatalf("period %v out of range", f.model.Period)
		}
		if f.model.JitterScale > f.model.Period/20 {
			t.Fatalf("jitter %v for period %v", f.model.JitterScale, f.model.Period)
		}
		count[f.weight]++
	}
	for _, w := range budgetWeights {
		got := float64(count[w.w]) / float64(len(feeds))
		if want := float64(w.share) / 100; got < want-0.02 || got > want+0.02 {
			t.Errorf("weight %v: %.3f of feeds, want %.2f", w.w, got, want)
		}
	}
}
