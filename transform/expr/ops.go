package expr

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/slogfeed/slogfeed/transform"
)

// MaxAssignments bounds the fields one compute node sets.
const MaxAssignments = 32

// What a where or compute node does with an item whose expression fails
// (a division by zero, a bad timestamp string, a value out of range).
const (
	OnErrorFail = "fail" // stop the run (the default)
	OnErrorDrop = "drop" // leave the item out
	OnErrorKeep = "keep" // pass the item on unchanged
)

// WhereConfig configures the where operator.
type WhereConfig struct {
	// Expr is a boolean expression over the item's fields; the items
	// for which it is true pass.
	Expr string `json:"expr" jsonschema:"description=Boolean expression over the item's fields (CEL); items for which it is true pass"`
	// OnError is what to do with an item whose evaluation fails:
	// "fail" (default: the run stops), "drop" or "keep". Running over
	// the cost or time limit always stops the run.
	OnError string `json:"on_error,omitempty" jsonschema:"enum=fail,enum=drop,enum=keep,description=What to do with an item whose evaluation fails (default fail)"`
}

// ComputeConfig configures the compute operator.
type ComputeConfig struct {
	// Set maps item fields to the expressions giving their new values.
	// Every expression sees the input item, not the other results.
	Set map[string]string `json:"set" jsonschema:"description=Item field → expression giving its new value (1 to 32); all see the input item"`
	// OnError is what to do with an item whose evaluation or assignment
	// fails: "fail" (default), "drop" or "keep" (unchanged).
	OnError string `json:"on_error,omitempty" jsonschema:"enum=fail,enum=drop,enum=keep,description=What to do with an item whose evaluation or assignment fails (default fail)"`
}

func init() {
	transform.Register(transform.Spec{
		Name:   "where",
		Family: transform.FamilyExpr,
		Doc: "Keeps the items for which a boolean expression over their fields is true " +
			"(CEL: value > 25 && sensor.startsWith(\"lab\")).",
		Example:   `{"expr":"value > 25 && sensor.startsWith(\"lab\")"}`,
		MinInputs: 1,
		MaxInputs: 1,
		Config:    WhereConfig{},
		New:       newWhere,
	})
	transform.Register(transform.Spec{
		Name:   "compute",
		Family: transform.FamilyExpr,
		Doc: "Sets item fields to the values of expressions over the input item " +
			"(CEL), e.g. converts a reading to Fahrenheit and retitles it.",
		Example:   `{"set":{"value":"value * 1.8 + 32","unit":"\"F\"","title":"sensor + \": \" + string(value)"}}`,
		MinInputs: 1,
		MaxInputs: 1,
		Config:    ComputeConfig{},
		New:       newCompute,
	})
}

func checkOnError(s string) (string, error) {
	switch s {
	case "":
		return OnErrorFail, nil
	case OnErrorFail, OnErrorDrop, OnErrorKeep:
		return s, nil
	}
	return "", transform.Fieldf("on_error", "%q is not one of \"fail\", \"drop\", \"keep\"", s)
}

// Where is the where operator.
type Where struct {
	prog    *Program
	onError string
}

func newWhere(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := transform.Decode[WhereConfig](raw)
	if err != nil {
		return nil, err
	}
	onError, err := checkOnError(cfg.OnError)
	if err != nil {
		return nil, err
	}
	if cfg.Expr == "" {
		return nil, transform.Fieldf("expr", "missing: a boolean expression such as value > 25")
	}
	p, err := Compile("expr", cfg.Expr, Bool)
	if err != nil {
		return nil, err
	}
	return &Where{prog: p, onError: onError}, nil
}

// Apply keeps the items of in[0] for which the expression is true.
func (w *Where) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]transform.Item, 0, len(in[0]))
	for i := range in[0] {
		if err := c.Err(); err != nil {
			return nil, err
		}
		it := &in[0][i]
		v, err := w.prog.Eval(c, it)
		if err != nil {
			if IsFatal(err) || w.onError == OnErrorFail {
				return nil, runError(c, "where", it, err)
			}
			if w.onError == OnErrorKeep {
				out = append(out, *it)
			}
			continue
		}
		if b, _ := v.(bool); b {
			out = append(out, *it)
		}
	}
	return out, nil
}

// runError names the node and the item of a failed evaluation.
func runError(c *transform.Context, op string, it *transform.Item, err error) error {
	node := ""
	if c != nil {
		node = c.Node
	}
	return &transform.NodeError{Node: node, Op: op, Err: fmt.Errorf("item %q: %w", shortID(it.ID), err)}
}

func shortID(id string) string {
	const max = 80
	if len(id) <= max {
		return id
	}
	return id[:max] + "…"
}

// Compute is the compute operator.
type Compute struct {
	sets    []assignment // by field name
	onError string
}

type assignment struct {
	field string // the item field (canonical name)
	cfg   string // its configuration path, "set.value"
	prog  *Program
}

func newCompute(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := transform.Decode[ComputeConfig](raw)
	if err != nil {
		return nil, err
	}
	onError, err := checkOnError(cfg.OnError)
	if err != nil {
		return nil, err
	}
	switch n := len(cfg.Set); {
	case n == 0:
		return nil, transform.Fieldf("set", "missing: at least one field to set, e.g. {\"value\": \"value * 1.8 + 32\"}")
	case n > MaxAssignments:
		return nil, &transform.FieldError{Field: "set", Err: fmt.Errorf("%w: %d fields, at most %d", transform.ErrLimit, n, MaxAssignments)}
	}
	names := make([]string, 0, len(cfg.Set))
	for name := range cfg.Set {
		names = append(names, name)
	}
	sort.Strings(names)
	c := &Compute{onError: onError}
	seen := map[string]string{}
	for _, name := range names {
		path := "set." + name
		if err := transform.CheckField(path, name, true); err != nil {
			return nil, err
		}
		f, _ := transform.Field(name)
		if other, dup := seen[f.Name]; dup {
			return nil, transform.Fieldf(path, "sets item field %q again (see set.%s)", f.Name, other)
		}
		seen[f.Name] = name
		p, err := Compile(path, cfg.Set[name], kindFor(f.Type))
		if err != nil {
			return nil, err
		}
		c.sets = append(c.sets, assignment{field: f.Name, cfg: path, prog: p})
	}
	sort.Slice(c.sets, func(i, j int) bool { return c.sets[i].field < c.sets[j].field })
	return c, nil
}

// kindFor is the result kind an expression setting a field of type t
// must have: numbers and times strictly, text and lists anything
// transform.Set converts.
func kindFor(t transform.Type) Kind {
	switch t {
	case transform.TypeNumber:
		return Number
	case transform.TypeTime:
		return Time
	}
	return Any
}

// Apply sets the fields of each item of in[0].
func (cp *Compute) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]transform.Item, 0, len(in[0]))
	vals := make([]any, len(cp.sets))
	for i := range in[0] {
		if err := c.Err(); err != nil {
			return nil, err
		}
		it := &in[0][i]
		nt, err := cp.apply(c, it, vals)
		if err != nil {
			if IsFatal(err) || cp.onError == OnErrorFail {
				return nil, runError(c, "compute", it, err)
			}
			if cp.onError == OnErrorKeep {
				out = append(out, *it)
			}
			continue
		}
		out = append(out, nt)
	}
	return out, nil
}

// apply evaluates every assignment on the original item, then stores the
// results in a copy.
func (cp *Compute) apply(c *transform.Context, it *transform.Item, vals []any) (transform.Item, error) {
	for j, a := range cp.sets {
		v, err := a.prog.Eval(c, it)
		if err != nil {
			return transform.Item{}, fmt.Errorf("%s: %w", a.cfg, err)
		}
		vals[j] = v
	}
	nt := transform.Clone(*it)
	for j, a := range cp.sets {
		if err := transform.Set(&nt, a.field, vals[j]); err != nil {
			return transform.Item{}, fmt.Errorf("%s: %w", a.cfg, err)
		}
	}
	return nt, nil
}
