package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/warrenmq/warren/core/message"
)

// An entry is one change to a queue, as its log carries it (a command,
// below, encoded and decoded here alone):
//
//	version(3 bits) op(5 bits) | fields
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

// entryVersion is the version of the entries this release writes, held in
// the top three bits of the op byte: the entries of earlier releases have
// none there, version 0. A later format takes a new version, which this
// release refuses by name rather than misread.
const (
	entryVersion = 0
	opBits       = 5
)

// A command is one entry, read: encode writes it and decode reads it, and
// nothing else does either.
type command interface{ op() byte }

type (
	enqueue struct {
		now, expiresAt int64
		msg            *message.Message
	}
	checkout struct {
		consumer ConsumerID
		credit   int
		noAck    bool
		priority int
	}
	get struct {
		consumer ConsumerID
		noAck    bool
	}
	// settleAny settles the ids whoever holds them.
	settleAny struct {
		how How
		ids []uint64
	}
	// settleBy settles what consumer holds of ids: applied again (a retry
	// after an answer was lost) it changes nothing, since the consumer
	// holds them no more.
	settleBy struct {
		consumer ConsumerID
		how      How
		ids      []uint64
	}
	cancelConsumer struct{ consumer ConsumerID }
	downConsumer   struct{ consumer ConsumerID }
	expire         struct{ now int64 }
	// purge names its proposer, so that it hears the count; a purge of
	// before that did not (named false) is heard by nobody.
	purge struct {
		node, nonce uint64
		named       bool
	}
	configure    struct{ cfg Config }
	deadLettered struct{ ids []uint64 }
	// suspectNode suspects the consumers of a node the leader cannot reach.
	suspectNode struct{ node uint64 }
	// resumeConsumers brings suspected consumers back, their node being back.
	resumeConsumers struct{ consumers []ConsumerID }
)

func (enqueue) op() byte         { return opEnqueue }
func (checkout) op() byte        { return opCheckout }
func (get) op() byte             { return opGet }
func (settleAny) op() byte       { return opSettle }
func (settleBy) op() byte        { return opSettleBy }
func (cancelConsumer) op() byte  { return opCancel }
func (downConsumer) op() byte    { return opDown }
func (expire) op() byte          { return opExpire }
func (purge) op() byte           { return opPurge }
func (configure) op() byte       { return opConfig }
func (deadLettered) op() byte    { return opDeadLettered }
func (suspectNode) op() byte     { return opSuspect }
func (resumeConsumers) op() byte { return opResume }

// encode is c as the log holds it.
func encode(c command) []byte {
	size := 64
	if e, ok := c.(enqueue); ok {
		size += len(e.msg.Exchange) + len(e.msg.RoutingKey) + len(e.msg.Props) + len(e.msg.Body)
	}
	b := append(make([]byte, 0, size), entryVersion<<opBits|c.op()) // one allocation, a body's too
	switch c := c.(type) {
	case enqueue:
		b = binary.BigEndian.AppendUint64(b, uint64(c.now))
		b = binary.BigEndian.AppendUint64(b, uint64(c.expiresAt))
		b = appendMessage(b, c.msg)
	case checkout:
		// The priority is any long, as RabbitMQ compares any integer; it
		// is written twice, held within 32 bits first, for the releases
		// that took no more.
		b = appendShort(b, string(c.consumer))
		b = binary.BigEndian.AppendUint32(b, uint32(c.credit))
		b = append(b, boolByte(c.noAck))
		b = binary.BigEndian.AppendUint32(b, uint32(int32(min(max(c.priority, math.MinInt32), math.MaxInt32))))
		b = binary.BigEndian.AppendUint64(b, uint64(c.priority))
	case get:
		b = append(appendShort(b, string(c.consumer)), boolByte(c.noAck))
	case settleAny:
		b = appendIDs(append(b, byte(c.how)), c.ids)
	case settleBy:
		b = appendIDs(append(appendShort(b, string(c.consumer)), byte(c.how)), c.ids)
	case cancelConsumer:
		b = appendShort(b, string(c.consumer))
	case downConsumer:
		b = appendShort(b, string(c.consumer))
	case expire:
		b = binary.BigEndian.AppendUint64(b, uint64(c.now))
	case purge:
		if c.named {
			b = binary.BigEndian.AppendUint64(b, c.node)
			b = binary.BigEndian.AppendUint64(b, c.nonce)
		}
	case configure:
		b = binary.BigEndian.AppendUint64(b, uint64(c.cfg.MaxLength))
		b = binary.BigEndian.AppendUint64(b, uint64(c.cfg.MaxBytes))
		b = append(b, byte(c.cfg.Overflow))
		b = binary.BigEndian.AppendUint64(b, uint64(c.cfg.DeliveryLimit))
		b = append(b, boolByte(c.cfg.DeadLetter), boolByte(c.cfg.SingleActive), boolByte(c.cfg.AtLeastOnce))
	case deadLettered:
		b = appendIDs(b, c.ids)
	case suspectNode:
		b = binary.BigEndian.AppendUint64(b, c.node)
	case resumeConsumers:
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.consumers)))
		for _, id := range c.consumers {
			b = appendShort(b, string(id))
		}
	}
	return b
}

// decode reads what encode wrote, and what earlier releases wrote. An
// entry of a later version, or of an op this release does not know, is
// refused by both.
func decode(entry []byte) (command, error) {
	r := &reader{b: entry}
	first := r.u8()
	if r.err != nil {
		return nil, r.err
	}
	if v := first >> opBits; v > entryVersion {
		return nil, fmt.Errorf("quorum: an entry of version %d (op %d): this release knows version %d (written by a later one?)", v, first&(1<<opBits-1), entryVersion)
	}
	var c command
	switch op := first & (1<<opBits - 1); op {
	case opEnqueue:
		now, expiresAt := int64(r.u64()), int64(r.u64())
		m, err := r.message()
		if err != nil {
			return nil, err
		}
		c = enqueue{now: now, expiresAt: expiresAt, msg: m}
	case opCheckout:
		c = checkout{consumer: ConsumerID(r.short()), credit: int(r.u32()), noAck: r.u8() == 1, priority: r.priority()}
	case opGet:
		c = get{consumer: ConsumerID(r.short()), noAck: r.u8() == 1}
	case opSettle:
		c = settleAny{how: How(r.u8()), ids: r.ids()}
	case opSettleBy:
		c = settleBy{consumer: ConsumerID(r.short()), how: How(r.u8()), ids: r.ids()}
	case opCancel:
		c = cancelConsumer{consumer: ConsumerID(r.short())}
	case opDown:
		c = downConsumer{consumer: ConsumerID(r.short())}
	case opExpire:
		c = expire{now: int64(r.u64())}
	case opPurge:
		node, nonce, named := r.purger()
		c = purge{node: node, nonce: nonce, named: named}
	case opConfig:
		c = configure{cfg: r.config()}
	case opDeadLettered:
		c = deadLettered{ids: r.ids()}
	case opSuspect:
		c = suspectNode{node: r.u64()}
	case opResume:
		c = resumeConsumers{consumers: r.consumerIDs()}
	default:
		return nil, fmt.Errorf("quorum: an entry of op %d, which this release does not know (written by a later one?)", op)
	}
	if r.err != nil {
		return nil, r.err
	}
	return c, nil
}

func appendShort(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }

func appendIDs(b []byte, ids []uint64) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, id)
	}
	return b
}

// enqueuedMessage reads the message an opEnqueue entry holds.
func enqueuedMessage(entry []byte) (*message.Message, error) {
	c, err := decode(entry)
	if err != nil {
		return nil, err
	}
	e, ok := c.(enqueue)
	if !ok {
		return nil, fmt.Errorf("entry %d is not an enqueue", c.op())
	}
	return e.msg, nil
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

// purger reads a purge entry's proposer and nonce, when it has them.
func (r *reader) purger() (node, nonce uint64, ok bool) {
	if len(r.b) < 16 {
		return 0, 0, false
	}
	node, nonce = r.u64(), r.u64()
	return node, nonce, r.err == nil
}

// consumerIDs reads resumeConsumers' list.
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

// priority reads what checkout wrote after no_ack: entries of before
// have neither priority, or the first alone (a priority of 0 without).
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
