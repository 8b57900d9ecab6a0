package csvsource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/slogfeed/slogfeed/plugins/sourcekit"
)

// Limits on a configuration.
const (
	// MaxColumn is the highest column position accepted.
	MaxColumn = 1000
	// maxColumnName bounds a column name, in bytes.
	maxColumnName = 128
)

// Config is the adapter's configuration.
type Config struct {
	Delimiter    string       `json:"delimiter,omitempty"`
	Header       *bool        `json:"header"`
	Columns      Columns      `json:"columns"`
	DecimalComma DecimalComma `json:"decimal_comma"`
	TimeFormat   string       `json:"time_format"`
	Unit         string       `json:"unit,omitempty"`
	Sensor       string       `json:"sensor,omitempty"`
}

// Columns map a reading's fields to columns.
type Columns struct {
	Time   *Column `json:"time"`
	Value  *Column `json:"value"`
	Unit   *Column `json:"unit,omitempty"`
	Sensor *Column `json:"sensor,omitempty"`
	ID     *Column `json:"id,omitempty"`
}

// Column is a column by header name (JSON text) or position from 0 (a
// JSON number).
type Column struct {
	Name  string
	Index int
}

// UnmarshalJSON reads a name or a position.
func (c *Column) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &c.Name); err != nil {
			return err
		}
		c.Name = strings.TrimSpace(c.Name)
		if c.Name == "" || len(c.Name) > maxColumnName {
			return fmt.Errorf("a column name must have 1 to %d bytes", maxColumnName)
		}
		return nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 0 || n > MaxColumn {
		return fmt.Errorf("a column is a header name or a position from 0 to %d, not %s", MaxColumn, sourcekit.Quote(string(b)))
	}
	c.Index = n
	return nil
}

// MarshalJSON writes the name or the position.
func (c Column) MarshalJSON() ([]byte, error) {
	if c.Name != "" {
		return json.Marshal(c.Name)
	}
	return json.Marshal(c.Index)
}

// DecimalComma is true, false or auto.
type DecimalComma string

// Decimal mark settings.
const (
	DecimalAuto  DecimalComma = "auto"
	DecimalTrue  DecimalComma = "true"
	DecimalFalse DecimalComma = "false"
)

// UnmarshalJSON reads true, false, "auto" or null (auto).
func (d *DecimalComma) UnmarshalJSON(b []byte) error {
	switch s := string(bytes.TrimSpace(b)); s {
	case "true", "false":
		*d = DecimalComma(s)
	case `"auto"`, "null", `""`:
		*d = DecimalAuto
	default:
		return fmt.Errorf("decimal_comma is true, false or \"auto\", not %s", sourcekit.Quote(s))
	}
	return nil
}

// MarshalJSON writes true, false or "auto".
func (d DecimalComma) MarshalJSON() ([]byte, error) {
	switch d {
	case DecimalTrue, DecimalFalse:
		return []byte(d), nil
	}
	return []byte(`"auto"`), nil
}

// delimiters are the delimiters accepted, in order of preference when
// detecting one.
var delimiters = []rune{'\t', ';', ',', '|'}

// parseConfig checks a configuration and fills in its defaults.
func parseConfig(raw json.RawMessage) (Config, sourcekit.TimeFormat, error) {
	var c Config
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, "", fmt.Errorf("%w: csv needs a configuration with at least columns.time and columns.value", sourcekit.ErrConfig)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, "", fmt.Errorf("%w: %v", sourcekit.ErrConfig, err)
	}
	if c.Header == nil {
		yes := true
		c.Header = &yes
	}
	if c.DecimalComma == "" {
		c.DecimalComma = DecimalAuto
	}
	if c.Delimiter != "" {
		if r := []rune(c.Delimiter); len(r) != 1 || !slices.Contains(delimiters, r[0]) {
			return c, "", fmt.Errorf("%w: delimiter %s is not one of \",\", \";\", \"\\t\", \"|\"", sourcekit.ErrConfig, sourcekit.Quote(c.Delimiter))
		}
	}
	format, err := sourcekit.ParseTimeFormat(c.TimeFormat)
	if err != nil {
		return c, "", err
	}
	c.TimeFormat = string(format)
	if c.Columns.Time == nil || c.Columns.Value == nil {
		return c, "", fmt.Errorf("%w: columns.time and columns.value are required", sourcekit.ErrConfig)
	}
	for name, col := range c.Columns.all() {
		if col != nil && col.Name != "" && !*c.Header {
			return c, "", fmt.Errorf("%w: columns.%s names a column but header is false: give its position from 0", sourcekit.ErrConfig, name)
		}
	}
	if len(c.Unit) > 64 || len(c.Sensor) > sourcekit.MaxIDLen {
		return c, "", fmt.Errorf("%w: unit or sensor too long", sourcekit.ErrConfig)
	}
	return c, format, nil
}

// all lists the columns by field name, in a fixed order.
func (cs Columns) all() func(func(string, *Column) bool) {
	return func(yield func(string, *Column) bool) {
		for _, f := range []struct {
			n string
			c *Column
		}{{"time", cs.Time}, {"value", cs.Value}, {"unit", cs.Unit}, {"sensor", cs.Sensor}, {"id", cs.ID}} {
			if !yield(f.n, f.c) {
				return
			}
		}
	}
}
