// Package remote is consuming from a queue on another node of a cluster,
// on both nodes: the consuming node's Source, and the queue's node's
// consumer that stands for it.
//
// A client on node B consumes from (or gets from) a queue homed on node A
// through a Source that B's vhost hands its channel. It asks A to add a
// consumer to the queue; the queue delivers to that like to any consumer,
// within the credit B's consumer has (its prefetch, or a window when it
// has none), and the consumer sends what it was given to B in calls, a
// batch at a time, in order. B hands each delivery to its channel's
// consumer; what the channel cannot take yet (its prefetch full, its
// socket congested) waits in the Source, and the call that brought it is
// answered only once the channel took it, which holds A back. B's
// client's acks, rejects and requeues are calls to A, which settles the
// entries with its queue.
//
// Each delivery carries an id of A's consumer, which stands for the queue
// entry on B (queue.Entry.Seq); A keeps the entries it sent until B
// settles them. When B cannot be reached, or B's consumer is gone, A
// requeues them (Check, and the answer to a delivery call that fails);
// when A cannot be reached, B cancels its consumer (basic.cancel to a
// client that asked for it), as RabbitMQ does when a queue's node goes
// down.
//
// Consuming is one vhost's share of both sides. It knows nothing of the
// vhost: calls reach other nodes through a Caller, and a Source reaches
// its queue's node through the Home it was made for.
package remote

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol"
)

// Queue is what a channel consumes from and settles with: a queue of this
// node, or a Source for one on another node.
type Queue interface {
	Consume(c queue.Consumer, added func()) error
	Cancel(c queue.Consumer)
	Kick()
	Get(noAck bool) (d queue.Delivery, remaining int, ok bool)
	Ack(entries []queue.Entry)
	Requeue(entries []queue.Entry)
	Reject(entries []queue.Entry)
}

// The calls of remote consuming: to a queue's node (Consume, Cancel,
// Settle, Get), and from it to the consuming node (Deliver, Cancelled).
// Forget is a node's restart: it had none of its earlier consumers.
const (
	CallConsume   = "consumer.add"
	CallCancel    = "consumer.cancel"
	CallSettle    = "consumer.settle"
	CallGet       = "queue.get"
	CallDeliver   = "consumer.deliver"
	CallCancelled = "consumer.cancelled"
	CallForget    = "consumers.forget"
)

// creditWindow is a remote consumer's credit when its channel sets no
// prefetch: enough in flight to keep a fast consumer busy across the
// round trip, few enough that a slow one does not hold a queue's worth.
const creditWindow = 1000

// Caller reaches other nodes.
type Caller interface {
	// Call asks node to carry out req and returns its answer.
	Call(node string, req protocol.Table) (protocol.Table, error)
	// Up reports whether node is reachable.
	Up(node string) bool
}

// Home is a queue on another node as a Source reaches it.
type Home struct {
	Node, Queue string
	// Call carries out op on the queue there; req is the call's, to
	// which it adds what names the queue.
	Call func(op string, req protocol.Table) (protocol.Table, error)
}

// Consuming is one vhost's remote consuming: this node's Sources on other
// nodes' queues, and other nodes' consumers on this node's queues.
type Consuming struct {
	vhost  string
	caller Caller
	log    zerolog.Logger

	// mu guards the maps; a leaf.
	mu        lockorder.Mutex[lockorder.RemoteConsuming]
	sources   map[uint64]*Source // this node's, by id
	consumers map[key]*consumer  // other nodes', on queues here
	seq       atomic.Uint64
	base      uint64 // the first Source id of this run
}

// New makes vhost's remote consuming.
func New(vhost string, caller Caller, log zerolog.Logger) *Consuming {
	c := &Consuming{vhost: vhost, caller: caller, log: log,
		sources: make(map[uint64]*Source), consumers: make(map[key]*consumer)}
	// Source ids grow across restarts, so that the queues' nodes can tell
	// this run's consumers from a previous run's (ForgetConsumersOf).
	c.base = uint64(time.Now().UnixNano())
	c.seq.Store(c.base)
	return c
}

// Base is the first Source id of this run: the queues' nodes forget the
// consumers this node had before (ForgetConsumersOf).
func (c *Consuming) Base() uint64 { return c.base }

// Check ends the consumers of nodes that cannot be reached and cancels
// this node's Sources whose queue's node cannot be.
func (c *Consuming) Check() {
	c.mu.Lock()
	var dead []*consumer
	for k, cons := range c.consumers {
		if !c.caller.Up(k.node) {
			dead = append(dead, cons)
		}
	}
	var orphans []*Source
	for _, s := range c.sources {
		if !c.caller.Up(s.home.Node) {
			orphans = append(orphans, s)
		}
	}
	c.mu.Unlock()
	for _, cons := range dead {
		c.drop(cons)
	}
	for _, s := range orphans {
		s.cancelled()
	}
}

// ForgetConsumersOf ends the consumers node had before its current run,
// whose ids are below before: it restarted, and has none of them.
func (c *Consuming) ForgetConsumersOf(node string, before uint64) {
	c.mu.Lock()
	var gone []*consumer
	for k, cons := range c.consumers {
		if k.node == node && k.id < before {
			gone = append(gone, cons)
		}
	}
	c.mu.Unlock()
	for _, cons := range gone {
		c.drop(cons)
	}
}

// ---- on the consuming node

// Source is a queue on another node, as a channel of this node consumes
// from it.
type Source struct {
	c    *Consuming
	home Home
	id   uint64 // this node's; the queue's node knows the consumer by (node, id)
	// args are consumer arguments the queue reads (a stream's
	// x-stream-offset); nil for none.
	args protocol.Table
	// settling counts the settle calls on their way: a cancel waits for
	// them, so that the queue's node never takes back, as held by a
	// consumer that is gone, a message the client acked before it
	// cancelled.
	settling sync.WaitGroup

	mu      lockorder.Mutex[lockorder.RemoteSource]
	k       queue.Consumer   // the channel's consumer, once consuming
	ready   bool             // basic.consume-ok is out: deliveries may go
	waiting []queue.Delivery // arrived, not taken by the channel yet
	drained *sync.Cond       // signalled when waiting empties or k goes
	gone    bool             // cancelled, or the queue's node cancelled it
}

// Source consumes from home's queue.
func (c *Consuming) Source(home Home) *Source {
	return &Source{c: c, home: home, id: c.seq.Add(1)}
}

func (s *Source) call(op string, req protocol.Table) (protocol.Table, error) {
	req["source"] = int64(s.id)
	return s.home.Call(op, req)
}

// prefetcher is a consumer that says its prefetch (the connection layer's).
type prefetcher interface{ Prefetch() int }

// ConsumeWith is Consume with consumer arguments the queue reads (a
// stream's x-stream-offset).
func (s *Source) ConsumeWith(k queue.Consumer, added func(), args protocol.Table) error {
	s.args = args
	return s.Consume(k, added)
}

// Consume asks the queue's node to add a consumer for k.
func (s *Source) Consume(k queue.Consumer, added func()) error {
	s.mu.Lock()
	s.k = k
	s.drained = sync.NewCond(&s.mu)
	s.mu.Unlock()
	s.c.mu.Lock()
	s.c.sources[s.id] = s
	s.c.mu.Unlock()
	credit := creditWindow
	if p, ok := k.(prefetcher); ok && p.Prefetch() > 0 {
		credit = p.Prefetch()
	}
	req := protocol.Table{"no_ack": k.NoAck(), "exclusive": k.Exclusive(), "credit": int64(credit),
		"priority": int64(queue.PriorityOf(k))}
	if s.args != nil {
		req["arguments"] = s.args
	}
	if _, err := s.call(CallConsume, req); err != nil {
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

func (s *Source) forget() {
	s.c.mu.Lock()
	if s.c.sources[s.id] == s {
		delete(s.c.sources, s.id)
	}
	s.c.mu.Unlock()
	s.mu.Lock()
	s.gone = true
	if s.drained != nil {
		s.drained.Broadcast()
	}
	s.mu.Unlock()
}

// Cancel ends the consumer: the queue's node stops delivering, and what
// arrived but the channel never took goes back to the queue. The client's
// settlements made before reach the queue's node first.
func (s *Source) Cancel(queue.Consumer) {
	s.settling.Wait()
	s.forget()
	s.mu.Lock()
	ids := make([]any, 0, len(s.waiting))
	for _, d := range s.waiting {
		ids = append(ids, int64(d.Entry.Seq))
	}
	s.waiting = nil
	s.mu.Unlock()
	if _, err := s.call(CallCancel, protocol.Table{"requeue": ids}); err != nil {
		s.c.log.Debug().Err(err).Str("queue", s.home.Queue).Msg("cancelling a consumer on the queue's node")
	}
}

// Kick hands the channel what waits, once it has room.
func (s *Source) Kick() {
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

// deliver takes deliveries from the queue's node and returns once the
// channel has them all (or the consumer is gone).
func (s *Source) deliver(ds []queue.Delivery) {
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

// cancelled is the queue's node telling that the queue went away under
// the consumer, or this node finding that node gone.
func (s *Source) cancelled() {
	s.forget()
	s.mu.Lock()
	k := s.k
	s.mu.Unlock()
	if k != nil {
		k.Cancelled()
	}
}

// Get takes one message through the queue's node.
func (s *Source) Get(noAck bool) (queue.Delivery, int, bool) {
	ans, err := s.call(CallGet, protocol.Table{"no_ack": noAck})
	if err != nil || ans["empty"] == true {
		return queue.Delivery{}, 0, false
	}
	d, err := deliveryOf(ans)
	if err != nil {
		return queue.Delivery{}, 0, false
	}
	return d, int(Int(ans, "remaining")), true
}

func (s *Source) settle(how string, entries []queue.Entry) {
	ids := make([]any, len(entries))
	for i, e := range entries {
		ids[i] = int64(e.Seq)
	}
	// Not waited for: a client's ack needs no answer, and one the queue's
	// node never gets is requeued there when this node is gone. A cancel
	// waits for it (settling).
	s.settling.Add(1)
	go func() {
		defer s.settling.Done()
		if _, err := s.call(CallSettle, protocol.Table{"how": how, "ids": ids}); err != nil {
			s.c.log.Debug().Err(err).Str("queue", s.home.Queue).Str("how", how).Msg("settling with the queue's node")
		}
	}()
}

func (s *Source) Ack(entries []queue.Entry)     { s.settle("ack", entries) }
func (s *Source) Requeue(entries []queue.Entry) { s.settle("requeue", entries) }
func (s *Source) Reject(entries []queue.Entry)  { s.settle("reject", entries) }

// HandleSourceCall answers a queue's node's call (CallDeliver,
// CallCancelled) about a Source of this node.
func (c *Consuming) HandleSourceCall(op string, req protocol.Table) (protocol.Table, error) {
	c.mu.Lock()
	s := c.sources[Int(req, "source")]
	c.mu.Unlock()
	if s == nil {
		return nil, reply.NotFound("no such consumer")
	}
	switch op {
	case CallDeliver:
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
	case CallCancelled:
		s.cancelled()
		return protocol.Table{}, nil
	}
	return nil, reply.Internal("unknown call %q", op)
}

// ---- how a delivery travels

// deliveryRecord is a delivery as it travels. The caller holds d's
// message.
func deliveryRecord(deliveryID uint64, d queue.Delivery) protocol.Table {
	m := d.Entry.Msg
	m.Pin() // the record keeps the body until it is sent, uncounted
	return protocol.Table{"id": int64(deliveryID), "redelivered": d.Redelivered, "exchange": m.Exchange,
		"routing_key": m.RoutingKey, "flags": int64(m.Flags), "properties": m.Props, "body": m.Body}
}

func deliveryOf(rec protocol.Table) (queue.Delivery, error) {
	props, _ := rec["properties"].([]byte)
	body, _ := rec["body"].([]byte)
	m, err := message.New(String(rec, "exchange"), String(rec, "routing_key"), uint16(Int(rec, "flags")), props, body)
	if err != nil {
		return queue.Delivery{}, err
	}
	redelivered, _ := rec["redelivered"].(bool)
	return queue.Delivery{Entry: queue.Entry{Msg: m, Seq: Int(rec, "id")}, Redelivered: redelivered}, nil
}

// String, Int and Bool read a call's fields (calls between nodes are
// answered at once, and never stored nor replayed).
func String(t protocol.Table, k string) string { s, _ := t[k].(string); return s }

func Int(t protocol.Table, k string) uint64 {
	n, _ := queue.Integer(t[k])
	return uint64(n)
}

func Bool(t protocol.Table, k string) bool { b, _ := t[k].(bool); return b }
