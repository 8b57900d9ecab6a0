package sensor

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/slogfeed/slogfeed/transform"
)

// ThresholdConfig configures threshold.
type ThresholdConfig struct {
	// Above is the value at or above which a group goes high.
	Above *float64 `json:"above" jsonschema:"required,description=value at or above which a group goes high"`
	// Below is the value at or below which a high group goes back low
	// (at most Above). Unset, a high group goes back low under Above.
	Below *float64 `json:"below,omitempty" jsonschema:"description=value at or below which a high group goes back low (default: under above)"`
	// By names the item field that groups readings (default "sensor").
	By *string `json:"by,omitempty" jsonschema:"description=item field that groups readings (default sensor)"`
	// Initial is the state a new group starts in: "low" or "high".
	// Unset, a group's first reading sets its state without an alert.
	Initial string `json:"initial,omitempty" jsonschema:"enum=low,enum=high,description=state of a new group (default: set by its first reading without an alert)"`
	// Lateness is how long a reading may arrive out of time order and
	// still be processed in order (default 0); see the package
	// documentation.
	Lateness *transform.Duration `json:"lateness,omitempty" jsonschema:"description=how long readings are waited for to process them in time order (default 0s)"`
}

// Threshold states.
const (
	stateLow  = "low"
	stateHigh = "high"
)

type thresholdOp struct {
	above, below float64
	// strict (below not given) goes back low under above rather than at
	// or below it, so a value exactly at the threshold does not flip.
	strict  bool
	by      grouper
	initial string
	groups  *groups[string]
	seq     *sequencer
}

func newThreshold(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[ThresholdConfig](raw, "lateness")
	if err != nil {
		return nil, err
	}
	op := &thresholdOp{}
	op.reset()
	if cfg.Above == nil {
		return nil, transform.Fieldf("above", "missing: the value at or above which an alert is raised")
	}
	if !finite(*cfg.Above) {
		return nil, transform.Fieldf("above", "must be a finite number")
	}
	op.above, op.below, op.strict = *cfg.Above, *cfg.Above, cfg.Below == nil
	if cfg.Below != nil {
		if !finite(*cfg.Below) {
			return nil, transform.Fieldf("below", "must be a finite number")
		}
		if *cfg.Below > op.above {
			return nil, transform.Fieldf("below", "%v is above \"above\" (%v): below ≤ above is required", *cfg.Below, op.above)
		}
		op.below = *cfg.Below
	}
	if op.by, err = newGrouper(cfg.By, "sensor"); err != nil {
		return nil, err
	}
	switch s := strings.ToLower(strings.TrimSpace(cfg.Initial)); s {
	case "", stateLow, stateHigh:
		op.initial = s
	default:
		return nil, transform.Fieldf("initial", "want \"low\" or \"high\", not %q", trunc(cfg.Initial, 20))
	}
	if op.seq, err = newSequencer(cfg.Lateness); err != nil {
		return nil, err
	}
	return op, nil
}

// reset forgets every group.
func (op *thresholdOp) reset() *groups[string] {
	op.groups = newGroups[string](MaxGroups)
	return op.groups
}

func (op *thresholdOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	c = ctxOrZero(c)
	out, late, err := op.seq.readings(c, in, op.by, false, op.cross)
	if err != nil {
		return nil, err
	}
	return append(out, op.seq.notices(c, late)...), nil
}

// cross moves the group key of the reading it to the state its value v
// puts it in, appending an alert to out when the state flips.
func (op *thresholdOp) cross(out []transform.Item, it *transform.Item, key string, v float64) []transform.Item {
	st, created := op.groups.touch(key)
	if created {
		*st = op.initial
	}
	switch *st {
	case stateHigh:
		if v < op.below || (v == op.below && !op.strict) {
			*st = stateLow
			out = append(out, op.alert(it, key, stateLow, v))
		}
	case stateLow:
		if v >= op.above {
			*st = stateHigh
			out = append(out, op.alert(it, key, stateHigh, v))
		}
	default: // a new group: its first reading sets its state
		*st = stateLow
		if v >= op.above {
			*st = stateHigh
		}
	}
	return out
}

func (op *thresholdOp) alert(it *transform.Item, key, to string, v float64) transform.Item {
	a := transform.Clone(*it)
	a.ID = it.ID + "~alert"
	a.GUID = ""
	name := sensorName(it.Reading, key)
	unit := it.Reading.Unit
	var b strings.Builder
	if name != "" {
		b.WriteString(name)
		b.WriteByte(' ')
	}
	if to == stateHigh {
		fmt.Fprintf(&b, "above %s: %s", withUnit(op.above, unit), fmtNum(v))
	} else {
		fmt.Fprintf(&b, "back below %s: %s", withUnit(op.below, unit), fmtNum(v))
	}
	a.Title = b.String()
	a.Categories = []string{"alert", "alert:" + to}
	when := ""
	if t, ok := obsTime(it); ok {
		when = " at " + fmtTime(t)
	}
	if to == stateHigh {
		a.Summary = fmt.Sprintf("%s rose to %s%s (alert at or above %s, clears at or below %s).",
			nameOr(name), withUnit(v, unit), when, withUnit(op.above, unit), withUnit(op.below, unit))
	} else {
		a.Summary = fmt.Sprintf("%s fell to %s%s (cleared at or below %s).", nameOr(name), withUnit(v, unit), when, withUnit(op.below, unit))
	}
	a.Content = ""
	return a
}

func nameOr(name string) string {
	if name == "" {
		return "The reading"
	}
	return name
}

type keyState struct {
	K string `json:"k"`
	S string `json:"s"`
}

func (op *thresholdOp) SaveState() (json.RawMessage, error) {
	return saveOrdered(op.seq, op.groups, func(k string, s *string) (keyState, bool) {
		return keyState{K: k, S: *s}, *s != ""
	})
}

func (op *thresholdOp) LoadState(raw json.RawMessage) error {
	return loadOrdered(raw, op.seq, op.reset, func(sg *keyState) string { return sg.K },
		func(i int, sg *keyState, s *string) error {
			if sg.S != stateLow && sg.S != stateHigh {
				return malformed(i)
			}
			*s = sg.S
			return nil
		})
}

func init() {
	transform.Register(transform.Spec{
		Name:   "threshold",
		Family: transform.FamilySensor,
		Doc: "Alerts with hysteresis per group: emits an alert item (categories alert, alert:high) when a value reaches above, " +
			"and one (alert, alert:low) when it falls back to below or under; noise between the two raises nothing.",
		Example:   `{"above":30,"below":28,"by":"sensor"}`,
		MinInputs: 1, MaxInputs: 1,
		Config: ThresholdConfig{},
		New:    newThreshold,
	})
}
