// Package queue holds a queue's messages and consumers and decides who gets
// which message when.
//
// A Queue is a set of ready messages (FIFO, or FIFO within each priority
// level), a count of messages delivered but not yet settled, and a list of
// consumers served round-robin. One mutex, mu, guards it all. Every public
// method takes it, does its work and releases it, and only then calls back
// into the vhost (Events): a queue never calls "up" with its lock held, and
// never takes a vhost lock, a plugin or a synced write under it. Deliveries
// happen under the lock: Consumer.Deliver must record the delivery and
// write it without blocking on anything that could take a queue lock. Where
// queue.mu sits among Warren's other locks is written down in LOCKS.md at
// the repository's root.
//
// Settlement is the channel's job: it keeps the Entry of every unacked
// delivery and hands it back through Ack, Requeue or Reject. Requeued
// entries go back to their original place in line (ordered by Seq), marked
// redelivered, as RabbitMQ's classic queues do.
//
// Messages expire (TTL) only at the head of the queue, as in RabbitMQ: a
// timer watches the earliest head, and dispatch drops expired heads first.
// Expired, rejected, over-limit and over-delivered messages are collected
// while the lock is held and handed to Events.DeadLetter after it is released.
//
// With a Store (see persist.go), a durable queue writes each persistent
// message to its index, marks its first delivery, and deletes it when it is
// acked or leaves; any queue pages its newest messages out to the store
// once it outgrows its MemoryLimit, or once the node's queues together
// hold their Paging bound, and reads them back as it drains (see level.go
// and paging.go). Entries that left for a dead-letter exchange are deleted by
// the vhost, in the same Txn that stores them in their new queue.
package queue

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Entry is one message's place in one queue.
type Entry struct {
	Msg        *message.Message
	Seq        uint64 // position in the queue, increasing with each enqueue
	ExpiresAt  int64  // unix ms; 0 = never
	Deliveries uint32 // times delivered so far
	Level      uint8  // the priority level it is queued at
	Stored     bool   // the queue's index in the store holds it
}

// Reason says why a message was dead-lettered, in x-death's words.
type Reason string

const (
	Rejected      Reason = "rejected"
	Expired       Reason = "expired"
	MaxLen        Reason = "maxlen"
	DeliveryLimit Reason = "delivery_limit"
)

// Dead is a message leaving the queue for its dead-letter exchange.
type Dead struct {
	Entry
	Reason Reason
}

// Delivery is a message handed to a consumer or to basic.get.
type Delivery struct {
	Queue       *Queue
	Entry       Entry
	Redelivered bool
	// Writes, when set, is the run of work the delivery happens in: the
	// consumer may leave its socket to be flushed when the run ends. It is
	// valid only during Deliver.
	Writes *Writes
}

// Consumer receives deliveries. The connection layer implements it.
type Consumer interface {
	// Deliver hands d to the consumer. It runs with the queue's lock held and
	// returns false, having changed nothing, when the consumer cannot take a
	// message now (prefetch full, flow stopped, socket congested); the queue
	// then waits for a Kick.
	Deliver(d Delivery) bool
	// Cancelled tells the consumer its queue went away. It runs without the
	// queue's lock.
	Cancelled()
	// NoAck reports whether deliveries are settled on sending.
	NoAck() bool
	// Exclusive reports whether the consumer asked for sole use of the queue.
	Exclusive() bool
}

// Events are the queue's calls back into its vhost. None runs with the
// queue's lock held.
type Events interface {
	DeadLetter(q *Queue, dead []Dead)
	// Unused reports that x-expires elapsed with the queue unused.
	Unused(q *Queue)
	// Abandoned reports that the last consumer of an auto-delete queue left.
	Abandoned(q *Queue)
}

// Queue is one AMQP queue.
type Queue struct {
	Name       string
	VHost      string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       protocol.Table
	// Owner is the exclusive queue's connection; nil otherwise.
	Owner any
	// Counters are the queue's message statistics: publish (enqueued),
	// deliver, deliver_no_ack, get, get_no_ack, get_empty, redeliver, ack
	// and dead_lettered_*. The queue bumps them under its lock; anyone
	// may read them.
	Counters stats.Meter
	events   Events
	base     Settings // from the arguments alone

	mu         lockorder.Mutex[lockorder.QueueQueue]
	settings   Settings // base with the policy applied
	levels     []level  // by priority; one level unless x-max-priority
	ready      int
	readyBytes int64
	unacked    int
	// consumers are in order of priority, highest first (in order of
	// arrival within one priority, and always so under single active
	// consumer, where the first is the active one); prios holds each
	// one's priority.
	consumers []Consumer
	prios     []int
	next      int // round-robin cursor into consumers, with one priority
	// byPriority is set while the consumers' priorities differ; cursors
	// are then the round-robin positions within each priority's run.
	byPriority  bool
	cursors     map[int]int
	hadConsumer bool
	deleted     bool
	nextSeq     uint64
	dead        []Dead
	expiring    bool // some entry has had an expiry: expireHeads has work
	ttlTimer    *time.Timer
	ttlAt       int64
	idleTimer   *time.Timer
	lastUsed    int64
	now         func() int64

	order    uint64         // unique per queue: the order the vhost locks queues in
	store    Store          // nil: memory only
	persists bool           // durable, not exclusive, with a store
	qid      uint64         // the queue's id in the store; 0 until first needed
	qidSeen  atomic.Uint64  // qid, for QID without the lock
	tx       *storage.Txn   // writes of the operation in progress
	spill    *storage.Spill // large transient bodies paged out; nil until needed
	// spillWrites are the bodies placed in spill this operation, written
	// once the lock is released (unlockCollect).
	spillWrites []*storage.SpillWrite
	bodies      *message.Bodies // the pool bodies read back are read into; nil: allocated
	writes      *Writes         // the enqueuing run's, during EnqueueFrom's dispatch
	memLimit    MemoryLimit
	mem         memory // ready entries held in memory

	// The two latest depth samples (ready, unacked), for the rates of
	// change the admin API shows; under mu.
	depth stats.Pair[[2]int]
	util  utilisation // consumer utilisation (utilisation.go); under mu
}

// Order is the queue's place in the lock order: a vhost that locks several
// queues at once locks them by increasing Order.
func (q *Queue) Order() uint64 { return q.order }

// Config is what declaring a queue fixes.
type Config struct {
	Name       string
	VHost      string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       protocol.Table
	Owner      any
	Settings   Settings // from ParseArgs
	Events     Events
	Store      Store       // nil: memory only
	QID        uint64      // the id a durable queue is stored under (0: assign when needed)
	Memory     MemoryLimit // the in-memory bound before paging
	Order      uint64      // unique within the vhost; see Order
	// Bodies, when set, lends the buffers large bodies paged back in are
	// read into (message.Bodies).
	Bodies *message.Bodies
}

// New creates an empty queue.
func New(c Config) *Queue {
	q := &Queue{
		Name: c.Name, VHost: c.VHost, Durable: c.Durable, Exclusive: c.Exclusive,
		AutoDelete: c.AutoDelete, Args: c.Args, Owner: c.Owner, events: c.Events,
		base: c.Settings, settings: c.Settings, nextSeq: 1,
		now:   func() int64 { return time.Now().UnixMilli() },
		store: c.Store, qid: c.QID, memLimit: c.Memory, bodies: c.Bodies,
	}
	q.qidSeen.Store(c.QID)
	q.persists = c.Store != nil && c.Durable && !c.Exclusive
	q.order = c.Order
	q.levels = make([]level, int(c.Settings.MaxPriority)+1)
	for i := range q.levels {
		q.levels[i].prio = uint8(i)
	}
	q.lastUsed = q.now()
	q.mu.Lock()
	q.armIdleTimer()
	q.mu.Unlock()
	return q
}

// unlock commits the operation's writes, releases the lock and then hands
// collected dead letters to the vhost.
func (q *Queue) unlock() {
	if dead := q.unlockCollect(); len(dead) > 0 && q.events != nil {
		q.events.DeadLetter(q, dead)
	}
}

// unlockCollect commits the operation's writes and releases the lock,
// returning the dead letters collected under it for the caller to raise.
func (q *Queue) unlockCollect() []Dead {
	q.commit()
	dead := q.dead
	q.dead = nil
	writes := q.spillWrites
	q.spillWrites = nil
	q.mu.Unlock()
	for _, w := range writes {
		w.Write()
	}
	return dead
}

// Settings returns the settings in force.
func (q *Queue) Settings() Settings {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.settings
}

// ApplyPolicy puts a policy definition (nil: none) on top of the queue's
// arguments. Limits take effect at once.
func (q *Queue) ApplyPolicy(policy protocol.Table) {
	q.mu.Lock()
	q.settings = q.base.WithPolicy(policy)
	q.enforceLimits()
	q.armIdleTimer()
	q.dispatch()
	q.unlock()
}

// Enqueue adds a message. It reports whether the queue took it: false when
// the queue is gone, or full with overflow reject-publish (rejected is then
// true and the publisher should be nacked). stored reports that a persistent
// message was written to the store, so a confirm must wait for a sync.
func (q *Queue) Enqueue(m *message.Message) (accepted, rejected, stored bool) {
	return q.EnqueueFrom(m, nil)
}

// EnqueueFrom is Enqueue from a run of work that flushes w when it ends:
// the deliveries it makes leave their sockets' writes to w.
func (q *Queue) EnqueueFrom(m *message.Message, w *Writes) (accepted, rejected, stored bool) {
	q.mu.Lock()
	accepted, rejected, stored = q.enqueue(m)
	q.writes = w
	q.dispatch()
	q.writes = nil
	q.enforceLimits()
	q.expireHeads()
	q.unlock()
	return accepted, rejected, stored
}

// enqueue adds m without dispatching; q.mu is held.
func (q *Queue) enqueue(m *message.Message) (accepted, rejected, stored bool) {
	if q.deleted {
		q.releaseRef(m)
		return false, false, false
	}
	e := Entry{Msg: m, Seq: q.nextSeq, Level: q.levelIndex(m)}
	q.nextSeq++
	if ttl := q.ttlFor(m); ttl >= 0 {
		e.ExpiresAt = q.now() + ttl
		q.expiring = true
	}
	if q.full(m) && q.settings.Overflow != DropHead {
		if q.settings.Overflow == RejectPublishDLX {
			q.dead = append(q.dead, Dead{Entry: e, Reason: MaxLen})
		}
		q.releaseRef(m)
		return false, true, false
	}
	if q.persists && m.Persistent {
		q.storeEntry(&e, true)
		stored = true
	}
	q.push(e)
	q.Counters.Inc(stats.Publish)
	return true, false, stored
}

// releaseRef gives back the reference a shared message was promised for
// this queue, which did not take it; q.mu is held.
func (q *Queue) releaseRef(m *message.Message) {
	if m.ID != 0 && q.persists && m.Persistent {
		q.txn().ReleaseRef(m.ID)
	}
}

// LockForMove, EnqueueMoved, UnlockMoved and Serve let the vhost move
// dead letters into several queues atomically: it locks every target (in
// Order), enqueues into each, writes the Txn that deletes the messages
// from their old queue and stores them in the new ones, and only then
// unlocks. Until the Txn is committed no consumer can see the messages, so
// no ack can reach the store ahead of the move.
//
// This is the one place where a goroutine holds several queue locks, and
// the reason they are taken in Order. While it holds them it calls nothing
// outside the queues: UnlockMoved and Serve return the dead letters they
// produce instead of raising them through Events, and the vhost moves
// those once it holds no queue lock.
func (q *Queue) LockForMove() { q.mu.Lock() }

// EnqueueMoved enqueues a dead-lettered message, writing it into txn (the
// move's) when it is to be stored. It reports whether the queue took it.
func (q *Queue) EnqueueMoved(m *message.Message, txn *storage.Txn) bool {
	if q.deleted {
		return false
	}
	if txn != nil && q.tx == nil && q.store != nil {
		q.tx = txn
		defer func() { q.tx = nil }()
	}
	accepted, _, _ := q.enqueue(m)
	return accepted
}

// UnlockMoved ends a move's hold on the queue: length limits and TTLs are
// applied to what arrived, the queue's own writes are committed (after the
// move's Txn, so a drop-head deletion follows the put it deletes) and the
// lock is released. Delivery waits for Serve.
func (q *Queue) UnlockMoved() []Dead {
	q.enforceLimits()
	q.expireHeads()
	return q.unlockCollect()
}

// Serve hands ready messages to consumers, as Kick does, and returns the
// dead letters that produced (expired heads) instead of raising them.
func (q *Queue) Serve() []Dead {
	q.mu.Lock()
	q.dispatch()
	return q.unlockCollect()
}

func (q *Queue) ttlFor(m *message.Message) int64 {
	ttl := q.settings.MessageTTL
	if m.TTL != message.NoTTL && (ttl == Unlimited || m.TTL < ttl) {
		ttl = m.TTL
	}
	return ttl
}

// full reports whether adding m would break a length limit.
func (q *Queue) full(m *message.Message) bool {
	s := &q.settings
	return (s.MaxLength != Unlimited && int64(q.ready)+1 > s.MaxLength) ||
		(s.MaxLengthBytes != Unlimited && q.readyBytes+int64(m.Size()) > s.MaxLengthBytes)
}

// levelIndex is the priority level a message queues at: its priority,
// capped at the queue's highest.
func (q *Queue) levelIndex(m *message.Message) uint8 {
	p := int(m.Priority)
	if p >= len(q.levels) {
		p = len(q.levels) - 1
	}
	return uint8(p)
}

// push adds a ready entry: in memory, or paged out to the store when the
// queue is over its memory bound or its level is already paging.
func (q *Queue) push(e Entry) {
	l := &q.levels[e.Level]
	size := int64(e.Msg.Size())
	q.ready++
	q.readyBytes += size
	if l.pagedCount > 0 || q.overMemory(e.Stored) {
		if !e.Stored {
			q.storeEntry(&e, false)
		}
		if l.pagedCount == 0 {
			l.pagedFrom = e.Seq
		}
		l.pagedCount++
		l.pagedBytes += size
		return
	}
	l.fresh.push(e)
	e.Msg.Hold() // released when it leaves for good (forget)
	q.memAdd(&e)
}

// head returns the level holding the next message to leave, with that
// message in memory, or nil when the queue is empty.
func (q *Queue) head() *level {
	for i := len(q.levels) - 1; i >= 0; i-- {
		l := &q.levels[i]
		if l.len() == 0 {
			continue
		}
		if q.wantsPageIn(l) {
			_ = q.pageIn(l)
		}
		if l.inMemory() > 0 {
			return l
		}
	}
	return nil
}

func (q *Queue) popFrom(l *level) Entry {
	e := l.pop()
	q.ready--
	q.readyBytes -= int64(e.Msg.Size())
	q.memSub(&e)
	return e
}

// enforceLimits drops messages from the head while a drop-head limit is
// exceeded (reject-publish queues refuse at the door instead).
func (q *Queue) enforceLimits() {
	s := &q.settings
	if s.Overflow != DropHead {
		return
	}
	for q.ready > 0 && ((s.MaxLength != Unlimited && int64(q.ready) > s.MaxLength) ||
		(s.MaxLengthBytes != Unlimited && q.readyBytes > s.MaxLengthBytes)) {
		l := q.oldest()
		if l == nil {
			return
		}
		q.dead = append(q.dead, Dead{Entry: q.popFrom(l), Reason: MaxLen})
	}
}

// oldest returns the level whose head entered the queue first: drop-head
// drops the oldest message, whatever its priority.
func (q *Queue) oldest() *level {
	var best *level
	for i := range q.levels {
		l := &q.levels[i]
		if l.inMemory() == 0 && q.wantsPageIn(l) {
			_ = q.pageIn(l)
		}
		if h := l.peek(); h != nil && (best == nil || h.Seq < best.peek().Seq) {
			best = l
		}
	}
	return best
}

// expireHeads dead-letters expired messages at the head of each level and
// arms the timer for the next head to expire.
func (q *Queue) expireHeads() {
	if !q.expiring {
		return // no message with a TTL ever entered: nothing to look at
	}
	var now int64
	next := int64(0)
	for i := range q.levels {
		l := &q.levels[i]
		for {
			h := l.peek()
			if h == nil || h.ExpiresAt == 0 {
				break
			}
			if now == 0 {
				now = q.now()
			}
			if h.ExpiresAt > now {
				if next == 0 || h.ExpiresAt < next {
					next = h.ExpiresAt
				}
				break
			}
			q.dead = append(q.dead, Dead{Entry: q.popFrom(l), Reason: Expired})
		}
	}
	q.armTTLTimer(next)
}

func (q *Queue) armTTLTimer(at int64) {
	if at == 0 || q.deleted {
		if q.ttlTimer != nil {
			q.ttlTimer.Stop()
		}
		q.ttlAt = 0
		return
	}
	if q.ttlAt == at {
		return
	}
	q.ttlAt = at
	arm(&q.ttlTimer, at-q.now(), q.onTTLTimer)
}

// maxTimerWait bounds how far ahead a queue timer is set. Both timers'
// handlers check the clock and re-arm for what is left, so a longer wait is
// served in steps.
const maxTimerWait = 24 * time.Hour

// arm starts *t to run f in ms milliseconds, or resets it when it exists.
func arm(t **time.Timer, ms int64, f func()) {
	d := timerWait(ms)
	if *t == nil {
		*t = time.AfterFunc(d, f)
	} else {
		(*t).Reset(d)
	}
}

// timerWait turns a wait in ms into a Duration: none when ms <= 0, at most
// maxTimerWait. Converted unchecked, a wait beyond ~292 years overflows to
// a negative Duration, and the timer fires at once and re-arms forever.
func timerWait(ms int64) time.Duration {
	return time.Duration(max(0, min(ms, maxTimerWait.Milliseconds()))) * time.Millisecond
}

func (q *Queue) onTTLTimer() {
	q.mu.Lock()
	q.ttlAt = 0
	q.expireHeads()
	q.unlock()
}

// dispatch hands ready messages to consumers until one side runs out,
// then notes whether consumers left it blocked (utilisation.go).
func (q *Queue) dispatch() {
	q.dispatchReady()
	q.noteBlocked()
}

func (q *Queue) dispatchReady() {
	for q.ready > 0 && len(q.consumers) > 0 {
		l := q.head()
		if l == nil {
			return
		}
		e := l.peek()
		if e.ExpiresAt != 0 && e.ExpiresAt <= q.now() {
			q.dead = append(q.dead, Dead{Entry: q.popFrom(l), Reason: Expired})
			continue
		}
		if !q.offer(l, e) {
			return
		}
	}
}

// offer tries each consumer once, starting after the last one served. A
// single-active-consumer queue only ever offers to its first consumer.
// With consumer priorities, a priority's consumers are tried (round-robin
// among them) before any of a lower one: a lower one gets a message only
// when every higher one is blocked.
func (q *Queue) offer(l *level, e *Entry) bool {
	n := len(q.consumers)
	if q.settings.SingleActiveConsumer {
		n = 1
		q.next = 0
	}
	d := Delivery{Queue: q, Entry: *e, Redelivered: e.Deliveries > 0, Writes: q.writes}
	d.Entry.Deliveries++
	if q.byPriority && n > 1 {
		return q.offerByPriority(l, d)
	}
	for i := 0; i < n; i++ {
		k := (q.next + i) % len(q.consumers)
		if q.deliverTo(q.consumers[k], l, d) {
			q.next = (k + 1) % len(q.consumers)
			return true
		}
	}
	return false
}

// offerByPriority is offer over runs of consumers of one priority.
func (q *Queue) offerByPriority(l *level, d Delivery) bool {
	for start := 0; start < len(q.consumers); {
		prio := q.prios[start]
		end := start + 1
		for end < len(q.consumers) && q.prios[end] == prio {
			end++
		}
		size := end - start
		from := q.cursors[prio] % size
		for i := 0; i < size; i++ {
			if q.deliverTo(q.consumers[start+(from+i)%size], l, d) {
				q.cursors[prio] = (from + i + 1) % size
				return true
			}
		}
		start = end
	}
	return false
}

// deliverTo hands d, the head of l, to c if c takes it.
func (q *Queue) deliverTo(c Consumer, l *level, d Delivery) bool {
	if !c.Deliver(d) {
		return false
	}
	q.popFrom(l)
	q.Counters.CountDelivery(c.NoAck(), d.Redelivered, stats.Deliver, stats.DeliverNoAck)
	if c.NoAck() {
		q.forget(&d.Entry)
	} else {
		q.unacked++
		q.markDelivered(&d.Entry)
	}
	return true
}

// Prioritized is a Consumer with a priority (basic.consume's x-priority,
// 0 when it has none): higher ones are served first.
type Prioritized interface {
	Priority() int
}

// PriorityOf is c's priority.
func PriorityOf(c Consumer) int {
	if p, ok := c.(Prioritized); ok {
		return p.Priority()
	}
	return 0
}

// addConsumer puts c in its place; mu is held.
func (q *Queue) addConsumer(c Consumer) {
	prio := PriorityOf(c)
	at := len(q.consumers)
	switch {
	case c.Exclusive():
		at = 0 // alone, or first to be offered while the others leave
	case !q.settings.SingleActiveConsumer:
		for at > 0 && q.prios[at-1] < prio {
			at--
		}
	}
	q.consumers = slices.Insert(q.consumers, at, c)
	q.prios = slices.Insert(q.prios, at, prio)
	if at <= q.next && len(q.consumers) > 1 {
		q.next++
	}
	q.priorityChanged()
}

// removeConsumer takes c out; mu is held.
func (q *Queue) removeConsumer(c Consumer) {
	i := slices.Index(q.consumers, c)
	if i < 0 {
		return
	}
	q.consumers = slices.Delete(q.consumers, i, i+1)
	q.prios = slices.Delete(q.prios, i, i+1)
	if q.next > i {
		q.next--
	}
	if q.next >= len(q.consumers) {
		q.next = 0
	}
	q.priorityChanged()
	q.noteBlocked() // the last consumer gone: not blocked, idle
}

// priorityChanged notes whether the consumers' priorities differ.
func (q *Queue) priorityChanged() {
	n := len(q.prios)
	q.byPriority = n > 1 && q.prios[0] != q.prios[n-1]
	if q.byPriority && q.cursors == nil {
		q.cursors = map[int]int{}
	}
}

// Kick retries delivery, after a consumer regained credit.
func (q *Queue) Kick() {
	q.mu.Lock()
	q.dispatch()
	q.unlock()
}

// Get takes the next message for basic.get. ok is false when the queue is
// empty. With noAck the message is settled at once, and the caller gets
// the queue's hold on a pooled body (message.Bodies): it releases the
// message once it has written it, or leaves it to the GC.
func (q *Queue) Get(noAck bool) (d Delivery, remaining int, ok bool) {
	q.mu.Lock()
	defer q.unlock()
	q.touch()
	q.expireHeads()
	l := q.head()
	if l == nil {
		q.Counters.Inc(stats.GetEmpty)
		return Delivery{}, 0, false
	}
	e := q.popFrom(l)
	d = Delivery{Queue: q, Entry: e, Redelivered: e.Deliveries > 0}
	d.Entry.Deliveries++
	q.Counters.CountDelivery(noAck, d.Redelivered, stats.Get, stats.GetNoAck)
	if noAck {
		d.Entry.Msg.Hold() // the caller's, from here (see Get)
		q.forget(&d.Entry)
	} else {
		q.unacked++
		q.markDelivered(&d.Entry)
	}
	return d, q.ready, true
}

// Consume adds a consumer. An exclusive consumer needs the queue to itself.
// added, when not nil, runs under the queue's lock once the consumer is
// accepted and before anything is delivered to it: the place to send
// basic.consume-ok, which must reach the client before the first delivery
// and must not be sent for a refused consume.
func (q *Queue) Consume(c Consumer, added func()) error {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return reply.NotFound("no queue '%s' in vhost '%s'", q.Name, q.VHost)
	}
	if len(q.consumers) > 0 && (c.Exclusive() || q.consumers[0].Exclusive()) {
		q.mu.Unlock()
		return reply.AccessRefused("queue '%s' in vhost '%s' in exclusive use", q.Name, q.VHost)
	}
	q.addConsumer(c)
	q.hadConsumer = true
	if added != nil {
		added()
	}
	q.touch()
	q.dispatch()
	q.unlock()
	return nil
}

// Cancel removes a consumer. Its unacked messages are the channel's to
// settle. The last consumer leaving an auto-delete queue deletes it.
func (q *Queue) Cancel(c Consumer) {
	q.mu.Lock()
	q.removeConsumer(c)
	abandoned := q.AutoDelete && q.hadConsumer && len(q.consumers) == 0 && !q.deleted
	q.touch()
	q.dispatch() // a single active consumer's successor takes over
	q.unlock()
	if abandoned && q.events != nil {
		q.events.Abandoned(q)
	}
}

// Ack settles delivered messages for good.
func (q *Queue) Ack(entries []Entry) {
	q.mu.Lock()
	q.unacked -= len(entries)
	q.Counters.Add(stats.Ack, uint64(len(entries)))
	for i := range entries {
		q.forget(&entries[i])
	}
	q.dispatch()
	q.unlock()
}

// Requeue puts delivered messages back in their place, to be redelivered;
// one delivered more often than x-delivery-limit allows is dead-lettered.
func (q *Queue) Requeue(entries []Entry) {
	q.mu.Lock()
	q.unacked -= len(entries)
	if q.deleted {
		q.mu.Unlock()
		return
	}
	limit := q.settings.DeliveryLimit
	for _, e := range entries {
		if limit != Unlimited && int64(e.Deliveries) > limit {
			q.dead = append(q.dead, Dead{Entry: e, Reason: DeliveryLimit})
			continue
		}
		q.levels[e.Level].putBack(e)
		q.ready++
		q.readyBytes += int64(e.Msg.Size())
		q.memAdd(&e)
	}
	q.dispatch()
	q.enforceLimits()
	q.expireHeads()
	q.unlock()
}

// Reject dead-letters delivered messages (basic.reject or nack without requeue).
func (q *Queue) Reject(entries []Entry) {
	q.mu.Lock()
	q.unacked -= len(entries)
	for _, e := range entries {
		q.dead = append(q.dead, Dead{Entry: e, Reason: Rejected})
	}
	q.dispatch()
	q.unlock()
}

// Purge drops every ready message and returns how many there were.
func (q *Queue) Purge() int {
	q.mu.Lock()
	n := q.ready
	q.dropReady(true)
	q.expireHeads()
	q.unlock()
	return n
}

// dropReady forgets every ready message. With fromStore, their entries are
// deleted from the store too: one range deletion when nothing is unacked
// (so the whole index is ready messages), else entry by entry.
func (q *Queue) dropReady(fromStore bool) {
	paged := false
	for i := range q.levels {
		if q.levels[i].pagedCount > 0 {
			paged = true
		}
	}
	switch {
	case !fromStore || q.qid == 0 || q.store == nil:
	case q.unacked == 0:
		q.txn().DeleteQueue(q.qid)
	default:
		for i := range q.levels {
			l := &q.levels[i]
			for l.inMemory() > 0 {
				e := l.pop()
				q.forget(&e)
			}
		}
		if paged {
			q.forgetPaged()
		}
	}
	for i := range q.levels {
		q.levels[i] = level{prio: uint8(i)}
	}
	if q.spill != nil {
		q.spill.Reset() // its bodies were the paged entries'
	}
	q.ready, q.readyBytes = 0, 0
	q.memReset()
}

// forgetPaged deletes the paged entries from the store, reading them in
// batches (not their bodies in the body log); q.mu is held.
func (q *Queue) forgetPaged() {
	for i := range q.levels {
		l := &q.levels[i]
		for l.pagedCount > 0 {
			q.commit()
			n := 0
			_ = q.store.ScanQueueDeletes(q.qid, l.prio, l.pagedFrom, pageInBatch, func(seq uint64, d storage.Deleted) bool {
				q.txn().DeleteEntry(q.qid, l.prio, seq, d)
				l.pagedFrom = seq + 1
				n++
				return true
			})
			l.pagedCount -= n
			if n == 0 {
				break
			}
		}
	}
}

// Delete removes the queue: consumers are cancelled, ready messages
// dropped (never dead-lettered). ifUnused and ifEmpty make it conditional
// (406 when the condition fails: DeleteConditions). It returns the number
// of ready messages dropped.
func (q *Queue) Delete(ifUnused, ifEmpty bool) (int, error) {
	q.mu.Lock()
	if q.deleted {
		q.mu.Unlock()
		return 0, nil
	}
	if err := DeleteConditions(q.Name, q.VHost, len(q.consumers), q.ready, ifUnused, ifEmpty); err != nil {
		q.mu.Unlock()
		return 0, err
	}
	n := q.ready
	q.dropReady(false)
	if q.qid != 0 && q.store != nil {
		q.txn().DeleteQueue(q.qid)
	}
	q.deleted = true
	q.commit()
	consumers := q.consumers
	q.consumers, q.prios, q.byPriority = nil, nil, false
	if q.ttlTimer != nil {
		q.ttlTimer.Stop()
	}
	if q.idleTimer != nil {
		q.idleTimer.Stop()
	}
	q.mu.Unlock()
	for _, c := range consumers {
		c.Cancelled()
	}
	return n, nil
}

// Source reports, in one look, what dead-lettering from the queue needs:
// the settings in force, its id in the store, and whether it was deleted.
func (q *Queue) Source() (s Settings, qid uint64, deleted bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.settings, q.qid, q.deleted
}

// Deleted reports whether the queue has been deleted.
func (q *Queue) Deleted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleted
}

// Stats are a queue's counts at one moment, and how fast the message
// counts changed between the two latest samples (per second).
type Stats struct {
	Ready      int
	ReadyBytes int64
	Unacked    int
	Consumers  int
	// MaxPriority is the highest priority (x-priority) of the consumers,
	// when there are any: a federated queue pulls from its upstream only
	// while a consumer of priority 0 or more (not another broker's
	// federation link, which consumes at -1) waits. A type that does
	// not keep priorities reports 0.
	MaxPriority int

	ReadyRate, UnackedRate float64
	// ConsumerUtilisation is the share of the last statistics interval
	// that consumers could take a ready message at once (utilisation.go);
	// HasUtilisation says the queue measures it (a classic queue does).
	ConsumerUtilisation float64
	HasUtilisation      bool
}

// MemoryBytes is what the ready messages the queue holds in memory take
// (memBytes and entryMemory each): those paged out to the store are not
// counted.
func (q *Queue) MemoryBytes() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return footprint(q.mem.msgs, q.mem.bytes)
}

func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := Stats{Ready: q.ready, ReadyBytes: q.readyBytes, Unacked: q.unacked, Consumers: len(q.consumers)}
	if len(q.prios) > 0 {
		st.MaxPriority = slices.Max(q.prios)
	}
	if dt := q.depth.Seconds(); dt > 0 {
		st.ReadyRate = float64(q.depth.Last[0]-q.depth.Prev[0]) / dt
		st.UnackedRate = float64(q.depth.Last[1]-q.depth.Prev[1]) / dt
	}
	st.ConsumerUtilisation, st.HasUtilisation = q.utilisationNow(), true
	return st
}

// SampleDepth records the message counts as of now, for Stats' rates, and
// returns the counts; the broker's statistics sampler calls it.
func (q *Queue) SampleDepth(now time.Time) Stats {
	q.mu.Lock()
	q.depth.Push([2]int{q.ready, q.unacked}, now)
	q.util.sample(now)
	q.mu.Unlock()
	return q.Stats()
}

// Touch marks the queue used, for x-expires (a redeclare counts as use).
func (q *Queue) Touch() {
	q.mu.Lock()
	q.touch()
	q.mu.Unlock()
}

func (q *Queue) touch() {
	q.lastUsed = q.now()
	q.armIdleTimer()
}

// armIdleTimer schedules the x-expires check. A queue with consumers is in
// use, so the timer only matters once they are gone; it is armed anyway and
// rechecks when it fires.
func (q *Queue) armIdleTimer() {
	exp := q.settings.Expires
	if exp == Unlimited || q.deleted {
		if q.idleTimer != nil {
			q.idleTimer.Stop()
		}
		return
	}
	// exp minus the time unused so far: lastUsed+exp could overflow.
	arm(&q.idleTimer, exp-(q.now()-q.lastUsed), q.onIdleTimer)
}

func (q *Queue) onIdleTimer() {
	q.mu.Lock()
	exp := q.settings.Expires
	if q.deleted || exp == Unlimited {
		q.mu.Unlock()
		return
	}
	if len(q.consumers) > 0 {
		q.lastUsed = q.now()
	}
	if q.now()-q.lastUsed < exp {
		q.armIdleTimer()
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	if q.events != nil {
		q.events.Unused(q)
	}
}

// DeleteConditions refuses (406, in RabbitMQ's words) a conditional delete
// of a queue of every type: with ifUnused one that has consumers, with
// ifEmpty one that holds messages (held counts those a type takes into
// account: ready ones, or ready and unacked ones).
func DeleteConditions(name, vhost string, consumers, held int, ifUnused, ifEmpty bool) error {
	if ifUnused && consumers > 0 {
		return reply.PreconditionFailed("queue '%s' in vhost '%s' in use", name, vhost)
	}
	if ifEmpty && held > 0 {
		return reply.PreconditionFailed("queue '%s' in vhost '%s' is not empty", name, vhost)
	}
	return nil
}
