package quorum

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/warrenmq/warren/core/message"
)

// A snapshot is the queue as of an index: the machine's state and the
// bodies it still holds, so that the log before it can go.
//
//	version(1) = 1
//	machine: u32 length | next(4) | ready | consumers | dead letters
//	         dead letters: msgs, then each one's reason (shortstr)
//	         msgs: count(4) | each id(8) size(8) expires_at(8) delivery_count(4) delivered(1)
//	         consumers: count(4) | each id (shortstr) credit(4) once(1) gone(1) no_ack(1) priority(4) out (msgs, by id)
//	         (version 1 had no priority: 0)
//	bodies:  count(4) | each, by id: id(8) message (appendMessage)
//
// The machine's Config is not in it: it comes from the queue's
// declaration and policies, which the metadata store keeps.
const snapshotVersion = 2

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

// encode appends the machine's state.
func (m *Machine) encode(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(m.next))
	b = appendMsgs(b, m.ready)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.consumers)))
	for _, c := range m.consumers {
		b = appendShort(b, string(c.id))
		b = binary.BigEndian.AppendUint32(b, uint32(c.credit))
		b = append(b, boolByte(c.once), boolByte(c.gone), boolByte(c.noAck))
		b = binary.BigEndian.AppendUint32(b, uint32(int32(c.priority)))
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
	return b
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
		if version >= 2 {
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
	return m
}

// Snapshot is the queue's state as of the last entry applied: the
// machine and the bodies of the messages it holds.
func (q *Queue) Snapshot() ([]byte, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := []byte{snapshotVersion}
	machine := q.m.encode(nil)
	b = binary.BigEndian.AppendUint32(b, uint32(len(machine)))
	b = append(b, machine...)
	ids := make([]uint64, 0, len(q.bodies))
	for id := range q.bodies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = appendMessage(binary.BigEndian.AppendUint64(b, id), q.bodies[id])
	}
	return b, nil
}

// Restore replaces the queue's state with a snapshot's. This node's
// consumers stay; what the snapshot's machine says they hold is theirs.
func (q *Queue) Restore(index uint64, data []byte) error {
	r := &reader{b: data}
	version := r.u8()
	if r.err == nil && (version < 1 || version > snapshotVersion) {
		return fmt.Errorf("quorum: snapshot version %d, this node knows 1 to %d", version, snapshotVersion)
	}
	mr := &reader{b: r.take(int(r.u32()))}
	n := int(r.u32())
	if r.err != nil {
		return fmt.Errorf("quorum: the snapshot at %d does not decode", index)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m := decodeMachine(q.m.cfg, mr, version)
	if mr.err != nil || len(mr.b) != 0 {
		return fmt.Errorf("quorum: the snapshot at %d has a machine that does not decode", index)
	}
	bodies := make(map[uint64]*message.Message, n)
	for i := 0; i < n && r.err == nil; i++ {
		id := r.u64()
		msg, err := r.message()
		if r.err != nil {
			break
		}
		if err != nil {
			return fmt.Errorf("quorum: the snapshot at %d: message %d: %w", index, id, err)
		}
		bodies[id] = msg
	}
	if r.err != nil || len(r.b) != 0 {
		return fmt.Errorf("quorum: the snapshot at %d has bodies that do not decode", index)
	}
	q.m, q.bodies = m, bodies
	// The snapshot may name consumers of this node's earlier runs that
	// the log replayed before it did not: they are ended now, not left
	// holding their messages (off the log's loop, which calls this).
	go q.Tidy(nil)
	return nil
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
