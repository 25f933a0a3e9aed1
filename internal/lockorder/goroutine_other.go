//go:build !amd64

package lockorder

import "runtime"

// goroutine identifies the calling goroutine by the id in its stack
// trace's header: slow, but only a checked build asks.
func goroutine() uintptr {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	var id uintptr
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uintptr(c-'0')
	}
	return id
}
