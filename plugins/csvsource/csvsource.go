package csvsource

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/plugins"
	"github.com/slogfeed/slogfeed/plugins/sourcekit"
	"github.com/slogfeed/slogfeed/reader/parser"
)

// Name is the adapter's source type.
const Name = "csv"

// MaxFieldLen bounds a cell the adapter reads, in bytes.
const MaxFieldLen = 4096

// sniffLen is how much of the first line delimiter detection reads.
const sniffLen = 64 << 10

func init() { plugins.RegisterSource(Source{}) }

// Source is the csv adapter (aggregator.Source).
type Source struct{}

// Name implements aggregator.Source.
func (Source) Name() string { return Name }

// Prepare checks and normalises a configuration.
func (Source) Prepare(raw json.RawMessage, _ time.Time) (json.RawMessage, error) {
	c, _, err := parseConfig(raw)
	if err != nil {
		return nil, err
	}
	return json.Marshal(c)
}

// Parse implements aggregator.Source: one reading per row.
func (Source) Parse(body []byte, contentType string, raw json.RawMessage, opt parser.Options) (*parser.Parsed, error) {
	c, format, err := parseConfig(raw)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fmt.Errorf("%w: the response is empty", parser.ErrMalformed)
	}
	if !utf8.Valid(body[:min(len(body), sniffLen)]) {
		return nil, fmt.Errorf("%w: the response is not UTF-8 text", parser.ErrMalformed)
	}
	if t := bytes.TrimSpace(body); t[0] == '<' || t[0] == '{' {
		mt, _, _ := mime.ParseMediaType(contentType)
		return nil, fmt.Errorf("%w: the response (%.60s) is markup or JSON, not CSV", parser.ErrMalformed, mt)
	}
	r := csv.NewReader(bytes.NewReader(body))
	r.Comma = delimiter(c.Delimiter, contentType, body)
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = r.Comma != '\t'
	r.ReuseRecord = true
	cols, err := resolve(c, r)
	if err != nil {
		return nil, err
	}
	b := sourcekit.NewBuilder("row", opt)
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		n, ok := b.Next()
		if !ok {
			break
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			b.Skip(b.Errorf(n, "", "line %d, column %d: %v", pe.Line, pe.Column, pe.Err))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", parser.ErrMalformed, err)
		}
		rd, rerr := row(b, n, rec, cols, c, format)
		if rerr != nil {
			b.Skip(rerr)
			continue
		}
		b.Add(n, rd)
	}
	return b.Parsed("")
}

// columns are the resolved column positions (-1: none).
type columns struct{ time, value, unit, sensor, id int }

// resolve reads the header (when there is one) and finds the configured
// columns: a name missing from the header is a feed error.
func resolve(c Config, r *csv.Reader) (columns, error) {
	var header []string
	if *c.Header {
		h, err := r.Read()
		if err != nil {
			return columns{}, fmt.Errorf("%w: header: %v", parser.ErrMalformed, err)
		}
		header = make([]string, len(h))
		for i, name := range h {
			header[i] = strings.TrimSpace(name)
		}
	}
	find := func(field string, col *Column) (int, error) {
		switch {
		case col == nil:
			return -1, nil
		case col.Name == "":
			return col.Index, nil
		}
		for i, h := range header {
			if h == col.Name {
				return i, nil
			}
		}
		for i, h := range header {
			if strings.EqualFold(h, col.Name) {
				return i, nil
			}
		}
		names := make([]string, 0, min(len(header), 20))
		for _, h := range header[:min(len(header), 20)] {
			names = append(names, sourcekit.Quote(h))
		}
		return 0, fmt.Errorf("%w: columns.%s: no column %s in the header (it has %s)", parser.ErrMalformed, field, sourcekit.Quote(col.Name), strings.Join(names, ", "))
	}
	var cols columns
	for _, f := range []struct {
		name string
		col  *Column
		dst  *int
	}{
		{"time", c.Columns.Time, &cols.time}, {"value", c.Columns.Value, &cols.value},
		{"unit", c.Columns.Unit, &cols.unit}, {"sensor", c.Columns.Sensor, &cols.sensor}, {"id", c.Columns.ID, &cols.id},
	} {
		i, err := find(f.name, f.col)
		if err != nil {
			return cols, err
		}
		*f.dst = i
	}
	return cols, nil
}

// row reads one data row.
func row(b *sourcekit.Builder, n int, rec []string, cols columns, c Config, format sourcekit.TimeFormat) (sourcekit.Record, *sourcekit.RecordError) {
	var out sourcekit.Record
	cell := func(field string, i int) (string, *sourcekit.RecordError) {
		if i < 0 {
			return "", nil
		}
		if i >= len(rec) {
			return "", b.Errorf(n, field, "no column %d (the row has %d)", i, len(rec))
		}
		s := rec[i]
		if len(s) > MaxFieldLen {
			return "", b.Errorf(n, field, "%d bytes, more than %d", len(s), MaxFieldLen)
		}
		return strings.TrimSpace(s), nil
	}
	ts, rerr := cell("time", cols.time)
	if rerr != nil {
		return out, rerr
	}
	var err error
	if out.Time, err = format.Text(ts); err != nil {
		return out, b.Errorf(n, "time", "%v", err)
	}
	vs, rerr := cell("value", cols.value)
	if rerr != nil {
		return out, rerr
	}
	var ok bool
	if out.Value, ok = number(vs, c.DecimalComma); !ok {
		if vs == "" {
			return out, b.Errorf(n, "value", "empty")
		}
		return out, b.Errorf(n, "value", "%s is not a number", sourcekit.Quote(vs))
	}
	if out.Unit, rerr = cell("unit", cols.unit); rerr != nil {
		return out, rerr
	}
	if out.Sensor, rerr = cell("sensor", cols.sensor); rerr != nil {
		return out, rerr
	}
	if out.ID, rerr = cell("id", cols.id); rerr != nil {
		return out, rerr
	}
	if out.Unit == "" {
		out.Unit = c.Unit
	}
	if out.Sensor == "" {
		out.Sensor = c.Sensor
	}
	return out, nil
}

// number reads a cell's value with the configured decimal mark.
func number(s string, mode DecimalComma) (float64, bool) {
	switch mode {
	case DecimalTrue:
		if strings.Count(s, ",") > 1 {
			return 0, false
		}
		s = strings.ReplaceAll(s, ".", "")
		s = strings.Replace(s, ",", ".", 1)
	case DecimalFalse:
		s = strings.ReplaceAll(s, ",", "")
	}
	return feedext.ParseLocalNumber(s)
}

// delimiter returns the configured delimiter, else a tab for
// text/tab-separated-values, else the most frequent candidate outside
// quotes on the first line (comma when there is none).
func delimiter(configured, contentType string, body []byte) rune {
	if configured != "" {
		r, _ := utf8.DecodeRuneInString(configured)
		return r
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "text/tab-separated-values" {
		return '\t'
	}
	counts := map[rune]int{}
	quoted := false
	for _, c := range body[:min(len(body), sniffLen)] {
		if c == '"' {
			quoted = !quoted
		}
		if c == '\n' && !quoted {
			break
		}
		if !quoted {
			counts[rune(c)]++
		}
	}
	best := ','
	for _, d := range delimiters {
		if counts[d] > counts[best] {
			best = d
		}
	}
	return best
}
