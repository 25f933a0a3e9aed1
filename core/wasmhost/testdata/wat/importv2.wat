;; Claims ABI v1 but imports the host functions of v2.
(module
  (import "warren_v2" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (func (export "warren_abi_version") (result i32) (i32.const 0x00010000)))
