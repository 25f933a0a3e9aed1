package conn

import (
	"sync/atomic"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
)

// confirms tracks a confirm-mode channel's publishes until the client has
// been told their fate. Publishes are numbered from 1 in arrival order.
// Most settle at once (transient messages, or none routed); a persistent
// message routed to durable queues settles when the store has synced it,
// on the store's goroutine. Confirms go out strictly in sequence order: a
// run of settled acks becomes one basic.ack with multiple set, a nack goes
// out on its own, and a publish still waiting for disk holds back the ones
// after it. Coalescing happens at flush points — when the reader has
// nothing buffered, and when the store reports a sync — so a burst of
// publishes costs one ack frame, not one each.
type confirms struct {
	// enabled is written and read by the connection's reader alone.
	enabled bool

	mu     lockorder.Mutex[lockorder.ConnConfirms]
	closed bool    // the channel is gone: settle quietly, send nothing
	next   uint64  // sequence number of the next publish
	base   uint64  // sequence number of states[head]
	states []uint8 // per unannounced publish: waiting, acked or nacked
	head   int     // states[:head] are announced
	// dirty says something settled since the last flush; the reader checks
	// it at every flush point without taking the lock.
	dirty atomic.Bool
}

const (
	waiting uint8 = iota
	acked
	nacked
)

func (cf *confirms) enable() {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if !cf.enabled {
		cf.enabled, cf.next, cf.base = true, 1, 1
	}
}

// add numbers a new publish, waiting.
func (cf *confirms) add() uint64 {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	seq := cf.next
	cf.next++
	cf.states = append(cf.states, waiting)
	return seq
}

// settle records a publish's fate.
func (cf *confirms) settle(seq uint64, ok bool) {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	i := int(seq-cf.base) + cf.head
	if seq < cf.base || i >= len(cf.states) {
		return
	}
	cf.states[i] = acked
	if !ok {
		cf.states[i] = nacked
	}
	cf.dirty.Store(true)
}

func (cf *confirms) pending() bool { return cf.dirty.Load() }

// close drops everything: the channel is gone and its client will not hear
// of these publishes.
func (cf *confirms) close() {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	cf.closed, cf.states, cf.head = true, nil, 0
	cf.dirty.Store(false)
}

// awaitSync has seq confirmed once the store has synced it. A run's
// stored publishes on one channel share one sync callback, registered when
// the run ends (Conn.registerSyncs): the store syncs in commit order, and
// every write of the run was committed before the callback's own commit,
// so one callback covers them all, and their confirms go out as one
// basic.ack instead of one callback and one ack frame each.
func (ch *channel) awaitSync(seq uint64) {
	if len(ch.synced) == 0 {
		ch.c.syncWait = append(ch.c.syncWait, ch)
	}
	ch.synced = append(ch.synced, seq)
}

// registerSyncs asks the store for one sync callback per channel that
// stored publishes during the run.
func (c *Conn) registerSyncs() {
	for i, ch := range c.syncWait {
		seqs := ch.synced
		ch.synced = nil
		c.vh.AfterSync(func(err error) { ch.durableAll(seqs, err) })
		c.syncWait[i] = nil
	}
	c.syncWait = c.syncWait[:0]
}

// durableAll settles publishes the store has synced (or failed to).
func (ch *channel) durableAll(seqs []uint64, err error) {
	for _, seq := range seqs {
		ch.confirm.settle(seq, err == nil)
	}
	ch.flushConfirms()
}

// flushConfirms announces every settled publish at the front of the line.
func (ch *channel) flushConfirms() {
	cf := &ch.confirm
	cf.mu.Lock()
	defer cf.mu.Unlock()
	cf.dirty.Store(false)
	if cf.closed {
		return
	}
	var ackUpTo, acks uint64
	b := ch.c.out.begin()
	for cf.head < len(cf.states) && cf.states[cf.head] != waiting {
		seq := cf.base
		if cf.states[cf.head] == nacked {
			if ackUpTo != 0 && b != nil {
				b = protocol.AppendMethodFrame(b, ch.id, &protocol.BasicAck{DeliveryTag: ackUpTo, Multiple: true})
			}
			ackUpTo = 0
			if b != nil {
				b = protocol.AppendMethodFrame(b, ch.id, &protocol.BasicNack{DeliveryTag: seq})
			}
		} else {
			ackUpTo = seq
			acks++
		}
		cf.head++
		cf.base++
	}
	if ackUpTo != 0 && b != nil {
		b = protocol.AppendMethodFrame(b, ch.id, &protocol.BasicAck{DeliveryTag: ackUpTo, Multiple: true})
	}
	// Counted before the frames go out: a client that has its confirm
	// finds it counted.
	if acks > 0 {
		ch.count(stats.Confirm, acks)
	}
	ch.c.out.end(b)
	// Reclaim the announced prefix once it dominates the slice.
	if cf.head > 64 && cf.head*2 > len(cf.states) {
		n := copy(cf.states, cf.states[cf.head:])
		cf.states = cf.states[:n]
		cf.head = 0
	}
	if cf.head == len(cf.states) {
		cf.states, cf.head = cf.states[:0], 0
	}
}

// Durable is called by the store, on its own goroutine, once the publish
// seq is on disk (err nil) or could not be stored.
func (ch *channel) Durable(seq uint64, err error) {
	ch.confirm.settle(seq, err == nil)
	ch.flushConfirms()
}
