package sensor

import (
	"encoding/json"
	"math"

	"github.com/slogfeed/slogfeed/transform"
)

// DeadbandConfig configures deadband.
type DeadbandConfig struct {
	// Delta is the change a reading must exceed, against the group's
	// last passed value, to pass (default 0: any change).
	Delta float64 `json:"delta,omitempty" jsonschema:"minimum=0,description=change a reading must exceed to pass (default 0)"`
	// By names the item field that groups readings (default "sensor").
	By *string `json:"by,omitempty" jsonschema:"description=item field that groups readings (default sensor)"`
	// Lateness is how long a reading may arrive out of time order and
	// still be processed in order (default 0); see the package
	// documentation.
	Lateness *transform.Duration `json:"lateness,omitempty" jsonschema:"description=how long readings are waited for to process them in time order (default 0s)"`
}

type deadbandOp struct {
	delta  float64
	by     grouper
	groups *groups[float64]
	seq    *sequencer
}

func newDeadband(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := decode[DeadbandConfig](raw, "lateness")
	if err != nil {
		return nil, err
	}
	if cfg.Delta < 0 || !finite(cfg.Delta) {
		return nil, transform.Fieldf("delta", "must be a finite number ≥ 0")
	}
	op := &deadbandOp{delta: cfg.Delta}
	op.reset()
	if op.by, err = newGrouper(cfg.By, "sensor"); err != nil {
		return nil, err
	}
	if op.seq, err = newSequencer(cfg.Lateness); err != nil {
		return nil, err
	}
	return op, nil
}

// reset forgets every group.
func (op *deadbandOp) reset() *groups[float64] {
	op.groups = newGroups[float64](MaxGroups)
	return op.groups
}

func (op *deadbandOp) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	c = ctxOrZero(c)
	out, late, err := op.seq.readings(c, in, op.by, false, op.pass)
	if err != nil {
		return nil, err
	}
	return append(out, op.seq.notices(c, late)...), nil
}

// pass appends the reading it of group key to out when it is the group's
// first or moved by more than delta from the last passed one.
func (op *deadbandOp) pass(out []transform.Item, it *transform.Item, key string, v float64) []transform.Item {
	if last, seen := op.groups.get(key); seen && !(math.Abs(v-*last) > op.delta) {
		return out
	}
	p, _ := op.groups.touch(key)
	*p = v
	return append(out, *it)
}

type keyedValue struct {
	K string  `json:"k"`
	X float64 `json:"x"`
}

func (op *deadbandOp) SaveState() (json.RawMessage, error) {
	return saveOrdered(op.seq, op.groups, func(k string, v *float64) (keyedValue, bool) {
		return keyedValue{K: k, X: *v}, true
	})
}

func (op *deadbandOp) LoadState(raw json.RawMessage) error {
	return loadOrdered(raw, op.seq, op.reset, func(s *keyedValue) string { return s.K },
		func(i int, s *keyedValue, v *float64) error {
			if !finite(s.X) {
				return malformed(i)
			}
			*v = s.X
			return nil
		})
}

func init() {
	transform.Register(transform.Spec{
		Name:   "deadband",
		Family: transform.FamilySensor,
		Doc: "Passes a group's first reading, then only readings that differ from the last passed one by more than delta; " +
			"the others are dropped.",
		Example:   `{"delta":0.5,"by":"sensor"}`,
		MinInputs: 1, MaxInputs: 1,
		Config: DeadbandConfig{},
		New:    newDeadband,
	})
}
