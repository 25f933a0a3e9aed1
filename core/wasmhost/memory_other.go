//go:build !linux

package wasmhost

import "github.com/tetratelabs/wazero/experimental"

// mmapMemory exists only on Linux; elsewhere wazero's default allocator
// (a Go slice that grows by copying) backs linear memories.
type mmapMemory struct{}

func (m *mmapMemory) release() {}

func (in *instance) memoryAllocator() experimental.MemoryAllocator { return nil }
