//go:build cgo

package storage

// pebbleOffHeap: with cgo, Pebble allocates its block cache and memtables
// with C's malloc (internal/manual), outside the Go heap.
const pebbleOffHeap = true
