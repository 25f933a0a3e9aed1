package conn

import (
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/replyto"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
)

// A channel's side of direct reply-to (see vhost/replyto.go): its reply
// consumer, the rewrite of reply_to on its requests, and the replies it
// is handed. Replies come from other connections' goroutines, as queue
// deliveries do, and are written under ch.mu.

// replyConsumer is a channel's consumer of amq.rabbitmq.reply-to.
type replyConsumer struct {
	tag   string
	token string
}

// replyTarget is how the vhost reaches the channel.
type replyTarget struct{ ch *channel }

// consumeReplyTo starts the channel's reply consumer: no-ack only, one
// per channel, as RabbitMQ has it.
func (ch *channel) consumeReplyTo(m *protocol.BasicConsume) error {
	if !m.NoAck {
		return reply.PreconditionFailed("reply consumer cannot acknowledge")
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = generatedTag()
	}
	ch.mu.Lock()
	switch {
	case ch.reply != nil:
		ch.mu.Unlock()
		return reply.PreconditionFailed("reply consumer already set")
	case ch.consumers[tag] != nil:
		ch.mu.Unlock()
		return reply.New(protocol.NotAllowed, "attempt to reuse consumer tag '%s'", tag)
	}
	ch.reply = &replyConsumer{tag: tag}
	ch.mu.Unlock()
	token := ch.c.vh.Replies().Register(replyTarget{ch})
	ch.mu.Lock()
	ch.reply.token = token
	ch.mu.Unlock()
	if !m.NoWait {
		ch.c.send(ch.id, &protocol.BasicConsumeOk{ConsumerTag: tag})
	}
	return nil
}

// cancelReplyTo ends the reply consumer if tag is its tag.
func (ch *channel) cancelReplyTo(tag string) bool {
	ch.mu.Lock()
	r := ch.reply
	if r == nil || r.tag != tag {
		ch.mu.Unlock()
		return false
	}
	ch.reply = nil
	ch.mu.Unlock()
	ch.c.vh.Replies().Unregister(r.token)
	return true
}

// dropReplyTo forgets the reply consumer of a channel being torn down.
func (ch *channel) dropReplyTo() {
	ch.mu.Lock()
	r := ch.reply
	ch.reply = nil
	ch.mu.Unlock()
	if r != nil && ch.c.vh != nil {
		ch.c.vh.Replies().Unregister(r.token)
	}
}

// withReplyToken rewrites a request's reply_to of amq.rabbitmq.reply-to
// to the channel's token; a channel with no reply consumer cannot ask for
// replies (406, as RabbitMQ).
func (ch *channel) withReplyToken(m *message.Message) (*message.Message, error) {
	if m.Flags&protocol.FlagReplyTo == 0 {
		return m, nil
	}
	v, err := m.View()
	if err != nil {
		return m, nil // the queue's reader sees the same undecodable properties
	}
	if to, _ := v.String(protocol.FlagReplyTo); to != replyto.Queue {
		return m, nil
	}
	ch.mu.Lock()
	var token string
	if ch.reply != nil {
		token = ch.reply.token
	}
	ch.mu.Unlock()
	if token == "" {
		return nil, reply.PreconditionFailed("fast reply consumer does not exist")
	}
	p, err := m.Properties()
	if err != nil {
		return nil, err
	}
	p.ReplyTo = token
	return m.WithProperties(m.Exchange, m.RoutingKey, &p)
}

// DeliverReply writes a reply to the reply consumer, no-ack: nothing is
// kept for it. A channel's credit and the socket's room do not hold it
// back: RabbitMQ sends replies as they come.
func (t replyTarget) DeliverReply(m *message.Message) bool {
	ch := t.ch
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed || ch.reply == nil || ch.reply.token != m.RoutingKey {
		return false
	}
	o := ch.c.out
	b := o.begin()
	if b == nil {
		o.end(nil)
		return false
	}
	ch.nextTag++
	o.end(ch.appendDeliver(b, ch.reply.tag, ch.nextTag, false, m))
	ch.countDelivery(queue.Delivery{Entry: queue.Entry{Msg: m}}, true, stats.Deliver, stats.DeliverNoAck)
	return true
}

// declareReplyTo answers queue.declare of the pseudo-queue or a token:
// declare-ok with no messages and one consumer while it exists (RabbitMQ
// answers so, whatever the declare's flags), else 404.
func (ch *channel) declareReplyTo(m *protocol.QueueDeclare) error {
	if !ch.c.vh.ReplyExists(m.Queue) {
		return ch.c.vh.ReplyAbsent(m.Queue)
	}
	if m.NoWait {
		return nil
	}
	return ch.ok(false, &protocol.QueueDeclareOk{Queue: m.Queue, MessageCount: 0, ConsumerCount: 1})
}
