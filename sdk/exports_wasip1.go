//go:build wasip1

package sdk

import (
	"unsafe"

	"github.com/warrenmq/warren/sdk/abi"
)

// The module's exports (sdk/ABI.md, "Exports"). //go:wasmexport works in
// any package since Go 1.24, so importing the SDK is all a plugin needs.

//go:wasmexport warren_abi_version
func wasmABIVersion() int32 { return abi.Version }

//go:wasmexport warren_buffer
func wasmBuffer(size int32) int32 {
	if registered == nil || size < 0 {
		return 0
	}
	return int32(uintptr(unsafe.Pointer(&registered.buffer(int(size))[0])))
}

// export runs one dispatcher method on the n input bytes and packs the
// output's address and length.
func export(method func(*dispatcher, []byte) []byte, n int32) int64 {
	var out []byte
	if d := registered; d == nil {
		out = noPlugin(nil)
	} else if n < 0 || int(n) > len(d.in) {
		out = d.fault("input of %d bytes overruns the %d-byte buffer", n, len(d.in))
	} else {
		out = d.call(method, d.in[:n])
	}
	if len(out) == 0 {
		return 0
	}
	if registered != nil {
		registered.out = out[:0] // keep a grown output buffer for next time
	}
	return int64(abi.PackResult(uint32(uintptr(unsafe.Pointer(&out[0]))), uint32(len(out))))
}

//go:wasmexport warren_describe
func wasmDescribe(n int32) int64 { return export((*dispatcher).describe, n) }

//go:wasmexport warren_validate_declare
func wasmValidateDeclare(n int32) int64 { return export((*dispatcher).validateDeclare, n) }

//go:wasmexport warren_create
func wasmCreate(n int32) int64 { return export((*dispatcher).create, n) }

//go:wasmexport warren_delete
func wasmDelete(n int32) int64 { return export((*dispatcher).delete, n) }

//go:wasmexport warren_validate_binding
func wasmValidateBinding(n int32) int64 { return export((*dispatcher).validateBinding, n) }

//go:wasmexport warren_add_binding
func wasmAddBinding(n int32) int64 { return export((*dispatcher).addBinding, n) }

//go:wasmexport warren_remove_bindings
func wasmRemoveBindings(n int32) int64 { return export((*dispatcher).removeBindings, n) }

//go:wasmexport warren_policy_changed
func wasmPolicyChanged(n int32) int64 { return export((*dispatcher).policyChanged, n) }

// warren_route skips export's indirection and its recover: on the hot
// path every call counts (see dispatcher.route), and a deferred recover
// costs 60-80 ns in wasm. A panic in Route is not recovered: the Go runtime
// prints it to stderr and exits, and the host reports that line as the
// failure.
//
//go:wasmexport warren_route
func wasmRoute(n int32) int64 {
	d := registered
	if d == nil || n < 0 || int(n) > len(d.in) {
		return export((*dispatcher).route, n)
	}
	return pack(d.route(d.in[:n]))
}

func pack(out []byte) int64 {
	if len(out) == 0 {
		return 0
	}
	return int64(abi.PackResult(uint32(uintptr(unsafe.Pointer(&out[0]))), uint32(len(out))))
}

//go:wasmexport warren_info
func wasmInfo(n int32) int64 { return export((*dispatcher).info, n) }

//go:wasmexport warren_idle
func wasmIdle(n int32) int64 { return export((*dispatcher).idle, n) }

//go:wasmexport warren_settings_changed
func wasmSettingsChanged(n int32) int64 { return export((*dispatcher).settingsChanged, n) }

// Host functions (sdk/ABI.md, "Host functions").

//go:wasmimport warren_v1 log
func wasmLog(level int32, ptr unsafe.Pointer, n int32)

//go:wasmimport warren_v1 clock_monotonic
func wasmClockMonotonic() int64

//go:wasmimport warren_v1 clock_wall
func wasmClockWall() int64

//go:wasmimport warren_v1 config
func wasmConfig(ptr unsafe.Pointer, capacity int32) int32

//go:wasmimport warren_v1 type_exists
func wasmTypeExists(ptr unsafe.Pointer, n int32) int32

func hostLog(level Level, msg string) {
	if len(msg) == 0 {
		return
	}
	wasmLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), int32(len(msg)))
}

func hostMonotonic() int64 { return wasmClockMonotonic() }

func hostWall() int64 { return wasmClockWall() }

func hostTypeExists(name string) bool {
	if len(name) == 0 {
		return false
	}
	return wasmTypeExists(unsafe.Pointer(unsafe.StringData(name)), int32(len(name))) == 1
}

func hostConfig() []byte {
	buf := make([]byte, 256)
	for {
		n := wasmConfig(unsafe.Pointer(&buf[0]), int32(len(buf)))
		if int(n) <= len(buf) {
			return buf[:n]
		}
		buf = make([]byte, n)
	}
}
