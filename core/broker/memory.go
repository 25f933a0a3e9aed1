package broker

import (
	"context"
	"runtime/metrics"
)

// Memory is where a node's memory goes, by category, as
// rabbitmq-diagnostics memory_breakdown and /api/nodes/{node}/memory show
// a RabbitMQ node's. The categories are Warren's own (a RabbitMQ name
// would promise an Erlang process that does not exist); they add up to
// Allocated, and Outside makes up the rest of the resident set.
type Memory struct {
	// QueueMessages is what classic queues' messages in memory take;
	// HeapOther the rest of the Go heap's live objects.
	QueueMessages, HeapOther uint64
	// StoreCache and StoreMemtables are Pebble's block cache and
	// memtables, in the Go heap or outside it (a cgo build).
	StoreCache, StoreMemtables uint64
	// Stacks are goroutines' stacks (a connection has two); Runtime is
	// the Go runtime's own metadata and profiling buckets; Unused is heap
	// the runtime holds but no object uses (free spans, fragmentation).
	Stacks, Runtime, Unused uint64
	// Outside is resident memory neither Go nor Pebble accounts for
	// (compiled plugins, C libraries, the binary's mapped code).
	Outside uint64
	// RSS is the resident set (0 where /proc is not readable); Allocated
	// what Go and Pebble hold.
	RSS, Allocated uint64
}

// Categories are the breakdown by name, in the order warrenctl prints it.
func (m Memory) Categories() []MemoryCategory {
	return []MemoryCategory{
		{"queue_messages", m.QueueMessages}, {"store_cache", m.StoreCache}, {"store_memtables", m.StoreMemtables},
		{"heap_other", m.HeapOther}, {"goroutine_stacks", m.Stacks}, {"runtime", m.Runtime},
		{"allocated_unused", m.Unused}, {"outside_go", m.Outside},
	}
}

// MemoryCategory is one line of a breakdown.
type MemoryCategory struct {
	Name  string
	Bytes uint64
}

// memoryClasses are the runtime's classes the breakdown reads, each a
// class of /memory/classes/ (runtime/metrics), which partition what the
// runtime has mapped.
var memoryClasses = []string{
	"heap/objects", "heap/unused", "heap/free", "heap/released", "heap/stacks", "os-stacks",
	"metadata/mcache/free", "metadata/mcache/inuse", "metadata/mspan/free", "metadata/mspan/inuse",
	"metadata/other", "profiling/buckets", "other",
}

// Memory is this node's breakdown now. It takes each classic queue's lock
// in turn (vhost.MessageMemory), so it is for an operator's question, not
// for every statistics tick.
func (b *Broker) Memory() Memory {
	samples := make([]metrics.Sample, len(memoryClasses))
	for i, c := range memoryClasses {
		samples[i].Name = "/memory/classes/" + c + ":bytes"
	}
	metrics.Read(samples)
	class := map[string]uint64{}
	for i, c := range memoryClasses {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			class[c] = samples[i].Value.Uint64()
		}
	}
	var m Memory
	for _, name := range b.VHosts() {
		if v, ok := b.VHost(name); ok {
			m.QueueMessages += uint64(max(0, v.MessageMemory()))
		}
	}
	var inHeap uint64 // Pebble's memory counted among the heap's objects
	offHeap := false
	if b.store != nil {
		var ok bool
		if m.StoreCache, m.StoreMemtables, offHeap, ok = b.store.PebbleMemory(); ok && !offHeap {
			inHeap = m.StoreCache + m.StoreMemtables
		}
	}
	objects := class["heap/objects"]
	m.HeapOther = objects - min(objects, m.QueueMessages+inHeap)
	if objects < m.QueueMessages+inHeap {
		// Sampled a moment apart: the queues' figure is the estimate.
		m.QueueMessages = objects - min(objects, inHeap)
	}
	m.Stacks = class["heap/stacks"] + class["os-stacks"]
	m.Runtime = class["metadata/mcache/inuse"] + class["metadata/mspan/inuse"] + class["metadata/other"] +
		class["profiling/buckets"] + class["other"]
	m.Unused = class["heap/unused"] + class["heap/free"] + class["metadata/mcache/free"] + class["metadata/mspan/free"]
	m.Allocated = objects + m.Stacks + m.Runtime + m.Unused
	if offHeap {
		m.Allocated += m.StoreCache + m.StoreMemtables
	}
	if rss, ok := newMemoryGauge().residentOnce(); ok {
		m.RSS = rss
		m.Outside = rss - min(rss, m.Allocated)
	}
	return m
}

// MemberMemory asks a cluster member for its breakdown; this node's own
// needs no call.
func (b *Broker) MemberMemory(ctx context.Context, name string) (Memory, error) {
	if name == b.NodeName() {
		return b.Memory(), nil
	}
	return askMember[Memory](ctx, b, name, callMemory, "a memory breakdown")
}
