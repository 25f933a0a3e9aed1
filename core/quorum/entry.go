package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/warrenmq/warren/core/message"
)

// An entry is one change to a queue, as its log carries it:
//
//	op(1) | fields
//
//	opEnqueue:  now(8) expires_at(8) | exchange, routing key (shortstr) |
//	            flags(2) | props, body (u32 length each)
//	opCheckout: consumer (shortstr) | credit(4) | no_ack(1) |
//	            priority(4) | priority(8) (the first held within 32 bits,
//	            for releases that read no further; entries of before
//	            have neither, or the first alone)
//	opGet:      consumer | no_ack(1)
//	opSettle:   how(1) | count(4) | ids(8 each) (whoever holds them)
//	opSettleBy: consumer | how(1) | count(4) | ids(8 each)
//	opCancel, opDown: consumer
//	opExpire:   now(8)
//	opPurge:    proposer node(8) nonce(8) (nothing, in logs of before)
//	opConfig:   max_length(8) max_bytes(8) overflow(1) delivery_limit(8)
//	            dead_letter(1) single_active(1) at_least_once(1)
//	opDeadLettered: count(4) | ids(8 each)
//	opSuspect:  node(8)
//	opResume:   count(4) | consumers (shortstr each)
//
// Times are the leader's clock when it made the entry: applying an entry
// reads no clock, so every member decides alike.
const (
	opEnqueue byte = iota + 1
	opCheckout
	opGet
	opSettle
	opCancel
	opDown
	opExpire
	opPurge
	opConfig
	opDeadLettered
	opSettleBy
	opSuspect
	opResume
)

var errEntry = errors.New("quorum: an entry that does not decode")

func appendShort(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }

func enqueueEntry(m *message.Message, now, expiresAt int64) []byte {
	b := make([]byte, 0, 32+len(m.Exchange)+len(m.RoutingKey)+len(m.Props)+len(m.Body))
	b = append(b, opEnqueue)
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	b = binary.BigEndian.AppendUint64(b, uint64(expiresAt))
	return appendMessage(b, m)
}

// enqueuedMessage reads the message an opEnqueue entry holds.
func enqueuedMessage(entry []byte) (*message.Message, error) {
	r := &reader{b: entry}
	if op := r.u8(); op != opEnqueue {
		return nil, fmt.Errorf("entry %d is not an enqueue", op)
	}
	r.u64() // now
	r.u64() // expires_at
	return r.message()
}

// appendMessage appends what a message is made of: exchange, routing key
// (shortstr), flags(2), props and body (u32 length each).
func appendMessage(b []byte, m *message.Message) []byte {
	b = appendShort(b, m.Exchange)
	b = appendShort(b, m.RoutingKey)
	b = binary.BigEndian.AppendUint16(b, m.Flags)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Props)))
	b = append(b, m.Props...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Body)))
	return append(b, m.Body...)
}

// message reads what appendMessage wrote.
func (r *reader) message() (*message.Message, error) {
	exchange, key, flags := r.short(), r.short(), r.u16()
	props, body := r.bytes(), r.bytes()
	if r.err != nil {
		return nil, r.err
	}
	return message.New(exchange, key, flags, props, body)
}

func purgeEntry(node, nonce uint64) []byte {
	b := binary.BigEndian.AppendUint64([]byte{opPurge}, node)
	return binary.BigEndian.AppendUint64(b, nonce)
}

// purger reads a purge entry's proposer and nonce, when it has them.
func (r *reader) purger() (node, nonce uint64, ok bool) {
	if len(r.b) < 16 {
		return 0, 0, false
	}
	node, nonce = r.u64(), r.u64()
	return node, nonce, r.err == nil
}

func consumerEntry(op byte, id ConsumerID) []byte { return appendShort([]byte{op}, string(id)) }

// suspectEntry suspects the consumers of a node the leader cannot reach.
func suspectEntry(node uint64) []byte { return binary.BigEndian.AppendUint64([]byte{opSuspect}, node) }

// resumeEntry brings suspected consumers back, their node being back.
func resumeEntry(ids []ConsumerID) []byte {
	b := binary.BigEndian.AppendUint32([]byte{opResume}, uint32(len(ids)))
	for _, id := range ids {
		b = appendShort(b, string(id))
	}
	return b
}

// consumerIDs reads resumeEntry's list.
func (r *reader) consumerIDs() []ConsumerID {
	n := int(r.u32())
	if r.err != nil || n > len(r.b) {
		r.err = errEntry
		return nil
	}
	out := make([]ConsumerID, n)
	for i := range out {
		out[i] = ConsumerID(r.short())
	}
	return out
}

// checkoutEntry adds a consumer. Its priority (x-priority) came after
// the first release: an entry without it is a priority of 0. A priority
// is any long, as RabbitMQ compares any integer; it is written twice,
// held within 32 bits first, for the releases that took no more.
func checkoutEntry(id ConsumerID, credit int, noAck bool, priority int) []byte {
	b := binary.BigEndian.AppendUint32(consumerEntry(opCheckout, id), uint32(credit))
	b = append(b, boolByte(noAck))
	b = binary.BigEndian.AppendUint32(b, uint32(int32(min(max(priority, math.MinInt32), math.MaxInt32))))
	return binary.BigEndian.AppendUint64(b, uint64(priority))
}

// priority reads what checkoutEntry wrote after no_ack.
func (r *reader) priority() int {
	priority := 0
	if len(r.b) >= 4 {
		priority = int(int32(r.u32()))
	}
	if len(r.b) >= 8 {
		priority = int(int64(r.u64()))
	}
	return priority
}

func getEntry(id ConsumerID, noAck bool) []byte {
	b := consumerEntry(opGet, id)
	if noAck {
		return append(b, 1)
	}
	return append(b, 0)
}

func settleEntry(how How, ids []uint64) []byte {
	b := binary.BigEndian.AppendUint32([]byte{opSettle, byte(how)}, uint32(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	return b
}

// settleByEntry settles what consumer holds of ids: applied again (a
// retry after an answer was lost) it changes nothing, since the consumer
// holds them no more.
func settleByEntry(consumer ConsumerID, how How, ids []uint64) []byte {
	b := append(consumerEntry(opSettleBy, consumer), byte(how))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	return b
}

func configEntry(c Config) []byte {
	b := []byte{opConfig}
	b = binary.BigEndian.AppendUint64(b, uint64(c.MaxLength))
	b = binary.BigEndian.AppendUint64(b, uint64(c.MaxBytes))
	b = append(b, byte(c.Overflow))
	b = binary.BigEndian.AppendUint64(b, uint64(c.DeliveryLimit))
	b = append(b, boolByte(c.DeadLetter), boolByte(c.SingleActive), boolByte(c.AtLeastOnce))
	return b
}

func deadLetteredEntry(ids []uint64) []byte {
	b := binary.BigEndian.AppendUint32([]byte{opDeadLettered}, uint32(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	return b
}

// ids reads a count and that many ids.
func (r *reader) ids() []uint64 {
	n := int(r.u32())
	if r.err != nil || n > len(r.b)/8 {
		r.err = errEntry
		return nil
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = r.u64()
	}
	return out
}

func (r *reader) config() Config {
	return Config{MaxLength: int64(r.u64()), MaxBytes: int64(r.u64()), Overflow: Overflow(r.u8()),
		DeliveryLimit: int64(r.u64()), DeadLetter: r.u8() == 1, SingleActive: r.u8() == 1, AtLeastOnce: r.u8() == 1}
}

func expireEntry(now int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{opExpire}, uint64(now))
}

// reader takes an entry apart; a short entry sets err.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errEntry
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) short() string { return string(r.take(int(r.u8()))) }

// bytes copies: a message kept in the queue must not pin the log's buffer.
func (r *reader) bytes() []byte { return append([]byte(nil), r.take(int(r.u32()))...) }
