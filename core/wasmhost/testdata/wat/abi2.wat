;; A plugin from the future: routing ABI v2.0.
(module
  (memory (export "memory") 1)
  (func (export "warren_abi_version") (result i32) (i32.const 0x00020000)))
