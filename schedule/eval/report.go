package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Row is one line of a scenario's result: one policy under one set of
// parameters. Params holds the scenario's parameters (p_ss, p_fs, file,
// sensor, feeds, ...) and is flattened into the JSON row beside the
// measurements. Extra holds scenario-specific measurements that are not part
// of every row (wall_s, bytes_per_feed, weighted_latency_s, ...), also
// flattened into the JSON row.
type Row struct {
	Policy string         `json:"policy"`
	Params map[string]any `json:"-"`

	MedianLatencyS float64 `json:"median_latency_s"`
	MeanLatencyS   float64 `json:"mean_latency_s"`
	P90LatencyS    float64 `json:"p90_latency_s"`
	StdLatencyS    float64 `json:"std_latency_s"`
	HitPct         float64 `json:"hit_pct"`
	Polls          int     `json:"polls"`
	Items          int     `json:"items"`

	Extra map[string]any `json:"-"`
}

// Series is one line of a figure.
type Series struct {
	Name string
	X, Y []float64
}

// Figure is one plot a scenario draws (written as SVG by --svg DIR).
type Figure struct {
	Name   string // file name without extension, e.g. "loss-sweep-latency-pfs0.6"
	Title  string
	XLabel string
	YLabel string
	LogY   bool
	Series []Series
}

// Report is what a scenario returns.
type Report struct {
	Scenario string   `json:"scenario"`
	Columns  []string `json:"-"` // parameter/extra keys to show in the table, in order
	Rows     []Row    `json:"rows"`
	Figures  []Figure `json:"-"`
	Notes    []string `json:"notes,omitempty"` // human-readable remarks printed under the table
}

// Options are the flags common to all scenarios.
type Options struct {
	Seed   uint64
	Runs   int     // runs per point where a scenario averages (0 = scenario default)
	Jitter float64 // Laplace jitter scale b in seconds for model publishers (0 = scenario default)
	Files  []string
	Log    io.Writer // progress output (may be nil)
}

// Scenario produces a Report.
type Scenario struct {
	Name  string
	Usage string
	Run   func(ctx context.Context, opt Options) (*Report, error)
}

// FailPrefix starts every note that states a failed acceptance check. A
// scenario reports a failed check only this way, so that `slogfeed eval`
// (and any script reading the JSON notes) can tell a run that failed a
// check from one that passed.
const FailPrefix = "FAIL"

// ErrChecksFailed is what `slogfeed eval` returns (wrapped, with the
// scenario's name) when a report states a failed check, so that its exit
// status is not zero.
var ErrChecksFailed = errors.New("acceptance checks failed")

// Failures returns the notes that state a failed acceptance check.
func (r *Report) Failures() []string {
	var out []string
	for _, n := range r.Notes {
		if strings.HasPrefix(n, FailPrefix) {
			out = append(out, n)
		}
	}
	return out
}

// missing is the failure note for a row a check needs but the report lacks:
// a missing row must fail its check, never pass as zeros.
func missing(policy string, kv ...any) string {
	return fmt.Sprintf("%s: no %s row%s to check", FailPrefix, policy, fmtParams(kv))
}

func fmtParams(kv []any) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	if b.Len() == 0 {
		return ""
	}
	return " at" + b.String()
}

// require returns the row of policy at the given parameter values; when the
// report lacks it, it appends the failure note to notes and returns false.
func require(rep *Report, notes *[]string, policy string, kv ...any) (Row, bool) {
	r, ok := find(rep, policy, kv...)
	if !ok {
		*notes = append(*notes, missing(policy, kv...))
	}
	return r, ok
}
