package quorum

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/warrenmq/warren/core/message"
)

// A snapshot is the queue as of an index: the machine's state, and the
// bodies of its messages that the member's log no longer holds. A body
// stays in the log entry that enqueued it, as in RabbitMQ's quorum
// queues: the group compacts the log only up to the oldest message the
// queue holds (cluster.LogKeeper), so a snapshot costs the queue's
// bookkeeping (29 bytes and a consumer id's share a message), not what its
// messages weigh, and no body is written twice.
//
//	version(1) = 5
//	floor(8):  the log holds the entries of the messages from this index
//	           on; the bodies of those before it are here
//	machine:   u32 length | next(4) | ready | consumers | dead letters | flags(1)
//	           dead letters: msgs, then each one's reason (shortstr)
//	           flags: 1 = reject-publish refuses publishes (none before version 4)
//	           msgs: count(4) | each id(8) size(8) expires_at(8) delivery_count(4) delivered(1)
//	           consumers: count(4) | each id (shortstr) credit(4) once(1) gone(1) no_ack(1) priority(8) suspected(1) out (msgs, by id)
//	           (versions 2 and 3 had a priority(4), version 1 none: 0;
//	           versions before 5 no suspected: none was)
//	bodies:    count(4) | each, by id: id(8) message (appendMessage)
//
// Versions 1 and 2 have no floor: every body is in the snapshot. A
// snapshot sent to a member that lacks the log (Complete) is a version 2
// one, which every release reads, unless its machine holds what version
// 2 cannot say (a priority beyond 32 bits, publishes refused, a consumer
// suspected): then it
// is a version 4 one whose floor is past its index. The machine's Config is not in it: it
// comes from the queue's declaration and policies, which the metadata
// store keeps.
const snapshotVersion = 5

// completeVersion is the version of a snapshot that holds every body.
const completeVersion = 2

// EntryReader reads the log's entries from lo up to hi, in order, as
// cluster.EntryReader does: a queue restoring its own snapshot reads the
// bodies it refers to with it.
type EntryReader = func(lo, hi uint64, each func(index uint64, cmd []byte) error) error

func appendMsgs(b []byte, msgs []Msg) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(msgs)))
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint64(b, m.ID)
		b = binary.BigEndian.AppendUint64(b, uint64(m.Size))
		b = binary.BigEndian.AppendUint64(b, uint64(m.ExpiresAt))
		b = binary.BigEndian.AppendUint32(b, m.DeliveryCount)
		if m.Delivered {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return b
}

func (r *reader) msgs() []Msg {
	n := int(r.u32())
	if r.err != nil || n > len(r.b)/29 {
		r.err = errEntry
		return nil
	}
	out := make([]Msg, n)
	for i := range out {
		out[i] = Msg{ID: r.u64(), Size: int64(r.u64()), ExpiresAt: int64(r.u64()), DeliveryCount: r.u32(), Delivered: r.u8() == 1}
	}
	return out
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// encode appends the machine's state, as a snapshot of version 2 or
// snapshotVersion holds it.
func (m *Machine) encode(b []byte, version byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(m.next))
	b = appendMsgs(b, m.ready)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.consumers)))
	for _, c := range m.consumers {
		b = appendShort(b, string(c.id))
		b = binary.BigEndian.AppendUint32(b, uint32(c.credit))
		b = append(b, boolByte(c.once), boolByte(c.gone), boolByte(c.noAck))
		if version >= 4 {
			b = binary.BigEndian.AppendUint64(b, uint64(c.priority))
			if version >= 5 {
				b = append(b, boolByte(c.suspected))
			}
		} else {
			b = binary.BigEndian.AppendUint32(b, uint32(int32(c.priority)))
		}
		out := make([]Msg, 0, len(c.out))
		for _, msg := range c.out {
			out = append(out, msg)
		}
		slices.SortFunc(out, func(a, b Msg) int { return cmpU64(a.ID, b.ID) })
		b = appendMsgs(b, out)
	}
	dead := make([]Msg, len(m.dlx))
	for i, d := range m.dlx {
		dead[i] = d.Msg
	}
	b = appendMsgs(b, dead)
	for _, d := range m.dlx {
		b = appendShort(b, string(d.Reason))
	}
	if version >= 4 {
		b = append(b, boolByte(m.rejecting))
	}
	return b
}

// fitsVersion2 reports whether a version 2 snapshot can hold the
// machine's state: every consumer's priority within 32 bits, publishes
// not refused, and no consumer suspected.
func (m *Machine) fitsVersion2() bool {
	if m.rejecting {
		return false
	}
	for _, c := range m.consumers {
		if int(int32(c.priority)) != c.priority || c.suspected {
			return false
		}
	}
	return true
}

// decodeMachine rebuilds a machine with cfg from encode's bytes, as a
// snapshot of the given version wrote them.
func decodeMachine(cfg Config, r *reader, version byte) *Machine {
	m := New(cfg)
	m.next = int(r.u32())
	m.ready = r.msgs()
	for _, msg := range m.ready {
		m.readyBytes += msg.Size
	}
	n := int(r.u32())
	for i := 0; i < n && r.err == nil; i++ {
		c := &consumer{id: ConsumerID(r.short()), credit: int(r.u32()), once: r.u8() == 1, gone: r.u8() == 1, noAck: r.u8() == 1, out: map[uint64]Msg{}}
		switch {
		case version >= 4:
			c.priority = int(int64(r.u64()))
			if version >= 5 {
				c.suspected = r.u8() == 1
			}
		case version >= 2:
			c.priority = int(int32(r.u32()))
		}
		for _, msg := range r.msgs() {
			c.out[msg.ID] = msg
		}
		m.consumers = append(m.consumers, c)
		m.byID[c.id] = c
	}
	for _, msg := range r.msgs() {
		m.dlx = append(m.dlx, pendingDead{Msg: msg})
		m.dlxBytes += msg.Size
	}
	for i := range m.dlx {
		m.dlx[i].Reason = Reason(r.short())
	}
	if version >= 4 {
		m.rejecting = r.u8()&1 != 0
	}
	return m
}

// Snapshot is the queue's state as of the last entry applied: the
// machine, and the bodies the log does not hold (those before the floor).
// It notes the oldest message whose body the log holds, for OldestNeeded.
func (q *Queue) Snapshot() ([]byte, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := binary.BigEndian.AppendUint64([]byte{snapshotVersion}, q.floor)
	machine := q.m.encode(nil, snapshotVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(machine)))
	b = append(b, machine...)
	var inline []uint64
	q.oldestLogged = 0
	for id := range q.bodies {
		switch {
		case id < q.floor:
			inline = append(inline, id)
		case q.oldestLogged == 0 || id < q.oldestLogged:
			q.oldestLogged = id
		}
	}
	slices.Sort(inline)
	return appendBodies(b, inline, q.bodies), nil
}

func appendBodies(b []byte, ids []uint64, bodies map[uint64]*message.Message) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = appendMessage(binary.BigEndian.AppendUint64(b, id), bodies[id])
	}
	return b
}

// OldestNeeded is the oldest message whose body the log holds, as of the
// last Snapshot (0: none): the group compacts the log only up to it. The
// group asks right after the snapshot, on the loop that applies entries,
// so nothing changed in between.
func (q *Queue) OldestNeeded() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.oldestLogged
}

// Restore replaces the queue's state with a snapshot that holds every
// body it needs (one sent by the leader). This node's consumers stay;
// what the snapshot's machine says they hold is theirs.
func (q *Queue) Restore(index uint64, data []byte) error {
	return q.RestoreFrom(index, data, nil)
}

// RestoreFrom is Restore of a snapshot this member took, which reads the
// bodies it does not hold from the log's entries (nil: it must hold them
// all).
func (q *Queue) RestoreFrom(index uint64, data []byte, entries EntryReader) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	st, err := decodeSnapshot(q.m.cfg, index, data, entries)
	if err != nil {
		return err
	}
	q.m, q.bodies, q.floor = st.m, st.bodies, st.floor
	// What the snapshot says this node's consumers hold is handed to
	// them once the member is current (AppliedBatch).
	q.resync = true
	// The snapshot may name consumers of this node's earlier runs that
	// the log replayed before it did not: they are ended now, not left
	// holding their messages (off the log's loop, which calls this).
	go q.Tidy(nil)
	return nil
}

// Complete turns a snapshot this member took into one that holds every
// body, for a member that lacks the log.
func (q *Queue) Complete(index uint64, data []byte, entries EntryReader) ([]byte, error) {
	q.mu.Lock()
	cfg := q.m.cfg
	q.mu.Unlock()
	st, err := decodeSnapshot(cfg, index, data, entries)
	if err != nil {
		return nil, err
	}
	b := []byte{completeVersion}
	if !st.m.fitsVersion2() {
		// Every body follows: the floor is past the index.
		b = binary.BigEndian.AppendUint64([]byte{snapshotVersion}, index+1)
	}
	machine := st.m.encode(nil, b[0])
	b = binary.BigEndian.AppendUint32(b, uint32(len(machine)))
	b = append(b, machine...)
	ids := make([]uint64, 0, len(st.bodies))
	for id := range st.bodies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return appendBodies(b, ids, st.bodies), nil
}

// snapshotState is a decoded snapshot.
type snapshotState struct {
	m      *Machine
	bodies map[uint64]*message.Message
	floor  uint64
}

// decodeSnapshot reads a snapshot taken at index, and the bodies it
// refers to from entries (nil when it must hold them all).
func decodeSnapshot(cfg Config, index uint64, data []byte, entries EntryReader) (snapshotState, error) {
	r := &reader{b: data}
	version := r.u8()
	if r.err == nil && (version < 1 || version > snapshotVersion) {
		return snapshotState{}, fmt.Errorf("quorum: snapshot version %d, this node knows 1 to %d", version, snapshotVersion)
	}
	floor := index + 1 // versions before 3 hold every body
	if version >= 3 {
		floor = r.u64()
	}
	mr := &reader{b: r.take(int(r.u32()))}
	n := int(r.u32())
	if r.err != nil {
		return snapshotState{}, fmt.Errorf("quorum: the snapshot at %d does not decode", index)
	}
	m := decodeMachine(cfg, mr, version)
	if mr.err != nil || len(mr.b) != 0 {
		return snapshotState{}, fmt.Errorf("quorum: the snapshot at %d has a machine that does not decode", index)
	}
	bodies := make(map[uint64]*message.Message, n)
	for i := 0; i < n && r.err == nil; i++ {
		id := r.u64()
		msg, err := r.message()
		if r.err != nil {
			break
		}
		if err != nil {
			return snapshotState{}, fmt.Errorf("quorum: the snapshot at %d: message %d: %w", index, id, err)
		}
		bodies[id] = msg
	}
	if r.err != nil || len(r.b) != 0 {
		return snapshotState{}, fmt.Errorf("quorum: the snapshot at %d has bodies that do not decode", index)
	}
	// The rest are in the log, in the entries that enqueued them.
	logged := map[uint64]bool{}
	lo := uint64(0)
	for _, id := range m.ids() {
		if bodies[id] == nil {
			logged[id] = true
			if lo == 0 || id < lo {
				lo = id
			}
		}
	}
	if len(logged) > 0 {
		if entries == nil || lo < floor {
			return snapshotState{}, fmt.Errorf("quorum: the snapshot at %d lacks the bodies of %d messages", index, len(logged))
		}
		err := entries(lo, index+1, func(at uint64, cmd []byte) error {
			if !logged[at] {
				return nil
			}
			msg, err := enqueuedMessage(cmd)
			if err != nil {
				return fmt.Errorf("quorum: the snapshot at %d: message %d in the log: %w", index, at, err)
			}
			bodies[at] = msg
			delete(logged, at)
			return nil
		})
		if err != nil {
			return snapshotState{}, err
		}
		if len(logged) > 0 {
			return snapshotState{}, fmt.Errorf("quorum: the snapshot at %d: %d messages' bodies are not in the log", index, len(logged))
		}
	}
	return snapshotState{m: m, bodies: bodies, floor: floor}, nil
}

// SnapshotDue takes a snapshot once the log since the last one has as
// many entries as the queue holds messages (and at least 4,096): a
// snapshot costs what the queue holds, so this keeps its cost per entry
// bounded, and a short queue's log short.
func (q *Queue) SnapshotDue(entries uint64) bool {
	if entries < 4096 {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return entries >= uint64(len(q.bodies))
}
