package conn

import (
	"sync/atomic"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// channel is one AMQP channel. Fields above mu belong to the connection's
// reader goroutine; fields below it are shared with the queues that deliver
// to the channel's consumers.
type channel struct {
	c  *Conn
	id uint16
	// closing is set once the broker sent channel.close: until close-ok
	// arrives, every other frame on the channel is dropped.
	closing   bool
	pub       publishing
	router    vhost.RouteBuffers
	confirm   confirms
	flow      flowCount    // publishes logs have not answered yet (flow.go)
	synced    []uint64     // this run's stored publishes, confirmed after a sync (confirms.go)
	tx        *transaction // nil unless tx.select was seen
	lastQueue string       // the last queue declared, for methods that name none

	// stats are the channel's message statistics (the vhost's counters
	// get the same adds); any goroutine may add or read.
	stats stats.Meter
	// confirmMode and txMode mirror confirm.enabled and tx != nil for
	// readers other than the connection's reader.
	confirmMode, txMode atomic.Bool

	mu             lockorder.Mutex[lockorder.ConnChannel]
	closed         bool // torn down: no more deliveries
	nextTag        uint64
	unacked        unackedList
	prefetch       uint16 // basic.qos global=false: applies to consumers created after it
	globalPrefetch uint16 // basic.qos global=true: the channel's total
	consumers      map[string]*consumer
	reply          *replyConsumer // consuming amq.rabbitmq.reply-to (replyto.go)
	// holdingCancels: a queue.delete of the channel's runs, and the
	// basic.cancel of its consumers wait in heldCancels for delete-ok.
	holdingCancels bool
	heldCancels    []string
}

// channelMethod routes a method to its channel, opening and closing
// channels on the way.
func (c *Conn) channelMethod(id uint16, m protocol.Method) error {
	ch := c.channels[id]
	if _, ok := m.(*protocol.ChannelOpen); ok {
		if ch != nil {
			return reply.New(protocol.ChannelError, "second 'channel.open' seen")
		}
		// Like RabbitMQ, channel_max bounds the channels open at once,
		// whatever their numbers.
		if c.channelMax != 0 && len(c.channels) >= int(c.channelMax) {
			return reply.New(protocol.NotAllowed, "number of channels opened (%d) has reached the negotiated channel_max (%d)", len(c.channels), c.channelMax)
		}
		if e := c.srv.openChannel(c.user.Name, c.userLimit(auth.UserMaxChannels)); e != nil {
			return e
		}
		ch = &channel{c: c, id: id, consumers: make(map[string]*consumer)}
		ch.router.Writes = &c.writes
		c.channels[id] = ch
		c.nchan.Add(1)
		c.liveMu.Lock()
		c.live[id] = ch
		c.liveMu.Unlock()
		c.srv.churn.channelsOpened.Add(1)
		c.send(id, &protocol.ChannelOpenOk{})
		return nil
	}
	if ch == nil {
		if _, ok := m.(*protocol.ChannelCloseOk); ok {
			// Both sides closed at once: our close-ok to the client's
			// channel.close already ended the channel.
			return nil
		}
		return reply.New(protocol.ChannelError, "expected 'channel.open' on channel %d", id)
	}
	if ch.closing {
		switch m.(type) {
		case *protocol.ChannelCloseOk:
			ch.forget()
		case *protocol.ChannelClose:
			c.send(id, &protocol.ChannelCloseOk{})
			ch.forget()
		}
		return nil
	}
	if ch.pub.state != idle {
		return reply.New(protocol.UnexpectedFrame, "expected content header for class 60, got non content header frame instead")
	}
	return ch.method(m)
}

// method runs one method on an open channel.
func (ch *channel) method(m protocol.Method) error {
	switch m := m.(type) {
	case *protocol.BasicPublish:
		return ch.publish(m)
	case *protocol.BasicAck:
		return ch.ack(m.DeliveryTag, m.Multiple)
	case *protocol.BasicNack:
		return ch.nack(m.DeliveryTag, m.Multiple, m.Requeue)
	case *protocol.BasicReject:
		return ch.nack(m.DeliveryTag, false, m.Requeue)
	case *protocol.BasicQos:
		return ch.qos(m)
	case *protocol.BasicConsume:
		return ch.consume(m)
	case *protocol.BasicCancel:
		return ch.cancel(m)
	case *protocol.BasicGet:
		return ch.get(m)
	case *protocol.BasicRecover:
		return ch.recover(m.Requeue, true)
	case *protocol.BasicRecoverAsync:
		return ch.recover(m.Requeue, false)

	case *protocol.ExchangeDeclare:
		return ch.exchangeDeclare(m)
	case *protocol.ExchangeDelete:
		return ch.exchangeDelete(m)
	case *protocol.ExchangeBind:
		return ch.exchangeBind(m.Source, m.Destination, m.RoutingKey, m.Arguments, m.NoWait, true)
	case *protocol.ExchangeUnbind:
		return ch.exchangeBind(m.Source, m.Destination, m.RoutingKey, m.Arguments, m.NoWait, false)
	case *protocol.QueueDeclare:
		return ch.queueDeclare(m)
	case *protocol.QueueBind:
		return ch.queueBind(m.Queue, m.Exchange, m.RoutingKey, m.Arguments, m.NoWait, true)
	case *protocol.QueueUnbind:
		return ch.queueBind(m.Queue, m.Exchange, m.RoutingKey, m.Arguments, false, false)
	case *protocol.QueuePurge:
		return ch.queuePurge(m)
	case *protocol.QueueDelete:
		return ch.queueDelete(m)

	case *protocol.ChannelClose:
		ch.teardown()
		ch.c.send(ch.id, &protocol.ChannelCloseOk{})
		ch.forget()
		return nil
	case *protocol.ChannelCloseOk:
		return nil
	case *protocol.ChannelFlow:
		if !m.Active {
			// RabbitMQ refuses to stop deliveries this way; basic.qos does it.
			return reply.NotImplemented("active=false")
		}
		ch.c.send(ch.id, &protocol.ChannelFlowOk{Active: true})
		return nil
	case *protocol.ChannelFlowOk:
		return nil

	case *protocol.TxSelect:
		return ch.txSelect()
	case *protocol.TxCommit:
		return ch.txCommit()
	case *protocol.TxRollback:
		return ch.txRollback()
	case *protocol.ConfirmSelect:
		return ch.confirmSelect(m.NoWait)
	}
	return reply.New(protocol.CommandInvalid, "method %s is not valid on a channel", m.Name())
}

// closeWith closes the channel for a soft error: channel.close goes out,
// the channel's resources are released, and the channel waits for close-ok.
func (ch *channel) closeWith(e *reply.Error, classID, methodID uint16) {
	ch.c.send(ch.id, &protocol.ChannelClose{ReplyCode: e.Code, ReplyText: e.Text, FailingClassID: classID, FailingMethodID: methodID})
	ch.closing = true
	ch.teardown()
}

// forget removes a closed channel from its connection.
func (ch *channel) forget() {
	c := ch.c
	if c.channels[ch.id] == ch {
		delete(c.channels, ch.id)
		c.nchan.Add(-1)
		c.retire(ch)
	}
}

// teardown cancels the channel's consumers and requeues its unacked
// messages, in delivery order. It is safe to call more than once.
func (ch *channel) teardown() {
	ch.pub = publishing{}
	ch.confirm.close()
	ch.tx = nil
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return
	}
	ch.closed = true
	consumers := ch.consumers
	for _, k := range consumers {
		k.gone = true
	}
	ch.consumers = nil
	pending := ch.unacked.takeAll()
	ch.mu.Unlock()

	for _, k := range consumers {
		ch.c.dropConsumer(k)
		k.q.Cancel(k)
	}
	ch.dropReplyTo()
	requeue(pending)
}

// requeue hands deliveries back to their queues, grouped per queue in
// delivery order.
func requeue(pending []unacked) {
	forEachQueue(pending, func(q queuetype.Source, entries []queue.Entry) { q.Requeue(entries) })
}

// forEachQueue groups settled deliveries by queue, keeping their order.
func forEachQueue(pending []unacked, f func(queuetype.Source, []queue.Entry)) {
	for len(pending) > 0 {
		q := pending[0].q
		var entries []queue.Entry
		var others []unacked
		for _, u := range pending {
			if u.q == q {
				entries = append(entries, u.entry)
			} else {
				others = append(others, u)
			}
		}
		f(q, entries)
		pending = others
	}
}
