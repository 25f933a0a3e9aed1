//go:build !cgo

package storage

// pebbleOffHeap: without cgo, Pebble's block cache and memtables are Go
// memory, which the runtime's figures already count.
const pebbleOffHeap = false
