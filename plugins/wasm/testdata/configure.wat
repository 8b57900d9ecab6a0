;; configure.wat: configure accepts a JSON object (its first byte is '{')
;; and remembers its length; process sets every value to that length, so
;; a test sees that configure ran first, in the same instance.
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $configured (mut i32) (i32.const -1))
  (func (export "slogfeed_abi") (result i32) (i32.const 1))
  (func (export "alloc") (param $size i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (global.set $heap (i32.add (local.get $ptr) (local.get $size)))
    (local.get $ptr))
  (func (export "configure") (param $ptr i32) (param $len i32) (result i32)
    (if (i32.ne (i32.load8_u (local.get $ptr)) (i32.const 0x7b))
      (then (return (i32.const 3))))
    (global.set $configured (local.get $len))
    (i32.const 0))
  (func (export "process") (param $ptr i32) (param $len i32) (result i64)
    (local $n i32)
    (local $rec i32)
    (local $p i32)
    (local $end i32)
    (local.set $n (i32.load (local.get $ptr)))
    (local.set $rec
      (i32.add (i32.add (local.get $ptr) (i32.const 8))
               (i32.shl (i32.load offset=4 (local.get $ptr)) (i32.const 3))))
    (local.set $p (local.get $rec))
    (local.set $end (i32.add (local.get $rec) (i32.mul (local.get $n) (i32.const 24))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (f64.store (local.get $p) (f64.convert_i32_s (global.get $configured)))
        (i32.store offset=20 (local.get $p) (i32.const 1))
        (local.set $p (i32.add (local.get $p) (i32.const 24)))
        (br $next)))
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $rec)) (i64.const 32))
      (i64.extend_i32_u (i32.mul (local.get $n) (i32.const 24))))))
