package wasm

import "errors"

// Errors of WebAssembly operators and modules. A run that fails with one
// of them fails that run of its pipe only (the runner records the error
// and tries again on the next run); the process and the other pipes carry
// on. A run over its time limit fails with transform.ErrTimeLimit.
var (
	// ErrModule means a module cannot be used: it is not WebAssembly,
	// lacks an export of the ABI or has one of the wrong type, speaks
	// another ABI version, imports something (slogfeed provides no
	// imports) or fails when instantiated.
	ErrModule = errors.New("unusable WebAssembly module")
	// ErrModuleNotFound means a node names a module that the module
	// store does not hold (or no store is running).
	ErrModuleNotFound = errors.New("WebAssembly module not found")
	// ErrTrap means the module trapped: unreachable, an out-of-bounds
	// memory access, a division by zero, a stack overflow.
	ErrTrap = errors.New("WebAssembly operator trapped")
	// ErrOutput means the module returned something the ABI does not
	// allow: a pointer or length outside its memory, a length that is
	// not a whole number of records, an index that names no input item,
	// unknown flags, a value that is not finite, malformed JSON.
	ErrOutput = errors.New("WebAssembly operator returned a bad output")
	// ErrReported means the module failed the run itself (the "error"
	// member of a "json" output).
	ErrReported = errors.New("WebAssembly operator reported an error")
	// ErrMemoryLimit means the module needed more memory than its
	// limit: it declares a larger initial memory, or a run failed after
	// a memory.grow was refused. Such errors also match
	// transform.ErrLimit.
	ErrMemoryLimit = errors.New("WebAssembly operator over its memory limit")
)
