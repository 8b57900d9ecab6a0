package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAcceptance runs the paper scenarios with fewer runs than `slogfeed
// eval` does and requires every acceptance check they state to hold.
func TestAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the simulations")
	}
	// Excerpts of the real ULB traces kept in the repository (see
	// schedule/sim/testdata/ulb/README.md): missing data fails the test.
	traces, _ := filepath.Glob("../sim/testdata/ulb/ulb-library1-R*.txt")
	if len(traces) != 3 {
		t.Fatalf("want the 3 ULB trace excerpts in schedule/sim/testdata/ulb, found %q", traces)
	}
	tests := []struct {
		name string
		s    Scenario
		opt  Options
	}{
		{"loss-sweep", LossSweep(), Options{Seed: 1, Runs: 20}},
		{"bimodal", Bimodal(), Options{Seed: 1, Runs: 4}},
		{"mdpt", MDPT(), Options{Seed: 1, Runs: 20}},
		{"mdpt-jitter", MDPT(), Options{Seed: 1, Runs: 20, Jitter: mdptJitterGoalB}},
		{"trace", Trace(), Options{Seed: 1, Files: traces}},
		{"cold-trace", ColdTrace(), Options{Seed: 1, Files: traces}},
		{"sleep", Sleep(), Options{Seed: 1, Runs: 4}},
		{"groups", Groups(), Options{Seed: 1, Runs: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := tc.s.Run(context.Background(), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			checked := false
			for _, n := range rep.Notes {
				if strings.HasPrefix(n, "FAIL") {
					t.Error(n)
				}
				if strings.Contains(n, "checks:") {
					checked = true
				}
			}
			if !checked {
				t.Errorf("no acceptance verdict in notes: %q", rep.Notes)
			}
		})
	}
}

// TestReportRows checks every scenario row carries what the JSON contract
// promises: a policy name and the scenario's parameters.
func TestReportRows(t *testing.T) {
	rep, err := FixedSweep().Run(context.Background(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Scenario string           `json:"scenario"`
		Rows     []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Scenario != "fixed-sweep" || len(out.Rows) != 50 {
		t.Fatalf("scenario %q with %d rows, want fixed-sweep with 50", out.Scenario, len(out.Rows))
	}
	for _, k := range []string{"policy", "period_s", "phase_s", "median_latency_s", "mean_latency_s", "p90_latency_s", "hit_pct", "polls", "items"} {
		if _, ok := out.Rows[0][k]; !ok {
			t.Errorf("row lacks %q: %v", k, out.Rows[0])
		}
	}
	// A strict 300 s grid published at +100 s, polled every 300 s at phase
	// 0: every reading waits 200 s, and only the first poll (at 0, before
	// the first publish) misses.
	for _, r := range rep.Rows {
		if r.Params["period_s"] == 300.0 && r.Params["phase_s"] == 0.0 {
			if r.MedianLatencyS != 200 || r.Polls != 1000 || r.HitPct != 99.9 {
				t.Fatalf("fixed-5m phase 0: median %v polls %d hit %v, want 200, 1000, 99.9", r.MedianLatencyS, r.Polls, r.HitPct)
			}
		}
	}
}

func TestTraceNeedsFiles(t *testing.T) {
	if _, err := Trace().Run(context.Background(), Options{}); err != ErrNoFiles {
		t.Fatalf("err %v, want ErrNoFiles", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("not a trace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Trace().Run(context.Background(), Options{Files: []string{bad}}); err == nil {
		t.Fatal("a file with no readings did not fail")
	}
}

// TestMissingRowFails pins that a check whose row is missing fails: a
// missing policy row must never pass as zeros.
func TestMissingRowFails(t *testing.T) {
	traceRep := func(drop string) *Report {
		rep := &Report{Scenario: "trace"}
		for _, p := range []string{"fixed-avg", "dpt-l", "auto"} {
			if p == drop {
				continue
			}
			lat := map[string]float64{"fixed-avg": 30, "dpt-l": 1, "auto": 0.5}[p]
			rep.Rows = append(rep.Rows, Row{Policy: p, MedianLatencyS: lat, HitPct: 95, Params: map[string]any{"file": "f", "sensor": "all"}})
		}
		return rep
	}
	lossRep := func(drop string) *Report {
		rep := &Report{Scenario: "loss-sweep"}
		for _, p := range []string{"fixed-avg", "dpt-a", "dpt-n", "dpt-l", "auto"} {
			if p == drop {
				continue
			}
			lat := map[string]float64{"fixed-avg": 150, "dpt-a": 10, "dpt-n": 15, "dpt-l": 20, "auto": 30}[p]
			rep.Rows = append(rep.Rows, Row{Policy: p, MedianLatencyS: lat, HitPct: 95, Params: map[string]any{"p_ss": 0.9, "p_fs": 0.6}})
		}
		return rep
	}
	budgetRep := func(drop string) *Report {
		rep := &Report{Scenario: "budget"}
		for _, p := range []string{"priority", "round-robin", "fifo"} {
			if p == drop {
				continue
			}
			lat := map[string]float64{"priority": 5, "round-robin": 9, "fifo": 10}[p]
			rep.Rows = append(rep.Rows, Row{Policy: p, Extra: map[string]any{"weighted_latency_s": lat}})
		}
		return rep
	}
	tests := []struct {
		name  string
		check func(*Report) []string
		rep   func(drop string) *Report
		drops []string
	}{
		{"trace", traceChecks, traceRep, []string{"dpt-l", "auto"}},
		{"loss-sweep", lossSweepChecks, lossRep, []string{"dpt-a", "dpt-n", "dpt-l", "auto"}},
		{"budget", budgetNotes, budgetRep, []string{"priority", "round-robin", "fifo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/complete", func(t *testing.T) {
			rep := tc.rep("")
			rep.Notes = tc.check(rep)
			if f := rep.Failures(); len(f) > 0 {
				t.Fatalf("complete report fails: %q", f)
			}
		})
		for _, d := range tc.drops {
			t.Run(tc.name+"/without-"+d, func(t *testing.T) {
				rep := tc.rep(d)
				rep.Notes = tc.check(rep)
				f := rep.Failures()
				if len(f) == 0 || !strings.Contains(strings.Join(f, "\n"), "no "+d+" row") {
					t.Fatalf("report without %s: failures %q, want one naming the missing row", d, f)
				}
			})
		}
	}
}

// TestColdStart runs the cold-start scenario and requires its goals at
// every point: auto's mean ≤ 20% and p90 ≤ 50% of the period over the
// first 10 periods with ≤ 3× the polls of fixed polling, for steady and
// lossy publishers, empty when subscribed or with a backlog.
func TestColdStart(t *testing.T) {
	rep, err := ColdStart().Run(context.Background(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(coldPublishers)*2*len(coldPeriods)*len(coldStartPolicies) {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	for _, n := range rep.Failures() {
		t.Error(n)
	}
	// Auto beats fixed polling at the period on mean latency at every
	// point, and a backlog makes it steady from the first poll.
	for _, r := range rep.Rows {
		if r.Policy != "auto" {
			continue
		}
		kv := []any{"publisher", r.Params["publisher"], "backlog", r.Params["backlog"], "period_s", r.Params["period_s"]}
		f, ok := find(rep, "fixed-avg", kv...)
		if !ok || r.MeanLatencyS >= f.MeanLatencyS {
			t.Errorf("%v: auto mean %.1f s, fixed-avg %.1f s", kv, r.MeanLatencyS, f.MeanLatencyS)
		}
		if ttfs, _ := r.Extra["ttfs_periods"].(float64); r.Params["backlog"] == coldBacklog && ttfs > 1.5 {
			t.Errorf("%v: first steady hit after %.2f periods with a backlog", kv, ttfs)
		}
	}
}
