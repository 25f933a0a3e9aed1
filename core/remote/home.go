package remote

import (
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol"
)

// On the queue's node.

// key names a consumer on another node: that node, and its id there.
type key struct {
	node string
	id   uint64
}

// consumer is, on a queue's node, a consumer on another node. It
// implements queue.Consumer.
type consumer struct {
	c         *Consuming
	q         Queue // a queue of this node, or this node's member of a replicated one
	key       key
	noAck     bool
	exclusive bool
	priority  int // the consumer's x-priority
	args      protocol.Table
	credit    int
	consuming bool // added to the queue (not only getting from it)

	mu        lockorder.Mutex[lockorder.RemoteConsumer]
	inflight  int                    // delivered, not settled (noAck: not answered)
	unacked   map[uint64]queue.Entry // by delivery id
	nextID    uint64
	outbox    []protocol.Table
	sending   bool
	blocked   bool
	cancelled bool
}

func (k *consumer) NoAck() bool { return k.noAck }

// Arguments are the consumer's arguments a queue reads (a stream's
// x-stream-offset).
func (k *consumer) Arguments() protocol.Table { return k.args }
func (k *consumer) Priority() int             { return k.priority }

// Prefetch is the consumer's credit: a quorum queue's checkout takes it.
func (k *consumer) Prefetch() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.credit
}
func (k *consumer) Exclusive() bool { return k.exclusive }

// Deliver runs under the queue's lock: take credit, keep the entry until
// it is settled, and queue it for the consumer's node.
func (k *consumer) Deliver(d queue.Delivery) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cancelled {
		return false
	}
	if k.inflight >= k.credit {
		k.blocked = true
		return false
	}
	k.inflight++
	k.nextID++
	if !k.noAck {
		k.unacked[k.nextID] = d.Entry
	}
	k.outbox = append(k.outbox, deliveryRecord(k.nextID, d))
	if !k.sending {
		k.sending = true
		go k.send()
	}
	return true
}

// send carries the outbox to the consumer's node, a batch a call, until
// it is empty.
func (k *consumer) send() {
	for {
		k.mu.Lock()
		batch := k.outbox
		k.outbox = nil
		if len(batch) == 0 || k.cancelled {
			k.sending = false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		items := make([]any, len(batch))
		for i, b := range batch {
			items[i] = b
		}
		_, err := k.c.caller.Call(k.key.node, protocol.Table{"op": CallDeliver, "vhost": k.c.vhost,
			"source": int64(k.key.id), "deliveries": items})
		switch e := reply.As(err); {
		case err == nil:
		case e != nil && e.Code == protocol.NotFound:
			// The consumer was cancelled there (or its node restarted,
			// which ForgetConsumersOf hears of): this batch never
			// reached its client and goes back; what the client took
			// stays until it settles it, which it may after a cancel.
			k.giveBack(recordIDs(batch))
			k.c.forgetIfDone(k)
			continue
		default:
			// The consumer's node cannot be reached: what it was sent
			// and not settled goes back to the queue.
			k.c.drop(k)
			continue
		}
		if k.noAck {
			k.release(len(batch))
		}
	}
}

// release gives back credit and lets the queue deliver again if it waited
// for it.
func (k *consumer) release(n int) {
	k.mu.Lock()
	k.inflight -= n
	kick := k.blocked
	k.blocked = false
	k.mu.Unlock()
	if kick {
		k.q.Kick()
	}
}

// Cancelled runs when the queue goes away: the consumer's node hears of it.
func (k *consumer) Cancelled() {
	k.mu.Lock()
	k.cancelled = true
	k.mu.Unlock()
	k.c.forget(k)
	go func() {
		_, _ = k.c.caller.Call(k.key.node, protocol.Table{"op": CallCancelled, "vhost": k.c.vhost, "source": int64(k.key.id)})
	}()
}

// giveBack stops the consumer's sending and requeues what its node's
// client never got: ids (on that node, not taken by the channel) and the
// outbox, never sent.
func (k *consumer) giveBack(ids []any) {
	k.mu.Lock()
	k.cancelled = true
	ids = append(ids, recordIDs(k.outbox)...)
	k.outbox = nil
	k.mu.Unlock()
	requeueInOrder(k.q, k.take(ids))
}

// isConsuming says the consumer is added to the queue (not only getting
// from it, nor cancelled).
func (k *consumer) isConsuming() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.consuming
}

// recordIDs are the delivery ids of records.
func recordIDs(records []protocol.Table) []any {
	ids := make([]any, len(records))
	for i, r := range records {
		ids[i] = r["id"]
	}
	return ids
}

// take removes the entries of ids from those kept.
func (k *consumer) take(ids []any) []queue.Entry {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]queue.Entry, 0, len(ids))
	for _, x := range ids {
		n, _ := queue.Integer(x)
		if e, ok := k.unacked[uint64(n)]; ok {
			delete(k.unacked, uint64(n))
			out = append(out, e)
		}
	}
	return out
}

// consumer returns the consumer of key, made when create is set.
func (c *Consuming) consumer(id key, q Queue, create bool) *consumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.consumers[id]
	if k == nil && create {
		k = &consumer{c: c, q: q, key: id, credit: creditWindow, unacked: map[uint64]queue.Entry{}}
		c.consumers[id] = k
	}
	return k
}

func (c *Consuming) forget(k *consumer) {
	c.mu.Lock()
	if c.consumers[k.key] == k {
		delete(c.consumers, k.key)
	}
	c.mu.Unlock()
}

// drop ends a consumer whose node or channel is gone: it leaves the
// queue, and what it held goes back.
func (c *Consuming) drop(k *consumer) {
	k.mu.Lock()
	k.cancelled = true
	k.outbox = nil
	held := make([]queue.Entry, 0, len(k.unacked))
	for _, e := range k.unacked {
		held = append(held, e)
	}
	clear(k.unacked)
	k.mu.Unlock()
	c.forget(k)
	if k.isConsuming() {
		k.q.Cancel(k)
	}
	requeueInOrder(k.q, held)
}

// requeueInOrder requeues entries in queue order.
func requeueInOrder(q Queue, entries []queue.Entry) {
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

// HandleConsumerCall answers a consuming node's call (CallConsume,
// CallCancel, CallSettle, CallGet) about q, a queue of this node (or
// this node's member of a replicated one).
func (c *Consuming) HandleConsumerCall(op string, q Queue, req protocol.Table) (protocol.Table, error) {
	id := key{node: String(req, "from"), id: Int(req, "source")}
	switch op {
	case CallConsume:
		k := c.consumer(id, q, true)
		k.mu.Lock()
		k.noAck, k.exclusive, k.consuming = Bool(req, "no_ack"), Bool(req, "exclusive"), true
		k.priority = int(Int(req, "priority"))
		k.args, _ = req["arguments"].(protocol.Table)
		if n := int(Int(req, "credit")); n > 0 {
			k.credit = n
		}
		k.mu.Unlock()
		if err := q.Consume(k, nil); err != nil {
			c.forget(k)
			return nil, err
		}
		return protocol.Table{}, nil
	case CallGet:
		noAck := Bool(req, "no_ack")
		d, remaining, ok := q.Get(noAck)
		if !ok {
			return protocol.Table{"empty": true}, nil
		}
		var deliveryID uint64
		if !noAck {
			k := c.consumer(id, q, true)
			k.mu.Lock()
			k.nextID++
			deliveryID = k.nextID
			k.unacked[deliveryID] = d.Entry
			k.mu.Unlock()
		}
		rec := deliveryRecord(deliveryID, d)
		rec["remaining"] = int64(remaining)
		return rec, nil
	case CallSettle:
		k := c.consumer(id, q, false)
		if k == nil {
			return protocol.Table{}, nil // dropped: its entries were requeued
		}
		ids, _ := req["ids"].([]any)
		entries := k.take(ids)
		switch String(req, "how") {
		case "ack":
			q.Ack(entries)
		case "reject":
			q.Reject(entries)
		default:
			q.Requeue(entries)
		}
		if k.isConsuming() {
			k.release(len(entries))
		}
		c.forgetIfDone(k)
		return protocol.Table{}, nil
	case CallCancel:
		k := c.consumer(id, q, false)
		if k == nil {
			return protocol.Table{}, nil
		}
		// What the consuming node never got goes back: what waited
		// there for its channel (the call names it) and what was never
		// sent. What its client took stays until it settles it.
		q.Cancel(k)
		ids, _ := req["requeue"].([]any)
		k.giveBack(ids)
		k.mu.Lock()
		k.consuming = false
		k.mu.Unlock()
		c.forgetIfDone(k)
		return protocol.Table{}, nil
	}
	return nil, reply.Internal("unknown call %q", op)
}

// forgetIfDone forgets a consumer that is cancelled (or only got) and
// holds nothing more.
func (c *Consuming) forgetIfDone(k *consumer) {
	k.mu.Lock()
	done := !k.consuming && len(k.unacked) == 0
	k.mu.Unlock()
	if done {
		c.forget(k)
	}
}
