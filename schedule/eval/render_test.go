package eval

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/render")

// renderReports are the reports the golden files under testdata/render
// pin, by file stem.
func renderReports() map[string]*Report {
	return map[string]*Report{
		"empty": {},
		"basic": {
			Scenario: "loss-sweep",
			Columns:  []string{"p_ss", "p_fs", "wall_s"},
			Rows: []Row{
				{
					Policy:         "dpt-l",
					Params:         map[string]any{"p_ss": 0.95, "p_fs": 0.8, "feeds": 3},
					Extra:          map[string]any{"wall_s": 0.0123456},
					MedianLatencyS: 48.123456, MeanLatencyS: 61.5, P90LatencyS: 130.04,
					StdLatencyS: 22.25, HitPct: 96.04, Polls: 1200, Items: 1150,
				},
				{
					Policy:         "fixed-15m",
					Params:         map[string]any{"p_ss": 0.95, "p_fs": 0.8, "feeds": 3},
					Extra:          map[string]any{"wall_s": 0.5},
					MedianLatencyS: 467.9, MeanLatencyS: 450, P90LatencyS: 812.333,
					StdLatencyS: 260, HitPct: 47, Polls: 2880, Items: 1150,
				},
				{
					Policy:         "oracle",
					Params:         map[string]any{"p_ss": 0.95, "p_fs": 0.8, "feeds": 3},
					Extra:          map[string]any{"wall_s": 12.0},
					MedianLatencyS: 0.0004, MeanLatencyS: 1.23456, P90LatencyS: 9.9999,
					HitPct: 100, Polls: 1150, Items: 1150,
				},
			},
			Notes: []string{"DPT-L median latency is 10% of fixed polling.", "runs=5 seed=1"},
		},
		"missing": {
			Scenario: "trace",
			Columns:  []string{"file", "sensor", "bytes_per_feed"},
			Rows: []Row{
				{Policy: "dpt-n", Params: map[string]any{"file": "a.csv"}, MedianLatencyS: 12, HitPct: 50, Polls: 4, Items: 2},
				{Policy: "dpt-a", Extra: map[string]any{"bytes_per_feed": 2048, "sensor": "s1"}, MedianLatencyS: 3.5, Polls: 1},
				{Policy: "fixed"},
			},
		},
		"nan": {
			Scenario: "nan",
			Columns:  []string{"x", "y"},
			Rows: []Row{{
				Policy:         "dpt-l",
				Params:         map[string]any{"x": math.NaN(), "y": math.Inf(1)},
				Extra:          map[string]any{"z": math.Inf(-1), "w": float32(math.NaN()), "list": []float64{1, math.NaN()}},
				MedianLatencyS: math.NaN(), MeanLatencyS: math.Inf(1), P90LatencyS: math.Inf(-1),
				StdLatencyS: math.NaN(), HitPct: math.NaN(),
			}},
		},
		"hostile": {
			Scenario: "odd\tname",
			Columns:  []string{"policy", "file", "wait", "polls", "html", "file"},
			Rows: []Row{{
				Policy: "tab\there\nnewline",
				Params: map[string]any{
					"file":   "a b/<c>&d.csv",
					"policy": "param-policy",
					"polls":  7,
					"wait":   90 * time.Second,
					"html":   "<b>\"x\"</b>",
					"bad":    "\xff\xfe",
				},
				Extra: map[string]any{"file": "extra-file", "param_polls": 1, "polls": 2, "on": true},
				Polls: 9, Items: 1,
			}},
			Notes: []string{"a note with a\x1b[31m colour escape"},
		},
	}
}

func TestRenderGolden(t *testing.T) {
	reports := renderReports()
	names := make([]string, 0, len(reports))
	for name := range reports {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := reports[name]
		for _, format := range []struct {
			ext   string
			write func(io.Writer, *Report) error
		}{
			{"txt", WriteTable},
			{"json", WriteJSON},
		} {
			t.Run(name+"."+format.ext, func(t *testing.T) {
				var buf bytes.Buffer
				if err := format.write(&buf, r); err != nil {
					t.Fatalf("write: %v", err)
				}
				if format.ext == "json" && !json.Valid(buf.Bytes()) {
					t.Fatalf("invalid JSON:\n%s", buf.String())
				}
				golden := filepath.Join("testdata", "render", name+"."+format.ext)
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("read golden file (run with -update to create it): %v", err)
				}
				if got := buf.String(); got != string(want) {
					t.Errorf("output differs from %s:\n--- got\n%s\n--- want\n%s", golden, got, want)
				}
			})
		}
	}
}

// TestWriteJSONShape decodes the JSON output and checks the row keys, in
// order, and the values, so the contract does not rest on golden files
// alone.
func TestWriteJSONShape(t *testing.T) {
	tests := []struct {
		name     string
		report   *Report
		wantKeys [][]string
		wantRows []map[string]any
	}{
		{
			name:   "columns order then sorted",
			report: renderReports()["basic"],
			wantKeys: [][]string{
				{"policy", "p_ss", "p_fs", "feeds", "wall_s", "median_latency_s", "mean_latency_s", "p90_latency_s", "std_latency_s", "hit_pct", "polls", "items"},
				{"policy", "p_ss", "p_fs", "feeds", "wall_s", "median_latency_s", "mean_latency_s", "p90_latency_s", "std_latency_s", "hit_pct", "polls", "items"},
				{"policy", "p_ss", "p_fs", "feeds", "wall_s", "median_latency_s", "mean_latency_s", "p90_latency_s", "std_latency_s", "hit_pct", "polls", "items"},
			},
			wantRows: []map[string]any{{
				"policy": "dpt-l", "p_ss": 0.95, "p_fs": 0.8, "feeds": 3.0, "wall_s": 0.0123456,
				"median_latency_s": 48.123456, "mean_latency_s": 61.5, "p90_latency_s": 130.04,
				"std_latency_s": 22.25, "hit_pct": 96.04, "polls": 1200.0, "items": 1150.0,
			}, nil, nil},
		},
		{
			name:   "nan becomes null",
			report: renderReports()["nan"],
			wantKeys: [][]string{
				{"policy", "x", "y", "list", "w", "z", "median_latency_s", "mean_latency_s", "p90_latency_s", "std_latency_s", "hit_pct", "polls", "items"},
			},
			wantRows: []map[string]any{{
				"policy": "dpt-l", "x": nil, "y": nil, "z": nil, "w": nil, "list": "[1 NaN]",
				"median_latency_s": nil, "mean_latency_s": nil, "p90_latency_s": nil,
				"std_latency_s": nil, "hit_pct": nil, "polls": 0.0, "items": 0.0,
			}},
		},
		{
			name:   "colliding keys renamed",
			report: renderReports()["hostile"],
			wantKeys: [][]string{
				{"policy", "param_policy", "file", "wait", "param_polls", "html", "bad", "extra_file", "extra_polls", "on", "extra_param_polls", "median_latency_s", "mean_latency_s", "p90_latency_s", "std_latency_s", "hit_pct", "polls", "items"},
			},
			wantRows: []map[string]any{{
				"policy": "tab\there\nnewline", "param_policy": "param-policy", "file": "a b/<c>&d.csv",
				"wait": 9e10, "param_polls": 7.0, "html": "<b>\"x\"</b>", "bad": "\ufffd\ufffd",
				"extra_file": "extra-file", "extra_polls": 2.0, "on": true, "extra_param_polls": 1.0,
				"median_latency_s": 0.0, "mean_latency_s": 0.0, "p90_latency_s": 0.0,
				"std_latency_s": 0.0, "hit_pct": 0.0, "polls": 9.0, "items": 1.0,
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteJSON(&buf, tt.report); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Scenario string            `json:"scenario"`
				Rows     []json.RawMessage `json:"rows"`
				Notes    []string          `json:"notes"`
			}
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("decode: %v\n%s", err, buf.String())
			}
			if doc.Scenario != tt.report.Scenario {
				t.Errorf("scenario = %q, want %q", doc.Scenario, tt.report.Scenario)
			}
			if !slices.Equal(doc.Notes, tt.report.Notes) && !(len(doc.Notes) == 0 && len(tt.report.Notes) == 0) {
				t.Errorf("notes = %q, want %q", doc.Notes, tt.report.Notes)
			}
			if len(doc.Rows) != len(tt.wantKeys) {
				t.Fatalf("%d rows, want %d", len(doc.Rows), len(tt.wantKeys))
			}
			for i, raw := range doc.Rows {
				if got := objectKeys(t, raw); !slices.Equal(got, tt.wantKeys[i]) {
					t.Errorf("row %d keys = %q\nwant %q", i, got, tt.wantKeys[i])
				}
				if tt.wantRows[i] == nil {
					continue
				}
				var got map[string]any
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tt.wantRows[i]) {
					t.Errorf("row %d has %d keys, want %d", i, len(got), len(tt.wantRows[i]))
				}
				for k, want := range tt.wantRows[i] {
					if g, ok := got[k]; !ok || g != want {
						t.Errorf("row %d: %s = %#v, want %#v", i, k, g, want)
					}
				}
			}
		})
	}
}

// objectKeys returns the keys of a JSON object in document order.
func objectKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestFormatNumbers(t *testing.T) {
	tests := []struct {
		fn   func(float64) string
		name string
		in   float64
		want string
	}{
		{formatLatency, "latency zero", 0, "0.000"},
		{formatLatency, "latency tiny", 0.0004, "4.00e-04"},
		{formatLatency, "latency below 10", 1.23456, "1.235"},
		{formatLatency, "latency below 100", 48.123456, "48.12"},
		{formatLatency, "latency large", 467.94, "467.9"},
		{formatLatency, "latency rounds up past 10", 9.9999, "10.00"},
		{formatLatency, "latency rounds up past 100", 99.999, "100.0"},
		{formatLatency, "latency just below 10", 9.9994, "9.999"},
		{formatLatency, "latency smallest fixed", 0.0005, "0.001"},
		{formatLatency, "latency huge", 1e7, "10000000.0"},
		{formatLatency, "latency negative", -12.345, "-12.35"},
		{formatLatency, "latency NaN", math.NaN(), "NaN"},
		{formatLatency, "latency +Inf", math.Inf(1), "+Inf"},
		{formatPct, "pct", 96.04, "96.0"},
		{formatPct, "pct whole", 100, "100.0"},
		{formatPct, "pct -Inf", math.Inf(-1), "-Inf"},
		{formatNumber, "param whole", 3, "3"},
		{formatNumber, "param million", 1e6, "1000000"},
		{formatNumber, "param short", 0.95, "0.95"},
		{formatNumber, "param long", 0.0123456, "0.012"},
		{formatNumber, "param long large", 1234.56789, "1234.6"},
		{formatNumber, "param huge", 1e300, "1e+300"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fn(tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSanitizeFileStem(t *testing.T) {
	tests := []struct {
		name  string
		index int
		want  string
	}{
		{"loss-sweep-latency-pfs0.6", 0, "loss-sweep-latency-pfs0.6"},
		{"../../etc/passwd", 0, "_.._etc_passwd"},
		{"..", 2, "figure-3"},
		{"", 0, "figure-1"},
		{".hidden", 0, "hidden"},
		{`a\b/c:d`, 0, "a_b_c_d"},
		{"ünïcode σ", 0, "_n_code__"},
		{"///", 4, "figure-5"},
		{strings.Repeat("x", 300), 0, strings.Repeat("x", maxFileStem)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sanitizeFileStem(tt.name, tt.index); got != tt.want {
				t.Errorf("sanitizeFileStem(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

func TestWriteSVG(t *testing.T) {
	line := Series{Name: "dpt-l", X: []float64{0.5, 0.6, 0.7}, Y: []float64{10, 20, 400}}
	tests := []struct {
		name      string
		figures   []Figure
		wantFiles []string // relative to the output directory
		wantText  map[string][]string
		wantErr   error
	}{
		{
			name: "two figures with log axis",
			figures: []Figure{
				{
					Name: "latency", Title: "Latency <vs> loss & jitter", XLabel: "p_fs", YLabel: "median latency (s)", LogY: true,
					Series: []Series{line, {Name: "fixed", X: []float64{0.5, 0.6, 0.7, 0.8}, Y: []float64{450, 0, -1, 460}}},
				},
				{Name: "hits", XLabel: "p_fs", YLabel: "hit %", Series: []Series{{Name: "dpt-l", X: []float64{1, 2}, Y: []float64{90, 95}}}},
			},
			wantFiles: []string{"latency.svg", "hits.svg"},
			wantText: map[string][]string{
				"latency.svg": {"Latency &lt;vs&gt; loss &amp; jitter", "median latency (s)", "dpt-l", "fixed"},
				"hits.svg":    {"hit %", "dpt-l"},
			},
		},
		{
			name: "hostile names and values",
			figures: []Figure{
				{Name: "../escape", Title: "ctl\x00\x1b chars \xff", Series: []Series{{Name: "nan\tseries", X: []float64{1, math.NaN(), 3, math.Inf(1)}, Y: []float64{1, 2, math.NaN(), 4}}}},
				{Name: "../escape", Series: []Series{line}},
				{Name: "", LogY: true},
				{Name: "all-nonpositive", LogY: true, Series: []Series{{Name: "zero", X: []float64{1, 2}, Y: []float64{0, -5}}}},
				{Name: "flat", Series: []Series{{Name: "one", X: []float64{1}, Y: []float64{7}}}},
			},
			wantFiles: []string{"_escape.svg", "_escape-2.svg", "figure-3.svg", "all-nonpositive.svg", "flat.svg"},
			wantText:  map[string][]string{"_escape.svg": {"ctl   chars \ufffd", "nan series"}},
		},
		{
			name: "mismatched series is an error, others are written",
			figures: []Figure{
				{Name: "bad", Series: []Series{{Name: "short", X: []float64{1, 2}, Y: []float64{1}}}},
				{Name: "good", Series: []Series{line}},
			},
			wantFiles: []string{"good.svg"},
			wantErr:   ErrBadFigure,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out", "svg")
			paths, err := WriteSVG(dir, &Report{Scenario: "s", Figures: tt.figures})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			var want []string
			for _, f := range tt.wantFiles {
				want = append(want, filepath.Join(dir, f))
			}
			if !slices.Equal(paths, want) {
				t.Fatalf("paths = %q, want %q", paths, want)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(want) {
				t.Errorf("directory holds %d entries, want %d (no temporary files left)", len(entries), len(want))
			}
			for _, p := range paths {
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
					t.Errorf("%s: mode %v, %v; want -rw-r--r--", p, fi.Mode(), err)
				}
				if root := xmlRoot(t, data); root != "svg" {
					t.Errorf("%s: root element %q, want svg", p, root)
				}
				for _, s := range tt.wantText[filepath.Base(p)] {
					if !bytes.Contains(data, []byte(s)) {
						t.Errorf("%s does not contain %q", p, s)
					}
				}
			}
		})
	}
}

// xmlRoot parses data as a whole XML document and returns the name of its
// root element.
func xmlRoot(t *testing.T, data []byte) string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("malformed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	return root
}

func TestLegendHeadroom(t *testing.T) {
	tests := []struct {
		name           string
		lo, hi         float64
		logY           bool
		entries        int
		wantLo, wantHi float64
	}{
		{"linear, two entries", 0, 100, false, 2, 0, 100 + 100*0.17/0.83},
		{"linear, room capped at half", 0, 100, false, 10, 0, 200},
		{"linear, single value", 5, 5, false, 10, 4, 8},
		{"linear, single large value", 50, 50, false, 10, 45, 65},
		{"log, room capped at half", 10, 1000, true, 10, 10, 1e5},
		{"log, single value", 4, 4, true, 10, 2, 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := legendHeadroom(tt.lo, tt.hi, tt.logY, tt.entries)
			if math.Abs(lo-tt.wantLo) > 1e-9*math.Abs(tt.wantLo) || math.Abs(hi-tt.wantHi) > 1e-9*math.Abs(tt.wantHi) {
				t.Errorf("legendHeadroom(%v, %v) = %v, %v; want %v, %v", tt.lo, tt.hi, lo, hi, tt.wantLo, tt.wantHi)
			}
		})
	}
}

func TestWriteSVGNoFigures(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never-created")
	paths, err := WriteSVG(dir, &Report{Scenario: "s"})
	if err != nil || paths != nil {
		t.Fatalf("WriteSVG = %q, %v; want nil, nil", paths, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory created for a report without figures: %v", err)
	}
}

func TestRenderErrors(t *testing.T) {
	errWrite := errors.New("disk full")
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"table nil", func() error { return WriteTable(io.Discard, nil) }, ErrNilReport},
		{"json nil", func() error { return WriteJSON(io.Discard, nil) }, ErrNilReport},
		{"svg nil", func() error { _, err := WriteSVG(t.TempDir(), nil); return err }, ErrNilReport},
		{"table write", func() error { return WriteTable(failWriter{errWrite}, renderReports()["basic"]) }, errWrite},
		{"json write", func() error { return WriteJSON(failWriter{errWrite}, renderReports()["basic"]) }, errWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestWriteSVGDirIsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	paths, err := WriteSVG(file, &Report{Figures: []Figure{{Name: "x"}}})
	var pathErr *fs.PathError
	if !errors.As(err, &pathErr) || paths != nil {
		t.Fatalf("WriteSVG = %q, %v; want nil and a path error", paths, err)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }
