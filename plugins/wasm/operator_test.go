package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/transform"
)

// Every way a module can misbehave ends that run with a clear error, and
// the same operator's next run works.
func TestSandbox(t *testing.T) {
	evil := wat(t, "testdata/evil.wat")
	// The mode is the first item's value, so one operator can misbehave
	// and then work. Modules that end by themselves get a generous time
	// limit: a stack overflow takes a while (wazero lets the call stack
	// grow to about 100 MiB), more so under the race detector.
	quick := build(t, inline(evil, `"time_limit":"300ms","memory_mib":4`))
	patient := build(t, inline(evil, `"time_limit":"1m","memory_mib":4`))
	// A module that must reach its memory limit before its time limit
	// stops it: 300 ms is not always enough for that on a loaded machine
	// under -race.
	bombThenLoop := build(t, inline(evil, `"time_limit":"2s","memory_mib":4`))
	tests := []struct {
		name string
		mode float64
		want []error
		msg  string
	}{
		{"infinite loop", 1, []error{transform.ErrTimeLimit}, "time limit of 300ms"},
		{"memory bomb", 2, []error{ErrMemoryLimit, transform.ErrLimit, ErrTrap}, "the limit is 4 MiB"},
		{"unreachable", 3, []error{ErrTrap}, "unreachable"},
		{"stack overflow", 4, []error{ErrTrap}, "stack overflow"},
		{"division by zero", 5, []error{ErrTrap}, "divide by zero"},
		{"output outside memory", 6, []error{ErrOutput}, "outside the memory"},
		{"output not whole records", 7, []error{ErrOutput}, "not a whole number"},
		{"index naming no item", 8, []error{ErrOutput}, "index 1, but the batch has 1 items"},
		{"NaN value", 9, []error{ErrOutput}, "not a finite number"},
		{"unknown flags", 10, []error{ErrOutput}, "unknown flags 0x4"},
		{"output too long", 12, []error{ErrOutput, transform.ErrLimit}, "4294967295 bytes"},
		{"memory bomb then loop", 13, []error{ErrMemoryLimit, transform.ErrLimit, transform.ErrTimeLimit}, "asked for"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The patient modules' runs get a pipe run time as long as
			// their own limit: the default (10 s) is what a loaded machine
			// under -race can take to overflow the stack.
			op, c := patient, transform.NewContext(context.Background(), t0, "test-pipe", "w", transform.Limits{RunTime: time.Minute})
			if errors.Is(tt.want[len(tt.want)-1], transform.ErrTimeLimit) {
				op, c = quick, ctx()
				if tt.mode == 13 {
					op = bombThenLoop
				}
			}
			out, err := op.Apply(c, [][]transform.Item{readings(tt.mode)})
			if err == nil {
				t.Fatalf("the run succeeded: %v", values(out))
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not match %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			// The next run of the same operator works.
			out, err = op.Apply(ctx(), [][]transform.Item{readings(0, 21.5)})
			if err != nil || !slices.Equal(values(out), []float64{0, 21.5}) {
				t.Fatalf("next run: %v, %v", values(out), err)
			}
		})
	}
}

// The pipe's own time limit stops a module too, and says so.
func TestPipeTimeLimit(t *testing.T) {
	op := build(t, inline(wat(t, "testdata/evil.wat"), `"params":[1]`))
	c := transform.NewContext(context.Background(), t0, "p", "w", transform.Limits{RunTime: 200 * time.Millisecond})
	_, err := op.Apply(c, [][]transform.Item{readings(0)})
	if !errors.Is(err, transform.ErrTimeLimit) || !strings.Contains(err.Error(), "200ms") {
		t.Fatalf("error %v, want the pipe's time limit of 200ms", err)
	}
	// A cancelled run (a server stopping) is not a trap.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = op.Apply(transform.NewContext(cctx, t0, "p", "w", transform.Limits{}), [][]transform.Item{readings(0)})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTrap) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// Every run has a fresh instance: nothing a module keeps in its globals
// or memory survives to the next run or reaches another node.
func TestFreshInstance(t *testing.T) {
	evil := wat(t, "testdata/evil.wat")
	a := build(t, inline(evil, `"params":[11]`))
	b := build(t, inline(evil, `"params":[11]`))
	for i, op := range []transform.Operator{a, a, b, a} {
		out, err := op.Apply(ctx(), [][]transform.Item{readings(5, 6)})
		if err != nil {
			t.Fatal(err)
		}
		if got := values(out); !slices.Equal(got, []float64{1, 1}) {
			t.Errorf("run %d: values %v, want [1 1] (one process call per instance)", i, got)
		}
	}
}

// Modules that do not fit the ABI are refused when the node is built,
// naming what is wrong.
func TestModuleChecks(t *testing.T) {
	tests := []struct {
		name  string
		bin   func(t *testing.T) []byte
		extra string
		field string
		want  []error
		msg   string
	}{
		{"not WebAssembly", func(*testing.T) []byte { return []byte("(module)") }, "", "module_base64", []error{ErrModule, transform.ErrInvalid}, "not a WebAssembly binary"},
		{"truncated", func(t *testing.T) []byte { return wat(t, "testdata/echo.wat")[:20] }, "", "module_base64", []error{ErrModule}, "unusable"},
		{"no slogfeed_abi", func(t *testing.T) []byte { return wat(t, "testdata/noabi.wat") }, "", "module_base64", []error{ErrModule}, `no function exported as "slogfeed_abi"`},
		{"ABI version 2", func(t *testing.T) []byte { return wat(t, "testdata/abi2.wat") }, "", "module_base64", []error{ErrModule}, "returned 2"},
		{"wrong signature", func(t *testing.T) []byte { return wat(t, "testdata/wrongsig.wat") }, "", "module_base64", []error{ErrModule}, `"process" is (func (param i32 i32) (result i32)), want (func (param i32 i32) (result i64))`},
		{"imports", func(t *testing.T) []byte { return wat(t, "testdata/imports.wat") }, "", "module_base64", []error{ErrModule}, "imports env.log"},
		{"half a state", func(t *testing.T) []byte { return wat(t, "testdata/halfstate.wat") }, "", "module_base64", []error{ErrModule}, "exports only one of"},
		{"memory not exported", func(t *testing.T) []byte { return wat(t, "testdata/nomem.wat") }, "", "module_base64", []error{ErrModule}, `no memory exported as "memory"`},
		{"start never returns", func(t *testing.T) []byte { return wat(t, "testdata/startloop.wat") }, "", "module_base64", []error{ErrModule, transform.ErrTimeLimit}, "instantiation"},
		{"initial memory over the limit", func(t *testing.T) []byte { return wat(t, "testdata/bigmem.wat") }, "", "memory_mib", []error{ErrMemoryLimit, transform.ErrLimit}, "initial memory of 32 MiB, the limit is 16 MiB"},
		{"too large inline", func(*testing.T) []byte { return make([]byte, MaxInlineBytes+1) }, "", "module_base64", []error{transform.ErrLimit}, "at most 131072"},
		{"configure missing", func(t *testing.T) []byte { return wat(t, "testdata/echo.wat") }, `"config":{"a":1}`, "config", []error{transform.ErrInvalid}, "does not export configure"},
		{"configuration refused", func(t *testing.T) []byte { return wat(t, "testdata/configure.wat") }, `"config":[1]`, "config", []error{ErrReported}, "configure returned 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newOperator(inline(tt.bin(t), tt.extra))
			if err == nil {
				t.Fatal("built")
			}
			var fe *transform.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("error %v: want a *FieldError on %q", err, tt.field)
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not match %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
		})
	}
	// A larger memory limit admits the large module.
	build(t, inline(wat(t, "testdata/bigmem.wat"), `"memory_mib":32`))
}

// A module whose alloc returns a pointer outside its memory fails the
// run with ErrOutput.
func TestBadAlloc(t *testing.T) {
	op := build(t, inline(wat(t, "testdata/badalloc.wat"), ""))
	_, err := op.Apply(ctx(), [][]transform.Item{readings(1)})
	if !errors.Is(err, ErrOutput) || !strings.Contains(err.Error(), "alloc(") {
		t.Fatalf("error %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	echo := wat(t, "testdata/echo.wat")
	tests := []struct {
		name, cfg, field string
		limit            bool
	}{
		{"no module", `{}`, "module", false},
		{"both", `{"module":"x","module_base64":"AA=="}`, "module", false},
		{"bad name", `{"module":"../etc"}`, "module", false},
		{"bad base64", `{"module_base64":"!!"}`, "module_base64", false},
		{"unknown field", string(inline(echo, `"modul":"x"`)), "modul", false},
		{"bad abi", string(inline(echo, `"abi":"xml"`)), "abi", false},
		{"too many params", string(inline(echo, `"params":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]`)), "params", true},
		{"memory too large", string(inline(echo, `"memory_mib":257`)), "memory_mib", false},
		{"negative memory", string(inline(echo, `"memory_mib":-1`)), "memory_mib", false},
		{"time limit too long", string(inline(echo, `"time_limit":"2m"`)), "time_limit", false},
		{"config too large", string(inline(echo, `"config":"`+strings.Repeat("x", MaxConfigBytes)+`"`)), "config", true},
		{"long unit", string(inline(echo, `"unit":"`+strings.Repeat("u", 65)+`"`)), "unit", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newOperator(json.RawMessage(tt.cfg))
			var fe *transform.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("error %v: want a *FieldError on %q", err, tt.field)
			}
			if errors.Is(err, transform.ErrLimit) != tt.limit || errors.Is(err, transform.ErrInvalid) == tt.limit {
				t.Errorf("error %v: ErrLimit %v, want %v", err, errors.Is(err, transform.ErrLimit), tt.limit)
			}
		})
	}
}

// configure runs before process, in the same instance, with the node's
// configuration.
func TestConfigure(t *testing.T) {
	op := build(t, inline(wat(t, "testdata/configure.wat"), `"config":{"a": 1}`))
	out, err := op.Apply(ctx(), [][]transform.Item{readings(20, 21)})
	if err != nil {
		t.Fatal(err)
	}
	if got := values(out); !slices.Equal(got, []float64{float64(len(`{"a": 1}`)), 8}) {
		t.Errorf("values %v, want the configuration's length", got)
	}
}

// The records ABI: the input carries values, times, indexes and the input
// number; the output refers back to the input items.
func TestRecordsExample(t *testing.T) {
	op := build(t, inline(wat(t, "examples/c_to_f.wat"), `"unit":"F"`))
	noReading := transform.Item{ID: "text", Title: "no reading", Published: t0}
	out, err := op.Apply(ctx(), [][]transform.Item{readings(0, 100, -40), {noReading}})
	if err != nil {
		t.Fatal(err)
	}
	if got := values(out); !slices.Equal(got, []float64{32, 212, -40, -1}) {
		t.Errorf("values %v", got)
	}
	want := []string{"r0", "r1", "r2", "text"}
	for i, it := range out {
		if it.ID != want[i] {
			t.Errorf("item %d: id %q, want %q", i, it.ID, want[i])
		}
	}
	if r := out[1].Reading; r.Unit != "F" || out[1].Title != "lab-1: 212 °F" || !r.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("converted item %+v %+v", out[1], r)
	}
	if out[3].Title != "no reading" || out[3].Reading != nil {
		t.Errorf("item without a reading changed: %+v", out[3])
	}
	// The input items are not modified.
	if in := readings(0); in[0].Reading.Value != 0 || in[0].Reading.Unit != "C" {
		t.Errorf("input changed")
	}
}

func TestDespikeExample(t *testing.T) {
	bin := wat(t, "examples/despike.wat")
	tests := []struct {
		name   string
		params string
		in     []float64
		want   []float64
	}{
		{"default delta 5", "", []float64{20, 21, 80, 22, 23.5, -10, 24}, []float64{20, 21, 22, 23.5, 24}},
		{"delta 0.5", `"params":[0.5]`, []float64{20, 20.4, 21, 20.9}, []float64{20, 20.4, 20.9}},
		{"first reading is kept", `"params":[1]`, []float64{99, 20, 98.5}, []float64{99, 98.5}},
		{"empty batch", "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := build(t, inline(bin, tt.params))
			out, err := op.Apply(ctx(), [][]transform.Item{readings(tt.in...)})
			if err != nil {
				t.Fatal(err)
			}
			if got := values(out); !slices.Equal(got, tt.want) && len(got)+len(tt.want) > 0 {
				t.Errorf("values %v, want %v", got, tt.want)
			}
			for _, it := range out {
				if strings.Contains(it.ID, "~") || it.Title == "" {
					t.Errorf("kept item changed: %+v", it)
				}
			}
		})
	}
}

// A stateful module gets back what it saved after the previous run,
// also through the runner's SaveState and LoadState, but not a state
// another module saved.
func TestState(t *testing.T) {
	despike := wat(t, "examples/despike.wat")
	op := build(t, inline(despike, `"params":[5]`)).(*operator)
	runs := []struct{ in, want []float64 }{
		{[]float64{20, 21}, []float64{20, 21}},
		{[]float64{90}, []float64{}},
		{nil, []float64{}}, // no items: the module is not called, the state stays
		{[]float64{22, 95}, []float64{22}},
	}
	for i, r := range runs {
		out, err := op.Apply(ctx(), [][]transform.Item{readings(r.in...)})
		if err != nil || !slices.Equal(values(out), r.want) {
			t.Fatalf("run %d: %v, %v; want %v", i, values(out), err, r.want)
		}
	}
	saved, err := op.SaveState()
	if err != nil || saved == nil {
		t.Fatalf("SaveState: %s, %v", saved, err)
	}
	// A new operator (the pipe rebuilt, slogfeed restarted) carries on.
	again := build(t, inline(despike, `"params":[5]`)).(*operator)
	if err := again.LoadState(saved); err != nil {
		t.Fatal(err)
	}
	if out, err := again.Apply(ctx(), [][]transform.Item{readings(30, 23)}); err != nil || !slices.Equal(values(out), []float64{23}) {
		t.Errorf("after LoadState: %v, %v", values(out), err)
	}
	// Another module does not get it.
	other := build(t, inline(wat(t, "testdata/statebig.wat"), "")).(*operator)
	if err := other.LoadState(saved); err != nil {
		t.Fatal(err)
	}
	if other.stateOf == other.mod.sum {
		t.Error("the state names the other module")
	}
	// A module without state saves none.
	if st, err := build(t, inline(wat(t, "examples/c_to_f.wat"), "")).(*operator).SaveState(); st != nil || err != nil {
		t.Errorf("stateless module: %s, %v", st, err)
	}
	for _, bad := range []string{`{`, `{"v":2,"module":"00","state":""}`, `{"v":1,"module":"zz","state":""}`} {
		if err := again.LoadState(json.RawMessage(bad)); err == nil {
			t.Errorf("LoadState(%s) accepted", bad)
		}
	}
	// A state over MaxStateBytes fails the run.
	if _, err := other.Apply(ctx(), [][]transform.Item{readings(1)}); !errors.Is(err, ErrOutput) || !errors.Is(err, transform.ErrLimit) || !strings.Contains(err.Error(), "state_save") {
		t.Errorf("large state: %v", err)
	}
}

// The json ABI: the output changes fields of input items; text is
// sanitised; a repeated index makes a second item with its own id.
func TestJSONABI(t *testing.T) {
	op := build(t, inline(wat(t, "testdata/jsonconst.wat"), `"abi":"json"`))
	out, err := op.Apply(ctx(), [][]transform.Item{readings(20, 30)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("%d items, want 2", len(out))
	}
	a, b := out[0], out[1]
	if a.ID != "r0" || a.Reading.Value != 42.5 || a.Reading.Unit != "F" || a.Title != "hot now" ||
		a.Summary != "<p>ok</p>" || !slices.Equal(a.Categories, []string{"alerts"}) {
		t.Errorf("first item %+v %+v", a, a.Reading)
	}
	if b.ID != "r0~2" || b.Reading.Value != 20 || b.Title != "20" {
		t.Errorf("second item %+v", b)
	}

	errOp := build(t, inline(wat(t, "testdata/jsonerr.wat"), `"abi":"json"`))
	if _, err := errOp.Apply(ctx(), [][]transform.Item{readings(1)}); !errors.Is(err, ErrReported) || !strings.Contains(err.Error(), "sensor offline") {
		t.Errorf("reported error: %v", err)
	}
	// The input document is not an output document.
	echo := build(t, inline(wat(t, "testdata/echo.wat"), `"abi":"json"`))
	if _, err := echo.Apply(ctx(), [][]transform.Item{readings(1)}); !errors.Is(err, ErrOutput) || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("echoed JSON: %v", err)
	}
	echo = build(t, inline(wat(t, "testdata/echo.wat"), ""))
	if _, err := echo.Apply(ctx(), [][]transform.Item{readings(1)}); !errors.Is(err, ErrOutput) {
		t.Errorf("echoed records: %v", err)
	}
}

// Named modules come from the library, are checked when the node is
// built if a library is there, and are recompiled when they change.
func TestNamedModules(t *testing.T) {
	lib := &memLibrary{}
	useLibrary(t, lib)
	if _, err := newOperator(json.RawMessage(`{"module":"c-to-f"}`)); !errors.Is(err, ErrModuleNotFound) || !errors.Is(err, transform.ErrInvalid) {
		t.Fatalf("missing module: %v", err)
	}
	lib.put("c-to-f", wat(t, "examples/c_to_f.wat"))
	op := build(t, json.RawMessage(`{"module":"c-to-f"}`))
	out, err := op.Apply(ctx(), [][]transform.Item{readings(100)})
	if err != nil || !slices.Equal(values(out), []float64{212}) {
		t.Fatalf("run: %v %v", values(out), err)
	}
	// A new version under the same name is used from the next run on.
	lib.put("c-to-f", wat(t, "testdata/evil.wat"))
	out, err = op.Apply(ctx(), [][]transform.Item{readings(0)})
	if err != nil || !slices.Equal(values(out), []float64{0}) {
		t.Fatalf("after the update: %v %v", values(out), err)
	}
	// Deleted: the run fails and says why.
	lib.mu.Lock()
	delete(lib.mods, "c-to-f")
	lib.mu.Unlock()
	if _, err := op.Apply(ctx(), [][]transform.Item{readings(0)}); !errors.Is(err, ErrModuleNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
	// Without a library (a pipe loaded before the store), the node is
	// built and its runs fail until a library has the module.
	restore := SetLibrary(nil)
	op = build(t, json.RawMessage(`{"module":"later"}`))
	if _, err := op.Apply(ctx(), [][]transform.Item{readings(0)}); !errors.Is(err, ErrModuleNotFound) || !strings.Contains(err.Error(), "no module store") {
		t.Fatalf("without a library: %v", err)
	}
	restore()
	lib.put("later", wat(t, "examples/c_to_f.wat"))
	if out, err := op.Apply(ctx(), [][]transform.Item{readings(0)}); err != nil || !slices.Equal(values(out), []float64{32}) {
		t.Fatalf("once the library has it: %v %v", values(out), err)
	}
}

// A module is compiled once while nodes use it.
func TestCompileCache(t *testing.T) {
	bin := wat(t, "examples/despike.wat")
	a := build(t, inline(bin, "")).(*operator)
	b := build(t, inline(bin, `"params":[2]`)).(*operator)
	if a.mod != b.mod {
		t.Error("the same module was compiled twice")
	}
	info, err := Validate(context.Background(), bin)
	if err != nil || info.Size != len(bin) || info.MemoryMiB != 1 || info.Configure || !info.Stateful {
		t.Errorf("Validate: %+v %v", info, err)
	}
}

// The catalogue lists the operator in the plugin family with its schema.
func TestCatalogue(t *testing.T) {
	for _, oi := range transform.Catalogue() {
		if oi.Name != "wasm" {
			continue
		}
		if oi.Family != transform.FamilyPlugin || oi.MaxInputs != MaxInputs || oi.MinInputs != 1 {
			t.Errorf("catalogue entry %+v", oi)
		}
		for _, field := range []string{"module", "module_base64", "abi", "params", "config", "memory_mib", "time_limit"} {
			if !strings.Contains(string(oi.Schema), `"`+field+`"`) {
				t.Errorf("schema lacks %s: %s", field, oi.Schema)
			}
		}
		return
	}
	t.Fatal("wasm is not in the catalogue")
}
