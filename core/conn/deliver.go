package conn

import (
	"crypto/rand"
	"encoding/base64"
	"sort"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/replyto"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
)

// consumer is one basic.consume: it implements queue.Consumer.
type consumer struct {
	ch        *channel
	q         queuetype.Source // the queue, or its home's stand-in
	queueName string
	tag       string
	noAck     bool
	exclusive bool
	priority  int            // x-priority: served before lower ones
	args      protocol.Table // basic.consume's arguments, for the admin API
	// Under ch.mu:
	prefetch uint16 // this consumer's limit (0: none)
	unacked  int
	blocked  bool // a delivery was refused for want of credit
	gone     bool // cancelled: no more deliveries
}

func (k *consumer) NoAck() bool     { return k.noAck }
func (k *consumer) Exclusive() bool { return k.exclusive }
func (k *consumer) Priority() int   { return k.priority }

// Arguments are basic.consume's arguments (a stream reads its
// x-stream-offset there).
func (k *consumer) Arguments() protocol.Table { return k.args }

// Prefetch is the consumer's prefetch, for a queue on another node to
// size its credit by.
func (k *consumer) Prefetch() int {
	k.ch.mu.Lock()
	defer k.ch.mu.Unlock()
	return int(k.prefetch)
}

// Deliver runs under the queue's lock: check credit, take a delivery tag,
// remember the message until it is settled, and write it out.
func (k *consumer) Deliver(d queue.Delivery) bool {
	ch := k.ch
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed || k.gone {
		return false
	}
	if !k.noAck && !ch.hasCredit(k) {
		k.blocked = true
		return false
	}
	o := ch.c.out
	b := o.begin()
	if b == nil {
		o.end(nil)
		return false
	}
	if !o.roomFor() {
		o.end(b)
		return false
	}
	ch.nextTag++
	tag := ch.nextTag
	o.endFor(ch.appendDeliver(b, k.tag, tag, d.Redelivered, d.Entry.Msg), d.Writes, ch.c)
	if !k.noAck {
		ch.unacked.push(unacked{tag: tag, q: k.q, entry: d.Entry, consumer: k})
		k.unacked++
	}
	ch.countDelivery(d, k.noAck, stats.Deliver, stats.DeliverNoAck)
	return true
}

// appendDeliver appends basic.deliver of m and its content frames to b.
func (ch *channel) appendDeliver(b []byte, consumerTag string, tag uint64, redelivered bool, m *message.Message) []byte {
	deliver := protocol.BasicDeliver{ConsumerTag: consumerTag, DeliveryTag: tag, Redelivered: redelivered, Exchange: m.Exchange, RoutingKey: m.RoutingKey}
	b, start := protocol.BeginFrame(b, protocol.FrameMethod, ch.id)
	b = deliver.Append(b)
	b = protocol.EndFrame(b, start)
	return ch.c.out.appendContent(b, ch.id, m, ch.c.frameMax)
}

// countDelivery counts d in the channel's statistics and its vhost's.
func (ch *channel) countDelivery(d queue.Delivery, noAck bool, withAck, withoutAck stats.Kind) {
	ch.stats.CountDelivery(noAck, d.Redelivered, withAck, withoutAck)
	if vh := ch.c.vh; vh != nil {
		vh.Counters.CountDelivery(noAck, d.Redelivered, withAck, withoutAck)
	}
}

// hasCredit applies basic.qos; ch.mu is held.
func (ch *channel) hasCredit(k *consumer) bool {
	if k.prefetch > 0 && k.unacked >= int(k.prefetch) {
		return false
	}
	return ch.globalPrefetch == 0 || ch.unacked.len() < int(ch.globalPrefetch)
}

// Cancelled runs when the queue is deleted under the consumer: the client
// hears of it through basic.cancel if it asked to, after the answer to
// the channel's own queue.delete when that is what deleted it.
func (k *consumer) Cancelled() {
	ch := k.ch
	ch.mu.Lock()
	wasActive := !k.gone && ch.consumers[k.tag] == k
	if wasActive {
		delete(ch.consumers, k.tag)
	}
	k.gone = true
	notify := wasActive && ch.c.caps.consumerCancelNotify
	if notify && ch.holdingCancels {
		ch.heldCancels = append(ch.heldCancels, k.tag)
		notify = false
	}
	ch.mu.Unlock()
	ch.c.dropConsumer(k)
	if notify {
		ch.c.send(ch.id, &protocol.BasicCancel{ConsumerTag: k.tag, NoWait: true})
	}
}

// holdCancels keeps the basic.cancel of the channel's consumers until
// sendHeldCancels. RabbitMQ's channel answers its queue.delete before it
// hears from the queue that its consumers are gone, so a client sees
// delete-ok first (amqplib's tests count on it); Warren's queues tell
// their consumers while they are deleted, before the answer is out.
func (ch *channel) holdCancels() {
	ch.mu.Lock()
	ch.holdingCancels = true
	ch.mu.Unlock()
}

// sendHeldCancels sends what holdCancels kept, and stops keeping.
func (ch *channel) sendHeldCancels() {
	ch.mu.Lock()
	tags := ch.heldCancels
	ch.holdingCancels, ch.heldCancels = false, nil
	ch.mu.Unlock()
	for _, tag := range tags {
		ch.c.send(ch.id, &protocol.BasicCancel{ConsumerTag: tag, NoWait: true})
	}
}

func (c *Conn) addConsumer(k *consumer) {
	c.consumersMu.Lock()
	c.consumers[k] = struct{}{}
	c.consumersMu.Unlock()
}

func (c *Conn) dropConsumer(k *consumer) {
	c.consumersMu.Lock()
	delete(c.consumers, k)
	c.consumersMu.Unlock()
}

// unacked is a delivery awaiting settlement.
type unacked struct {
	tag      uint64
	q        queuetype.Source
	entry    queue.Entry
	consumer *consumer // nil for basic.get
	settled  bool
}

// unackedList keeps deliveries in tag order (tags only grow), so settling
// one tag is a binary search and settling "multiple" takes a prefix.
// Settled entries in the middle are only marked, and swept when they make
// up half the list.
//
// It is a ring: deliveries join at the tail and settle mostly from the
// head, so a steady flow reuses the same array instead of copying the
// list each time a slice that moved forward ran out of room (13% of the
// broker's CPU per small message). items has a power-of-two length; the
// list is the n entries from head on, wrapping.
type unackedList struct {
	items   []unacked
	head, n int
	settled int
}

// at is the list's i-th entry.
func (l *unackedList) at(i int) *unacked { return &l.items[(l.head+i)&(len(l.items)-1)] }

func (l *unackedList) len() int { return l.n - l.settled }

func (l *unackedList) push(u unacked) {
	if l.n == len(l.items) {
		grown := make([]unacked, max(16, 2*len(l.items)))
		for i := range l.n {
			grown[i] = *l.at(i)
		}
		l.items, l.head = grown, 0
	}
	*l.at(l.n) = u
	l.n++
}

// search is the index of the first entry whose tag is tag or more.
func (l *unackedList) search(tag uint64) int {
	return sort.Search(l.n, func(i int) bool { return l.at(i).tag >= tag })
}

// take removes and returns the deliveries a settlement names: tag alone,
// or with multiple every tag up to it (tag 0 with multiple: all). ok is
// false, and nothing is taken, when tag is not outstanding: as RabbitMQ
// 3.10.8 has it, multiple settles up to a tag the channel holds, not up
// to any number (an ack of 10 with multiple after deliveries 1 to 3, or
// of a tag settled already, is 406 "unknown delivery tag").
func (l *unackedList) take(tag uint64, multiple bool) (out []unacked, ok bool) {
	if (tag != 0 || !multiple) && !l.has(tag) {
		return nil, false
	}
	if multiple {
		for i := range l.n {
			u := l.at(i)
			if tag != 0 && u.tag > tag {
				break
			}
			if !u.settled {
				out = append(out, *u)
				u.settled = true
				l.settled++
			}
		}
		l.compact()
		return out, true
	}
	i := l.search(tag)
	out = append(out, *l.at(i))
	l.at(i).settled = true
	l.settled++
	l.compact()
	return out, true
}

// compact drops the settled entries at the head, and sweeps the rest once
// settled ones are half the list. Dropped entries are cleared, so that
// the list keeps no message alive.
func (l *unackedList) compact() {
	for l.n > 0 && l.at(0).settled {
		*l.at(0) = unacked{}
		l.head = (l.head + 1) & (len(l.items) - 1)
		l.n--
		l.settled--
	}
	if l.settled > 0 && l.settled*2 >= l.n {
		w := 0
		for i := range l.n {
			if u := *l.at(i); !u.settled {
				*l.at(w) = u
				w++
			}
		}
		for i := w; i < l.n; i++ {
			*l.at(i) = unacked{}
		}
		l.n, l.settled = w, 0
	}
	if l.n == 0 {
		l.head = 0
		if len(l.items) > 64 {
			l.items = nil // a burst's big array goes; a small steady flow keeps its own
		}
	}
}

func (l *unackedList) takeAll() []unacked {
	var out []unacked
	for i := range l.n {
		if u := *l.at(i); !u.settled {
			out = append(out, u)
		}
	}
	*l = unackedList{}
	return out
}

func (ch *channel) ack(tag uint64, multiple bool) error {
	if ch.tx != nil {
		return ch.txSettle(tag, multiple, true, false)
	}
	return ch.settle(tag, multiple, true, false)
}

func (ch *channel) nack(tag uint64, multiple, requeue bool) error {
	if ch.tx != nil {
		return ch.txSettle(tag, multiple, false, requeue)
	}
	return ch.settle(tag, multiple, false, requeue)
}

// txSettle checks a settlement now (an unknown tag is an error at once) but
// applies it at commit.
func (ch *channel) txSettle(tag uint64, multiple, ack, requeue bool) error {
	ch.mu.Lock()
	known := multiple && tag == 0 || ch.unacked.has(tag)
	ch.mu.Unlock()
	if !known {
		return reply.PreconditionFailed("unknown delivery tag %d", tag)
	}
	ch.tx.settles = append(ch.tx.settles, txSettle{tag: tag, multiple: multiple, ack: ack, requeue: requeue})
	return nil
}

func (l *unackedList) has(tag uint64) bool {
	i := l.search(tag)
	return i < l.n && l.at(i).tag == tag && !l.at(i).settled
}

// settle acks, requeues or rejects deliveries, then lets the queues whose
// consumers regained credit deliver again.
func (ch *channel) settle(tag uint64, multiple, ack, requeueIt bool) error {
	ch.mu.Lock()
	done, ok := ch.unacked.take(tag, multiple)
	if !ok {
		ch.mu.Unlock()
		return reply.PreconditionFailed("unknown delivery tag %d", tag)
	}
	if !ack {
		for _, u := range done {
			if err := queuetype.Refused(u.q, queuetype.AskNackOrReject); err != nil {
				// The connection closes: what the nack took goes back to
				// its queues, as everything else it holds will.
				ch.mu.Unlock()
				requeue(done)
				return err
			}
		}
	}
	kick := ch.releaseCredit(done)
	ch.mu.Unlock()

	if ack {
		ch.count(stats.Ack, uint64(len(done)))
	} else {
		ch.count(stats.Reject, uint64(len(done)))
	}
	switch {
	case ack:
		forEachQueue(done, func(q queuetype.Source, e []queue.Entry) { q.Ack(e) })
	case requeueIt:
		requeue(done)
	default:
		forEachQueue(done, func(q queuetype.Source, e []queue.Entry) { q.Reject(e) })
	}
	kickEach(kick)
	return nil
}

// releaseCredit gives back the prefetch credit settled deliveries held and
// returns the queues of consumers that were waiting for it; ch.mu is held.
func (ch *channel) releaseCredit(settled []unacked) []queuetype.Source {
	var kick []queuetype.Source
	for _, u := range settled {
		if k := u.consumer; k != nil {
			k.unacked--
			if k.blocked {
				k.blocked = false
				kick = append(kick, k.q)
			}
		}
	}
	if ch.globalPrefetch > 0 {
		// A channel-wide limit may have held back consumers of other queues.
		kick = ch.unblockAll(kick)
	}
	return kick
}

// unblockAll appends the queues of every consumer waiting for credit;
// ch.mu is held.
func (ch *channel) unblockAll(kick []queuetype.Source) []queuetype.Source {
	for _, k := range ch.consumers {
		if k.blocked {
			k.blocked = false
			kick = append(kick, k.q)
		}
	}
	return kick
}

// kickEach kicks each distinct queue once.
func kickEach(qs []queuetype.Source) {
	for i, q := range qs {
		dup := false
		for _, p := range qs[:i] {
			if p == q {
				dup = true
				break
			}
		}
		if !dup {
			q.Kick()
		}
	}
}

func (ch *channel) qos(m *protocol.BasicQos) error {
	if m.PrefetchSize != 0 {
		return reply.NotImplemented("prefetch_size!=0 (%d)", m.PrefetchSize)
	}
	ch.mu.Lock()
	if m.Global {
		ch.globalPrefetch = m.PrefetchCount
	} else {
		// A per-consumer prefetch lifts the channel's limit, as RabbitMQ
		// 3.10.8's does (qos 2 global then qos 5: consumers get 5 each,
		// and a quorum queue takes a consume).
		ch.prefetch = m.PrefetchCount
		ch.globalPrefetch = 0
	}
	kick := ch.unblockAll(nil)
	ch.mu.Unlock()
	ch.c.send(ch.id, &protocol.BasicQosOk{})
	kickEach(kick)
	return nil
}

// queueName resolves the empty name to the channel's last declared queue,
// as the spec allows.
func (ch *channel) queueName(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if ch.lastQueue == "" {
		return "", reply.NotFound("no previously declared queue")
	}
	return ch.lastQueue, nil
}

// readableQueue resolves a queue named in basic.consume or basic.get: the
// last declared one for "", then read permission, then existence and
// exclusivity.
func (ch *channel) readableQueue(name string) (queuetype.Source, string, error) {
	name, err := ch.queueName(name)
	if err != nil {
		return nil, "", err
	}
	if err := refused(ch.c.grant.ReadQueue(name)); err != nil {
		return nil, "", err
	}
	q, err := ch.c.vh.Source(name, ch.c)
	return q, name, err
}

func (ch *channel) consume(m *protocol.BasicConsume) error {
	if m.Queue == replyto.Queue {
		return ch.consumeReplyTo(m)
	}
	q, name, err := ch.readableQueue(m.Queue)
	if err != nil {
		return err
	}
	if ch.globalPrefetch > 0 {
		// A quorum queue refuses: RabbitMQ 3.10.8 closes the connection
		// (checked against it).
		if err := queuetype.Refused(q, queuetype.AskGlobalPrefetch); err != nil {
			return err
		}
	}
	priority, err := ch.c.vh.ConsumerArgs(name, m.Arguments)
	if err != nil {
		return err
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = generatedTag()
	}
	ch.mu.Lock()
	if _, dup := ch.consumers[tag]; dup || ch.reply != nil && ch.reply.tag == tag {
		ch.mu.Unlock()
		return reply.New(protocol.NotAllowed, "attempt to reuse consumer tag '%s'", tag)
	}
	k := &consumer{ch: ch, q: q, queueName: name, tag: tag, noAck: m.NoAck, exclusive: m.Exclusive, priority: priority, args: m.Arguments, prefetch: ch.prefetch}
	ch.consumers[tag] = k
	ch.mu.Unlock()

	var added func()
	if !m.NoWait {
		added = func() { ch.c.send(ch.id, &protocol.BasicConsumeOk{ConsumerTag: tag}) }
	}
	ch.c.addConsumer(k)
	if err := q.Consume(k, added); err != nil {
		ch.mu.Lock()
		delete(ch.consumers, tag)
		k.gone = true
		ch.mu.Unlock()
		ch.c.dropConsumer(k)
		return err
	}
	return nil
}

// generatedTag names a consumer the client left unnamed, like RabbitMQ.
func generatedTag() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "amq.ctag-" + base64.RawURLEncoding.EncodeToString(b[:])
}

func (ch *channel) cancel(m *protocol.BasicCancel) error {
	if ch.cancelReplyTo(m.ConsumerTag) {
		if !m.NoWait {
			ch.c.send(ch.id, &protocol.BasicCancelOk{ConsumerTag: m.ConsumerTag})
		}
		return nil
	}
	ch.mu.Lock()
	k := ch.consumers[m.ConsumerTag]
	delete(ch.consumers, m.ConsumerTag)
	if k != nil {
		k.gone = true
	}
	ch.mu.Unlock()
	if k != nil {
		ch.c.dropConsumer(k)
		k.q.Cancel(k)
	}
	if !m.NoWait {
		ch.c.send(ch.id, &protocol.BasicCancelOk{ConsumerTag: m.ConsumerTag})
	}
	return nil
}

func (ch *channel) get(m *protocol.BasicGet) error {
	q, _, err := ch.readableQueue(m.Queue)
	if err != nil {
		return err
	}
	if err := queuetype.Refused(q, queuetype.AskGet); err != nil {
		return err
	}
	d, remaining, ok := q.Get(m.NoAck)
	if !ok {
		ch.count(stats.GetEmpty, 1)
		ch.c.send(ch.id, &protocol.BasicGetEmpty{})
		return nil
	}
	ch.countDelivery(d, m.NoAck, stats.Get, stats.GetNoAck)
	ch.mu.Lock()
	ch.nextTag++
	tag := ch.nextTag
	if !m.NoAck {
		ch.unacked.push(unacked{tag: tag, q: q, entry: d.Entry})
	}
	msg := d.Entry.Msg
	getOk := protocol.BasicGetOk{DeliveryTag: tag, Redelivered: d.Redelivered, Exchange: msg.Exchange, RoutingKey: msg.RoutingKey, MessageCount: uint32(remaining)}
	b := ch.c.out.begin()
	if b != nil {
		b = protocol.AppendMethodFrame(b, ch.id, &getOk)
		b = ch.c.out.appendContent(b, ch.id, msg, ch.c.frameMax)
	}
	ch.c.out.end(b)
	ch.mu.Unlock()
	if _, local := q.(*queue.Queue); local && m.NoAck {
		msg.Release() // the hold Get handed over: the write holds it now
	}
	return nil
}

// recover requeues every unacked delivery on the channel. RabbitMQ does not
// implement redelivery to the same consumer (requeue=false), and neither
// does Warren.
func (ch *channel) recover(requeueIt, answer bool) error {
	if !requeueIt {
		return reply.NotImplemented("requeue=false")
	}
	ch.mu.Lock()
	pending := ch.unacked.takeAll()
	kick := ch.releaseCredit(pending)
	ch.mu.Unlock()
	requeue(pending)
	kickEach(kick)
	if answer {
		ch.c.send(ch.id, &protocol.BasicRecoverOk{})
	}
	return nil
}
