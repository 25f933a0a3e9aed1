package conn

import (
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// The methods that declare, bind and delete exchanges and queues. Each
// checks the user's permission the way RabbitMQ does, then asks the vhost.

func (ch *channel) exchangeDeclare(m *protocol.ExchangeDeclare) error {
	if !m.Passive && !ch.c.perm.CanConfigure(m.Exchange) {
		return ch.refused("configure", "exchange", m.Exchange)
	}
	if !m.Passive {
		if err := ch.checkAlternateExchange(m.Exchange, m.Arguments); err != nil {
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

// checkAlternateExchange applies RabbitMQ's rule for a new exchange with
// an alternate-exchange argument: the user must be able to read the
// exchange being declared and write to the AE, since messages published to
// the one end up in the other. Without it a user could route their
// messages into an exchange they may not publish to. Redeclaring an
// existing exchange checks nothing more, as in RabbitMQ (the arguments
// must match what is there anyway).
func (ch *channel) checkAlternateExchange(name string, args protocol.Table) error {
	ae, ok := protocol.TextValue(args["alternate-exchange"])
	if !ok {
		return nil // absent, or of a type the vhost refuses
	}
	if _, err := ch.c.vh.Exchange(name); err == nil {
		return nil
	}
	if !ch.c.perm.CanRead(name) {
		return ch.refused("read", "exchange", name)
	}
	if !ch.c.perm.CanWrite(ae) {
		return ch.refused("write", "exchange", ae)
	}
	return nil
}

// ok answers a method unless the client asked for no answer.
func (ch *channel) ok(noWait bool, m protocol.Method) error {
	if !noWait {
		ch.c.send(ch.id, m)
	}
	return nil
}

func (ch *channel) exchangeDelete(m *protocol.ExchangeDelete) error {
	if !ch.c.perm.CanConfigure(m.Exchange) {
		return ch.refused("configure", "exchange", m.Exchange)
	}
	if err := ch.c.vh.DeleteExchange(m.Exchange, m.IfUnused); err != nil {
		return err
	}
	return ch.ok(m.NoWait, &protocol.ExchangeDeleteOk{})
}

// exchangeBind handles exchange.bind and exchange.unbind: write permission
// on the destination, read on the source.
func (ch *channel) exchangeBind(source, dest, key string, args protocol.Table, noWait, bind bool) error {
	if !ch.c.perm.CanWrite(dest) {
		return ch.refused("write", "exchange", dest)
	}
	if !ch.c.perm.CanRead(source) {
		return ch.refused("read", "exchange", source)
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
	if m.Queue == vhost.ReplyToQueue || vhost.IsReplyToken(m.Queue) {
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
		name = vhost.ServerNamed()
	}
	if !m.Passive && !ch.c.perm.CanConfigure(name) {
		return ch.refused("configure", "queue", name)
	}
	if !m.Passive && ch.isNewQueue(name) {
		if err := ch.checkDeadLetterExchange(name, m.Arguments); err != nil {
			return err
		}
		if err := queue.CheckExpiryArgs(name, ch.c.vh.Name, m.Arguments); err != nil {
			return err
		}
	}
	d, err := ch.c.vh.Declare(vhost.QueueDef{
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

// isNewQueue reports whether a declare would create the queue: the checks
// RabbitMQ makes on a new queue's arguments are not made again when one is
// redeclared (its arguments must then match what is there).
func (ch *channel) isNewQueue(name string) bool {
	return !ch.c.vh.HasQueue(name)
}

// checkDeadLetterExchange applies RabbitMQ's rule for a new queue with an
// x-dead-letter-exchange argument: the user must be able to read the queue
// and write to the dead-letter exchange, since messages leave the one for
// the other. Without it a user could route their messages into an exchange
// they may not publish to.
func (ch *channel) checkDeadLetterExchange(name string, args protocol.Table) error {
	dlx, ok := protocol.TextValue(args["x-dead-letter-exchange"])
	if !ok {
		return nil // absent, or of a type ParseArgs refuses
	}
	if !ch.c.perm.CanRead(name) {
		return ch.refused("read", "queue", name)
	}
	if !ch.c.perm.CanWrite(dlx) {
		return ch.refused("write", "exchange", dlx)
	}
	return nil
}

// queueBind handles queue.bind and queue.unbind: write permission on the
// queue, read on the exchange. An empty queue name means the last one
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
	if !ch.c.perm.CanWrite(queueName) {
		return ch.refused("write", "queue", queueName)
	}
	if !ch.c.perm.CanRead(source) {
		return ch.refused("read", "exchange", source)
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
	if !ch.c.perm.CanRead(name) {
		return ch.refused("read", "queue", name)
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
	if !ch.c.perm.CanConfigure(name) {
		return ch.refused("configure", "queue", name)
	}
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
