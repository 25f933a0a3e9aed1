//go:build !warren_lockorder

package lockorder

import "unsafe"

// Checked says whether this build checks the order.
const Checked = false

func acquire(rankID, unsafe.Pointer) {}
func took(rankID, unsafe.Pointer)    {}
func release(rankID, unsafe.Pointer) {}
