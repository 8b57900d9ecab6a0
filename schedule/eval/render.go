package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// ErrNilReport is returned by the renderers when they are given no report.
var ErrNilReport = errors.New("eval: nil report")

// ErrBadFigure is wrapped by WriteSVG when a figure cannot be drawn (a
// series whose X and Y differ in length, a plotting failure).
var ErrBadFigure = errors.New("eval: bad figure")

// measureColumns are the measurement columns of the text table, after the
// policy and the report's own columns.
var measureColumns = []string{
	"median_latency_s", "mean_latency_s", "p90_latency_s", "hit_pct", "polls", "items",
}

// missingCell is printed in the table where a row has no value for a column.
const missingCell = "-"

// WriteTable writes r as an aligned text table: a "scenario: NAME" line, a
// header, one line per row (policy, r.Columns looked up in Row.Params then
// Row.Extra, then the latency, hit and count measurements), and r.Notes
// after a blank line. Missing values print as "-".
func WriteTable(w io.Writer, r *Report) error {
	if r == nil {
		return ErrNilReport
	}
	var buf bytes.Buffer
	if r.Scenario != "" {
		fmt.Fprintf(&buf, "scenario: %s\n", cell(r.Scenario))
	}
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	header := make([]string, 0, 1+len(r.Columns)+len(measureColumns))
	header = append(header, "policy")
	for _, c := range r.Columns {
		header = append(header, cell(c))
	}
	header = append(header, measureColumns...)
	writeTabLine(tw, header)
	for i := range r.Rows {
		row := &r.Rows[i]
		line := make([]string, 0, len(header))
		line = append(line, cell(row.Policy))
		for _, c := range r.Columns {
			line = append(line, lookupCell(row, c))
		}
		line = append(line,
			formatLatency(row.MedianLatencyS),
			formatLatency(row.MeanLatencyS),
			formatLatency(row.P90LatencyS),
			formatPct(row.HitPct),
			strconv.Itoa(row.Polls),
			strconv.Itoa(row.Items),
		)
		writeTabLine(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("eval: table: %w", err)
	}
	if len(r.Notes) > 0 {
		buf.WriteByte('\n')
		for _, n := range r.Notes {
			buf.WriteString(cell(n))
			buf.WriteByte('\n')
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("eval: table: %w", err)
	}
	return nil
}

// writeTabLine writes cells as one tab-separated tabwriter line. The cells
// must not contain tabs or newlines, which would split them (cell and the
// number formatters guarantee that). The writer buffers into memory, so
// its write errors surface at Flush.
func writeTabLine(tw *tabwriter.Writer, cells []string) {
	for i, c := range cells {
		if i > 0 {
			tw.Write([]byte{'\t'})
		}
		tw.Write([]byte(c))
	}
	tw.Write([]byte{'\n'})
}

// lookupCell formats the value of column key for row: Params first, then
// Extra, "-" when neither has it.
func lookupCell(row *Row, key string) string {
	if v, ok := row.Params[key]; ok {
		return formatValue(v)
	}
	if v, ok := row.Extra[key]; ok {
		return formatValue(v)
	}
	return missingCell
}

// cell makes s safe for one table cell on one line: printable text is kept
// as is, anything with control characters or invalid UTF-8 is quoted.
func cell(s string) string {
	if s == "" {
		return `""`
	}
	if !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// formatValue formats a parameter or extra value for the table.
func formatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return missingCell
	case string:
		return cell(x)
	case float64:
		return formatNumber(x)
	case float32:
		return formatNumber(float64(x))
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case fmt.Stringer:
		return cell(x.String())
	default:
		return cell(fmt.Sprint(x))
	}
}

// formatNumber formats a parameter value: whole numbers without decimals,
// short values (0.95, 1.5, 0.001) in their shortest exact form, others with
// the precision formatLatency uses.
func formatNumber(v float64) string {
	if s, ok := formatNonFinite(v); ok {
		return s
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	if s := strconv.FormatFloat(v, 'g', -1, 64); len(s) <= 7 {
		return s
	}
	return formatLatency(v)
}

// formatLatency formats a duration in seconds with 1 to 3 decimals: 3
// below 10 s, 2 below 100 s, 1 above (judged after rounding, so 9.9999
// prints as 10.00), so every value shows about four significant digits.
// Values that would round to zero print in exponent notation.
func formatLatency(v float64) string {
	if s, ok := formatNonFinite(v); ok {
		return s
	}
	if v == 0 {
		return "0.000"
	}
	if math.Abs(v) < 0.0005 {
		return strconv.FormatFloat(v, 'e', 2, 64)
	}
	decimals := 3
	for limit := 10.0; decimals > 1; limit *= 10 {
		scale := math.Pow10(decimals)
		if math.Abs(math.Round(v*scale)/scale) < limit {
			break
		}
		decimals--
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// formatPct formats a percentage with one decimal.
func formatPct(v float64) string {
	if s, ok := formatNonFinite(v); ok {
		return s
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// formatNonFinite names NaN and the infinities.
func formatNonFinite(v float64) (string, bool) {
	switch {
	case math.IsNaN(v):
		return "NaN", true
	case math.IsInf(v, 1):
		return "+Inf", true
	case math.IsInf(v, -1):
		return "-Inf", true
	}
	return "", false
}

// reservedKeys are the row keys WriteJSON writes itself; Params and Extra
// keys with these names are renamed so that no object has a key twice.
var reservedKeys = []string{
	"policy", "median_latency_s", "mean_latency_s", "p90_latency_s",
	"std_latency_s", "hit_pct", "polls", "items",
}

// WriteJSON writes r as one indented JSON object:
//
//	{"scenario": NAME, "rows": [ROW...], "notes": [NOTE...]}
//
// Each row is a flat object with keys in a fixed order: "policy"; the
// Params keys, those named in r.Columns first in that order, the others
// sorted; the Extra keys in the same way; then median_latency_s,
// mean_latency_s, p90_latency_s, std_latency_s, hit_pct, polls and items.
// A Params key that collides with a measurement key is written as
// "param_KEY", an Extra key that collides with any earlier key as
// "extra_KEY". NaN and infinite numbers are written as null; values JSON
// cannot encode are written as their fmt.Sprint string. "rows" and "notes"
// are always present, empty lists when there is nothing.
func WriteJSON(w io.Writer, r *Report) error {
	if r == nil {
		return ErrNilReport
	}
	var b bytes.Buffer
	b.WriteString(`{"scenario":`)
	b.Write(jsonString(r.Scenario))
	b.WriteString(`,"rows":[`)
	for i := range r.Rows {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONRow(&b, &r.Rows[i], r.Columns)
	}
	b.WriteString(`],"notes":[`)
	for i, n := range r.Notes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(n))
	}
	b.WriteString(`]}`)

	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		// Every fragment above is produced by the JSON encoder, so this
		// means a bug here, not bad input.
		return fmt.Errorf("eval: json: %w", err)
	}
	out.WriteByte('\n')
	if _, err := w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("eval: json: %w", err)
	}
	return nil
}

// writeJSONRow writes one flat row object (see WriteJSON for the order).
func writeJSONRow(b *bytes.Buffer, row *Row, columns []string) {
	seen := make(map[string]bool, len(reservedKeys)+len(row.Params)+len(row.Extra))
	for _, k := range reservedKeys {
		seen[k] = true
	}
	b.WriteString(`{"policy":`)
	b.Write(jsonString(row.Policy))
	writeJSONMap(b, row.Params, columns, "param_", seen)
	writeJSONMap(b, row.Extra, columns, "extra_", seen)
	for _, f := range []struct {
		key string
		v   float64
	}{
		{"median_latency_s", row.MedianLatencyS},
		{"mean_latency_s", row.MeanLatencyS},
		{"p90_latency_s", row.P90LatencyS},
		{"std_latency_s", row.StdLatencyS},
		{"hit_pct", row.HitPct},
	} {
		b.WriteByte(',')
		b.Write(jsonString(f.key))
		b.WriteByte(':')
		b.Write(jsonFloat(f.v))
	}
	fmt.Fprintf(b, `,"polls":%d,"items":%d}`, row.Polls, row.Items)
}

// writeJSONMap writes the members of m, the keys listed in columns first
// (in that order), then the others sorted. A key already in seen is
// renamed with prefix (and a numeric suffix if that is taken too).
func writeJSONMap(b *bytes.Buffer, m map[string]any, columns []string, prefix string, seen map[string]bool) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	listed := make(map[string]bool, len(columns))
	for _, c := range columns {
		if _, ok := m[c]; ok && !listed[c] {
			listed[c] = true
			keys = append(keys, c)
		}
	}
	rest := make([]string, 0, len(m)-len(keys))
	for k := range m {
		if !listed[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	keys = append(keys, rest...)
	for _, k := range keys {
		name := k
		if seen[name] {
			name = prefix + k
			for i := 2; seen[name]; i++ {
				name = prefix + k + "_" + strconv.Itoa(i)
			}
		}
		seen[name] = true
		b.WriteByte(',')
		b.Write(jsonString(name))
		b.WriteByte(':')
		b.Write(jsonValue(m[k]))
	}
}

// jsonString encodes s as a JSON string (invalid UTF-8 becomes U+FFFD).
func jsonString(s string) []byte {
	out, _ := marshalNoEscape(s) // a string always encodes
	return out
}

// jsonFloat encodes v, writing null for NaN and the infinities.
func jsonFloat(v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null")
	}
	out, _ := marshalNoEscape(v) // a finite float always encodes
	return out
}

// jsonValue encodes an arbitrary parameter value: non-finite floats as
// null, anything the JSON encoder rejects as its fmt.Sprint string.
func jsonValue(v any) []byte {
	switch x := v.(type) {
	case float64:
		return jsonFloat(x)
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return []byte("null")
		}
	}
	out, err := marshalNoEscape(v)
	if err != nil {
		return jsonString(fmt.Sprint(v))
	}
	return out
}

// marshalNoEscape is json.Marshal without HTML escaping and without the
// trailing newline of json.Encoder.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// Figure size in the SVG files.
const (
	svgWidth  = 16 * vg.Centimeter
	svgHeight = 10 * vg.Centimeter
)

// maxFileStem bounds the length of a figure's file name.
const maxFileStem = 100

// WriteSVG draws every figure of r as dir/NAME.svg (creating dir) and
// returns the paths written, in figure order. NAME is Figure.Name reduced
// to letters, digits, '.', '-' and '_' (no path separators, no leading
// dot, at most 100 bytes; "figure-N" when nothing is left; "-2", "-3", ...
// appended when two figures would share a file). Each series is drawn as
// a line with points and named in the legend; points with a NaN or
// infinite coordinate are left out, as are points with y <= 0 on a log-Y
// figure. A figure that cannot be drawn does not stop the others: the
// error (wrapping ErrBadFigure) is returned with the paths that were
// written.
func WriteSVG(dir string, r *Report) ([]string, error) {
	if r == nil {
		return nil, ErrNilReport
	}
	if len(r.Figures) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("eval: svg: %w", err)
	}
	var (
		paths []string
		errs  []error
		used  = make(map[string]bool, len(r.Figures))
	)
	for i := range r.Figures {
		f := &r.Figures[i]
		stem := sanitizeFileStem(f.Name, i)
		base := stem
		for n := 2; used[strings.ToLower(stem)]; n++ {
			stem = base + "-" + strconv.Itoa(n)
		}
		used[strings.ToLower(stem)] = true
		path := filepath.Join(dir, stem+".svg")
		if err := writeFigure(path, f); err != nil {
			errs = append(errs, fmt.Errorf("eval: svg %q: %w", f.Name, err))
			continue
		}
		paths = append(paths, path)
	}
	return paths, errors.Join(errs...)
}

// sanitizeFileStem turns a figure name into a safe file name without
// extension (see WriteSVG).
func sanitizeFileStem(name string, index int) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= maxFileStem {
			break
		}
	}
	s := strings.TrimLeft(b.String(), ".")
	if strings.Trim(s, "_") == "" {
		return "figure-" + strconv.Itoa(index+1)
	}
	return s
}

// writeFigure draws f and writes it to path through a temporary file, so
// a failed write never leaves a truncated SVG behind.
func writeFigure(path string, f *Figure) error {
	var svg bytes.Buffer
	if err := drawFigure(&svg, f); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".figure-*.svg.tmp")
	if err != nil {
		return err
	}
	// CreateTemp makes the file private; a figure is ordinary output.
	_, werr := tmp.Write(svg.Bytes())
	werr = errors.Join(werr, tmp.Chmod(0o644))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// drawFigure renders f as SVG into w. The plotting library panics on some
// degenerate inputs (log scales without positive values); such a panic is
// turned into an error wrapping ErrBadFigure.
func drawFigure(w io.Writer, f *Figure) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: plotting: %v", ErrBadFigure, p)
		}
	}()
	p := plot.New()
	p.Title.Text = plotText(f.Title)
	p.X.Label.Text = plotText(f.XLabel)
	p.Y.Label.Text = plotText(f.YLabel)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())

	points, entries := 0, 0
	for i, s := range f.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("%w: series %q has %d x values and %d y values", ErrBadFigure, s.Name, len(s.X), len(s.Y))
		}
		xys := make(plotter.XYs, 0, len(s.X))
		for j := range s.X {
			x, y := s.X[j], s.Y[j]
			if !finite(x) || !finite(y) || (f.LogY && y <= 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
		if len(xys) == 0 {
			continue
		}
		line, scatter, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("%w: series %q: %w", ErrBadFigure, s.Name, err)
		}
		c := plotutil.Color(i)
		line.Color = c
		scatter.Color = c
		scatter.Shape = plotutil.Shape(i)
		p.Add(line, scatter)
		p.Legend.Add(plotText(s.Name), line, scatter)
		points += len(xys)
		entries++
	}
	// A log axis needs a positive range; without any point there is none,
	// so an empty figure keeps the linear axis.
	if points > 0 {
		if f.LogY {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		}
		p.Y.Min, p.Y.Max = legendHeadroom(p.Y.Min, p.Y.Max, f.LogY, entries)
	}

	c := vgsvg.New(svgWidth, svgHeight)
	p.Draw(draw.New(c))
	if _, err := c.WriteTo(w); err != nil {
		return err
	}
	return nil
}

// legendHeadroom widens the data range [lo, hi] of the Y axis upwards so
// that the legend, drawn in the top right corner, does not cover data: the
// legend takes about one line per entry, and the range gets that much
// room above the highest point. A single-valued range is first opened
// around its value. On a log axis the arithmetic is done on logarithms.
func legendHeadroom(lo, hi float64, logY bool, entries int) (float64, float64) {
	if logY {
		if hi <= lo {
			lo, hi = lo/2, hi*2
		}
		l, h := legendHeadroom(math.Log(lo), math.Log(hi), false, entries)
		return math.Exp(l), math.Exp(h)
	}
	if hi <= lo {
		d := math.Max(math.Abs(lo)*0.1, 1)
		lo, hi = lo-d, hi+d
	}
	frac := math.Min(0.5, 0.05+0.06*float64(entries))
	return lo, hi + (hi-lo)*frac/(1-frac)
}

// plotText makes s safe for the SVG text the plot writes: XML forbids most
// control characters even when escaped, so they become spaces, and invalid
// UTF-8 becomes U+FFFD. Overlong text is cut.
func plotText(s string) string {
	const maxText = 200
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\uFFFE' || r == '\uFFFF' {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > maxText {
		s = string([]rune(s)[:maxText]) + "…"
	}
	return s
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
