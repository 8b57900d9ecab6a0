;; abi2.wat: speaks a version of the ABI slogfeed does not know.
(module
  (memory (export "memory") 1)
  (func (export "slogfeed_abi") (result i32) (i32.const 2))
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "process") (param i32 i32) (result i64) (i64.const 0)))
