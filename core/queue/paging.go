package queue

import "sync/atomic"

// Paging is the node's bound on the messages its queues keep in memory
// (their bodies, properties and entryMemory each), as RabbitMQ's
// vm_memory_high_watermark_paging_ratio: every queue reports what it
// holds, and once the node's total reaches the limit the queues that hold
// anything page their new messages out to the store, until the total is
// back under half the limit. So a node with one long
// queue keeps it in memory as far as the machine allows, and a node with
// many stays under the same bound.
//
// A queue reports in steps of reportStep bytes, not per message, so the
// total may be off by that much per queue; the limit is a fraction of the
// memory watermark, well above such an error. It takes no lock.
type Paging struct {
	used  atomic.Int64 // bytes the queues reported holding
	limit atomic.Int64 // 0: no bound
}

// reportStep is how far a queue's memory moves before it reports the
// change, so that queues on different cores do not write one counter for
// every message.
const reportStep = 256 << 10

// NewPaging returns a bound of limit bytes (0: none).
func NewPaging(limit int64) *Paging {
	p := &Paging{}
	p.limit.Store(limit)
	return p
}

// SetLimit changes the bound (a new memory watermark).
func (p *Paging) SetLimit(limit int64) { p.limit.Store(limit) }

// Limit is the bound in bytes (0: none).
func (p *Paging) Limit() int64 { return p.limit.Load() }

// Used is what the queues reported holding in memory.
func (p *Paging) Used() int64 { return p.used.Load() }

// over reports whether the queues hold the limit or more.
func (p *Paging) over() bool {
	l := p.limit.Load()
	return l > 0 && p.used.Load() >= l
}

// low reports whether the queues hold less than half the limit: then
// paged messages are read back.
func (p *Paging) low() bool {
	l := p.limit.Load()
	return l == 0 || p.used.Load() < l/2
}

// entryMemory is what a ready message takes in memory beside its body
// and properties: its Message (128 bytes), its place in a level's ring
// (40), its names, and the allocator's rounding. The node's bound counts
// it, so that a backlog of tiny messages, which no longer pages by count
// (MemoryLimit), is bounded too. Measured: 1,000,000 transient 16-byte
// messages in one queue took 205 MB resident.
const entryMemory = 192

// footprint is what n messages of the given bytes take in memory.
func footprint(n int, bytes int64) int64 { return bytes + int64(n)*entryMemory }

// memBytes is what a queue counts of e's message in memory: its body
// (MemSize) and its properties, which a message carrying large headers
// holds beside a small body. Neither changes while the message lives.
func memBytes(e *Entry) int64 { return int64(e.Msg.MemSize() + len(e.Msg.Props)) }

// memAdd counts e's message into the queue's memory; q.mu is held.
func (q *Queue) memAdd(e *Entry) {
	n := memBytes(e)
	q.mem.msgs++
	q.mem.bytes += n
	q.report(footprint(1, n))
}

// memSub counts e's message out of the queue's memory; q.mu is held.
func (q *Queue) memSub(e *Entry) {
	n := memBytes(e)
	q.mem.msgs--
	q.mem.bytes -= n
	q.report(-footprint(1, n))
}

// memReset empties the queue's memory (a purge, a deletion), and takes
// back all it reported; q.mu is held.
func (q *Queue) memReset() {
	if p := q.memLimit.Node; p != nil {
		p.used.Add(q.mem.unreported - footprint(q.mem.msgs, q.mem.bytes))
	}
	q.mem = memory{}
}

// report adds n to what the queue holds, telling the node once it has
// moved reportStep; q.mu is held.
func (q *Queue) report(n int64) {
	p := q.memLimit.Node
	if p == nil {
		return
	}
	q.mem.unreported += n
	if u := q.mem.unreported; u >= reportStep || u <= -reportStep {
		p.used.Add(u)
		q.mem.unreported = 0
	}
}
