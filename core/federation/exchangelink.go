package federation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// An exchange link makes the upstream send this broker what its
// exchange routes to the federated exchange's bindings. Upstream, it
// declares a queue ("federation: X -> <this cluster>") and an internal
// exchange of type x-federation-upstream (a fanout where the upstream
// has no federation) bound to it, and binds that exchange to the
// upstream exchange with each key and arguments the federated exchange
// is bound with. It consumes the queue and publishes each message to the
// federated exchange, with an x-received-from entry naming where it came
// from, so that it reaches the bindings here.
//
// The internal exchange's name ends in A or B, the other one than last
// time's: the new one is bound before the old one goes, so that a link
// that starts again (this broker's restart included) misses nothing
// published meanwhile. Bindings carry x-bound-from with the hops they
// may still travel, so that in a chain or ring of brokers they go as far
// upstream as messages may come down, and no further.

// internalCheck is how often a running link checks that its internal
// exchange is still there upstream (RabbitMQ's
// internal_exchange_check_interval is 90 s).
const internalCheck = 30 * time.Second

// upstreamQueueName is the queue a link declares upstream: named for the
// upstream exchange, this broker's cluster name and, when they differ,
// the federated exchange's vhost and name.
func upstreamQueueName(upX, upVHost, vhost, x, cluster string) string {
	down := ""
	switch {
	case vhost != upVHost:
		down = ":" + vhost + ":" + x
	case x != upX:
		down = ":" + x
	}
	return "federation: " + upX + " -> " + cluster + down
}

// exchangeSession runs one session of an exchange link.
func (l *link) exchangeSession(ctx context.Context) error {
	def, ok := l.m.Downstream.Exchange(l.spec.VHost, l.spec.Name)
	if !ok {
		return fmt.Errorf("exchange '%s' in vhost '%s' not found", l.spec.Name, l.spec.VHost)
	}
	return l.session(ctx, func(e *ends) error { return l.exchangeLink(ctx, def, e) })
}

// exchangeLink is an exchange link's session once both ends are open.
func (l *link) exchangeLink(ctx context.Context, def exchange.Definition, e *ends) error {
	upX := or(l.spec.Exchange, l.spec.Name)
	upVHost := e.uri.VHost()
	cluster := l.m.clusterName()
	queue := upstreamQueueName(upX, upVHost, l.spec.VHost, l.spec.Name, cluster)
	if _, err := e.ch.QueueDeclare(queue, true, false, false, false, l.upstreamQueueArgs()); err != nil {
		return fmt.Errorf("could not declare queue '%s' upstream: %w", queue, err)
	}
	tag := "federation-link-" + l.id + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	deliveries, err := e.ch.Consume(queue, tag, l.spec.AckMode == NoAck, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("could not consume from queue '%s' upstream: %w", queue, err)
	}
	if err := ensureUpstreamExchange(e.up, upX, def); err != nil {
		return err
	}
	cmd, err := e.up.Channel()
	if err != nil {
		return err
	}
	e.watch(cmd.NotifyClose(make(chan *amqp.Error, 1)))
	b := &binder{l: l, e: e, ch: cmd, queue: queue, upX: upX, upCluster: e.cname, upVHost: upVHost, cluster: cluster}
	// The suffix not in use: A unless A is there.
	b.suffix = "B"
	if onChannel(e.up, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(queue+" A", UpstreamExchange, true, true, true, false, nil)
	}) == nil {
		b.suffix = "A"
	}
	if err := b.swap(); err != nil {
		return err
	}
	l.setRunning(e)
	l.log.Info().Str("uri", e.uri.Redacted()).Msg("federation link running")
	if e.cname == cluster && upVHost == l.spec.VHost {
		l.log.Warn().Str("cluster_name", cluster).Msg("the upstream has this broker's cluster name and vhost: a message that crosses more than one link is taken for one that came back, and dropped; give each broker its own cluster_name")
	}

	entry := protocol.Table{"uri": e.uri.Redacted(), "exchange": l.spec.Name}
	if e.cname != "" {
		entry["cluster-name"] = e.cname
	}
	entry["vhost"] = upVHost
	pending := map[uint64]uint64{}
	check := time.NewTicker(internalCheck)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			l.stopExchange(e, queue, b.internal)
			return ctx.Err()
		case <-l.restart:
			return errRestart
		case err := <-e.closed:
			return closedReason(err)
		case <-l.nudge:
			if err := b.sync(); err != nil {
				return err
			}
		case <-check.C:
			err := onChannel(e.up, func(ch *amqp.Channel) error {
				return ch.ExchangeDeclarePassive(b.internal, UpstreamExchange, true, true, true, false, nil)
			})
			if code(err) == amqp.NotFound {
				return fmt.Errorf("the internal exchange '%s' is gone upstream", b.internal)
			}
		case c, open := <-e.confirms:
			if !open {
				return errors.New("this broker's channel closed")
			}
			if err := l.confirmed(e, c, pending, func() { _ = e.ch.Cancel(tag, false) }, deliveries); err != nil {
				return err
			}
		case d, open := <-deliveries:
			if !open {
				return errors.New("the upstream cancelled the link's consumer")
			}
			headers := amqpclient.FromClient(d.Headers)
			if !ShouldForward(headers, l.spec.MaxHops, cluster, l.spec.VHost) {
				if l.spec.AckMode != NoAck {
					if err := d.Ack(false); err != nil {
						return err
					}
				}
				continue
			}
			entry["redelivered"] = d.Redelivered
			headers = prepend(headers, ReceivedFrom, maps.Clone(entry))
			if err := l.forward(ctx, e, d, l.spec.Name, d.RoutingKey, amqpclient.Table(headers), pending); err != nil {
				return err
			}
		}
	}
}

// upstreamQueueArgs are the arguments of the link's queue upstream.
func (l *link) upstreamQueueArgs() amqp.Table {
	args := amqp.Table{internalPurpose: "federation"}
	if l.spec.Expires > 0 {
		args["x-expires"] = l.spec.Expires
	}
	if l.spec.MessageTTL > 0 {
		args["x-message-ttl"] = l.spec.MessageTTL
	}
	return args
}

// ensureUpstreamExchange declares the upstream exchange as the federated
// one is declared, unless it is there.
func ensureUpstreamExchange(up *amqp.Connection, name string, def exchange.Definition) error {
	if onChannel(up, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(name, def.Type, def.Durable, def.AutoDelete, def.Internal, false, nil)
	}) == nil {
		return nil
	}
	err := onChannel(up, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(name, def.Type, def.Durable, def.AutoDelete, def.Internal, false, amqpclient.Table(def.Args))
	})
	if err != nil {
		return fmt.Errorf("could not declare exchange '%s' upstream: %w", name, err)
	}
	return nil
}

// ensureInternalExchange declares the internal exchange afresh: of type
// x-federation-upstream, or a fanout where the upstream has no such type
// (the link then applies the hops itself).
func (l *link) ensureInternalExchange(e *ends, name, cluster string) error {
	_ = onChannel(e.up, func(ch *amqp.Channel) error { return ch.ExchangeDelete(name, false, false) })
	args := amqp.Table{MaxHopsArg: l.spec.MaxHops, DownstreamNameArg: cluster, DownstreamVHostArg: l.spec.VHost,
		internalPurpose: "federation"}
	// A type the upstream does not know closes the connection (503), so
	// the declare is tried on one of its own.
	d := l.m.dialer("Federation link (disposable)")
	c, err := d.Dial(e.uri)
	if err != nil {
		return fmt.Errorf("could not connect to the upstream: %w", err)
	}
	err = onChannel(c, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(name, UpstreamExchange, true, true, true, false, args)
	})
	c.Close()
	if err == nil {
		return nil
	}
	if code(err) != amqp.CommandInvalid {
		return fmt.Errorf("could not declare exchange '%s' upstream: %w", name, err)
	}
	err = e.ch.ExchangeDeclare(name, "fanout", true, true, true, false, amqp.Table{internalPurpose: "federation"})
	if err != nil {
		return fmt.Errorf("could not declare exchange '%s' upstream: %w", name, err)
	}
	return nil
}

// stopExchange ends a link that stops: for good (cleanup), it deletes
// its queue and internal exchange upstream.
func (l *link) stopExchange(e *ends, queue, internal string) {
	if !l.cleanup {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.ch.QueueDelete(queue, false, false, false)
		_ = e.ch.ExchangeDelete(internal, false, false)
	}()
	select {
	case <-done:
	case <-time.After(cleanupTimeout):
	}
}

// binder keeps the upstream exchange's bindings to the internal exchange
// those the federated exchange's bindings ask for. A binding is added
// with exchange.bind, but never taken away with exchange.unbind: an
// unbind matches a binding's arguments exactly, and the client library
// writes a table's entries (x-bound-from's, nested) in no set order, so
// RabbitMQ would not recognise the binding it made. Instead the binder
// swaps the internal exchange: a new one (the other suffix) is bound as
// wanted and to the queue, then the old one is deleted with its
// bindings. While both are bound a message still reaches the queue once.
type binder struct {
	l                  *link
	e                  *ends
	ch                 *amqp.Channel // for the binds
	queue, upX         string
	internal, suffix   string // the internal exchange in use and its suffix
	upCluster, upVHost string // the upstream's cluster name and vhost
	cluster            string // this broker's
	bound              map[topology.BindingKey]Binding
}

// wanted are the upstream bindings the federated exchange's bindings ask
// for now, with the binder's suffix.
func (b *binder) wanted() map[topology.BindingKey]Binding {
	want := map[topology.BindingKey]Binding{}
	for _, x := range b.l.m.Downstream.Bindings(b.l.spec.VHost, b.l.spec.Name) {
		args, ok := b.propagated(x.Args)
		if !ok {
			continue
		}
		k, err := topology.KeyOf(b.upX, exchange.Destination{Kind: exchange.ToExchange}, x.Key, args)
		if err != nil {
			continue
		}
		want[k] = Binding{Key: x.Key, Args: args}
	}
	return want
}

// sync binds what is missing upstream; when a binding is no longer
// wanted, it swaps the internal exchange.
func (b *binder) sync() error {
	want := b.wanted()
	for k := range b.bound {
		if _, ok := want[k]; !ok {
			return b.swap()
		}
	}
	for k, x := range want {
		if _, ok := b.bound[k]; ok {
			continue
		}
		if err := b.ch.ExchangeBind(b.internal, x.Key, b.upX, false, amqpclient.Table(x.Args)); err != nil {
			return fmt.Errorf("could not bind upstream: %w", err)
		}
		b.bound[k] = x
	}
	return nil
}

// swap moves to the other internal exchange: declared afresh, bound as
// wanted and to the queue, before the one in use is deleted.
func (b *binder) swap() error {
	old := b.internal
	b.suffix = map[string]string{"A": "B", "B": "A"}[b.suffix]
	b.internal = b.queue + " " + b.suffix
	if err := b.l.ensureInternalExchange(b.e, b.internal, b.cluster); err != nil {
		return err
	}
	b.bound = map[topology.BindingKey]Binding{}
	for k, x := range b.wanted() {
		if err := b.ch.ExchangeBind(b.internal, x.Key, b.upX, false, amqpclient.Table(x.Args)); err != nil {
			return fmt.Errorf("could not bind upstream: %w", err)
		}
		b.bound[k] = x
	}
	if err := b.ch.QueueBind(b.queue, "", b.internal, false, nil); err != nil {
		return fmt.Errorf("could not bind queue '%s' upstream: %w", b.queue, err)
	}
	if old == "" {
		old = b.queue + " " + map[string]string{"A": "B", "B": "A"}[b.suffix]
	}
	_ = onChannel(b.e.up, func(ch *amqp.Channel) error { return ch.ExchangeDelete(old, false, false) })
	return nil
}

// propagated is a binding's arguments as the link binds upstream, with
// this broker prepended to x-bound-from and the hops the binding may
// still travel: the link's max-hops, or one fewer than where it came
// from, whichever is less; false when none are left, or the binding came
// from the upstream itself.
func (b *binder) propagated(args protocol.Table) (protocol.Table, bool) {
	hops := b.l.spec.MaxHops
	if path, ok := args[BoundFrom].([]any); ok && len(path) > 0 {
		if alreadySeen(b.upCluster, b.upVHost, path) {
			return nil, false
		}
		prev, _ := path[0].(protocol.Table)
		hops = min(hopsOf(prev)-1, hops)
	}
	if hops <= 0 {
		return nil, false
	}
	entry := protocol.Table{"cluster-name": b.cluster, "vhost": b.l.spec.VHost,
		"exchange": b.l.spec.VHost + ":" + b.l.spec.Name + " " + b.suffix, "hops": int16(hops)}
	return prepend(args, BoundFrom, entry), true
}
