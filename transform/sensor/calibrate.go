package sensor

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/slogfeed/slogfeed/transform"
)

// MaxCalibrations bounds the per-sensor overrides of calibrate.
const MaxCalibrations = 1000

// Calibration is a linear correction: value' = value·Scale + Offset,
// optionally with a new unit.
type Calibration struct {
	// Scale multiplies the value (default 1; 0 is refused).
	Scale *float64 `json:"scale,omitempty" jsonschema:"description=factor (default 1)"`
	// Offset is added after scaling (default 0).
	Offset *float64 `json:"offset,omitempty" jsonschema:"description=added after scaling (default 0)"`
	// Unit is the unit of the corrected value (default: unchanged).
	Unit string `json:"unit,omitempty" jsonschema:"description=unit of the corrected value (default unchanged)"`
}

// CalibrateConfig configures calibrate: a correction for every reading,
// and overrides for some sensors. An override's missing fields take the
// values of the correction for every reading.
type CalibrateConfig struct {
	// Scale multiplies the value (default 1; 0 is refused).
	Scale *float64 `json:"scale,omitempty" jsonschema:"description=factor (default 1)"`
	// Offset is added after scaling (default 0).
	Offset *float64 `json:"offset,omitempty" jsonschema:"description=added after scaling (default 0)"`
	// Unit is the unit of the corrected value (default: unchanged).
	Unit string `json:"unit,omitempty" jsonschema:"description=unit of the corrected value (default unchanged)"`
	// Sensors maps sensor ids (Reading.Sensor) to their own correction.
	Sensors map[string]Calibration `json:"sensors,omitempty" jsonschema:"description=per-sensor corrections by sensor id"`
}

type linear struct {
	scale, offset float64
	unit          string
}

type calibrateOp struct {
	all     linear
	sensors map[string]linear
}

func checkCalibration(prefix string, c Calibration, base linear) (linear, error) {
	l := base
	if c.Scale != nil {
		if *c.Scale == 0 || !finite(*c.Scale) {
			return l, transform.Fieldf(prefix+"scale", "must be a finite number other than 0")
		}
		l.scale = *c.Scale
	}
	if c.Offset != nil {
		if !finite(*c.Offset) {
			return l, transform.Fieldf(prefix+"offset", "must be a finite number")
		}
		l.offset = *c.Offset
	}
	if err := checkText(prefix+"unit", c.Unit, maxUnitRunes); err != nil {
		return l, err
	}
	if u := strings.TrimSpace(c.Unit); u != "" {
		l.unit = u
	}
	return l, nil
}

func newCalibrate(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := transform.Decode[CalibrateConfig](raw)
	if err != nil {
		return nil, err
	}
	op := &calibrateOp{}
	if op.all, err = checkCalibration("", Calibration{Scale: cfg.Scale, Offset: cfg.Offset, Unit: cfg.Unit}, linear{scale: 1}); err != nil {
		return nil, err
	}
	if len(cfg.Sensors) > MaxCalibrations {
		return nil, transform.Fieldf("sensors", "%w: %d sensors, at most %d", transform.ErrLimit, len(cfg.Sensors), MaxCalibrations)
	}
	op.sensors = make(map[string]linear, len(cfg.Sensors))
	names := make([]string, 0, len(cfg.Sensors))
	for name := range cfg.Sensors {
		names = append(names, name)
	}
	sort.Strings(names) // the first bad one is always the same
	for _, name := range names {
		if name == "" || len(name) > maxKeyBytes {
			return nil, transform.Fieldf("sensors", "sensor id %q: want 1 to %d bytes", trunc(name, 40), maxKeyBytes)
		}
		l, err := checkCalibration("sensors."+name+".", cfg.Sensors[name], op.all)
		if err != nil {
			return nil, err
		}
		op.sensors[name] = l
	}
	return op, nil
}

func (op *calibrateOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	items := flatten(in)
	return appendReadings(ctxOrZero(c), make([]transform.Item, 0, len(items)), items, false, op.correct)
}

// correct appends the reading it, its value v corrected, to out; it
// leaves out a reading whose corrected value is not finite.
func (op *calibrateOp) correct(out []transform.Item, it *transform.Item, v float64) []transform.Item {
	l, ok := op.sensors[it.Reading.Sensor]
	if !ok {
		l = op.all
	}
	nv := v*l.scale + l.offset
	if !finite(nv) {
		return out
	}
	u := it.Reading.Unit
	if l.unit != "" {
		u = l.unit
	}
	return append(out, revalued(it, nv, u))
}

func init() {
	transform.Register(transform.Spec{
		Name:   "calibrate",
		Family: transform.FamilySensor,
		Doc: "Corrects readings linearly (value·scale + offset, per-sensor overrides, optional new unit) and republishes them " +
			"under their own ids, titled like \"lab-1: 21.3 °C\". A reading whose corrected value is not a finite number (an overflow) is left out.",
		Example:   `{"scale":1.02,"offset":-0.3,"unit":"C","sensors":{"lab-1":{"scale":1,"offset":0.4}}}`,
		MinInputs: 1, MaxInputs: 1,
		Config: CalibrateConfig{},
		New:    newCalibrate,
	})
}
