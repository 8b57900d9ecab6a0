;; badalloc.wat: alloc returns an address far outside the memory.
(module
  (memory (export "memory") 1)
  (func (export "slogfeed_abi") (result i32) (i32.const 1))
  (func (export "alloc") (param i32) (result i32) (i32.const 0x7fffff00))
  (func (export "process") (param i32 i32) (result i64) (i64.const 0)))
