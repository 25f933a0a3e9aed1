;; Fixture for wasmpatch tests: functions with loops, nested blocks, a
;; br_table, SIMD and bulk-memory instructions, so the rewrite must decode
;; every immediate correctly; and every place a function index lives (calls,
;; ref.func, exports, the start function, element segments of both forms,
;; a global's initializer, the name section), so renumbering is checked.
;; The imports come from env.wat.
;; Regenerate: wat2wasm --debug-names loops.wat && wat2wasm env.wat
(module
  (import "env" "twice" (func $twice (param i32) (result i32)))
  (import "env" "five" (global $five i32))
  (type $ii (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (table $t 4 funcref)
  (global $g (mut i32) (i32.const 7))
  (global $fr funcref (ref.func $inc))
  (global $started (mut i32) (i32.const 0))
  (elem (table $t) (i32.const 0) func $inc $dbl)
  (elem (table $t) (i32.const 2) funcref (ref.func $twice) (ref.func $inc))
  (elem declare func $dbl)
  (start $init)
  (func $init (global.set $started (global.get $five)))
  (func $inc (type $ii) (i32.add (local.get 0) (i32.const 1)))
  (func $dbl (type $ii) (i32.mul (local.get 0) (i32.const 2)))
  ;; indirect: table slot k applied to 10.
  (func $indirect (export "indirect") (param $k i32) (result i32)
    (call_indirect (type $ii) (i32.const 10) (local.get $k)))
  ;; direct: a defined and an imported function.
  (func $direct (export "direct") (param $x i32) (result i32)
    (call $twice (call $inc (local.get $x))))
  ;; reffunc: a ref.func stored in the table, and the global's.
  (func $reffunc (export "reffunc") (param $x i32) (result i32)
    (table.set $t (i32.const 3) (ref.func $dbl))
    (table.set $t (i32.const 2) (global.get $fr))
    (i32.add
      (call_indirect (type $ii) (local.get $x) (i32.const 3))
      (call_indirect (type $ii) (local.get $x) (i32.const 2))))
  (func $started (export "started") (result i32) (global.get $started))
  ;; spin: loops forever unless n > 0, counting n down.
  (func $spin (export "spin") (param $n i32) (result i32)
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
  (func $dispatch (export "dispatch") (param $k i32) (result i32)
    (block $c
      (block $b
        (block $a
          (br_table $a $b $c (local.get $k)))
        (return (i32.const 10)))
      (return (i32.const 20)))
    (i32.const 30))
  ;; misc: SIMD, bulk memory, i64 and float constants, memory ops.
  (func $misc (export "misc") (result i64)
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
