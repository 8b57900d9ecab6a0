;; c_to_f.wat: a slogfeed WebAssembly operator that converts readings from
;; degrees Celsius to degrees Fahrenheit.
;;
;; It speaks ABI version 1 with the "records" batch form (docs/wasm.md):
;;
;;   input, at the pointer process is given (little-endian):
;;     u32 count, u32 param count, param count × f64, then count records
;;   record, 24 bytes:
;;     +0 f64 value   +8 i64 time (Unix ns)   +16 i32 index   +20 i32 flags
;;   input flags:  1 = the item has a value, 2 = it has a time
;;   output flags: 1 = set the value,       2 = set the time
;;
;; process converts every record in place and returns the same records: the
;; output item of each is the input item its index names, with the new
;; value. Build it with: wat2wasm c_to_f.wat -o c_to_f.wasm
(module
  ;; One 64 KiB page to start; alloc grows the memory when a batch needs
  ;; more. slogfeed refuses to grow it beyond the node's memory limit.
  (memory (export "memory") 1)

  ;; The first free byte. Every run gets a fresh instance of the module,
  ;; so a bump allocator that never frees is all it takes.
  (global $heap (mut i32) (i32.const 1024))

  ;; The ABI version the module speaks.
  (func (export "slogfeed_abi") (result i32)
    (i32.const 1))

  ;; alloc returns the address of size free bytes, 8-byte aligned, growing
  ;; the memory when needed (and trapping when it cannot).
  (func (export "alloc") (param $size i32) (result i32)
    (local $ptr i32)
    (local $end i32)
    (local.set $ptr
      (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (local.set $end (i32.add (local.get $ptr) (local.get $size)))
    (if (i32.gt_u (local.get $end) (i32.shl (memory.size) (i32.const 16)))
      (then
        (if (i32.eq
              (memory.grow
                (i32.sub
                  (i32.shr_u (i32.add (local.get $end) (i32.const 0xffff)) (i32.const 16))
                  (memory.size)))
              (i32.const -1))
          (then unreachable))))
    (global.set $heap (local.get $end))
    (local.get $ptr))

  ;; process converts the batch at ptr and returns (records << 32) | length.
  (func (export "process") (param $ptr i32) (param $len i32) (result i64)
    (local $count i32)
    (local $rec i32)
    (local $end i32)
    (local.set $count (i32.load (local.get $ptr)))
    ;; The records follow the header and the parameters (none are used).
    (local.set $rec
      (i32.add
        (i32.add (local.get $ptr) (i32.const 8))
        (i32.shl (i32.load offset=4 (local.get $ptr)) (i32.const 3))))
    (local.set $end
      (i32.add (local.get $rec) (i32.mul (local.get $count) (i32.const 24))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $rec) (local.get $end)))
        (if (i32.and (i32.load offset=20 (local.get $rec)) (i32.const 1))
          (then
            ;; °F = °C × 1.8 + 32, and flag 1: set the value.
            (f64.store (local.get $rec)
              (f64.add
                (f64.mul (f64.load (local.get $rec)) (f64.const 1.8))
                (f64.const 32)))
            (i32.store offset=20 (local.get $rec) (i32.const 1)))
          (else
            ;; No value: pass the item on unchanged (flags 0).
            (i32.store offset=20 (local.get $rec) (i32.const 0))))
        (local.set $rec (i32.add (local.get $rec) (i32.const 24)))
        (br $next)))
    ;; The output starts where the records start, with as many records.
    (i64.or
      (i64.shl
        (i64.extend_i32_u
          (i32.sub (local.get $end) (i32.mul (local.get $count) (i32.const 24))))
        (i64.const 32))
      (i64.extend_i32_u (i32.mul (local.get $count) (i32.const 24)))))
)
