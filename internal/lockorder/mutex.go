package lockorder

import (
	"sync"
	"unsafe"
)

// Mutex is a sync.Mutex in the order at R's rank.
type Mutex[R Ranked] struct{ mu sync.Mutex }

// Lock takes m; in a checked build it first panics if the goroutine holds
// a lock that must not be held around m.
func (m *Mutex[R]) Lock() {
	var r R
	acquire(r.rankID(), unsafe.Pointer(m))
	m.mu.Lock()
}

// TryLock takes m if it is free. It cannot deadlock, so its order is not
// checked, but a lock it took counts as held.
func (m *Mutex[R]) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	var r R
	took(r.rankID(), unsafe.Pointer(m))
	return true
}

// Unlock releases m.
func (m *Mutex[R]) Unlock() {
	var r R
	release(r.rankID(), unsafe.Pointer(m))
	m.mu.Unlock()
}

// RWMutex is a sync.RWMutex in the order at R's rank. A reader is
// checked as a writer is: a reader waits behind a waiting writer, so a
// shared hold taken out of order deadlocks as an exclusive one does.
type RWMutex[R Ranked] struct{ mu sync.RWMutex }

// Lock takes m exclusively (see Mutex.Lock).
func (m *RWMutex[R]) Lock() {
	var r R
	acquire(r.rankID(), unsafe.Pointer(m))
	m.mu.Lock()
}

// Unlock releases an exclusive hold.
func (m *RWMutex[R]) Unlock() {
	var r R
	release(r.rankID(), unsafe.Pointer(m))
	m.mu.Unlock()
}

// RLock takes m shared (see Mutex.Lock).
func (m *RWMutex[R]) RLock() {
	var r R
	acquire(r.rankID(), unsafe.Pointer(m))
	m.mu.RLock()
}

// RUnlock releases a shared hold.
func (m *RWMutex[R]) RUnlock() {
	var r R
	release(r.rankID(), unsafe.Pointer(m))
	m.mu.RUnlock()
}
