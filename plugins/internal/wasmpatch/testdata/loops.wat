;; Fixture for wasmpatch tests: functions with loops, nested blocks, a
;; br_table, SIMD and bulk-memory instructions, so the rewrite must decode
;; every immediate correctly. Regenerate: wat2wasm --enable-all loops.wat
(module
  (memory (export "memory") 1)
  (global $g (mut i32) (i32.const 7))
  ;; spin: loops forever unless n > 0, counting n down.
  (func (export "spin") (param $n i32) (result i32)
    (local $i i32)
    (block $out
      (loop $top
        (br_if $out (i32.eq (local.get $n) (i32.const 1)))
        (if (i32.gt_s (local.get $n) (i32.const 1))
          (then (local.set $n (i32.sub (local.get $n) (i32.const 1))))
          (else nop))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $top)))
    (local.get $i))
  ;; dispatch: br_table over three blocks.
  (func (export "dispatch") (param $k i32) (result i32)
    (block $c
      (block $b
        (block $a
          (br_table $a $b $c (local.get $k)))
        (return (i32.const 10)))
      (return (i32.const 20)))
    (i32.const 30))
  ;; misc: SIMD, bulk memory, i64 and float constants, memory ops.
  (func (export "misc") (result i64)
    (memory.fill (i32.const 0) (i32.const 1) (i32.const 16))
    (memory.copy (i32.const 16) (i32.const 0) (i32.const 16))
    (v128.store offset=32 (i32.const 0)
      (i8x16.add (v128.load (i32.const 0)) (v128.const i32x4 1 2 3 4)))
    (drop (f64.const 1.5))
    (drop (f32.const 2.5))
    (drop (i8x16.extract_lane_u 3 (v128.load offset=32 (i32.const 0))))
    (global.set $g (i32.const 9))
    (i64.add (i64.load (i32.const 16)) (i64.const -123456789012)))
  ;; recurse: unbounded recursion without a loop.
  (func $recurse (export "recurse") (param $n i32) (result i32)
    (call $recurse (i32.add (local.get $n) (i32.const 1)))))
