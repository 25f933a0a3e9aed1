//go:build linux

package wasmhost

import (
	"syscall"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapMemory backs a linear memory with one anonymous mapping of the
// memory's maximum size, made at instantiation. Growing only lengthens the
// slice: no copy, and the kernel supplies zeroed pages on first touch, so an
// instance costs the pages it uses and a memory bomb reaches the limit in
// milliseconds instead of seconds of copying (wazero's default allocator
// copies the whole memory on every memory.grow).
//
// The mapping is outside the Go heap: it neither counts against GOGC nor
// needs the collector. Free unmaps it, except while a call runs on the
// instance (a guest's proc_exit closes its module from inside the call):
// then the unmapping waits until the call has returned.
type mmapMemory struct {
	in  *instance
	mu  lockorder.Mutex[lockorder.PluginMemory]
	buf []byte // the whole mapping; nil once unmapped
	// pending records a Free that arrived during a call.
	pending bool
}

func (in *instance) memoryAllocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(_, max uint64) experimental.LinearMemory {
		if max == 0 || max > 1<<32 {
			max = 1 << 32
		}
		buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
		if err != nil {
			return nil // wazero reports the failed allocation
		}
		m := &mmapMemory{in: in, buf: buf}
		in.linear = m
		return m
	})
}

func (m *mmapMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil || size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size:size]
}

func (m *mmapMemory) Free() {
	if m.in.inCall() {
		m.mu.Lock()
		m.pending = true
		m.mu.Unlock()
		return
	}
	m.release()
}

// release unmaps the memory; the instance calls it once no call can run.
func (m *mmapMemory) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}
