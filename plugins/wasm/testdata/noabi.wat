;; noabi.wat: no slogfeed_abi export.
(module
  (memory (export "memory") 1)
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "process") (param i32 i32) (result i64) (i64.const 0)))
