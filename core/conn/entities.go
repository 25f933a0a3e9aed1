package conn

import (
	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/replyto"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// The methods that declare, bind and delete exchanges and queues. Each
// asks the connection's auth.Grant, which holds RabbitMQ's rules, then the
// vhost.

func (ch *channel) exchangeDeclare(m *protocol.ExchangeDeclare) error {
	if !m.Passive {
		_, err := ch.c.vh.Exchange(m.Exchange)
		if err := refused(ch.c.grant.DeclareExchange(m.Exchange, m.Arguments, err != nil)); err != nil {
			return err
		}
	}
	_, err := ch.c.vh.DeclareExchange(exchange.Definition{
		Name: m.Exchange, Type: m.Type, Durable: m.Durable, AutoDelete: m.AutoDelete,
		Internal: m.Internal, Args: m.Arguments,
	}, m.Passive)
	if err != nil {
		return err
	}
	return ch.ok(m.NoWait, &protocol.ExchangeDeclareOk{})
}

// ok answers a method unless the client asked for no answer.
func (ch *channel) ok(noWait bool, m protocol.Method) error {
	if !noWait {
		ch.c.send(ch.id, m)
	}
	return nil
}

func (ch *channel) exchangeDelete(m *protocol.ExchangeDelete) error {
	if err := refused(ch.c.grant.DeleteExchange(m.Exchange)); err != nil {
		return err
	}
	if err := ch.c.vh.DeleteExchange(m.Exchange, m.IfUnused); err != nil {
		return err
	}
	return ch.ok(m.NoWait, &protocol.ExchangeDeleteOk{})
}

// bindAllowed checks a bind or unbind from source to dest with key: the
// user's permissions on both, then, when source is a topic exchange, the
// key against their topic permission on it (a source that does not exist
// is the bind's own 404).
func (ch *channel) bindAllowed(source, destKind, dest, key string) error {
	if err := refused(ch.c.grant.Bind(source, destKind, dest)); err != nil {
		return err
	}
	if x, err := ch.c.vh.Exchange(source); err == nil && x.Type == exchange.TypeTopic {
		return refused(ch.c.grant.BindTopic(source, key))
	}
	return nil
}

// exchangeBind handles exchange.bind and exchange.unbind.
func (ch *channel) exchangeBind(source, dest, key string, args protocol.Table, noWait, bind bool) error {
	if err := ch.bindAllowed(source, auth.KindExchange, dest, key); err != nil {
		return err
	}
	d := exchange.Destination{Kind: exchange.ToExchange, Name: dest}
	if bind {
		if err := ch.c.vh.Bind(source, d, key, args, ch.c); err != nil {
			return err
		}
		return ch.ok(noWait, &protocol.ExchangeBindOk{})
	}
	if err := ch.c.vh.Unbind(source, d, key, args, ch.c); err != nil {
		return err
	}
	return ch.ok(noWait, &protocol.ExchangeUnbindOk{})
}

func (ch *channel) queueDeclare(m *protocol.QueueDeclare) error {
	if m.Queue == replyto.Queue || replyto.IsToken(m.Queue) {
		return ch.declareReplyTo(m)
	}
	name := m.Queue
	if m.Passive && name == "" {
		var err error
		if name, err = ch.queueName(""); err != nil {
			return err
		}
	}
	serverNamed := !m.Passive && name == ""
	if serverNamed {
		// A server-named queue gets its name first, so that permissions
		// are checked on that name, as RabbitMQ checks them.
		name = topology.ServerNamed()
	}
	if !m.Passive {
		isNew := !ch.c.vh.HasQueue(name)
		if err := refused(ch.c.grant.DeclareQueue(name, m.Arguments, isNew)); err != nil {
			return err
		}
	}
	d, err := ch.c.vh.Declare(topology.QueueDef{
		Name: name, Durable: m.Durable, Exclusive: m.Exclusive, AutoDelete: m.AutoDelete,
		Args: m.Arguments, Owner: ch.c, ServerNamed: serverNamed,
	}, m.Passive)
	if err != nil {
		return err
	}
	ch.lastQueue = d.Name
	if m.NoWait {
		return nil
	}
	ready, consumers, err := ch.c.vh.Counts(d)
	if err != nil {
		return err
	}
	return ch.ok(false, &protocol.QueueDeclareOk{Queue: d.Name, MessageCount: uint32(ready), ConsumerCount: uint32(consumers)})
}

// queueBind handles queue.bind and queue.unbind. An empty queue name means the last one
// declared, and with it an empty key means that queue's name.
func (ch *channel) queueBind(queueName, source, key string, args protocol.Table, noWait, bind bool) error {
	if queueName == "" {
		var err error
		if queueName, err = ch.queueName(""); err != nil {
			return err
		}
		if key == "" {
			key = queueName
		}
	}
	if err := ch.bindAllowed(source, auth.KindQueue, queueName, key); err != nil {
		return err
	}
	d := exchange.Destination{Kind: exchange.ToQueue, Name: queueName}
	if bind {
		if err := ch.c.vh.Bind(source, d, key, args, ch.c); err != nil {
			return err
		}
		return ch.ok(noWait, &protocol.QueueBindOk{})
	}
	if err := ch.c.vh.Unbind(source, d, key, args, ch.c); err != nil {
		return err
	}
	return ch.ok(false, &protocol.QueueUnbindOk{})
}

func (ch *channel) queuePurge(m *protocol.QueuePurge) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	if err := refused(ch.c.grant.ReadQueue(name)); err != nil {
		return err
	}
	n, err := ch.c.vh.PurgeQueue(name, ch.c)
	if err != nil {
		return err
	}
	return ch.ok(m.NoWait, &protocol.QueuePurgeOk{MessageCount: uint32(n)})
}

func (ch *channel) queueDelete(m *protocol.QueueDelete) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	if err := refused(ch.c.grant.DeleteQueue(name)); err != nil {
		return err
	}
	// The answer goes out before its consumers' basic.cancel.
	ch.holdCancels()
	defer ch.sendHeldCancels()
	n, err := ch.c.vh.DeleteQueue(name, ch.c, m.IfUnused, m.IfEmpty)
	if err != nil {
		if e := reply.As(err); e.Code == protocol.NotFound && !ch.c.vh.HasQueue(name) {
			// Deleting a queue that is not there succeeds, as in RabbitMQ.
			return ch.ok(m.NoWait, &protocol.QueueDeleteOk{})
		}
		return err
	}
	return ch.ok(m.NoWait, &protocol.QueueDeleteOk{MessageCount: uint32(n)})
}
