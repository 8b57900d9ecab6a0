package transform

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The operators every pipe needs: where items come from, and how a
// sub-chain runs per item. The other families live in the packages
// transform/pipes, transform/pack, transform/sensor and transform/expr.

const (
	sourceName = "source"
	loopName   = "loop"
	// DefaultBacklog is how many of an input's newest items a pipe takes
	// on its first run; MaxBacklog bounds SourceConfig.Backlog.
	DefaultBacklog = 20
	MaxBacklog     = 10000
	// MaxLoopSteps bounds the steps of one loop.
	MaxLoopSteps = 16
)

// SourceConfig configures a "source" node.
type SourceConfig struct {
	// Feed names the input: "sensor/NAME", "pipe/SLUG", "feed/ID" or the
	// URL of a subscribed feed.
	Feed string `json:"feed" doc:"the input: sensor/NAME, pipe/SLUG, feed/ID or the URL of a subscribed feed"`
	// Backlog is how many of the feed's newest items the pipe's first run
	// takes (default DefaultBacklog; later runs take only new items).
	Backlog int `json:"backlog,omitempty" doc:"newest items taken on the first run (default 20, at most 10000)"`
}

type sourceOp struct {
	ref     Ref
	backlog int
}

// Apply passes the input's items on with ids made unique across inputs:
// "<feed id>:<item id>", so two feeds' "1" stay two items downstream.
func (s *sourceOp) Apply(c *Context, in [][]Item) ([]Item, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]Item, 0, len(in[0]))
	for i, it := range in[0] {
		if i%256 == 0 {
			if err := c.Err(); err != nil {
				return nil, err
			}
		}
		it = Clone(it)
		it.ID = strconv.FormatUint(it.FeedID, 10) + ":" + it.ID
		out = append(out, it)
	}
	return out, nil
}

// LoopConfig configures a "loop" node.
type LoopConfig struct {
	// Steps are operators applied in turn to each item on its own (a
	// one-item batch); their output items, for every input item, make
	// the loop's output. Steps take one input; stateful operators are
	// not allowed in a loop.
	Steps []LoopStep `json:"steps" doc:"operators applied in turn to each item on its own"`
}

// LoopStep is one operator of a loop.
type LoopStep struct {
	Op     string          `json:"op"`
	Config json.RawMessage `json:"config,omitempty"`
}

type loopOp struct {
	steps []Operator
	size  int // steps, nested ones included
}

func newLoop(raw json.RawMessage, depth int, lim Limits) (*loopOp, error) {
	if depth > lim.MaxDepth {
		return nil, &FieldError{Field: "steps", Err: fmt.Errorf("%w: loops nested deeper than %d", ErrLimit, lim.MaxDepth)}
	}
	cfg, err := Decode[LoopConfig](raw)
	if err != nil {
		return nil, err
	}
	if len(cfg.Steps) == 0 {
		return nil, Fieldf("steps", "a loop needs at least one step")
	}
	if len(cfg.Steps) > MaxLoopSteps {
		return nil, &FieldError{Field: "steps", Err: fmt.Errorf("%w: %d steps, at most %d", ErrLimit, len(cfg.Steps), MaxLoopSteps)}
	}
	l := &loopOp{}
	for i, st := range cfg.Steps {
		field := fmt.Sprintf("steps[%d]", i)
		spec, ok := Lookup(st.Op)
		if !ok {
			return nil, Fieldf(field+".op", "unknown operator %q", truncate(st.Op, 40))
		}
		if spec.MinInputs > 1 || spec.MaxInputs == 0 {
			return nil, Fieldf(field+".op", "a %s cannot be a loop step (steps take exactly one input)", spec.Name)
		}
		op, err := newOperator(spec, st.Config, depth+1, lim)
		if err != nil {
			return nil, prefixField(field+".config", err)
		}
		if _, ok := op.(Stateful); ok {
			return nil, Fieldf(field+".op", "%s keeps state between runs and cannot be a loop step", spec.Name)
		}
		l.steps = append(l.steps, op)
		l.size++
		if sub, ok := op.(*loopOp); ok {
			l.size += sub.size
		}
	}
	return l, nil
}

// prefixField puts prefix before the field of a *FieldError.
func prefixField(prefix string, err error) error {
	if fe, ok := err.(*FieldError); ok {
		f := prefix
		if fe.Field != "" {
			f += "." + fe.Field
		}
		return &FieldError{Field: f, Err: fe.Err}
	}
	return &FieldError{Field: prefix, Err: err}
}

// Apply runs the steps over each item on its own.
func (l *loopOp) Apply(c *Context, in [][]Item) ([]Item, error) {
	var out []Item
	var made int64
	for _, batch := range in {
		for _, it := range batch {
			if err := c.Err(); err != nil {
				return nil, err
			}
			cur := []Item{it}
			for i, op := range l.steps {
				next, err := op.Apply(c, [][]Item{cur})
				if err != nil {
					return nil, fmt.Errorf("step %d on item %q: %w", i, truncate(it.ID, 80), err)
				}
				cur = next
				if len(cur) == 0 {
					break
				}
			}
			out = append(out, cur...)
			if len(out) > c.Limits.MaxItems {
				return nil, fmt.Errorf("%w: the loop made over %d items", ErrLimit, c.Limits.MaxItems)
			}
			if made += itemsBytes(cur); c.Limits.MaxNodeBytes > 0 && made > c.Limits.MaxNodeBytes {
				return nil, fmt.Errorf("%w: the loop made over %d bytes (max_node_bytes)", ErrByteLimit, c.Limits.MaxNodeBytes)
			}
		}
	}
	return out, nil
}

func init() {
	Register(Spec{
		Name:   sourceName,
		Family: FamilyPipes,
		Doc: "Reads one of slogfeed's feeds: a sensor of the sensor store, another pipe's output, or a subscribed feed. " +
			"A run gets the items that arrived since the previous run (the first run, the newest `backlog`). " +
			"Item ids become \"<feed id>:<id>\" so that items of different inputs never collide.",
		Example:   `{"feed":"sensor/lab-1"}`,
		MinInputs: 0, MaxInputs: 0,
		Config: SourceConfig{},
		New: func(raw json.RawMessage) (Operator, error) {
			cfg, err := Decode[SourceConfig](raw)
			if err != nil {
				return nil, err
			}
			ref, err := ParseRef(cfg.Feed)
			if err != nil {
				return nil, &FieldError{Field: "feed", Err: err}
			}
			switch {
			case cfg.Backlog < 0 || cfg.Backlog > MaxBacklog:
				return nil, Fieldf("backlog", "want 0 (default %d) to %d", DefaultBacklog, MaxBacklog)
			case cfg.Backlog == 0:
				cfg.Backlog = DefaultBacklog
			}
			return &sourceOp{ref: ref, backlog: cfg.Backlog}, nil
		},
	})
	Register(Spec{
		Name:   loopName,
		Family: FamilyPipes,
		Doc: "Runs a sub-chain of operators on each item on its own and emits what it gives for every item " +
			"(for example: split an item, then template each part). Loops nest up to three deep.",
		Example:   `{"steps":[{"op":"split","config":{"field":"categories"}},{"op":"template","config":{"field":"title","template":"tag: {categories}"}}]}`,
		MinInputs: 1, MaxInputs: -1,
		Config: LoopConfig{},
		New: func(raw json.RawMessage) (Operator, error) {
			return newLoop(raw, 1, DefaultLimits)
		},
	})
}
