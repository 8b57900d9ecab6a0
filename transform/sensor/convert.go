package sensor

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/slogfeed/slogfeed/transform"
)

// unit is one entry of the conversion table: base = value·scale + offset
// in its dimension's base unit.
type unit struct {
	name   string // canonical spelling
	dim    string
	scale  float64
	offset float64
}

// units are the units convert knows, by canonical name.
var units = []unit{
	// Temperature, base kelvin.
	{"C", "temperature", 1, 273.15},
	{"F", "temperature", 5.0 / 9.0, 273.15 - 32*5.0/9.0},
	{"K", "temperature", 1, 0},
	// Pressure, base pascal.
	{"Pa", "pressure", 1, 0},
	{"hPa", "pressure", 100, 0},
	{"kPa", "pressure", 1000, 0},
	{"bar", "pressure", 1e5, 0},
	{"inHg", "pressure", 3386.389, 0},
	{"mmHg", "pressure", 133.322387415, 0},
	// Speed, base metres per second.
	{"m/s", "speed", 1, 0},
	{"km/h", "speed", 1 / 3.6, 0},
	{"mph", "speed", 0.44704, 0},
	{"kn", "speed", 1852.0 / 3600.0, 0},
	// Length, base metre.
	{"m", "length", 1, 0},
	{"cm", "length", 0.01, 0},
	{"mm", "length", 0.001, 0},
	{"km", "length", 1000, 0},
	{"in", "length", 0.0254, 0},
	{"ft", "length", 0.3048, 0},
	// Ratio, base one.
	{"1", "ratio", 1, 0},
	{"%", "ratio", 0.01, 0},
	{"ppm", "ratio", 1e-6, 0},
}

// unitAliases are other spellings of the units, lower case.
var unitAliases = map[string]string{
	"°c": "C", "degc": "C", "celsius": "C", "℃": "C",
	"°f": "F", "degf": "F", "fahrenheit": "F", "℉": "F",
	"kelvin": "K",
	"mbar":   "hPa", "millibar": "hPa",
	"kph": "km/h", "kmh": "km/h", "km/hr": "km/h",
	"mps": "m/s", "m s-1": "m/s",
	"kt": "kn", "kts": "kn", "knot": "kn", "knots": "kn",
	"\"": "in", "inch": "in", "inches": "in", "feet": "ft", "foot": "ft",
	"ratio": "1", "percent": "%",
}

var unitIndex = func() map[string]unit {
	m := make(map[string]unit, len(units)+len(unitAliases))
	for _, u := range units {
		m[strings.ToLower(u.name)] = u
	}
	for a, name := range unitAliases {
		m[a] = m[strings.ToLower(name)]
	}
	return m
}()

// lookupUnit finds a unit by any of its spellings (case is ignored).
func lookupUnit(s string) (unit, bool) {
	u, ok := unitIndex[strings.ToLower(strings.TrimSpace(s))]
	return u, ok
}

func unitNames() string {
	names := make([]string, len(units))
	for i, u := range units {
		names[i] = u.name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// convertValue converts v from unit a to unit b (of the same dimension).
func convertValue(v float64, a, b unit) float64 {
	if a.name == b.name {
		return v
	}
	return (v*a.scale + a.offset - b.offset) / b.scale
}

// ConvertConfig configures convert.
type ConvertConfig struct {
	// To is the unit readings are converted to (e.g. "F").
	To string `json:"to" jsonschema:"required,description=unit to convert to (e.g. F)"`
	// From overrides the readings' own unit.
	From string `json:"from,omitempty" jsonschema:"description=unit of the readings (default: their own)"`
	// Strict drops readings whose unit is unknown or of another kind
	// instead of passing them unchanged.
	Strict bool `json:"strict,omitempty" jsonschema:"description=drop readings that cannot be converted"`
}

type convertOp struct {
	to     unit
	from   *unit
	strict bool
}

func newConvert(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := transform.Decode[ConvertConfig](raw)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.To) == "" {
		return nil, transform.Fieldf("to", "missing: the unit to convert to (one of %s)", unitNames())
	}
	to, ok := lookupUnit(cfg.To)
	if !ok {
		return nil, transform.Fieldf("to", "unknown unit %q (want one of %s)", trunc(cfg.To, 20), unitNames())
	}
	op := &convertOp{to: to, strict: cfg.Strict}
	if strings.TrimSpace(cfg.From) != "" {
		from, ok := lookupUnit(cfg.From)
		if !ok {
			return nil, transform.Fieldf("from", "unknown unit %q (want one of %s)", trunc(cfg.From, 20), unitNames())
		}
		if from.dim != to.dim {
			return nil, transform.Fieldf("from", "%s (%s) cannot be converted to %s (%s)", from.name, from.dim, to.name, to.dim)
		}
		op.from = &from
	}
	return op, nil
}

func (op *convertOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	items := flatten(in)
	return appendReadings(ctxOrZero(c), make([]transform.Item, 0, len(items)), items, false, op.convert)
}

// convert appends the reading it, its value v converted, to out. A
// reading that cannot be converted is appended unchanged, or left out
// when strict, and one whose converted value is not finite is left out.
func (op *convertOp) convert(out []transform.Item, it *transform.Item, v float64) []transform.Item {
	from, ok := op.source(it)
	if !ok || from.dim != op.to.dim {
		if op.strict {
			return out
		}
		return append(out, *it)
	}
	if from.name == op.to.name && it.Reading.Unit == op.to.name {
		return append(out, *it)
	}
	nv := convertValue(v, from, op.to)
	if !finite(nv) {
		return out
	}
	return append(out, revalued(it, nv, op.to.name))
}

// source is the unit of the reading of it: the configured one, else its
// own; ok is false when its own is unknown.
func (op *convertOp) source(it *transform.Item) (unit, bool) {
	if op.from != nil {
		return *op.from, true
	}
	return lookupUnit(it.Reading.Unit)
}

func init() {
	transform.Register(transform.Spec{
		Name:   "convert",
		Family: transform.FamilySensor,
		Doc: "Converts readings to another unit of the same kind (temperature, pressure, speed, length, ratio). " +
			"Readings whose unit is unknown or of another kind pass unchanged, or are dropped with strict.",
		Example:   `{"to":"F"}`,
		MinInputs: 1, MaxInputs: 1,
		Config: ConvertConfig{},
		New:    newConvert,
	})
}
