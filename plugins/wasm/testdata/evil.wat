;; evil.wat: a module that misbehaves on request, for the tests of the
;; sandbox. The node's first parameter, or else the value of the batch's
;; first item, picks what process does:
;;   0 pass every item on unchanged      7  output not whole records
;;   1 loop forever                      8  output index naming no item
;;   2 grow memory until refused, trap   9  output value NaN
;;   3 unreachable                       10 output with unknown flags
;;   4 unbounded recursion               11 value = runs of this instance
;;   5 integer division by zero          12 output length 4 GiB - 1
;;   6 output pointer outside memory     13 grow until refused, loop forever
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))
  (global $runs (mut i32) (i32.const 0))

  (func (export "slogfeed_abi") (result i32) (i32.const 1))

  (func (export "alloc") (param $size i32) (result i32)
    (local $ptr i32)
    (local $end i32)
    (local.set $ptr (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
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

  (func $recurse (param $n i32) (result i32)
    (i32.add (call $recurse (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))

  (func $out (param $ptr i32) (param $len i32) (result i64)
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
      (i64.extend_i32_u (local.get $len))))

  (func (export "process") (param $ptr i32) (param $len i32) (result i64)
    (local $mode i32)
    (local $n i32)
    (local $rec i32)
    (local $p i32)
    (local $end i32)
    (global.set $runs (i32.add (global.get $runs) (i32.const 1)))
    (local.set $n (i32.load (local.get $ptr)))
    (local.set $rec
      (i32.add
        (i32.add (local.get $ptr) (i32.const 8))
        (i32.shl (i32.load offset=4 (local.get $ptr)) (i32.const 3))))
    ;; The mode: the first parameter, else the first item's value.
    (if (i32.gt_u (i32.load offset=4 (local.get $ptr)) (i32.const 0))
      (then (local.set $mode (i32.trunc_sat_f64_s (f64.load offset=8 (local.get $ptr)))))
      (else
        (if (i32.and (i32.gt_u (local.get $n) (i32.const 0))
                     (i32.and (i32.load offset=20 (local.get $rec)) (i32.const 1)))
          (then (local.set $mode (i32.trunc_sat_f64_s (f64.load (local.get $rec))))))))
    (if (i32.eq (local.get $mode) (i32.const 1))
      (then (loop $forever (br $forever))))
    (if (i32.or (i32.eq (local.get $mode) (i32.const 2)) (i32.eq (local.get $mode) (i32.const 13)))
      (then
        (loop $grow
          (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
        (if (i32.eq (local.get $mode) (i32.const 13))
          (then (loop $forever (br $forever))))
        unreachable))
    (if (i32.eq (local.get $mode) (i32.const 3))
      (then unreachable))
    (if (i32.eq (local.get $mode) (i32.const 4))
      (then (drop (call $recurse (i32.const 0)))))
    (if (i32.eq (local.get $mode) (i32.const 5))
      (then (drop (i32.div_u (i32.const 1) (i32.sub (local.get $n) (local.get $n))))))
    (if (i32.eq (local.get $mode) (i32.const 6))
      (then (return (call $out (i32.const 0x7fff0000) (i32.const 24)))))
    (if (i32.eq (local.get $mode) (i32.const 7))
      (then (return (call $out (local.get $rec) (i32.const 23)))))
    (if (i32.eq (local.get $mode) (i32.const 8))
      (then
        (i32.store offset=16 (local.get $rec) (local.get $n))
        (i32.store offset=20 (local.get $rec) (i32.const 0))
        (return (call $out (local.get $rec) (i32.const 24)))))
    (if (i32.eq (local.get $mode) (i32.const 9))
      (then
        (f64.store (local.get $rec) (f64.const nan))
        (i32.store offset=20 (local.get $rec) (i32.const 1))
        (return (call $out (local.get $rec) (i32.const 24)))))
    (if (i32.eq (local.get $mode) (i32.const 10))
      (then
        (i32.store offset=20 (local.get $rec) (i32.const 4))
        (return (call $out (local.get $rec) (i32.const 24)))))
    (if (i32.eq (local.get $mode) (i32.const 12))
      (then (return (call $out (i32.const 0) (i32.const -1)))))
    ;; Modes 0 and 11: every item, unchanged or with value = runs.
    (local.set $p (local.get $rec))
    (local.set $end (i32.add (local.get $rec) (i32.mul (local.get $n) (i32.const 24))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (if (i32.eq (local.get $mode) (i32.const 11))
          (then
            (f64.store (local.get $p) (f64.convert_i32_u (global.get $runs)))
            (i32.store offset=20 (local.get $p) (i32.const 1)))
          (else (i32.store offset=20 (local.get $p) (i32.const 0))))
        (local.set $p (i32.add (local.get $p) (i32.const 24)))
        (br $next)))
    (call $out (local.get $rec) (i32.mul (local.get $n) (i32.const 24))))
)
