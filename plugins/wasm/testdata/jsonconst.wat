;; jsonconst.wat: a "json" ABI module whose output is a constant: item 0
;; with a new value, unit, title, summary and categories, then item 0
;; again unchanged.
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"items\":[{\"index\":0,\"value\":42.5,\"unit\":\"F\",\"title\":\"<b>hot</b> now\",\"summary\":\"<script>alert(1)</script><p>ok</p>\",\"categories\":[\"alerts\"]},{\"index\":0}]}")
  (global $heap (mut i32) (i32.const 4096))
  (func (export "slogfeed_abi") (result i32) (i32.const 1))
  (func (export "alloc") (param $size i32) (result i32)
    (local $ptr i32)
    (local $end i32)
    (local.set $ptr (global.get $heap))
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
  (func (export "process") (param i32 i32) (result i64)
    ;; 155 bytes at 16.
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 155))))
