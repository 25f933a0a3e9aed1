;; Not a plugin: no warren_abi_version.
(module
  (memory (export "memory") 1)
  (func (export "something") (result i32) (i32.const 1)))
