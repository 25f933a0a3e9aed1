// Package quorum is a quorum queue: its state machine (Machine), what
// each entry of the queue's replicated log does to the queue, and each
// member's side (Queue), which turns what its node's clients do into
// entries for a Log and acts on what applying them asks for. Every member
// of the queue's Raft group applies the same entries in the same order
// and so holds the same state.
//
// A Queue is the machine of its Raft group's member (cluster.Group; a
// GroupMachine, BatchApplier and LogKeeper): the group's log, in Pebble,
// holds its entries. A body stays in the log entry that enqueued it, as in
// RabbitMQ's quorum queues: the group compacts the log only up to the
// oldest message the queue holds, and a snapshot (snapshot.go) holds the
// machine and only the bodies the log no longer has, so it costs the
// queue's bookkeeping, not what its messages weigh. Bodies are kept in
// memory too, as RabbitMQ 3.8's quorum queues kept them.
//
// # Who acts on what
//
// Each member hands its own node's consumers what the machine checks out
// to them, from its own copy of the log: a body crosses the network once,
// in the log, where RabbitMQ's leader sends every delivery to consumers
// on other nodes. Only the leader routes dead letters and suspects the
// consumers of nodes it cannot reach. A member hands over only what is
// current: it holds a batch's deliveries until the batch is applied
// (a later entry of it may take one back), and a member catching up
// (restarted, back from a partition or a pause, or restored from a
// snapshot) hands over nothing until it has applied what the leader had
// committed, then gives its consumers what the machine says they hold
// (cluster.BatchApplier, AppliedBatch).
//
// A consumer whose node the leader cannot reach is suspected, as
// RabbitMQ's quorum queues suspect a consumer whose node is disconnected:
// what it holds comes back to the queue and goes to others, redelivered,
// and it gets nothing until its node, back, resumes it. Its client is not
// cancelled: it goes on receiving once its node is back, and its acks of
// what was taken back from it change nothing. The consumers of a node's
// earlier run (it restarted) are ended.
//
// The broker's side (declare rules, routing, confirms, dead-lettering out
// of the group, policies, x-expires, placement and members) is
// core/quorumqueue.
//
// The machine follows RabbitMQ 3.10's quorum queues (rabbit_fifo) where
// clients can see it:
//
//   - Messages are served first in, first out; a message given back (a
//     nack or reject with requeue, or a consumer gone with it unsettled)
//     goes to the back of the queue, as RabbitMQ 3.10.8's quorum queues
//     do (checked against it: a requeued head comes after the messages
//     behind it; classic queues put it back in its place).
//   - A give-back counts as a failed delivery: the message's delivery
//     count (the x-delivery-count header on its next delivery) grows by
//     one, and past the delivery limit the message is dead-lettered with
//     reason delivery_limit instead of returned.
//   - A consumer gets messages while it has credit (its prefetch; none
//     means unlimited); consumers with credit are served in turn. With
//     single active consumer only the oldest consumer is served.
//   - max-length and max-length-bytes count ready messages (not those
//     checked out) and at-least-once dead letters; the limits are
//     applied after each entry, as rabbit_fifo's evaluate_limit does.
//     Over a limit, drop-head dead-letters the oldest with reason
//     maxlen; reject-publish keeps what it has and refuses publishes
//     from then on, until the queue is down to 80% of its limits. So a
//     publish that finds the queue at its limit still gets in: with
//     x-max-length 2, serial publishes keep 3, then one is taken in
//     again once 1 is left (checked against RabbitMQ 3.10.8, for
//     x-max-length-bytes too). RabbitMQ keeps this state per publishing
//     channel, judges a channel's first publish by the limit alone, and
//     lets in what its channels sent before they heard of it (pipelined
//     publishes); Warren keeps one state for the queue, in the log.
//   - A no-ack consumer's deliveries are settled as they are handed out;
//     its prefetch does not apply.
//   - Message TTL expires ready messages at the head only, as RabbitMQ's.
//   - At-least-once dead-lettering (Config.AtLeastOnce) keeps a dead
//     letter, counted toward the limits, until DeadLettered settles it.
//
// What RabbitMQ 3.10's quorum queues do differently from its classic
// ones, Warren's do too: no message priorities (x-max-priority is
// refused at declare), and a channel with a global prefetch cannot
// consume from one (540 NOT_IMPLEMENTED, closing the connection).
//
// # Invariants
//
//   - The machine is deterministic: it reads no clock (time comes in the
//     entries that need it), draws no random number, and never lets a
//     map's order decide anything it returns.
//   - A message is in exactly one place: ready (in the queue), checked
//     out to one consumer, pending as an at-least-once dead letter, or
//     gone.
//   - A message's id is the log index of the entry that enqueued it, so
//     ids grow with arrival.
package quorum

import (
	"fmt"
	"slices"
	"strings"
)

// Unlimited marks a limit that is not set.
const Unlimited = -1

// Overflow is what a full queue does with a new message.
type Overflow uint8

const (
	DropHead      Overflow = iota // dead-letter the oldest ready message
	RejectPublish                 // refuse the new one
)

// Config is a queue's settings that the machine acts on.
type Config struct {
	MaxLength     int64 // ready messages; Unlimited when not set
	MaxBytes      int64 // ready bytes; Unlimited when not set
	Overflow      Overflow
	DeliveryLimit int64 // failed deliveries before dead-lettering; Unlimited when not set
	// DeadLetter says dead messages leave as DeadLetter effects (a
	// dead-letter exchange is set); without it they are dropped.
	DeadLetter bool
	// SingleActive serves the oldest consumer alone.
	SingleActive bool
	// AtLeastOnce keeps a dead letter in the queue until its targets
	// have it (x-dead-letter-strategy at-least-once, which RabbitMQ
	// honours only with overflow reject-publish); it counts toward the
	// limits meanwhile.
	AtLeastOnce bool
}

// DefaultConfig is a queue without limits.
func DefaultConfig() Config {
	return Config{MaxLength: Unlimited, MaxBytes: Unlimited, DeliveryLimit: Unlimited}
}

// Msg is a message as the machine holds it; the body stays in the log.
type Msg struct {
	ID            uint64 // the log index of its enqueue
	Size          int64
	ExpiresAt     int64  // unix ms; 0 never
	DeliveryCount uint32 // failed deliveries so far
	Delivered     bool   // delivered at least once
}

// ConsumerID names a consumer: the choice of the member on the consumer's
// node, which begins it with that node and its run; unique in the queue.
type ConsumerID string

// Reason says why a message was dead-lettered, in x-death's words.
type Reason string

const (
	Rejected      Reason = "rejected"
	Expired       Reason = "expired"
	MaxLen        Reason = "maxlen"
	DeliveryLimit Reason = "delivery_limit"
)

// EffectKind is what an effect asks of a member.
type EffectKind uint8

const (
	Deliver    EffectKind = iota // hand Msg to Consumer
	DeadLetter                   // route Msg to the dead-letter exchange
	Drop                         // Msg is gone (no dead-letter exchange)
	Refuse                       // the publish of Msg was refused: nack it
	Acked                        // Msg was settled for good: its body may go
)

// Effect is one thing applying an entry asks a member to do: every
// member delivers to its own node's consumers; only the leader routes dead
// letters (Queue.act).
type Effect struct {
	Kind        EffectKind
	Consumer    ConsumerID
	Msg         Msg
	Redelivered bool
	Reason      Reason
	// Keep: an at-least-once dead letter, whose body stays until its
	// targets have it (DeadLettered).
	Keep bool
}

func (e Effect) String() string {
	switch e.Kind {
	case Deliver:
		s := fmt.Sprintf("deliver %s m%d", e.Consumer, e.Msg.ID)
		if e.Redelivered {
			s += " redelivered"
		}
		if e.Msg.DeliveryCount > 0 {
			s += fmt.Sprintf(" x-delivery-count=%d", e.Msg.DeliveryCount)
		}
		return s
	case DeadLetter:
		if e.Keep {
			return fmt.Sprintf("dead-letter m%d %s (kept until its targets have it)", e.Msg.ID, e.Reason)
		}
		return fmt.Sprintf("dead-letter m%d %s", e.Msg.ID, e.Reason)
	case Drop:
		return fmt.Sprintf("drop m%d %s", e.Msg.ID, e.Reason)
	case Acked:
		return fmt.Sprintf("acked m%d", e.Msg.ID)
	default:
		return fmt.Sprintf("refuse m%d", e.Msg.ID)
	}
}

// consumer is a consumer's share of the state.
type consumer struct {
	id     ConsumerID
	credit int            // its prefetch; 0 means unlimited
	once   bool           // a basic.get: gone once served
	noAck  bool           // settles what it is delivered at once (no-ack)
	out    map[uint64]Msg // checked out, by id
	gone   bool           // cancelled: no more deliveries
	// suspected: its node was cut off from the leader; it gets nothing
	// until its node resumes it (Suspect, Resume).
	suspected bool
	// priority is the consumer's x-priority: a message goes to one of
	// the highest with credit.
	priority int
}

func (c *consumer) hasCredit() bool {
	return !c.gone && !c.suspected && (c.noAck || c.credit == 0 || len(c.out) < c.credit)
}

// Machine is one quorum queue's state.
type Machine struct {
	cfg        Config
	ready      []Msg // the queue, head first
	readyBytes int64
	// rejecting: reject-publish refuses publishes (the queue went over a
	// limit and is not down to 80% of it yet).
	rejecting bool
	dlx       []pendingDead // at-least-once dead letters not yet settled, in order
	dlxBytes  int64
	consumers []*consumer // in the order they came
	byID      map[ConsumerID]*consumer
	next      int // where the round of consumers with credit goes on
	effects   []Effect
}

// New returns an empty queue.
func New(cfg Config) *Machine {
	return &Machine{cfg: cfg, byID: map[ConsumerID]*consumer{}}
}

// Ready is how many messages wait for a consumer, and their bytes.
func (m *Machine) Ready() (n int, bytes int64) { return len(m.ready), m.readyBytes }

// CheckedOut is how many messages consumers hold unsettled.
func (m *Machine) CheckedOut() int {
	n := 0
	for _, c := range m.consumers {
		n += len(c.out)
	}
	return n
}

// ids lists every message the queue holds: ready, checked out, and dead
// letters not yet settled.
func (m *Machine) ids() []uint64 {
	out := make([]uint64, 0, len(m.ready)+len(m.dlx))
	for _, msg := range m.ready {
		out = append(out, msg.ID)
	}
	for _, c := range m.consumers {
		for id := range c.out {
			out = append(out, id)
		}
	}
	for _, d := range m.dlx {
		out = append(out, d.ID)
	}
	return out
}

// take ends a command: the limits are applied to the state it left, and
// the effects gathered since the last take are returned.
func (m *Machine) take() []Effect {
	m.applyLimits()
	out := m.effects
	m.effects = nil
	return out
}

// Enqueue adds a message: refused while reject-publish refuses, else
// queued.
func (m *Machine) Enqueue(msg Msg) []Effect {
	if m.rejecting {
		m.effects = append(m.effects, Effect{Kind: Refuse, Msg: msg})
		return m.take()
	}
	msg.DeliveryCount, msg.Delivered = 0, false
	m.ready = append(m.ready, msg)
	m.readyBytes += msg.Size
	m.dispatch()
	return m.take()
}

// applyLimits applies max-length and max-length-bytes to the state a
// command left, after its deliveries, as RabbitMQ does: with drop-head
// the oldest ready messages past them go; with reject-publish, publishes
// are refused from the time the queue is over one until it is down to
// 80% of each.
func (m *Machine) applyLimits() {
	if m.cfg.Overflow != RejectPublish {
		m.rejecting = false
		for m.overLimit() && len(m.ready) > 0 {
			m.dead(m.pop(), MaxLen)
		}
		return
	}
	switch {
	case m.overLimit():
		m.rejecting = true
	case m.rejecting && m.belowSoftLimit():
		m.rejecting = false
	}
}

// overLimit says whether what the limits count is over one of them.
func (m *Machine) overLimit() bool {
	n, bytes := int64(len(m.ready)+len(m.dlx)), m.readyBytes+m.dlxBytes
	return m.cfg.MaxLength != Unlimited && n > m.cfg.MaxLength ||
		m.cfg.MaxBytes != Unlimited && bytes > m.cfg.MaxBytes
}

// belowSoftLimit says whether what the limits count is at or below 80%
// of each (RabbitMQ's soft limit, trunc(limit * 0.8)); with no limit set
// nothing holds publishers back.
func (m *Machine) belowSoftLimit() bool {
	soft := func(limit int64) int64 { return limit/5*4 + limit%5*4/5 }
	n, bytes := int64(len(m.ready)+len(m.dlx)), m.readyBytes+m.dlxBytes
	return (m.cfg.MaxLength == Unlimited || n <= soft(m.cfg.MaxLength)) &&
		(m.cfg.MaxBytes == Unlimited || bytes <= soft(m.cfg.MaxBytes))
}

// pop takes the next ready message: a returned one first.
func (m *Machine) pop() Msg {
	var msg Msg
	msg, m.ready = m.ready[0], m.ready[1:]
	m.readyBytes -= msg.Size
	return msg
}

func (m *Machine) dead(msg Msg, why Reason) {
	kind := Drop
	if m.cfg.DeadLetter {
		kind = DeadLetter
	}
	keep := kind == DeadLetter && m.cfg.AtLeastOnce
	if keep {
		m.dlx = append(m.dlx, pendingDead{Msg: msg, Reason: why})
		m.dlxBytes += msg.Size
	}
	m.effects = append(m.effects, Effect{Kind: kind, Msg: msg, Reason: why, Keep: keep})
}

// pendingDead is an at-least-once dead letter waiting for its targets.
type pendingDead struct {
	Msg
	Reason Reason
}

// DeadLettered settles at-least-once dead letters whose targets have
// them: they are gone for good (ids not pending are ignored).
func (m *Machine) DeadLettered(ids []uint64) []Effect {
	gone := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	kept := m.dlx[:0]
	for _, d := range m.dlx {
		if gone[d.ID] {
			m.dlxBytes -= d.Size
			m.effects = append(m.effects, Effect{Kind: Acked, Msg: d.Msg})
		} else {
			kept = append(kept, d)
		}
	}
	clear(m.dlx[len(kept):])
	m.dlx = kept
	return m.take()
}

// PendingDeadLetters are the at-least-once dead letters not settled yet,
// as the effects that would route them: a new leader routes them again.
func (m *Machine) PendingDeadLetters() []Effect {
	out := make([]Effect, len(m.dlx))
	for i, d := range m.dlx {
		out[i] = Effect{Kind: DeadLetter, Msg: d.Msg, Reason: d.Reason, Keep: true}
	}
	return out
}

// Configure changes the limits and dead-lettering (a policy changed):
// a lower limit drops what is over it, and single active consumer may
// give another consumer its turn.
func (m *Machine) Configure(cfg Config) []Effect {
	m.cfg = cfg
	m.dispatch()
	return m.take()
}

// Checkout adds a consumer with a prefetch (0: unlimited) and a
// priority.
func (m *Machine) Checkout(id ConsumerID, credit int, noAck bool, priority int) []Effect {
	if m.byID[id] == nil {
		c := &consumer{id: id, credit: credit, noAck: noAck, priority: priority, out: map[uint64]Msg{}}
		m.consumers = append(m.consumers, c)
		m.byID[id] = c
	}
	m.dispatch()
	return m.take()
}

// Get serves one message to a basic.get under id: checked out to it until
// settled, unless noAck settles it at once.
func (m *Machine) Get(id ConsumerID, noAck bool) []Effect {
	if n, _ := m.Ready(); n == 0 {
		return nil
	}
	msg := m.pop()
	redelivered := msg.Delivered
	msg.Delivered = true
	m.effects = append(m.effects, Effect{Kind: Deliver, Consumer: id, Msg: msg, Redelivered: redelivered})
	if noAck {
		m.effects = append(m.effects, Effect{Kind: Acked, Msg: msg})
	} else {
		c := m.byID[id]
		if c == nil {
			c = &consumer{id: id, credit: 1, once: true, out: map[uint64]Msg{}}
			m.byID[id] = c
			m.consumers = append(m.consumers, c)
		}
		c.out[msg.ID] = msg
	}
	return m.take()
}

// dispatch hands ready messages to consumers with credit, in turn.
func (m *Machine) dispatch() {
	for {
		if n, _ := m.Ready(); n == 0 {
			return
		}
		c := m.nextConsumer()
		if c == nil {
			return
		}
		msg := m.pop()
		redelivered := msg.Delivered
		msg.Delivered = true
		m.effects = append(m.effects, Effect{Kind: Deliver, Consumer: c.id, Msg: msg, Redelivered: redelivered})
		if c.noAck {
			// Settled as it is sent, as RabbitMQ settles a no-ack
			// consumer's deliveries; its prefetch does not apply.
			m.effects = append(m.effects, Effect{Kind: Acked, Msg: msg})
		} else {
			c.out[msg.ID] = msg
		}
	}
}

// nextConsumer is the next consumer due a message, nil when none has
// credit.
func (m *Machine) nextConsumer() *consumer {
	if m.cfg.SingleActive {
		for _, c := range m.consumers {
			if !c.once && !c.gone {
				if c.hasCredit() {
					return c
				}
				return nil
			}
		}
		return nil
	}
	// The highest priority among those with credit, then round-robin
	// among the consumers of that priority.
	top, found := 0, false
	for _, c := range m.consumers {
		if !c.once && c.hasCredit() && (!found || c.priority > top) {
			top, found = c.priority, true
		}
	}
	if !found {
		return nil
	}
	for range m.consumers {
		if m.next >= len(m.consumers) {
			m.next = 0
		}
		c := m.consumers[m.next]
		m.next++
		if !c.once && c.priority == top && c.hasCredit() {
			return c
		}
	}
	return nil
}

// How settles checked-out messages.
type How uint8

const (
	Ack     How = iota // done with
	Requeue            // give back (counts as a failed delivery)
	Discard            // reject without requeue: dead-lettered
)

// Settle settles the messages ids checked out to consumer id; ids it does
// not hold are ignored (settled already).
func (m *Machine) Settle(id ConsumerID, how How, ids []uint64) []Effect {
	c := m.byID[id]
	if c == nil {
		return nil
	}
	var back []Msg
	for _, mid := range ids {
		msg, ok := c.out[mid]
		if !ok {
			continue
		}
		delete(c.out, mid)
		switch how {
		case Ack:
			m.effects = append(m.effects, Effect{Kind: Acked, Msg: msg})
		case Discard:
			m.dead(msg, Rejected)
		case Requeue:
			back = append(back, msg)
		}
	}
	m.giveBack(back)
	m.forgetIfDone(c)
	m.dispatch()
	return m.take()
}

// SettleAny settles messages whoever holds them: a channel settles by
// delivery, not by consumer.
func (m *Machine) SettleAny(how How, ids []uint64) []Effect {
	var effects []Effect
	for _, c := range slices.Clone(m.consumers) {
		var mine []uint64
		for _, id := range ids {
			if _, ok := c.out[id]; ok {
				mine = append(mine, id)
			}
		}
		if len(mine) > 0 {
			effects = append(effects, m.Settle(c.id, how, mine)...)
		}
	}
	return effects
}

// giveBack returns messages to the returns, in id order, each counted as
// a failed delivery; those past the delivery limit are dead-lettered.
func (m *Machine) giveBack(msgs []Msg) {
	slices.SortFunc(msgs, func(a, b Msg) int { return cmpU64(a.ID, b.ID) })
	for _, msg := range msgs {
		msg.DeliveryCount++
		if m.cfg.DeliveryLimit != Unlimited && int64(msg.DeliveryCount) > m.cfg.DeliveryLimit {
			m.dead(msg, DeliveryLimit)
			continue
		}
		m.ready = append(m.ready, msg)
		m.readyBytes += msg.Size
	}
}

// Cancel stops deliveries to a consumer; what it holds stays checked out
// until it is settled or the consumer is Down.
func (m *Machine) Cancel(id ConsumerID) []Effect {
	if c := m.byID[id]; c != nil {
		c.gone = true
		m.forgetIfDone(c)
	}
	m.dispatch() // with single active consumer, the next takes over
	return m.take()
}

// Down ends a consumer whose channel or node is gone: what it held comes
// back, counted as failed deliveries.
func (m *Machine) Down(id ConsumerID) []Effect {
	c := m.byID[id]
	if c == nil {
		return nil
	}
	back := make([]Msg, 0, len(c.out))
	for _, msg := range c.out {
		back = append(back, msg)
	}
	clear(c.out)
	c.gone = true
	m.forgetIfDone(c)
	m.giveBack(back)
	m.dispatch()
	return m.take()
}

// Suspect marks the consumers of node, which the leader cannot reach, as
// suspected, as RabbitMQ's quorum queues do when a consumer's node is
// disconnected: what they hold comes back to the queue (a failed
// delivery each), and they get nothing more until Resume; a get's is
// forgotten. The consumers stay: a node cut off for a while, then back,
// has its clients' consumers go on, not cancelled.
func (m *Machine) Suspect(node uint64) []Effect {
	var back []Msg
	for _, c := range slices.Clone(m.consumers) {
		if n, ok := c.id.Node(); !ok || n != node || c.suspected {
			continue
		}
		for _, msg := range c.out {
			back = append(back, msg)
		}
		clear(c.out)
		c.suspected = !c.once && !c.gone
		m.forgetIfDone(c)
	}
	m.giveBack(back)
	m.dispatch()
	return m.take()
}

// Resume brings suspected consumers back: their node is back.
func (m *Machine) Resume(ids []ConsumerID) []Effect {
	for _, id := range ids {
		if c := m.byID[id]; c != nil {
			c.suspected = false
		}
	}
	m.dispatch()
	return m.take()
}

// Suspected lists the suspected consumers of node.
func (m *Machine) Suspected(node uint64) []ConsumerID {
	var out []ConsumerID
	for _, c := range m.consumers {
		if n, ok := c.id.Node(); ok && n == node && c.suspected {
			out = append(out, c.id)
		}
	}
	return out
}

// Holds says whether consumer id holds message msg checked out, and is
// not suspected: a delivery of it is still to be made.
func (m *Machine) Holds(id ConsumerID, msg uint64) bool {
	c := m.byID[id]
	if c == nil || c.suspected {
		return false
	}
	_, ok := c.out[msg]
	return ok
}

// heldBy is what consumer id holds, oldest first, whether the machine
// knows it, and whether it is suspected.
func (m *Machine) heldBy(id ConsumerID) (held []Msg, known, suspected bool) {
	c := m.byID[id]
	if c == nil {
		return nil, false, false
	}
	held = make([]Msg, 0, len(c.out))
	for _, msg := range c.out {
		held = append(held, msg)
	}
	slices.SortFunc(held, func(a, b Msg) int { return cmpU64(a.ID, b.ID) })
	return held, true, c.suspected
}

// Active says whether consumer id is known and not suspected.
func (m *Machine) Active(id ConsumerID) bool {
	c := m.byID[id]
	return c != nil && !c.suspected
}

// forgetIfDone removes a consumer that is gone (or a get's, settled) and
// holds nothing.
func (m *Machine) forgetIfDone(c *consumer) {
	if (!c.gone && !c.once) || len(c.out) > 0 {
		return
	}
	delete(m.byID, c.id)
	i := slices.Index(m.consumers, c)
	m.consumers = slices.Delete(m.consumers, i, i+1)
	if m.next > i {
		m.next--
	}
}

// Expire expires the ready messages at the head whose time has come by
// now (unix ms, from the entry).
func (m *Machine) Expire(now int64) []Effect {
	for {
		var head *Msg
		if len(m.ready) > 0 {
			head = &m.ready[0]
		}
		if head == nil || head.ExpiresAt == 0 || head.ExpiresAt > now {
			break
		}
		m.dead(m.pop(), Expired)
	}
	return m.take()
}

// ConsumerCount is how many consumers are subscribed (gets and those
// cancelled but still holding messages are not).
func (m *Machine) ConsumerCount() int {
	n := 0
	for _, c := range m.consumers {
		if !c.once && !c.gone {
			n++
		}
	}
	return n
}

// Consumers are the consumers the machine knows, in the order they came.
func (m *Machine) Consumers() []ConsumerID {
	out := make([]ConsumerID, len(m.consumers))
	for i, c := range m.consumers {
		out[i] = c.id
	}
	return out
}

// HeadExpiresAt is when the next message to serve expires (unix ms); 0
// when it never does or nothing is ready.
func (m *Machine) HeadExpiresAt() int64 {
	if len(m.ready) > 0 {
		return m.ready[0].ExpiresAt
	}
	return 0
}

// Purge drops the ready messages and returns how many.
func (m *Machine) Purge() int {
	n := len(m.ready)
	m.ready, m.readyBytes = nil, 0
	m.applyLimits()
	return n
}

// String describes the state, for tests: the returns, the main queue and
// each consumer's checked-out messages, by id.
func (m *Machine) String() string {
	var b strings.Builder
	ids := func(msgs []Msg) string {
		parts := make([]string, len(msgs))
		for i, msg := range msgs {
			parts[i] = fmt.Sprintf("m%d", msg.ID)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	n, bytes := m.Ready()
	fmt.Fprintf(&b, "ready=%d bytes=%d queue=%s", n, bytes, ids(m.ready))
	if len(m.dlx) > 0 {
		dead := make([]Msg, len(m.dlx))
		for i, d := range m.dlx {
			dead[i] = d.Msg
		}
		fmt.Fprintf(&b, " dead-letters=%s", ids(dead))
	}
	if m.rejecting {
		b.WriteString(" rejecting publishes")
	}
	for _, c := range m.consumers {
		out := make([]Msg, 0, len(c.out))
		for _, msg := range c.out {
			out = append(out, msg)
		}
		slices.SortFunc(out, func(a, b Msg) int { return cmpU64(a.ID, b.ID) })
		fmt.Fprintf(&b, "\n%s out=%s", c.id, ids(out))
		if c.gone {
			b.WriteString(" cancelled")
		}
		if c.suspected {
			b.WriteString(" suspected")
		}
	}
	return b.String()
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
