package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/slogfeed/slogfeed/transform"
)

// Limits of modules and their runs.
const (
	// DefaultMemoryMiB is a node's memory limit when it sets none, and
	// MaxMemoryMiB the most it may set.
	DefaultMemoryMiB = 16
	MaxMemoryMiB     = 256
	// MaxModuleBytes bounds a module in the module store, MaxInlineBytes
	// one given inline in a node's configuration (module_base64).
	MaxModuleBytes = 8 << 20
	MaxInlineBytes = 128 << 10
	// ValidateTime bounds the instantiation and calls that check a
	// module when it is uploaded or a node is built.
	ValidateTime = 2 * time.Second
	// MaxTimeLimit bounds a node's time_limit; a run also ends with its
	// pipe's time limit.
	MaxTimeLimit = time.Minute
	// MaxStateBytes bounds the state a module keeps between runs.
	MaxStateBytes = 64 << 10
	// MaxConcurrentRuns bounds the modules running at once in the
	// process, and so the memory they hold: each has its linear memory
	// (memory_mib) and a call stack that wazero lets grow to about
	// 100 MiB. Further runs wait (within their time limit).
	MaxConcurrentRuns = 4

	pageSize = 64 << 10
	mib      = 1 << 20
)

// The exports of the ABI.
const (
	exportMemory    = "memory"
	exportABI       = "slogfeed_abi"
	exportAlloc     = "alloc"
	exportProcess   = "process"
	exportConfigure = "configure"
	exportStateLoad = "state_load"
	exportStateSave = "state_save"
	startFunction   = "_initialize"
)

// engine compiles and runs modules. There is one per process (the
// compiled code is shared by every node using the same module): a wazero
// runtime with context-done termination and the memory ceiling of
// MaxMemoryMiB, and the compiled modules by SHA-256. A compiled module
// lives while a node uses it and is released when none does.
type engine struct {
	rt   wazero.Runtime
	sem  chan struct{} // MaxConcurrentRuns slots
	mu   sync.Mutex
	mods map[[32]byte]weak.Pointer[module]
}

var theEngine = sync.OnceValue(func() *engine {
	cfg := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(MaxMemoryMiB * mib / pageSize)
	return &engine{
		rt:   wazero.NewRuntimeWithConfig(context.Background(), cfg),
		sem:  make(chan struct{}, MaxConcurrentRuns),
		mods: make(map[[32]byte]weak.Pointer[module]),
	}
})

// module is a compiled, checked module.
type module struct {
	sum       [32]byte
	size      int
	cm        wazero.CompiledModule
	minPages  uint32 // initial memory
	configure bool   // exports configure
	stateful  bool   // exports state_load and state_save
}

// Info describes a checked module.
type Info struct {
	// SHA256 is the hex SHA-256 of the binary.
	SHA256 string `json:"sha256"`
	// Size is the binary's size in bytes.
	Size int `json:"size"`
	// MemoryMiB is the initial memory the module declares, in MiB
	// (rounded up): the least memory_mib a node using it may set.
	MemoryMiB int `json:"memory_mib"`
	// Configure reports whether the module exports configure.
	Configure bool `json:"configure"`
	// Stateful reports whether the module keeps state between runs
	// (exports state_load and state_save).
	Stateful bool `json:"stateful"`
}

func (m *module) info() Info {
	return Info{
		SHA256:    fmt.Sprintf("%x", m.sum),
		Size:      m.size,
		MemoryMiB: int((uint64(m.minPages)*pageSize + mib - 1) / mib),
		Configure: m.configure,
		Stateful:  m.stateful,
	}
}

// Validate compiles bin and checks it against the ABI: its exports and
// their types, no imports, and slogfeed_abi returning ABIVersion. Errors
// wrap ErrModule.
func Validate(ctx context.Context, bin []byte) (Info, error) {
	m, err := theEngine().compile(ctx, bin)
	if err != nil {
		return Info{}, err
	}
	return m.info(), nil
}

// cached returns the compiled module whose binary has SHA-256 sum, if a
// node still uses it.
func (e *engine) cached(sum [32]byte) *module {
	e.mu.Lock()
	defer e.mu.Unlock()
	if wp, ok := e.mods[sum]; ok {
		return wp.Value()
	}
	return nil
}

// compile returns bin compiled and checked, from the cache when it is
// there.
func (e *engine) compile(ctx context.Context, bin []byte) (*module, error) {
	sum := sha256.Sum256(bin)
	if m := e.cached(sum); m != nil {
		return m, nil
	}
	if !bytes.HasPrefix(bin, []byte("\x00asm")) {
		return nil, fmt.Errorf("%w: not a WebAssembly binary (compile the text form with wat2wasm)", ErrModule)
	}
	cm, err := e.rt.CompileModule(ctx, bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrModule, firstLine(err.Error()))
	}
	m := &module{sum: sum, size: len(bin), cm: cm}
	if err := m.check(); err != nil {
		_ = cm.Close(context.Background())
		return nil, err
	}
	if err := e.checkVersion(ctx, m); err != nil {
		_ = cm.Close(context.Background())
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if wp, ok := e.mods[sum]; ok {
		if other := wp.Value(); other != nil {
			_ = cm.Close(context.Background())
			return other, nil
		}
	}
	for k, wp := range e.mods {
		if wp.Value() == nil {
			delete(e.mods, k)
		}
	}
	runtime.AddCleanup(m, func(cm wazero.CompiledModule) { _ = cm.Close(context.Background()) }, cm)
	e.mods[sum] = weak.Make(m)
	return m, nil
}

// check checks the module's imports and exports against the ABI.
func (m *module) check() error {
	if imp := m.cm.ImportedFunctions(); len(imp) > 0 {
		mod, name, _ := imp[0].Import()
		return fmt.Errorf("%w: it imports %s.%s, but slogfeed gives modules no imports (build for wasm32-unknown-unknown, or TinyGo's wasm-unknown target)", ErrModule, mod, name)
	}
	if len(m.cm.ImportedMemories()) > 0 {
		return fmt.Errorf("%w: it imports its memory; it must define and export it as %q", ErrModule, exportMemory)
	}
	mem, ok := m.cm.ExportedMemories()[exportMemory]
	if !ok {
		return fmt.Errorf("%w: no memory exported as %q", ErrModule, exportMemory)
	}
	m.minPages = mem.Min()
	fns := m.cm.ExportedFunctions()
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	want := []struct {
		name     string
		params   []api.ValueType
		result   api.ValueType
		optional bool
	}{
		{exportABI, nil, i32, false},
		{exportAlloc, []api.ValueType{i32}, i32, false},
		{exportProcess, []api.ValueType{i32, i32}, i64, false},
		{exportConfigure, []api.ValueType{i32, i32}, i32, true},
		{exportStateLoad, []api.ValueType{i32, i32}, i32, true},
		{exportStateSave, nil, i64, true},
	}
	for _, w := range want {
		fn, ok := fns[w.name]
		if !ok {
			if w.optional {
				continue
			}
			return fmt.Errorf("%w: no function exported as %q (want %s)", ErrModule, w.name, signature(w.params, w.result))
		}
		if !sameTypes(fn.ParamTypes(), w.params) || !sameTypes(fn.ResultTypes(), []api.ValueType{w.result}) {
			return fmt.Errorf("%w: %q is %s, want %s", ErrModule, w.name, signature(fn.ParamTypes(), fn.ResultTypes()...), signature(w.params, w.result))
		}
		if w.name == exportConfigure {
			m.configure = true
		}
	}
	_, load := fns[exportStateLoad]
	_, save := fns[exportStateSave]
	if load != save {
		return fmt.Errorf("%w: it exports only one of %q and %q; a module that keeps state exports both", ErrModule, exportStateLoad, exportStateSave)
	}
	m.stateful = load
	return nil
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// signature writes a function type as WAT does: (param i32 i32) (result i64).
func signature(params []api.ValueType, results ...api.ValueType) string {
	s := "(func"
	if len(params) > 0 {
		s += " (param"
		for _, p := range params {
			s += " " + api.ValueTypeName(p)
		}
		s += ")"
	}
	if len(results) > 0 {
		s += " (result"
		for _, r := range results {
			s += " " + api.ValueTypeName(r)
		}
		s += ")"
	}
	return s + ")"
}

// checkVersion instantiates m once and calls slogfeed_abi.
func (e *engine) checkVersion(ctx context.Context, m *module) error {
	ctx, cancel := context.WithTimeout(ctx, ValidateTime)
	defer cancel()
	if err := e.acquire(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrModule, classify(ctx, err, nil, "the wait for a free slot", ValidateTime))
	}
	defer e.release()
	inst, mem, err := e.instantiate(ctx, m, MaxMemoryMiB*mib)
	if err != nil {
		return fmt.Errorf("%w: instantiating: %w", ErrModule, classify(ctx, err, mem, "instantiation", ValidateTime))
	}
	defer inst.Close(context.Background())
	res, err := inst.ExportedFunction(exportABI).Call(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrModule, exportABI, classify(ctx, err, mem, exportABI, ValidateTime))
	}
	if v := int32(res[0]); v != ABIVersion {
		return fmt.Errorf("%w: %s returned %d; this slogfeed speaks ABI version %d", ErrModule, exportABI, v, ABIVersion)
	}
	return nil
}

// acquire takes one of the MaxConcurrentRuns slots, waiting while ctx
// lasts; release gives it back.
func (e *engine) acquire(ctx context.Context) error {
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *engine) release() { <-e.sem }

// instantiate makes a fresh instance of m whose memory may grow to limit
// bytes. The caller closes it.
func (e *engine) instantiate(ctx context.Context, m *module, limit uint64) (api.Module, *capMemory, error) {
	mem := &capMemory{limit: limit}
	if need := uint64(m.minPages) * pageSize; need > limit {
		mem.asked = need
		return nil, mem, memoryError(mem, fmt.Errorf("the module declares an initial memory of %s", sizeString(need)))
	}
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions(startFunction)
	alloc := experimental.MemoryAllocatorFunc(func(capHint, _ uint64) experimental.LinearMemory {
		mem.buf = make([]byte, 0, min(capHint, limit))
		return mem
	})
	inst, err := e.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, alloc), m.cm, cfg)
	if err != nil {
		return nil, mem, err
	}
	return inst, mem, nil
}

// call is one run of a module: configure (when given a configuration and
// exported), state_load (when given a state and exported), process on
// input, then state_save (when exported).
type call struct {
	mod      *module
	limit    uint64 // memory, bytes
	config   []byte // nil: configure is not called
	state    []byte // the state of the previous run (empty: none)
	input    []byte // nil: process is not called (a check of configure)
	maxOut   int
	timeLeft time.Duration // the time limit, for messages
}

// outcome is what a run returned: copies of the output and of the new
// state (nil when the module keeps none).
type outcome struct {
	out, state []byte
}

// run runs c in a fresh instance under ctx, whose deadline is the time
// limit.
func (e *engine) run(ctx context.Context, c call) (outcome, error) {
	if err := e.acquire(ctx); err != nil {
		return outcome{}, classify(ctx, err, nil, "the wait for a free slot", c.timeLeft)
	}
	defer e.release()
	inst, mem, err := e.instantiate(ctx, c.mod, c.limit)
	if err != nil {
		return outcome{}, classify(ctx, err, mem, "instantiation", c.timeLeft)
	}
	defer inst.Close(context.Background())
	fail := func(stage string, err error) (outcome, error) {
		return outcome{}, classify(ctx, err, mem, stage, c.timeLeft)
	}
	// call2 hands data to the module's function fn(ptr, len) -> i32.
	call2 := func(fn string, data []byte) (int32, error) {
		ptr, err := put(ctx, inst, data)
		if err != nil {
			return 0, err
		}
		res, err := inst.ExportedFunction(fn).Call(ctx, uint64(ptr), uint64(len(data)))
		if err != nil {
			return 0, err
		}
		return int32(res[0]), nil
	}
	if c.config != nil && c.mod.configure {
		code, err := call2(exportConfigure, c.config)
		if err != nil {
			return fail(exportConfigure, err)
		}
		if code != 0 {
			return outcome{}, fmt.Errorf("%w: configure returned %d: the module refuses its configuration", ErrReported, code)
		}
	}
	if c.input == nil {
		return outcome{}, nil
	}
	if len(c.state) > 0 && c.mod.stateful {
		code, err := call2(exportStateLoad, c.state)
		if err != nil {
			return fail(exportStateLoad, err)
		}
		if code != 0 {
			return outcome{}, fmt.Errorf("%w: state_load returned %d: the module refuses its saved state", ErrReported, code)
		}
	}
	ptr, err := put(ctx, inst, c.input)
	if err != nil {
		return fail(exportAlloc, err)
	}
	res, err := inst.ExportedFunction(exportProcess).Call(ctx, uint64(ptr), uint64(len(c.input)))
	if err != nil {
		return fail(exportProcess, err)
	}
	var oc outcome
	if oc.out, err = read(inst, exportProcess, res[0], c.maxOut); err != nil {
		return outcome{}, err
	}
	if c.mod.stateful {
		res, err := inst.ExportedFunction(exportStateSave).Call(ctx)
		if err != nil {
			return fail(exportStateSave, err)
		}
		if oc.state, err = read(inst, exportStateSave, res[0], MaxStateBytes); err != nil {
			return outcome{}, err
		}
	}
	return oc, nil
}

// read copies the bytes a function's result (ptr << 32 | len) names,
// refusing more than max.
func read(inst api.Module, fn string, res uint64, max int) ([]byte, error) {
	ptr, n := uint32(res>>32), uint32(res)
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("%w: %s returned %d bytes, at most %d (%w)", ErrOutput, fn, n, max, transform.ErrLimit)
	}
	buf, ok := inst.Memory().Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("%w: %s returned %d bytes at %d, outside the memory of %d bytes", ErrOutput, fn, n, ptr, inst.Memory().Size())
	}
	return bytes.Clone(buf), nil
}

// put asks the module for len(data) bytes with alloc and copies data
// there.
func put(ctx context.Context, inst api.Module, data []byte) (uint32, error) {
	res, err := inst.ExportedFunction(exportAlloc).Call(ctx, uint64(len(data)))
	if err != nil {
		return 0, err
	}
	ptr := uint32(res[0])
	if !inst.Memory().Write(ptr, data) {
		return 0, fmt.Errorf("%w: alloc(%d) returned %d, outside the memory of %d bytes", ErrOutput, len(data), ptr, inst.Memory().Size())
	}
	return ptr, nil
}

// classify turns what a module call returned into slogfeed's errors: the
// time limit, a trap, a refused memory.grow.
func classify(ctx context.Context, err error, mem *capMemory, stage string, limit time.Duration) error {
	if errors.Is(err, ErrOutput) || errors.Is(err, ErrMemoryLimit) {
		return err
	}
	var base error
	ee, isExit := errorsAs[*sys.ExitError](err)
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return ctx.Err()
	case ctx.Err() != nil || (isExit && ee.ExitCode() == sys.ExitCodeDeadlineExceeded):
		base = fmt.Errorf("%w: the module was stopped in %s, past its time limit of %v", transform.ErrTimeLimit, stage, limit)
	case isExit:
		base = fmt.Errorf("%w: the module exited with code %d in %s", ErrTrap, ee.ExitCode(), stage)
	default:
		base = fmt.Errorf("%w in %s: %s", ErrTrap, stage, firstLine(err.Error()))
	}
	if mem != nil && mem.asked > 0 {
		return memoryError(mem, base)
	}
	return base
}

// memoryError is the error of a run during which the memory limit was
// hit; then is what ended the run.
func memoryError(mem *capMemory, then error) error {
	return fmt.Errorf("%w (%w): the module asked for %s, the limit is %s; %w", ErrMemoryLimit, transform.ErrLimit, sizeString(mem.asked), sizeString(mem.limit), then)
}

func sizeString(n uint64) string {
	if n%mib == 0 {
		return fmt.Sprintf("%d MiB", n/mib)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/mib)
}

// capMemory backs an instance's linear memory and refuses to grow it
// beyond limit, remembering the largest size asked for.
type capMemory struct {
	buf   []byte
	limit uint64
	asked uint64 // the largest refused size, 0 if none
}

// Reallocate implements experimental.LinearMemory.
func (m *capMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.asked = max(m.asked, size)
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		// Wasm memories only grow, and the bytes past len were zeroed
		// by make: the new pages read as zero.
		m.buf = m.buf[:size]
		return m.buf
	}
	c := max(size, min(2*uint64(cap(m.buf)), m.limit))
	nb := make([]byte, size, c)
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

// Free implements experimental.LinearMemory.
func (m *capMemory) Free() { m.buf = nil }
