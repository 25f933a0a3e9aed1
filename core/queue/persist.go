package queue

import (
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/storage"
)

// Store is the part of the storage layer a queue writes through
// (*storage.Store). A queue without one keeps everything in memory.
//
// A queue writes its entries in Txns it commits before releasing its lock,
// so on disk the operations on one queue happen in the order they did in
// memory: an entry's put always precedes its delete, whichever goroutine
// does each. Those commits never wait for the disk; a publisher that needs
// its messages synced asks the store for a sync afterwards (one durable
// commit makes everything committed before it durable too).
type Store interface {
	Begin() *storage.Txn
	NewID() uint64
	ScanQueueDeletes(qid uint64, prio uint8, from uint64, limit int, fn func(seq uint64, d storage.Deleted) bool) error
	ScanQueueInto(qid uint64, prio uint8, from uint64, limit int, lend storage.BodyLender, fn func(seq uint64, e *storage.Entry) bool) error
	NewSpill() *storage.Spill
}

// Persists reports whether the queue keeps persistent messages across a
// restart: durable, not exclusive, and backed by a store.
func (q *Queue) Persists() bool { return q.persists }

// QID is the queue's id in the store (0 until it first writes). It takes
// no lock: a listing reads it under its vhost's, which a queue's lock
// never nests with.
func (q *Queue) QID() uint64 { return q.qidSeen.Load() }

// txn returns the Txn of the operation in progress, begun on first use;
// q.mu is held.
func (q *Queue) txn() *storage.Txn {
	if q.qid == 0 {
		q.qid = q.store.NewID()
		q.qidSeen.Store(q.qid)
	}
	if q.tx == nil {
		q.tx = q.store.Begin()
	}
	return q.tx
}

// commit hands the operation's writes to the store; q.mu is held.
func (q *Queue) commit() {
	if q.tx != nil {
		q.tx.Commit(false, nil)
		q.tx = nil
	}
}

// StoredMessage is the storage form of a message.
func StoredMessage(m *message.Message) *storage.Message {
	return &storage.Message{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Flags: m.Flags, Props: m.Props, Body: m.Body, Keep: m}
}

// StoreShared stores m once for the n durable queues about to take it and
// sets the id their entries will refer to (storeEntry then writes only
// the reference). It runs before any of them sees m, so the record is
// written by this package alone, as every queue's own record is.
func StoreShared(s Store, m *message.Message, n int) {
	m.ID = s.NewID()
	t := s.Begin()
	t.PutMessage(m.ID, StoredMessage(m), n)
	t.Commit(false, nil)
}

// storeEntry writes e to the queue's index (persistent says whether it is
// to survive a restart); q.mu is held. The large body of an entry that is
// not to survive goes to the queue's Spill instead, when it takes it.
func (q *Queue) storeEntry(e *Entry, persistent bool) {
	// A shared entry's Msg is not stored again, only its body's length.
	se := storage.Entry{Persistent: persistent, Delivered: e.Deliveries > 0, Deliveries: e.Deliveries,
		ExpiresAt: e.ExpiresAt, MsgID: e.Msg.ID, Msg: StoredMessage(e.Msg)}
	if !persistent && e.Msg.ID == 0 && len(e.Msg.Body) >= spillMin {
		if q.spill == nil {
			q.spill = q.store.NewSpill()
		}
		// On an error the body goes to Pebble with the rest, as before.
		// The file write waits until the lock is released
		// (unlockCollect), so consumers do not wait for it.
		if ref, w, err := q.spill.Reserve(e.Msg.Body, e.Msg); err == nil {
			se.Spill = ref
			q.spillWrites = append(q.spillWrites, w)
		}
	}
	q.txn().PutEntry(q.qid, e.Level, e.Seq, &se)
	e.Stored = true
}

// spillMin is the smallest body a paged-out transient entry keeps in the
// queue's Spill rather than in Pebble: the bodies large enough to be
// pooled, for which one file write and one read cost less than Pebble's
// copies; smaller ones share Pebble's batched writes.
const spillMin = message.PooledMin

// lendBody lends the store a pooled buffer for a body read back, when the
// queue has a pool and the body is large enough to be pooled: the store
// reads a paged body straight into the buffer it is delivered from, and
// none is left to the GC (storage.BodyLender).
func (q *Queue) lendBody(n int) ([]byte, bool) {
	b, ok := q.bodies.Get(n) // false below message.PooledMin, or with no pool
	if !ok {
		return nil, false
	}
	return b[:n], true
}

// readSpilled reads the spilled body of se, read back from the store, into
// a buffer of its own (pooled when the queue has a pool) and lets go of the
// spilled copy; q.mu is held.
func (q *Queue) readSpilled(se *storage.Entry) (body []byte, pooled bool, err error) {
	n := se.Spill.Len
	if q.spill == nil {
		return nil, false, storage.ErrSpillGone
	}
	body, pooled = q.lendBody(n)
	if !pooled {
		body = make([]byte, n)
	}
	if err := q.spill.Read(se.Spill, body); err != nil {
		return nil, false, err
	}
	q.spill.Release(se.Spill)
	return body, pooled, nil
}

// markDelivered records a stored entry's first delivery (so it comes back
// redelivered after a restart), and every later one when a delivery limit
// needs the count, in a mark beside the entry: the message is not written
// again; q.mu is held.
func (q *Queue) markDelivered(e *Entry) {
	if !e.Stored || (e.Deliveries > 1 && q.settings.DeliveryLimit == Unlimited) {
		return
	}
	q.txn().MarkDelivered(q.qid, e.Level, e.Seq, e.Deliveries)
}

// forget deletes a stored entry that left the queue for good, with its
// delivery mark if it was delivered, and ends the queue's hold on a pooled
// body; q.mu is held. Whoever still reads the body (a socket write) holds
// it too.
func (q *Queue) forget(e *Entry) {
	if e.Stored && !q.deleted {
		q.txn().DeleteEntry(q.qid, e.Level, e.Seq, storage.Deleted{MsgID: e.Msg.ID, Marked: e.Deliveries > 0, Size: len(e.Msg.Body)})
	}
	e.Msg.Release()
}

// entryFromStore rebuilds an entry read back from the store; body, when
// not nil, is its spilled body. pooled says the body (spilled, or lent to
// the store) is a buffer from q.bodies. The entry's Msg is nil when the
// stored one does not decode.
func (q *Queue) entryFromStore(seq uint64, prio uint8, se *storage.Entry, body []byte, pooled bool) Entry {
	sm := se.Msg
	if sm == nil {
		return Entry{}
	}
	if body == nil {
		body = sm.Body
	}
	m, err := message.New(sm.Exchange, sm.RoutingKey, sm.Flags, sm.Props, body)
	if err != nil {
		return Entry{}
	}
	m.ID = se.MsgID
	if pooled {
		m.Lend(q.bodies) // the queue's hold, released by forget
	}
	return Entry{Msg: m, Seq: seq, Level: prio, ExpiresAt: se.ExpiresAt, Deliveries: se.Deliveries, Stored: true}
}

// Restore loads a durable queue's entries after a restart, from the levels
// the store's recovery counted: up to the memory bound into memory, the rest
// left paged. Entries delivered before the restart come back redelivered.
func (q *Queue) Restore(levels []storage.Level) error {
	q.mu.Lock()
	defer q.unlock()
	for _, lv := range levels {
		if int(lv.Prio) >= len(q.levels) || lv.Count == 0 {
			continue
		}
		l := &q.levels[lv.Prio]
		l.pagedCount, l.pagedBytes, l.pagedFrom = int(lv.Count), lv.Bytes, lv.FirstSeq
		q.ready += int(lv.Count)
		q.readyBytes += lv.Bytes
		if lv.LastSeq >= q.nextSeq {
			q.nextSeq = lv.LastSeq + 1
		}
	}
	for i := range q.levels {
		l := &q.levels[i]
		for l.pagedCount > 0 && !q.overMemory(true) {
			before := l.pagedCount
			if err := q.pageIn(l); err != nil {
				return err
			}
			if l.pagedCount == before {
				break
			}
		}
	}
	q.expireHeads()
	return nil
}
