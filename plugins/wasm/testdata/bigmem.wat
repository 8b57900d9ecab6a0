;; bigmem.wat: declares an initial memory of 32 MiB (512 pages).
(module
  (memory (export "memory") 512)
  (func (export "slogfeed_abi") (result i32) (i32.const 1))
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "process") (param i32 i32) (result i64) (i64.const 0)))
