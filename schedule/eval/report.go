package eval

import (
	"context"
	"io"
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
