;; A plugin whose route answers break the ABI on request (see README.md).
;; Everything else answers OK with empty output.
(module
  (memory (export "memory") 2)
  ;; describe: OK, name "bad", version "1.0", feature body, type "x-bad", no settings
  (data (i32.const 1024) "\00\03bad\031.0\04\00\00\00\01\05x-bad\00")
  ;; unknown status
  (data (i32.const 2048) "\07")
  ;; OK, 255 ids announced, none there
  (data (i32.const 2064) "\00\ff\00\00\00")
  ;; OK, one id (0), then a via action: via must come alone
  (data (i32.const 2080) "\00\01\00\00\00\00\00\00\00\01\00\00\00\00\00\00\00\00\06direct")

  (func (export "warren_abi_version") (result i32) (i32.const 0x00010000))
  ;; the exchange buffer: 60000 bytes at 4096
  (func (export "warren_buffer") (param $size i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $size) (i32.const 60000))
      (then (i32.const 0))
      (else (i32.const 4096))))
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32))
            (i64.extend_i32_u (local.get $len))))
  (func (export "warren_describe") (param i32) (result i64)
    (call $pack (i32.const 1024) (i32.const 21)))
  (func (export "warren_create") (param i32) (result i64) (i64.const 0))
  (func (export "warren_add_binding") (param i32) (result i64) (i64.const 0))
  (func (export "warren_remove_bindings") (param i32) (result i64) (i64.const 0))
  (func (export "warren_route") (param $n i32) (result i64)
    (local $c i32)
    ;; route record: u32 exchange, u8 key length, key: the first key byte is at 4101
    (local.set $c (i32.load8_u (i32.const 4101)))
    (if (i32.eq (local.get $c) (i32.const 116)) (then unreachable))                          ;; t
    (if (i32.eq (local.get $c) (i32.const 111)) (then (return (call $pack (i32.const 0xffff0000) (i32.const 16))))) ;; o
    (if (i32.eq (local.get $c) (i32.const 115)) (then (return (call $pack (i32.const 2048) (i32.const 1)))))  ;; s
    (if (i32.eq (local.get $c) (i32.const 99)) (then (return (call $pack (i32.const 2064) (i32.const 5)))))   ;; c
    (if (i32.eq (local.get $c) (i32.const 118)) (then (return (call $pack (i32.const 2080) (i32.const 25))))) ;; v
    (i64.const 0)))
