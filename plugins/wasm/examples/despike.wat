;; despike.wat: a slogfeed WebAssembly operator that drops spikes: a
;; reading whose value differs from the previous kept reading by more than
;; a delta is dropped. The delta is the node's first parameter
;; ("params": [5]), 5 when none is given. Items without a value pass on.
;; Feed it one sensor's readings.
;;
;; ABI version 1, "records" batch form (see c_to_f.wat and docs/wasm.md).
;; The output is a subset of the input records, so process compacts them
;; in place.
;;
;; Every run has a fresh instance, so the previous kept value is carried
;; from one run to the next as the operator's state: state_save returns it
;; after process, slogfeed stores it with the pipe, and hands it to
;; state_load before the next run's process. The very first reading is
;; always kept.
;;
;; Build it with: wat2wasm despike.wat -o despike.wasm
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 1024))

  ;; The state: the previous kept value, and whether there is one.
  (global $prev (mut f64) (f64.const 0))
  (global $have (mut i32) (i32.const 0))

  (func (export "slogfeed_abi") (result i32)
    (i32.const 1))

  ;; alloc: a bump allocator, as in c_to_f.wat.
  (func $alloc (export "alloc") (param $size i32) (result i32)
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

  ;; state_load takes the state saved after the previous run: 16 bytes,
  ;; f64 previous value, i32 whether there is one, 4 bytes of padding.
  ;; Anything else (a state of another version) is ignored: start afresh.
  (func (export "state_load") (param $ptr i32) (param $len i32) (result i32)
    (if (i32.eq (local.get $len) (i32.const 16))
      (then
        (global.set $prev (f64.load (local.get $ptr)))
        (global.set $have (i32.load offset=8 (local.get $ptr)))))
    (i32.const 0))

  ;; state_save returns the state to keep: (ptr << 32) | 16.
  (func (export "state_save") (result i64)
    (local $p i32)
    (local.set $p (call $alloc (i32.const 16)))
    (f64.store (local.get $p) (global.get $prev))
    (i32.store offset=8 (local.get $p) (global.get $have))
    (i32.store offset=12 (local.get $p) (i32.const 0))
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $p)) (i64.const 32))
      (i64.const 16)))

  (func (export "process") (param $ptr i32) (param $len i32) (result i64)
    (local $count i32)
    (local $rec i32)   ;; the record being read
    (local $end i32)
    (local $start i32) ;; the first record: the output starts there too
    (local $out i32)   ;; where the next kept record is written
    (local $delta f64)
    (local $v f64)
    (local.set $count (i32.load (local.get $ptr)))
    ;; The delta: the first parameter, if any.
    (local.set $delta (f64.const 5))
    (if (i32.gt_u (i32.load offset=4 (local.get $ptr)) (i32.const 0))
      (then (local.set $delta (f64.load offset=8 (local.get $ptr)))))
    (local.set $start
      (i32.add
        (i32.add (local.get $ptr) (i32.const 8))
        (i32.shl (i32.load offset=4 (local.get $ptr)) (i32.const 3))))
    (local.set $end
      (i32.add (local.get $start) (i32.mul (local.get $count) (i32.const 24))))
    (local.set $rec (local.get $start))
    (local.set $out (local.get $start))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $rec) (local.get $end)))
        (block $keep
          (block $drop
            ;; No value: keep it.
            (br_if $keep
              (i32.eqz (i32.and (i32.load offset=20 (local.get $rec)) (i32.const 1))))
            (local.set $v (f64.load (local.get $rec)))
            ;; A jump of more than delta from the previous kept value: drop.
            (br_if $drop
              (i32.and
                (global.get $have)
                (f64.gt (f64.abs (f64.sub (local.get $v) (global.get $prev)))
                        (local.get $delta))))
            (global.set $prev (local.get $v))
            (global.set $have (i32.const 1))
            (br $keep))
          ;; Dropped: write nothing.
          (local.set $rec (i32.add (local.get $rec) (i32.const 24)))
          (br $next))
        ;; Kept: copy the record to the output, flags 0 (unchanged).
        (i64.store (local.get $out) (i64.load (local.get $rec)))
        (i64.store offset=8 (local.get $out) (i64.load offset=8 (local.get $rec)))
        (i32.store offset=16 (local.get $out) (i32.load offset=16 (local.get $rec)))
        (i32.store offset=20 (local.get $out) (i32.const 0))
        (local.set $out (i32.add (local.get $out) (i32.const 24)))
        (local.set $rec (i32.add (local.get $rec) (i32.const 24)))
        (br $next)))
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $start)) (i64.const 32))
      (i64.extend_i32_u (i32.sub (local.get $out) (local.get $start)))))
)
