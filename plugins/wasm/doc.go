// Package wasm runs user operators written in WebAssembly: the pipe
// operator "wasm" (family transform.FamilyPlugin) and the module store
// that holds the modules by name (the plugins.Service "wasm", routes
// under /api/v1/wasm). Modules run in wazero, a WebAssembly runtime in
// pure Go. docs/wasm.md is the guide, with a worked example.
//
// # The ABI, version 1
//
// A module imports nothing (no WASI, no host functions: no files, no
// network, no clock) and exports:
//
//	memory                                   its linear memory
//	slogfeed_abi() -> i32                    the ABI version: 1
//	alloc(size i32) -> i32                   the address of size free bytes
//	process(ptr i32, len i32) -> i64         the batch at ptr → (out ptr << 32) | out len
//	configure(ptr i32, len i32) -> i32       optional: the node's "config" JSON; 0 = accepted
//	state_load(ptr i32, len i32) -> i32      optional, with state_save: the state saved by the last run; 0 = accepted
//	state_save() -> i64                      (ptr << 32) | len of the state to keep (at most MaxStateBytes)
//
// Each run of a node gets a fresh instance (so nothing leaks between runs
// or pipes): slogfeed calls the start function _initialize if exported;
// when the node has a "config", alloc and configure; when there is a
// saved state, alloc and state_load; then alloc, copies the batch in, and
// calls process, and reads the output from the module's memory at the
// returned pointer and length; then state_save. The state is the node's
// transform.Stateful state: the runner stores it with the pipe when the
// run's output is stored, and a module (or version) other than the one
// that saved it starts afresh.
//
// The batch comes in one of two forms (the node's "abi"):
//
// "records" (default), little-endian: a header {u32 count, u32 param
// count}, the node's "params" as f64 values, then count records of 24
// bytes {f64 value, i64 observation time in Unix ns, i32 index, i32
// flags}. Input flags: FlagValue (the item has a reading; value NaN
// otherwise), FlagTime (time holds the reading's time or else the item's
// publish time), and the input (edge) number in bits 8 to 15. The output
// is an array of records, each naming an input item by index: the output
// item is that item, with the value set when FlagValue is set and the
// time when FlagTime is set. Items no record names are dropped; an index
// may repeat (the k-th copy's id gets "~k").
//
// "json": the batch is {"abi": 1, "params": [...], "inputs": [...],
// "items": [...]} (items as the API shows them, inputs[i] the edge of
// items[i]); the output is {"items": [{"index": i, "value": ..., "unit":
// ..., "time": ..., "title": ..., "summary": ..., "categories": [...]}]},
// or {"error": "message"} to fail the run. Titles become plain text and
// summaries are sanitised like feed HTML.
//
// # Limits
//
// A node's memory grows to at most memory_mib (default DefaultMemoryMiB,
// at most MaxMemoryMiB); a memory.grow beyond it fails (returns -1), and
// a run that then fails reports ErrMemoryLimit. A run ends at the node's
// time_limit or its pipe's run time (transform.ErrTimeLimit). Traps are
// ErrTrap, outputs that break the ABI ErrOutput. Modules are at most
// MaxModuleBytes in the store and MaxInlineBytes inline; they are
// compiled once per SHA-256 while a node uses them. At most
// MaxConcurrentRuns modules run at once in the process.
//
// Named modules are resolved through the Library the module store
// installs (SetLibrary), before every run: replacing a module takes
// effect at the next run of every node that names it.
package wasm
