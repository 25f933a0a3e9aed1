package auth

import (
	"fmt"

	"github.com/warrenmq/warren/protocol"
)

// Grant is one user's rights in one vhost, asked by every way into the
// broker before it changes, reads or publishes to a resource: the AMQP
// channel before each method, the management API before each request that
// touches a resource, and each protocol added beside them. The rules are
// RabbitMQ's and are kept here only, so no door can ask less than another:
//
//	operation                        needs
//	declare exchange X               configure X; a new X naming alternate-exchange A
//	                                 also read X and write A
//	delete exchange X                configure X
//	bind or unbind S to D            read S (an exchange), write D (a queue or an exchange)
//	declare queue Q                  configure Q; a new Q naming x-dead-letter-exchange D
//	                                 also read Q and write D
//	delete queue Q                   configure Q
//	purge Q, consume or get from Q   read Q
//	publish to X                     write X
//	list or drop X's held messages   read X
//
// and over the stream protocol, as RabbitMQ's stream plugin asks:
//
//	create or delete stream S        configure S (a queue)
//	declare a publisher of S         write S
//	subscribe to S, store or query   read S
//	an offset, query a publisher's
//	sequence, S's statistics
//	S's metadata                     read or write S
//	route in super stream X          write X (an exchange)
//	list X's partitions              read or write X
//
// and, where the user has a topic permission on a topic exchange (topic.go):
//
//	publish to X with key K          K matches the write expression
//	bind or unbind from S with key K K matches the read expression
//
// A passive declare needs nothing: it only asks whether the resource
// exists. The default exchange is matched as "amq.default". Each check
// allocates nothing unless it refuses, which matters on the publish path.
//
// The zero Grant allows nothing: a user without a permission in the vhost
// (an administrator included, as in RabbitMQ) may list its resources
// through the management API but not touch them.
type Grant struct {
	User, VHost string
	perm        *Permission // nil: no permission in the vhost
	store       *Store      // for topic permissions, read as they are now
}

// Grant returns a user's rights in a vhost; ok is false when they have
// none there.
func (s *Store) Grant(vhost, user string) (g Grant, ok bool) {
	p, ok := s.Permission(vhost, user)
	return Grant{User: user, VHost: vhost, perm: p, store: s}, ok
}

// Permitted reports whether the grant holds a permission in its vhost at
// all.
func (g Grant) Permitted() bool { return g.perm != nil }

// Refusal is an operation a grant does not allow: which permission the
// user lacked, on what. Its text is RabbitMQ's, without the AMQP code.
type Refusal struct {
	User, VHost string
	Perm        string // "configure", "write" or "read"
	Kind        string // "queue" or "exchange"
	Name        string // "amq.default" for the default exchange
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("access to %s '%s' in vhost '%s' refused for user '%s'", r.Kind, r.Name, r.VHost, r.User)
}

// The resource kinds a refusal names.
const (
	KindQueue    = "queue"
	KindExchange = "exchange"
)

func (g Grant) refuse(perm, kind, name string) error {
	if name == "" {
		name = "amq.default"
	}
	return &Refusal{User: g.User, VHost: g.VHost, Perm: perm, Kind: kind, Name: name}
}

func (g Grant) configure(kind, name string) error {
	if g.perm == nil || !g.perm.CanConfigure(name) {
		return g.refuse("configure", kind, name)
	}
	return nil
}

func (g Grant) write(kind, name string) error {
	if g.perm == nil || !g.perm.CanWrite(name) {
		return g.refuse("write", kind, name)
	}
	return nil
}

func (g Grant) read(kind, name string) error {
	if g.perm == nil || !g.perm.CanRead(name) {
		return g.refuse("read", kind, name)
	}
	return nil
}

// DeclareExchange checks a declare of exchange name with args; isNew says
// whether it would create the exchange (a redeclare's arguments must match
// what is there, so the alternate exchange is not checked again).
func (g Grant) DeclareExchange(name string, args protocol.Table, isNew bool) error {
	if err := g.configure(KindExchange, name); err != nil {
		return err
	}
	ae, ok := protocol.TextValue(args["alternate-exchange"])
	if !ok || !isNew {
		return nil // absent, or of a type the vhost refuses
	}
	// Messages published to the one end up in the other: without these a
	// user could route messages into an exchange they may not publish to.
	if err := g.read(KindExchange, name); err != nil {
		return err
	}
	return g.write(KindExchange, ae)
}

// DeleteExchange checks a delete of exchange name.
func (g Grant) DeleteExchange(name string) error { return g.configure(KindExchange, name) }

// Bind checks a binding (or unbinding) from exchange source to dest, a
// queue or an exchange as destKind says.
func (g Grant) Bind(source, destKind, dest string) error {
	if err := g.write(destKind, dest); err != nil {
		return err
	}
	return g.read(KindExchange, source)
}

// DeclareQueue checks a declare of queue name with args; isNew as for
// DeclareExchange.
func (g Grant) DeclareQueue(name string, args protocol.Table, isNew bool) error {
	if err := g.configure(KindQueue, name); err != nil {
		return err
	}
	dlx, ok := protocol.TextValue(args["x-dead-letter-exchange"])
	if !ok || !isNew {
		return nil
	}
	// Messages leave the queue for the dead-letter exchange, as for an
	// alternate exchange above.
	if err := g.read(KindQueue, name); err != nil {
		return err
	}
	return g.write(KindExchange, dlx)
}

// DeleteQueue checks a delete of queue name.
func (g Grant) DeleteQueue(name string) error { return g.configure(KindQueue, name) }

// ReadQueue checks a consume, a get or a purge of queue name.
func (g Grant) ReadQueue(name string) error { return g.read(KindQueue, name) }

// PublishToStream checks a stream-protocol publisher of stream name: it
// writes to the stream itself, a queue.
func (g Grant) PublishToStream(name string) error { return g.write(KindQueue, name) }

// DescribeStream checks a look at stream name's metadata: a user who may
// read it or write to it may.
func (g Grant) DescribeStream(name string) error { return g.readOrWrite(KindQueue, name) }

// RouteSuperStream checks a question of where a routing key goes in super
// stream name (its exchange): what a publisher to it asks.
func (g Grant) RouteSuperStream(name string) error { return g.write(KindExchange, name) }

// DescribeSuperStream checks a listing of super stream name's partitions.
func (g Grant) DescribeSuperStream(name string) error { return g.readOrWrite(KindExchange, name) }

// readOrWrite passes with either permission; its refusal names read.
func (g Grant) readOrWrite(kind, name string) error {
	if g.perm != nil && (g.perm.CanRead(name) || g.perm.CanWrite(name)) {
		return nil
	}
	return g.refuse("read", kind, name)
}

// Publish checks a publish to exchange name.
func (g Grant) Publish(name string) error { return g.write(KindExchange, name) }

// PublishTopic checks the routing key of a publish to exchange name, an
// exchange of type topic, against the user's topic permission on it (the
// write expression); without one it is allowed.
func (g Grant) PublishTopic(name, routingKey string) error {
	return g.topic("write", name, routingKey)
}

// BindTopic checks the routing key of a binding (or unbinding) from
// exchange name, of type topic, against the read expression of the
// user's topic permission on it.
func (g Grant) BindTopic(name, routingKey string) error {
	return g.topic("read", name, routingKey)
}

func (g Grant) topic(perm, name, routingKey string) error {
	if g.store == nil {
		return nil
	}
	p, ok := g.store.TopicPermission(g.VHost, g.User, name)
	if !ok {
		return nil
	}
	re := p.write
	if perm == "read" {
		re = p.read
	}
	if re.MatchString(routingKey) {
		return nil
	}
	return &TopicRefusal{User: g.User, VHost: g.VHost, Exchange: name, Perm: perm, RoutingKey: routingKey}
}

// ReadHeld checks a listing or purge of the messages exchange name holds
// (a delayed-message exchange's): they are messages on their way through
// it, which binding from it would read.
func (g Grant) ReadHeld(name string) error { return g.read(KindExchange, name) }

// BrokerUser is the name the broker's own connections to itself go by
// (a shovel's local end made without credentials), as RabbitMQ's direct
// connections without a user are "none".
const BrokerUser = "none"

// BrokerGrant is the broker's own rights in a vhost: every one, for the
// connections it makes to itself. Who may make it do so is checked where
// they ask (a shovel's definition names a vhost its author may use).
func BrokerGrant(vhost string) Grant {
	return Grant{User: BrokerUser, VHost: vhost, perm: allowAll}
}

var allowAll = &Permission{Configure: ".*", Write: ".*", Read: ".*", configure: matchAll, write: matchAll, read: matchAll}
