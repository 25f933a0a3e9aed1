package mqtt

import (
	"strings"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/protocol/mqtt"
)

// A session's subscriptions are bindings of the exchange to two queues,
// one per QoS granted (SubscriptionQueue); the connection consumes from
// both while it lives.

// subscribe runs SUBSCRIBE: each filter is granted QoS 0 or 1 (QoS 2 is
// granted as 1, as 3.1.1 and 5.0 allow) or refused, in SUBACK.
// Each filter granted is then sent the retained messages it matches,
// after SUBACK (unless its 5.0 Retain Handling says not to).
func (c *Conn) subscribe(m *mqtt.Subscribe) {
	codes := make([]mqtt.ReasonCode, len(m.Subscriptions))
	var sends []retainedSend
	for i, sub := range m.Subscriptions {
		_, had := c.subs[sub.Filter]
		codes[i] = c.subscribeOne(sub)
		if codes[i] > mqtt.ReasonCode(mqtt.QoS1) || !c.srv.retaining() ||
			sub.RetainHandling == mqtt.RetainDoNotSend || (sub.RetainHandling == mqtt.RetainSendIfNew && had) {
			continue
		}
		rs, err := c.srv.retained().matching(c.vh.Name, sub.Filter)
		if err != nil {
			c.log.Error().Err(err).Str("filter", sub.Filter).Msg("the MQTT retained messages could not be read")
		}
		for _, r := range rs {
			sends = append(sends, retainedSend{r, mqtt.QoS(codes[i])})
		}
	}
	c.out.send(&mqtt.Suback{PacketID: m.PacketID, ReasonCodes: codes})
	for _, s := range sends {
		c.deliverRetained(s.r, s.qos)
	}
}

// retainedSend is a retained message due to a new subscription.
type retainedSend struct {
	r   *retained
	qos mqtt.QoS
}

// deliverRetained writes a retained message to the client as a PUBLISH
// with RETAIN. At QoS 1 it waits for its PUBACK as a delivery does, with
// no queue to ack.
func (c *Conn) deliverRetained(r *retained, qos mqtt.QoS) {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	if c.stopped {
		return
	}
	p := r.publish(qos, c.version)
	if p.QoS == mqtt.QoS1 {
		p.PacketID = c.packetID()
	}
	o := c.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return
	}
	start := len(o.buf)
	o.buf = p.Append(o.buf, c.version)
	if c.maxOut > 0 && len(o.buf)-start > c.maxOut {
		o.buf = o.buf[:start] // too large for the client ([MQTT-3.1.2-25])
		return
	}
	if p.QoS == mqtt.QoS1 {
		c.inflight[p.PacketID] = inflight{}
	}
	o.signal()
}

func (c *Conn) subscribeOne(sub mqtt.Subscription) mqtt.ReasonCode {
	fail := mqtt.ReasonCode(0x80) // 3.1.1's Failure, 5.0's Unspecified error
	if c.version == mqtt.V5 && strings.HasPrefix(sub.Filter, "$share/") {
		return mqtt.ReasonSharedSubscriptionsNotSupported
	}
	qos := min(sub.QoS, mqtt.QoS1)
	key := TopicToKey(sub.Filter)
	name := SubscriptionQueue(c.clientID, qos)
	exName := c.srv.Settings.Exchange
	if err := c.subscribeAllowed(name, exName, key); err != nil {
		c.log.Warn().Err(err).Str("filter", sub.Filter).Msg("MQTT SUBSCRIBE refused")
		if c.version == mqtt.V5 {
			return mqtt.ReasonNotAuthorized
		}
		return fail
	}
	if err := c.declare(qos); err != nil {
		c.log.Warn().Err(err).Str("queue", name).Msg("MQTT SUBSCRIBE failed: the queue")
		return fail
	}
	if err := c.vh.Bind(exName, exchange.Destination{Kind: exchange.ToQueue, Name: name}, key, nil, c); err != nil {
		c.log.Warn().Err(err).Str("filter", sub.Filter).Msg("MQTT SUBSCRIBE failed: the binding")
		return fail
	}
	if old, had := c.subs[sub.Filter]; had && old != qos {
		// Subscribed again at another QoS: the subscription moves.
		other := SubscriptionQueue(c.clientID, old)
		_ = c.vh.Unbind(exName, exchange.Destination{Kind: exchange.ToQueue, Name: other}, key, nil, c)
	}
	c.subs[sub.Filter] = qos
	c.nsubs.Store(int32(len(c.subs)))
	if err := c.consume(qos); err != nil {
		c.log.Warn().Err(err).Str("queue", name).Msg("MQTT SUBSCRIBE failed: consuming")
		return fail
	}
	return mqtt.ReasonCode(qos) // Granted QoS 0 or 1
}

// subscribeAllowed checks what RabbitMQ's MQTT plugin checks of a
// subscription: configure on its queue (the declare), write on it and
// read on the exchange (the binding), the topic permission's read on the
// key, and read on the queue (consuming).
func (c *Conn) subscribeAllowed(queueName, exName, key string) error {
	if err := c.grant.DeclareQueue(queueName, nil, !c.vh.HasQueue(queueName)); err != nil {
		return err
	}
	if err := c.grant.Bind(exName, auth.KindQueue, queueName); err != nil {
		return err
	}
	if err := c.grant.BindTopic(exName, key); err != nil {
		return err
	}
	return c.grant.ReadQueue(queueName)
}

// declare declares the session's queue for qos, once per connection: a
// persistent session's QoS 1 queue is durable, its QoS 0 one is not, and
// both expire (x-expires) once unused for the session's expiry; a
// transient session's are exclusive to the connection.
func (c *Conn) declare(qos mqtt.QoS) error {
	if c.declared[qos] {
		return nil
	}
	def := topology.QueueDef{Name: SubscriptionQueue(c.clientID, qos), Owner: c}
	if c.persistent {
		def.Durable = qos == mqtt.QoS1
		if c.expires > 0 {
			def.Args = protocol.Table{"x-expires": c.expires}
		}
	} else {
		def.Exclusive = true
		def.AutoDelete = true
	}
	if _, err := c.vh.Declare(def, false); err != nil {
		return err
	}
	c.declared[qos] = true
	return nil
}

// unsubscribe runs UNSUBSCRIBE: each filter's binding goes.
func (c *Conn) unsubscribe(m *mqtt.Unsubscribe) {
	codes := make([]mqtt.ReasonCode, len(m.Filters))
	for i, f := range m.Filters {
		qos, had := c.subs[f]
		if !had {
			codes[i] = mqtt.ReasonNoSubscriptionExisted
			continue
		}
		name := SubscriptionQueue(c.clientID, qos)
		err := c.vh.Unbind(c.srv.Settings.Exchange, exchange.Destination{Kind: exchange.ToQueue, Name: name}, TopicToKey(f), nil, c)
		if err != nil && !isNotFound(err) {
			c.log.Warn().Err(err).Str("filter", f).Msg("MQTT UNSUBSCRIBE failed")
			codes[i] = mqtt.ReasonUnspecifiedError
			continue
		}
		delete(c.subs, f)
		c.nsubs.Store(int32(len(c.subs)))
	}
	c.out.send(&mqtt.Unsuback{PacketID: m.PacketID, ReasonCodes: codes})
}

func isNotFound(err error) bool {
	re, ok := err.(*reply.Error)
	return ok && re.Code == protocol.NotFound
}

// resume takes up a persistent session that was present: its
// subscriptions are read back from the bindings to its queues, and the
// connection consumes from the queues, which kept what came meanwhile.
func (c *Conn) resume() {
	exName := c.srv.Settings.Exchange
	for _, qos := range []mqtt.QoS{mqtt.QoS0, mqtt.QoS1} {
		name := SubscriptionQueue(c.clientID, qos)
		if !c.vh.HasQueue(name) {
			continue
		}
		for _, b := range c.vh.BindingsFrom(exName) {
			if b.Destination.Kind == exchange.ToQueue && b.Destination.Name == name {
				c.subs[KeyToTopic(b.Key)] = qos
			}
		}
		if err := c.grant.ReadQueue(name); err != nil {
			c.log.Warn().Err(err).Str("queue", name).Msg("MQTT session not resumed")
			continue
		}
		if err := c.declare(qos); err != nil {
			c.log.Warn().Err(err).Str("queue", name).Msg("MQTT session not resumed")
			continue
		}
		if err := c.consume(qos); err != nil {
			c.log.Warn().Err(err).Str("queue", name).Msg("MQTT session not resumed")
		}
	}
	c.nsubs.Store(int32(len(c.subs)))
}

// dropSession deletes a session's queues: a clean start, or the end of a
// transient session.
func (c *Conn) dropSession() {
	for _, qos := range []mqtt.QoS{mqtt.QoS0, mqtt.QoS1} {
		name := SubscriptionQueue(c.clientID, qos)
		if _, err := c.vh.DeleteQueue(name, c, false, false); err != nil && !isNotFound(err) {
			c.log.Warn().Err(err).Str("queue", name).Msg("an MQTT session's queue not deleted")
		}
	}
}

// consumer is the connection reading one of its session's queues: it
// implements queue.Consumer. A QoS 0 queue's deliveries are settled on
// sending (no-ack); a QoS 1 queue's wait for PUBACK.
type consumer struct {
	c       *Conn
	q       queuetype.Source
	qos     mqtt.QoS
	blocked bool // deliverMu's: a delivery refused for want of credit
	gone    bool
}

// inflight is a QoS 1 delivery waiting for its PUBACK.
type inflight struct {
	k     *consumer
	entry queue.Entry
}

// consume starts consuming the session's queue for qos, once.
func (c *Conn) consume(qos mqtt.QoS) error {
	c.deliverMu.Lock()
	have := c.consumers[qos] != nil
	c.deliverMu.Unlock()
	if have {
		return nil
	}
	name := SubscriptionQueue(c.clientID, qos)
	q, err := c.vh.Source(name, c)
	if err != nil {
		return err
	}
	k := &consumer{c: c, q: q, qos: qos}
	c.deliverMu.Lock()
	c.consumers[qos] = k
	c.deliverMu.Unlock()
	if err := q.Consume(k, nil); err != nil {
		c.deliverMu.Lock()
		c.consumers[qos] = nil
		k.gone = true
		c.deliverMu.Unlock()
		return err
	}
	return nil
}

func (k *consumer) NoAck() bool     { return k.qos == mqtt.QoS0 }
func (k *consumer) Exclusive() bool { return false }

// Prefetch is the credit a queue on another node sizes its own by.
func (k *consumer) Prefetch() int { return k.c.credit }

// Cancelled: the queue was deleted under the session (by an operator);
// the subscriptions it held are gone with it.
func (k *consumer) Cancelled() {
	c := k.c
	c.deliverMu.Lock()
	k.gone = true
	if c.consumers[k.qos] == k {
		c.consumers[k.qos] = nil
	}
	c.deliverMu.Unlock()
}

// Deliver runs under the queue's lock: a QoS 1 delivery takes credit and
// a packet id and waits for its PUBACK; each is written out as a PUBLISH
// of QoS min(subscription, message).
func (k *consumer) Deliver(d queue.Delivery) bool {
	c := k.c
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	if k.gone || c.stopped {
		return false
	}
	m := d.Entry.Msg
	qos := min(k.qos, qosOf(m))
	if k.qos == mqtt.QoS1 && len(c.inflight) >= c.credit {
		k.blocked = true
		return false
	}
	p := mqtt.Publish{QoS: qos, Dup: d.Redelivered && qos > mqtt.QoS0}
	toPublish(&p, m, c.version)
	if qos == mqtt.QoS1 {
		p.PacketID = c.packetID()
	}
	o := c.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return false
	}
	if len(o.buf) >= outboundLimit {
		k.blocked = true
		o.kick = append(o.kick, k.q)
		return false
	}
	start := len(o.buf)
	o.buf = p.Append(o.buf, c.version)
	if c.maxOut > 0 && len(o.buf)-start > c.maxOut {
		// Too large for the client: discarded as if sent
		// ([MQTT-3.1.2-25]).
		o.buf = o.buf[:start]
		qos = mqtt.QoS0
	}
	switch {
	case qos == mqtt.QoS1:
		c.inflight[p.PacketID] = inflight{k: k, entry: d.Entry}
	case k.qos == mqtt.QoS1:
		// The queue waits for an ack the client will not send.
		o.settle = append(o.settle, settlement{q: k.q, entry: d.Entry})
	}
	o.signal()
	return true
}

// packetID is a packet id no delivery in flight has; deliverMu is held.
func (c *Conn) packetID() uint16 {
	for {
		c.nextPID++
		if c.nextPID == 0 {
			c.nextPID = 1
		}
		if _, used := c.inflight[c.nextPID]; !used {
			return c.nextPID
		}
	}
}

// acked runs a PUBACK: the delivery is acked on its queue, and a queue
// whose consumer waited for credit is kicked.
func (c *Conn) acked(packetID uint16) {
	c.deliverMu.Lock()
	f, ok := c.inflight[packetID]
	delete(c.inflight, packetID)
	var kick []queuetype.Source
	for _, k := range c.consumers {
		// The consumer this frees credit for; any, for a retained
		// message's, which had no queue.
		if ok && k != nil && k.blocked && (f.k == k || f.k == nil) {
			k.blocked = false
			kick = append(kick, k.q)
		}
	}
	c.deliverMu.Unlock()
	if !ok {
		return // an unknown packet id: nothing to do ([MQTT-4.3.2])
	}
	if f.k != nil {
		f.k.q.Ack([]queue.Entry{f.entry})
	}
	kickEach(kick)
}

// stopConsuming cancels the connection's consumers and gives back what
// they held unacknowledged, in order, to be redelivered.
func (c *Conn) stopConsuming() {
	c.deliverMu.Lock()
	c.stopped = true
	consumers := c.consumers
	c.consumers = [2]*consumer{}
	held := c.inflight
	c.inflight = map[uint16]inflight{}
	for _, k := range consumers {
		if k != nil {
			k.gone = true
		}
	}
	c.deliverMu.Unlock()
	for _, k := range consumers {
		if k != nil {
			k.q.Cancel(k)
		}
	}
	byQueue := map[*consumer][]queue.Entry{}
	for _, f := range held {
		if f.k != nil { // not a retained message's
			byQueue[f.k] = append(byQueue[f.k], f.entry)
		}
	}
	for k, entries := range byQueue {
		sortEntries(entries)
		k.q.Requeue(entries)
	}
}

func sortEntries(es []queue.Entry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].Seq < es[j-1].Seq; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}
