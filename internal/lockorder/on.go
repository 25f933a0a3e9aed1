//go:build warren_lockorder

package lockorder

import "unsafe"

// Checked says whether this build checks the order.
const Checked = true

// The goroutines' holds, for the whole process: a checked build's one
// piece of global state.
var holding = newHolds()

func acquire(id rankID, lock unsafe.Pointer) {
	if err := holding.acquire(goroutine(), id, lock); err != nil {
		panic(err)
	}
}

func took(id rankID, lock unsafe.Pointer) { holding.took(goroutine(), id, lock) }

func release(id rankID, lock unsafe.Pointer) { holding.release(goroutine(), id, lock) }
