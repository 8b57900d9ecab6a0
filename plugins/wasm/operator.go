package wasm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/slogfeed/slogfeed/reader/sanitize"
	"github.com/slogfeed/slogfeed/transform"
)

// MaxConfigBytes bounds Config.Config.
const MaxConfigBytes = 64 << 10

// Config configures a "wasm" node.
type Config struct {
	// Module names a module of the module store (PUT /api/v1/wasm/{name}).
	Module string `json:"module,omitempty" jsonschema:"description=name of a module uploaded with PUT /api/v1/wasm/{name} (or give module_base64)"`
	// ModuleBase64 is a module given inline, base64-encoded, at most
	// MaxInlineBytes before encoding.
	ModuleBase64 string `json:"module_base64,omitempty" jsonschema:"description=the module itself in base64 (at most 128 KiB of WebAssembly)"`
	// ABI is the form of the batch: "records" (default) or "json".
	ABI string `json:"abi,omitempty" jsonschema:"enum=records,enum=json,default=records,description=form of the batch the module is given"`
	// Params are numbers given to the module with every batch (at most
	// MaxParams).
	Params []float64 `json:"params,omitempty" jsonschema:"maxItems=16,description=numbers given to the module with every batch"`
	// Config is any JSON given to the module's configure export before
	// each batch (at most MaxConfigBytes).
	Config json.RawMessage `json:"config,omitempty" jsonschema:"description=JSON given to the module's configure export"`
	// Unit is set on the readings whose value the module sets.
	Unit string `json:"unit,omitempty" jsonschema:"description=unit of the values the module sets (default: keep the reading's)"`
	// MemoryMiB is the module's memory limit (default DefaultMemoryMiB,
	// at most MaxMemoryMiB).
	MemoryMiB int `json:"memory_mib,omitempty" jsonschema:"minimum=1,maximum=256,default=16,description=memory limit in MiB"`
	// TimeLimit bounds one run of the module (default and ceiling: the
	// pipe's run time; at most MaxTimeLimit).
	TimeLimit transform.Duration `json:"time_limit,omitempty" jsonschema:"description=time limit of one run (default: the pipe's)"`
}

type operator struct {
	name      string // a named module, resolved before each run
	abi       string
	params    []float64
	config    []byte
	unit      string
	memLimit  uint64
	timeLimit time.Duration

	mu  sync.Mutex
	mod *module // the compiled module (nil: a named one not resolved yet)
	// state is what a stateful module saved after the last run, for the
	// module whose SHA-256 is stateOf (another module starts afresh).
	state   []byte
	stateOf [32]byte
}

func newOperator(raw json.RawMessage) (transform.Operator, error) {
	cfg, err := transform.Decode[Config](raw)
	if err != nil {
		return nil, err
	}
	o := &operator{abi: ABIRecords, params: cfg.Params, unit: cfg.Unit, memLimit: DefaultMemoryMiB * mib}
	switch {
	case cfg.Module == "" && cfg.ModuleBase64 == "":
		return nil, transform.Fieldf("module", "missing: name a module of the module store, or give module_base64")
	case cfg.Module != "" && cfg.ModuleBase64 != "":
		return nil, transform.Fieldf("module", "give module or module_base64, not both")
	case cfg.Module != "" && !NamePattern.MatchString(cfg.Module):
		return nil, transform.Fieldf("module", "%q is not a module name (lower-case letters, digits, '.', '_' and '-', at most 64)", sanitize.Clip(cfg.Module, 70))
	}
	switch cfg.ABI {
	case "", ABIRecords:
	case ABIJSON:
		o.abi = ABIJSON
	default:
		return nil, transform.Fieldf("abi", "%q: want %q or %q", sanitize.Clip(cfg.ABI, 20), ABIRecords, ABIJSON)
	}
	if len(cfg.Params) > MaxParams {
		return nil, &transform.FieldError{Field: "params", Err: fmt.Errorf("%w: %d numbers, at most %d", transform.ErrLimit, len(cfg.Params), MaxParams)}
	}
	for i, p := range cfg.Params {
		if math.IsNaN(p) || math.IsInf(p, 0) {
			return nil, transform.Fieldf(fmt.Sprintf("params[%d]", i), "not a finite number")
		}
	}
	if c := bytes.TrimSpace(cfg.Config); len(c) > 0 {
		if len(c) > MaxConfigBytes {
			return nil, &transform.FieldError{Field: "config", Err: fmt.Errorf("%w: %d bytes, at most %d", transform.ErrLimit, len(c), MaxConfigBytes)}
		}
		o.config = bytes.Clone(c)
	}
	if len(cfg.Unit) > maxUnitBytes {
		return nil, transform.Fieldf("unit", "%d bytes, at most %d", len(cfg.Unit), maxUnitBytes)
	}
	switch m := cfg.MemoryMiB; {
	case m < 0 || m > MaxMemoryMiB:
		return nil, transform.Fieldf("memory_mib", "%d: want 1 to %d", m, MaxMemoryMiB)
	case m > 0:
		o.memLimit = uint64(m) * mib
	}
	switch d := cfg.TimeLimit.D(); {
	case d < 0 || d > MaxTimeLimit:
		return nil, transform.Fieldf("time_limit", "%v: want at most %v", d, MaxTimeLimit)
	default:
		o.timeLimit = d
	}

	ctx, cancel := context.WithTimeout(context.Background(), ValidateTime)
	defer cancel()
	if cfg.ModuleBase64 != "" {
		if len(cfg.ModuleBase64) > base64.StdEncoding.EncodedLen(MaxInlineBytes)+64 {
			return nil, &transform.FieldError{Field: "module_base64", Err: fmt.Errorf("%w: more than %d bytes of WebAssembly; upload larger modules with PUT /api/v1/wasm/{name}", transform.ErrLimit, MaxInlineBytes)}
		}
		bin, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(cfg.ModuleBase64), ""))
		if err != nil {
			return nil, transform.Fieldf("module_base64", "not base64: %v", err)
		}
		if len(bin) > MaxInlineBytes {
			return nil, &transform.FieldError{Field: "module_base64", Err: fmt.Errorf("%w: %d bytes of WebAssembly, at most %d; upload larger modules with PUT /api/v1/wasm/{name}", transform.ErrLimit, len(bin), MaxInlineBytes)}
		}
		m, err := theEngine().compile(ctx, bin)
		if err != nil {
			return nil, &transform.FieldError{Field: "module_base64", Err: err}
		}
		o.mod = m
	} else {
		o.name = cfg.Module
		if lib := currentLibrary(); lib != nil {
			// Check now what can be checked; without a library (a pipe
			// loaded before the store started) the first run does.
			if _, err := o.resolve(ctx, lib); err != nil {
				return nil, &transform.FieldError{Field: "module", Err: err}
			}
		}
	}
	if o.mod != nil {
		if err := o.check(ctx, o.mod); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// check checks that m fits the node: its initial memory, and its verdict
// on the configuration.
func (o *operator) check(ctx context.Context, m *module) error {
	if need := uint64(m.minPages) * pageSize; need > o.memLimit {
		return &transform.FieldError{Field: "memory_mib", Err: fmt.Errorf("%w (%w): the module declares an initial memory of %s, the limit is %s",
			ErrMemoryLimit, transform.ErrLimit, sizeString(need), sizeString(o.memLimit))}
	}
	if o.config == nil {
		return nil
	}
	if !m.configure {
		return transform.Fieldf("config", "the module does not export configure, so it cannot take a configuration")
	}
	_, err := theEngine().run(ctx, call{mod: m, limit: o.memLimit, config: o.config, timeLeft: ValidateTime})
	if err != nil {
		return &transform.FieldError{Field: "config", Err: err}
	}
	return nil
}

// resolve returns the module the node names, compiling it when the
// library holds a new version.
func (o *operator) resolve(ctx context.Context, lib Library) (*module, error) {
	if lib == nil {
		return nil, fmt.Errorf("%w: %q (no module store is running)", ErrModuleNotFound, o.name)
	}
	sum, err := lib.Sum(o.name)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mod != nil && o.mod.sum == sum {
		return o.mod, nil
	}
	eng := theEngine()
	m := eng.cached(sum)
	if m == nil {
		bin, err := lib.Wasm(o.name)
		if err != nil {
			return nil, err
		}
		if m, err = eng.compile(ctx, bin); err != nil {
			return nil, fmt.Errorf("module %q: %w", o.name, err)
		}
	}
	if need := uint64(m.minPages) * pageSize; need > o.memLimit {
		return nil, fmt.Errorf("%w (%w): module %q declares an initial memory of %s, the node's limit is %s",
			ErrMemoryLimit, transform.ErrLimit, o.name, sizeString(need), sizeString(o.memLimit))
	}
	o.mod = m
	return m, nil
}

// Apply runs the module on the run's items: one fresh instance per run,
// so nothing carries over from one run (or pipe) to the next.
func (o *operator) Apply(c *transform.Context, in [][]transform.Item) ([]transform.Item, error) {
	if c == nil {
		c = transform.NewContext(context.Background(), time.Time{}, "", "", transform.Limits{})
	}
	b := newBatch(in)
	if len(b.items) == 0 {
		return nil, nil
	}
	if len(b.items) > c.Limits.MaxItems {
		return nil, fmt.Errorf("%w: %d items, at most %d", transform.ErrLimit, len(b.items), c.Limits.MaxItems)
	}
	// The node's time limit, within the pipe's (whose deadline the
	// context already carries when the run comes from a pipe).
	limit := c.Limits.RunTime
	if o.timeLimit > 0 {
		limit = min(limit, o.timeLimit)
	}
	ctx, cancel := context.WithTimeout(c.Context(), limit)
	defer cancel()
	m := o.mod
	if o.name != "" {
		var err error
		if m, err = o.resolve(ctx, currentLibrary()); err != nil {
			return nil, err
		}
	}
	o.mu.Lock()
	state := o.state
	if o.stateOf != m.sum {
		state = nil // saved by another module (or version)
	}
	o.mu.Unlock()
	cl := call{mod: m, limit: o.memLimit, config: o.config, state: state, timeLeft: limit}
	if o.abi == ABIJSON {
		raw, err := encodeJSON(b, o.params)
		if err != nil {
			return nil, err
		}
		cl.input, cl.maxOut = raw, MaxJSONBytes
	} else {
		cl.input, cl.maxOut = encodeRecords(b, o.params), RecordSize*c.Limits.MaxItems
	}
	oc, err := theEngine().run(ctx, cl)
	if err != nil {
		if errors.Is(err, transform.ErrTimeLimit) {
			if perr := c.Err(); perr != nil {
				// The pipe's time limit, not the node's.
				return nil, fmt.Errorf("%w (the module was running)", perr)
			}
		}
		return nil, err
	}
	ob := newOutput(b, o.unit, c.Limits.MaxItems)
	var out []transform.Item
	if o.abi == ABIJSON {
		out, err = ob.decodeJSON(oc.out, c.Limits.MaxText)
	} else {
		out, err = ob.decodeRecords(oc.out)
	}
	if err != nil {
		return nil, err
	}
	if m.stateful {
		// Kept for the next run; the runner stores it (SaveState) only
		// when this run's output is stored.
		o.mu.Lock()
		o.state, o.stateOf = oc.state, m.sum
		o.mu.Unlock()
	}
	return out, nil
}

// savedState is the operator's state as the runner stores it.
type savedState struct {
	V      int    `json:"v"`
	Module string `json:"module"` // hex SHA-256 of the module that saved it
	State  []byte `json:"state"`
}

// SaveState implements transform.Stateful: the bytes the module's
// state_save returned after the last run, if any.
func (o *operator) SaveState() (json.RawMessage, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.state) == 0 {
		return nil, nil
	}
	return json.Marshal(savedState{V: 1, Module: hex.EncodeToString(o.stateOf[:]), State: o.state})
}

// LoadState implements transform.Stateful. A state of another module (or
// version) is kept but not given to this one: it starts afresh.
func (o *operator) LoadState(raw json.RawMessage) error {
	var st savedState
	if err := json.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("wasm: unreadable state: %w", err)
	}
	sum, err := hex.DecodeString(st.Module)
	if st.V != 1 || err != nil || len(sum) != 32 || len(st.State) > MaxStateBytes {
		return fmt.Errorf("wasm: unusable state (version %d, %d bytes)", st.V, len(st.State))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.state, o.stateOf = st.State, [32]byte(sum)
	return nil
}

func init() {
	transform.Register(transform.Spec{
		Name:   "wasm",
		Family: transform.FamilyPlugin,
		Doc: "Runs a user operator written in WebAssembly on each run's items (see docs/wasm.md for the ABI). " +
			"The module is named (uploaded with PUT /api/v1/wasm/{name}) or given inline in base64. " +
			"It runs sandboxed: no imports, no files, no network, a memory limit and a time limit; a trap or a limit ends that run with an error.",
		Example:   `{"module":"despike","params":[5]}`,
		MinInputs: 1, MaxInputs: MaxInputs,
		Config: Config{},
		New:    newOperator,
	})
}

var _ transform.Stateful = (*operator)(nil)
