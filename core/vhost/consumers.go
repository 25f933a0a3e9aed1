package vhost

import (
	"sync"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// Consuming from a queue homed on another node.
//
// A client on node B consumes from (or gets from) a queue homed on node A
// through a Source that B's vhost hands its channel: a RemoteSource. It
// asks A to add a remoteConsumer to the queue; the queue delivers to that
// like to any consumer, within the credit B's consumer has (its prefetch,
// or a window when it has none), and the remoteConsumer sends what it was
// given to B in calls, a batch at a time, in order. B hands each delivery
// to its channel's consumer; what the channel cannot take yet (its
// prefetch full, its socket congested) waits in the RemoteSource, and the
// call that brought it is answered only once the channel took it, which
// holds A back. B's client's acks, rejects and requeues are calls to A,
// which settles the entries with its queue.
//
// Each delivery carries an id of A's remoteConsumer, which stands for the
// queue entry on B (queue.Entry.Seq); A keeps the entries it sent until B
// settles them. When B cannot be reached, or B's consumer is gone, A
// requeues them (CheckConsumers, and the answer to a delivery call that
// fails); when A cannot be reached, B cancels its consumer (basic.cancel
// to a client that asked for it), as RabbitMQ does when a queue's node
// goes down.

// Source is what a channel consumes from and settles with: a queue of this
// node, or a RemoteSource.
type Source interface {
	Consume(c queue.Consumer, added func()) error
	Cancel(c queue.Consumer)
	Kick()
	Get(noAck bool) (d queue.Delivery, remaining int, ok bool)
	Ack(entries []queue.Entry)
	Requeue(entries []queue.Entry)
	Reject(entries []queue.Entry)
}

// Asked is what a channel may ask of a Source that some types refuse.
type Asked int

const (
	AskGet            Asked = iota // basic.get
	AskSettleRefused               // basic.nack or basic.reject of its delivery
	AskGlobalPrefetch              // a consumer under the channel's global prefetch
)

// A Refuser is a Source that refuses some of what a channel may ask (a
// stream refuses basic.get and a nack or reject; a quorum queue, a global
// prefetch), with RabbitMQ's reply.
type Refuser interface {
	Refuses(what Asked) error
}

// Refused is src's reply to what: nil when it takes it.
func Refused(src Source, what Asked) error {
	if r, ok := src.(Refuser); ok {
		return r.Refuses(what)
	}
	return nil
}

// Source returns what a client on this node reads the named queue
// through: the queue itself, or a RemoteSource for one homed on another
// node. The checks are Queue's.
func (v *VHost) Source(name string, owner any) (Source, error) {
	if !v.HasQueue(name) {
		v.caughtUp() // declared through another node a moment ago
	}
	if t := v.typedQueue(name); t != nil {
		return t.Source()
	}
	q, err := v.Queue(name, owner)
	if err == nil {
		return q, nil
	}
	if rq := v.remoteQueue(name); rq != nil && !rq.Exclusive && v.cluster.Up(rq.Home) {
		return &RemoteSource{v: v, rq: rq, id: v.sourceSeq.Add(1)}, nil
	}
	return nil, err
}

// creditWindow is a remote consumer's credit when its channel sets no
// prefetch: enough in flight to keep a fast consumer busy across the
// round trip, few enough that a slow one does not hold a queue's worth.
const creditWindow = 1000

// The calls of remote consuming.
const (
	callConsume   = "consumer.add"
	callCancel    = "consumer.cancel"
	callSettle    = "consumer.settle"
	callGet       = "queue.get"
	callDeliver   = "consumer.deliver"
	callCancelled = "consumer.cancelled"
	callForget    = "consumers.forget"
)

// prefetcher is a consumer that says its prefetch (the connection layer's).
type prefetcher interface{ Prefetch() int }

// ---- on the consuming node

// RemoteSource is a queue homed on another node, as a channel of this node
// consumes from it.
type RemoteSource struct {
	v  *VHost
	rq *RemoteQueue
	id uint64 // this node's; the home knows the consumer by (node, id)
	// args are consumer arguments the home's queue reads (a stream's
	// x-stream-offset); nil for none.
	args protocol.Table

	mu      lockorder.Mutex[lockorder.VHostRemoteSource]
	k       queue.Consumer   // the channel's consumer, once consuming
	ready   bool             // basic.consume-ok is out: deliveries may go
	waiting []queue.Delivery // arrived, not taken by the channel yet
	drained *sync.Cond       // signalled when waiting empties or k goes
	gone    bool             // cancelled, or the home cancelled it
}

func (s *RemoteSource) call(op string, req protocol.Table) (protocol.Table, error) {
	req["source"] = int64(s.id)
	return s.v.callHome(s.rq, op, req)
}

// ConsumeWith is Consume with consumer arguments the home's queue reads
// (a stream's x-stream-offset).
func (s *RemoteSource) ConsumeWith(k queue.Consumer, added func(), args protocol.Table) error {
	s.args = args
	return s.Consume(k, added)
}

// Consume asks the home to add a consumer for k.
func (s *RemoteSource) Consume(k queue.Consumer, added func()) error {
	s.mu.Lock()
	s.k = k
	s.drained = sync.NewCond(&s.mu)
	s.mu.Unlock()
	s.v.consMu.Lock()
	s.v.sources[s.id] = s
	s.v.consMu.Unlock()
	credit := creditWindow
	if p, ok := k.(prefetcher); ok && p.Prefetch() > 0 {
		credit = p.Prefetch()
	}
	req := protocol.Table{"no_ack": k.NoAck(), "exclusive": k.Exclusive(), "credit": int64(credit),
		"priority": int64(queue.PriorityOf(k))}
	if s.args != nil {
		req["arguments"] = s.args
	}
	_, err := s.call(callConsume, req)
	if err != nil {
		s.forget()
		return err
	}
	if added != nil {
		added()
	}
	s.mu.Lock()
	s.ready = true
	s.mu.Unlock()
	s.Kick()
	return nil
}

// ConsumerArgs checks basic.consume's arguments for the named queue as
// RabbitMQ 3.10.8 does for its type (queue.CheckConsumeArgs: 406 for an
// x-priority that is not an integer, an x-cancel-on-ha-failover that is
// not a boolean, an argument another type takes) and returns the
// consumer's x-priority, 0 when it has none. RabbitMQ takes a priority of
// any size, and so does Warren, up to a long's (AMQP's widest integer):
// 2^40 comes before 2^31-1.
func (v *VHost) ConsumerArgs(queueName string, args protocol.Table) (int, error) {
	if err := queue.CheckConsumeArgs(queueName, v.Name, v.queueType(queueName), args); err != nil {
		return 0, err
	}
	n, _ := queue.Integer(args["x-priority"])
	return int(n), nil
}

// queueType is the named queue's type, classic when it is not known.
func (v *VHost) queueType(name string) string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if t := v.typed[name]; t != nil {
		return t.Type()
	}
	if rq := v.remote[name]; rq != nil {
		return queue.TypeOf(rq.Args)
	}
	return queue.Classic
}

func (s *RemoteSource) forget() {
	s.v.consMu.Lock()
	if s.v.sources[s.id] == s {
		delete(s.v.sources, s.id)
	}
	s.v.consMu.Unlock()
	s.mu.Lock()
	s.gone = true
	if s.drained != nil {
		s.drained.Broadcast()
	}
	s.mu.Unlock()
}

// Cancel ends the consumer: the home stops delivering, and what arrived
// but the channel never took goes back to the queue.
func (s *RemoteSource) Cancel(queue.Consumer) {
	s.forget()
	s.mu.Lock()
	ids := make([]any, 0, len(s.waiting))
	for _, d := range s.waiting {
		ids = append(ids, int64(d.Entry.Seq))
	}
	s.waiting = nil
	s.mu.Unlock()
	if _, err := s.call(callCancel, protocol.Table{"requeue": ids}); err != nil {
		s.v.log.Debug().Err(err).Str("queue", s.rq.Name).Msg("cancelling a consumer on the queue's node")
	}
}

// Kick hands the channel what waits, once it has room.
func (s *RemoteSource) Kick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.k == nil || !s.ready {
		return
	}
	for len(s.waiting) > 0 && !s.gone && s.k.Deliver(s.waiting[0]) {
		s.waiting[0] = queue.Delivery{}
		s.waiting = s.waiting[1:]
	}
	if len(s.waiting) == 0 || s.gone {
		s.drained.Broadcast()
	}
}

// deliver takes deliveries from the home and returns once the channel has
// them all (or the consumer is gone).
func (s *RemoteSource) deliver(ds []queue.Delivery) {
	s.mu.Lock()
	s.waiting = append(s.waiting, ds...)
	s.mu.Unlock()
	s.Kick()
	s.mu.Lock()
	for len(s.waiting) > 0 && !s.gone {
		s.drained.Wait()
	}
	s.mu.Unlock()
}

// cancelled is the home telling that the queue went away under the
// consumer.
func (s *RemoteSource) cancelled() {
	s.forget()
	s.mu.Lock()
	k := s.k
	s.mu.Unlock()
	if k != nil {
		k.Cancelled()
	}
}

// Get takes one message through the home.
func (s *RemoteSource) Get(noAck bool) (queue.Delivery, int, bool) {
	ans, err := s.call(callGet, protocol.Table{"no_ack": noAck})
	if err != nil || ans["empty"] == true {
		return queue.Delivery{}, 0, false
	}
	d, err := deliveryOf(ans)
	if err != nil {
		return queue.Delivery{}, 0, false
	}
	return d, int(id(ans, "remaining")), true
}

func (s *RemoteSource) settle(how string, entries []queue.Entry) {
	ids := make([]any, len(entries))
	for i, e := range entries {
		ids[i] = int64(e.Seq)
	}
	// Not waited for: a client's ack needs no answer, and one the home
	// never gets is requeued there when this node is gone.
	go func() {
		if _, err := s.call(callSettle, protocol.Table{"how": how, "ids": ids}); err != nil {
			s.v.log.Debug().Err(err).Str("queue", s.rq.Name).Str("how", how).Msg("settling with the queue's node")
		}
	}()
}

func (s *RemoteSource) Ack(entries []queue.Entry)     { s.settle("ack", entries) }
func (s *RemoteSource) Requeue(entries []queue.Entry) { s.settle("requeue", entries) }
func (s *RemoteSource) Reject(entries []queue.Entry)  { s.settle("reject", entries) }

// deliveryRecord is how a delivery travels. The caller holds d's message.
func deliveryRecord(deliveryID uint64, d queue.Delivery) protocol.Table {
	m := d.Entry.Msg
	m.Pin() // the record keeps the body until it is sent, uncounted
	return protocol.Table{"id": int64(deliveryID), "redelivered": d.Redelivered, "exchange": m.Exchange,
		"routing_key": m.RoutingKey, "flags": int64(m.Flags), "properties": m.Props, "body": m.Body}
}

func deliveryOf(rec protocol.Table) (queue.Delivery, error) {
	props, _ := rec["properties"].([]byte)
	body, _ := rec["body"].([]byte)
	m, err := message.New(str(rec, "exchange"), str(rec, "routing_key"), uint16(id(rec, "flags")), props, body)
	if err != nil {
		return queue.Delivery{}, err
	}
	redelivered, _ := rec["redelivered"].(bool)
	return queue.Delivery{Entry: queue.Entry{Msg: m, Seq: id(rec, "id")}, Redelivered: redelivered}, nil
}

// handleSourceCall answers the home's calls about a RemoteSource of this
// node.
func (v *VHost) handleSourceCall(op string, req protocol.Table) (protocol.Table, error) {
	v.consMu.Lock()
	s := v.sources[id(req, "source")]
	v.consMu.Unlock()
	if s == nil {
		return nil, reply.NotFound("no such consumer")
	}
	switch op {
	case callDeliver:
		items, _ := req["deliveries"].([]any)
		ds := make([]queue.Delivery, 0, len(items))
		for _, it := range items {
			rec, _ := it.(protocol.Table)
			d, err := deliveryOf(rec)
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		s.deliver(ds)
		s.mu.Lock()
		gone := s.gone
		s.mu.Unlock()
		if gone {
			return nil, reply.NotFound("the consumer is gone")
		}
		return protocol.Table{}, nil
	case callCancelled:
		s.cancelled()
		return protocol.Table{}, nil
	}
	return nil, reply.Internal("unknown call %q", op)
}

// ---- on the queue's home

// consumerKey names a remote consumer: the node it is on and that node's
// id for it.
type consumerKey struct {
	node string
	id   uint64
}

// remoteConsumer is, on a queue's home, a consumer on another node. It
// implements queue.Consumer.
type remoteConsumer struct {
	v         *VHost
	q         Source // a queue homed here, or this node's member of a quorum queue
	key       consumerKey
	noAck     bool
	exclusive bool
	priority  int // the consumer's x-priority
	args      protocol.Table
	credit    int
	consuming bool // added to the queue (not only getting from it)

	mu        lockorder.Mutex[lockorder.VHostRemoteConsumer]
	inflight  int                    // delivered, not settled (noAck: not answered)
	unacked   map[uint64]queue.Entry // by delivery id
	nextID    uint64
	outbox    []protocol.Table
	sending   bool
	blocked   bool
	cancelled bool
}

func (c *remoteConsumer) NoAck() bool { return c.noAck }

// Arguments are the consumer's arguments a queue reads (a stream's
// x-stream-offset).
func (c *remoteConsumer) Arguments() protocol.Table { return c.args }
func (c *remoteConsumer) Priority() int             { return c.priority }

// Prefetch is the consumer's credit: a quorum queue's checkout takes it.
func (c *remoteConsumer) Prefetch() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.credit
}
func (c *remoteConsumer) Exclusive() bool { return c.exclusive }

// Deliver runs under the queue's lock: take credit, keep the entry until
// it is settled, and queue it for the consumer's node.
func (c *remoteConsumer) Deliver(d queue.Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled {
		return false
	}
	if c.inflight >= c.credit {
		c.blocked = true
		return false
	}
	c.inflight++
	c.nextID++
	if !c.noAck {
		c.unacked[c.nextID] = d.Entry
	}
	c.outbox = append(c.outbox, deliveryRecord(c.nextID, d))
	if !c.sending {
		c.sending = true
		go c.send()
	}
	return true
}

// send carries the outbox to the consumer's node, a batch a call, until
// it is empty.
func (c *remoteConsumer) send() {
	for {
		c.mu.Lock()
		batch := c.outbox
		c.outbox = nil
		if len(batch) == 0 || c.cancelled {
			c.sending = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		items := make([]any, len(batch))
		for i, b := range batch {
			items[i] = b
		}
		_, err := c.v.cluster.Call(c.key.node, protocol.Table{"op": callDeliver, "vhost": c.v.Name,
			"source": int64(c.key.id), "deliveries": items})
		if err != nil {
			// The consumer's node is gone, or its consumer is: what it
			// was sent and not settled goes back to the queue.
			c.v.dropConsumer(c)
			continue
		}
		if c.noAck {
			c.release(len(batch))
		}
	}
}

// release gives back credit and lets the queue deliver again if it waited
// for it.
func (c *remoteConsumer) release(n int) {
	c.mu.Lock()
	c.inflight -= n
	kick := c.blocked
	c.blocked = false
	c.mu.Unlock()
	if kick {
		c.q.Kick()
	}
}

// Cancelled runs when the queue goes away: the consumer's node hears of it.
func (c *remoteConsumer) Cancelled() {
	c.mu.Lock()
	c.cancelled = true
	c.mu.Unlock()
	c.v.forgetConsumer(c)
	go func() {
		_, _ = c.v.cluster.Call(c.key.node, protocol.Table{"op": callCancelled, "vhost": c.v.Name, "source": int64(c.key.id)})
	}()
}

// take removes the entries of ids from those kept.
func (c *remoteConsumer) take(ids []any) []queue.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]queue.Entry, 0, len(ids))
	for _, x := range ids {
		n, _ := queue.Integer(x)
		if e, ok := c.unacked[uint64(n)]; ok {
			delete(c.unacked, uint64(n))
			out = append(out, e)
		}
	}
	return out
}

// remoteConsumer returns the consumer of key, made when make is set.
func (v *VHost) remoteConsumer(key consumerKey, q Source, create bool) *remoteConsumer {
	v.consMu.Lock()
	defer v.consMu.Unlock()
	c := v.consumers[key]
	if c == nil && create {
		c = &remoteConsumer{v: v, q: q, key: key, credit: creditWindow, unacked: map[uint64]queue.Entry{}}
		v.consumers[key] = c
	}
	return c
}

func (v *VHost) forgetConsumer(c *remoteConsumer) {
	v.consMu.Lock()
	if v.consumers[c.key] == c {
		delete(v.consumers, c.key)
	}
	v.consMu.Unlock()
}

// dropConsumer ends a remote consumer whose node or channel is gone: it
// leaves the queue, and what it held goes back.
func (v *VHost) dropConsumer(c *remoteConsumer) {
	c.mu.Lock()
	c.cancelled = true
	c.outbox = nil
	held := make([]queue.Entry, 0, len(c.unacked))
	for _, e := range c.unacked {
		held = append(held, e)
	}
	clear(c.unacked)
	c.mu.Unlock()
	v.forgetConsumer(c)
	if c.consuming {
		c.q.Cancel(c)
	}
	requeueInOrder(c.q, held)
}

// requeueInOrder requeues entries in queue order.
func requeueInOrder(q Source, entries []queue.Entry) {
	if len(entries) == 0 {
		return
	}
	for i := 1; i < len(entries); i++ {
		for j := i; j > 0 && entries[j].Seq < entries[j-1].Seq; j-- {
			entries[j], entries[j-1] = entries[j-1], entries[j]
		}
	}
	q.Requeue(entries)
}

// CheckConsumers ends the remote consumers of nodes that cannot be
// reached, cancels this node's consumers of queues whose home cannot be,
// and has the quorum queues this node leads end the consumers of members
// that cannot be; the broker calls it now and then.
func (v *VHost) CheckConsumers() {
	if v.cluster == nil {
		return
	}
	v.consMu.Lock()
	var dead []*remoteConsumer
	for key, c := range v.consumers {
		if !v.cluster.Up(key.node) {
			dead = append(dead, c)
		}
	}
	var orphans []*RemoteSource
	for _, s := range v.sources {
		if !v.cluster.Up(s.rq.Home) {
			orphans = append(orphans, s)
		}
	}
	v.consMu.Unlock()
	for _, c := range dead {
		v.dropConsumer(c)
	}
	for _, s := range orphans {
		s.cancelled()
	}
	for _, t := range v.typedList() {
		t.Tidy()
	}
}

// SourceBase is the first RemoteSource id of this run: the homes of
// queues forget the consumers this node had before (ForgetConsumersOf).
func (v *VHost) SourceBase() uint64 { return v.sourceBase }

// ForgetConsumersOf ends the remote consumers node had before its current
// run, whose ids are below before: it restarted, and has none of them.
func (v *VHost) ForgetConsumersOf(node string, before uint64) {
	v.consMu.Lock()
	var gone []*remoteConsumer
	for key, c := range v.consumers {
		if key.node == node && key.id < before {
			gone = append(gone, c)
		}
	}
	v.consMu.Unlock()
	for _, c := range gone {
		v.dropConsumer(c)
	}
}

// handleConsumerCall answers a consuming node's call about queue q homed
// here (or this node's member of a quorum queue).
func (v *VHost) handleConsumerCall(op string, q Source, req protocol.Table) (protocol.Table, error) {
	key := consumerKey{node: str(req, "from"), id: id(req, "source")}
	b := func(k string) bool { x, _ := req[k].(bool); return x }
	switch op {
	case callConsume:
		c := v.remoteConsumer(key, q, true)
		c.mu.Lock()
		c.noAck, c.exclusive, c.consuming = b("no_ack"), b("exclusive"), true
		c.priority = int(id(req, "priority"))
		c.args, _ = req["arguments"].(protocol.Table)
		if n := int(id(req, "credit")); n > 0 {
			c.credit = n
		}
		c.mu.Unlock()
		if err := q.Consume(c, nil); err != nil {
			v.forgetConsumer(c)
			return nil, err
		}
		return protocol.Table{}, nil
	case callGet:
		noAck := b("no_ack")
		d, remaining, ok := q.Get(noAck)
		if !ok {
			return protocol.Table{"empty": true}, nil
		}
		var deliveryID uint64
		if !noAck {
			c := v.remoteConsumer(key, q, true)
			c.mu.Lock()
			c.nextID++
			deliveryID = c.nextID
			c.unacked[deliveryID] = d.Entry
			c.mu.Unlock()
		}
		rec := deliveryRecord(deliveryID, d)
		rec["remaining"] = int64(remaining)
		return rec, nil
	case callSettle:
		c := v.remoteConsumer(key, q, false)
		if c == nil {
			return protocol.Table{}, nil // dropped: its entries were requeued
		}
		ids, _ := req["ids"].([]any)
		entries := c.take(ids)
		switch str(req, "how") {
		case "ack":
			q.Ack(entries)
		case "reject":
			q.Reject(entries)
		default:
			q.Requeue(entries)
		}
		if c.consuming {
			c.release(len(entries))
		}
		v.forgetIfDone(c)
		return protocol.Table{}, nil
	case callCancel:
		c := v.remoteConsumer(key, q, false)
		if c == nil {
			return protocol.Table{}, nil
		}
		c.mu.Lock()
		c.cancelled = true
		c.outbox = nil
		c.mu.Unlock()
		q.Cancel(c)
		ids, _ := req["requeue"].([]any)
		requeueInOrder(q, c.take(ids))
		c.mu.Lock()
		c.consuming = false
		c.mu.Unlock()
		v.forgetIfDone(c)
		return protocol.Table{}, nil
	}
	return nil, reply.Internal("unknown call %q", op)
}

// forgetIfDone forgets a remote consumer that is cancelled (or only got)
// and holds nothing more.
func (v *VHost) forgetIfDone(c *remoteConsumer) {
	c.mu.Lock()
	done := !c.consuming && len(c.unacked) == 0
	c.mu.Unlock()
	if done {
		v.forgetConsumer(c)
	}
}
