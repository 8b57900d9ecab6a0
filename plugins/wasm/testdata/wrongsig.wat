;; wrongsig.wat: process returns an i32 instead of an i64.
(module
  (memory (export "memory") 1)
  (func (export "slogfeed_abi") (result i32) (i32.const 1))
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "process") (param i32 i32) (result i32) (i32.const 0)))
