package topology

import (
	"crypto/rand"
	"encoding/base64"
	"strings"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// MaxNameLength bounds exchange and queue names, as shortstr does.
const MaxNameLength = 255

// QueueDef is what queue.declare asks for.
type QueueDef struct {
	Name       string // "" asks for a server-named queue
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       protocol.Table
	// Owner identifies the declaring connection; it owns an exclusive queue.
	Owner any
	// ServerNamed says Name came from ServerNamed (the client asked for a
	// server-named queue, and its permissions were checked on this name):
	// the reserved prefix is the broker's own.
	ServerNamed bool
	// Home and ID are a replicated queue's home node and incarnation (see
	// core/vhost's cluster.go); both are empty on a node of its own.
	Home string
	ID   uint64
	// Members are a replicated queue's nodes in a cluster (core/membership).
	Members []string
	// MemberIDs are the Raft ids of their incarnations when the queue was
	// declared, which make its group's first configuration (bootIDs).
	MemberIDs []uint64
	// FromSnapshot says the declaration comes from a snapshot of the
	// cluster's metadata, not a declare (a quorum queue's member then
	// joins its group).
	FromSnapshot bool
}

// Shape is what a redeclare of a classic queue compares.
type Shape struct {
	Durable, AutoDelete, Exclusive bool
	Args                           protocol.Table
}

// ServerNamed returns a fresh name like RabbitMQ's: amq.gen- and 22
// URL-safe base64 characters.
func ServerNamed() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "amq.gen-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// ReservedName reports names clients may not declare.
func ReservedName(name string) bool { return strings.HasPrefix(name, "amq.") }

// QueueArgsCompared are the arguments a redeclare of a classic or quorum
// queue must repeat exactly.
var QueueArgsCompared = []string{
	"x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes", "x-overflow",
	"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-max-priority",
	"x-single-active-consumer", "x-delivery-limit", "x-queue-type",
}

// EquivalentQueue refuses a redeclare def, in vhost, of a queue of shape q
// that differs from it in its flags or in the arguments of compared
// (QueueArgsCompared when nil): 405 for exclusivity, which RabbitMQ
// answers before it compares anything else, else 406.
func EquivalentQueue(vhost string, q Shape, def QueueDef, compared ...string) error {
	if compared == nil {
		compared = QueueArgsCompared
	}
	diff := func(field string, got, cur any) error {
		return reply.PreconditionFailed("inequivalent arg '%s' for queue '%s' in vhost '%s': received '%v' but current is '%v'",
			field, def.Name, vhost, got, cur)
	}
	switch {
	case q.Exclusive != def.Exclusive:
		return Locked(vhost, def.Name)
	case q.Durable != def.Durable:
		return diff("durable", def.Durable, q.Durable)
	case q.AutoDelete != def.AutoDelete:
		return diff("auto_delete", def.AutoDelete, q.AutoDelete)
	}
	for _, k := range compared {
		got, hasGot := def.Args[k]
		cur, hasCur := q.Args[k]
		if hasGot != hasCur || !exchange.ValuesEqual(got, cur) {
			return diff(k, describe(got, hasGot), describe(cur, hasCur))
		}
	}
	return nil
}

func describe(v any, present bool) any {
	if !present {
		return "none"
	}
	return v
}

// Locked is the 405 for a use of queue name, in vhost, that its
// exclusivity refuses, in RabbitMQ's words.
func Locked(vhost, name string) error {
	return reply.ResourceLocked("cannot obtain exclusive access to locked queue '%s' in vhost '%s'. "+
		"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name, vhost)
}

// EquivalentExchange refuses (406) a redeclare def of the exchange cur
// that differs from it in its type, its flags or its alternate exchange.
func EquivalentExchange(cur, def exchange.Definition) error {
	diff := func(field string, got, was any) error {
		return reply.PreconditionFailed("inequivalent arg '%s' for exchange '%s' in vhost '%s': received '%v' but current is '%v'",
			field, def.Name, cur.VHost, got, was)
	}
	switch {
	case cur.Type != def.Type:
		return diff("type", def.Type, cur.Type)
	case cur.Durable != def.Durable:
		return diff("durable", def.Durable, cur.Durable)
	case cur.AutoDelete != def.AutoDelete:
		return diff("auto_delete", def.AutoDelete, cur.AutoDelete)
	case cur.Internal != def.Internal:
		return diff("internal", def.Internal, cur.Internal)
	}
	got, was := def.Args["alternate-exchange"], cur.Args["alternate-exchange"]
	if !exchange.ValuesEqual(got, was) {
		return diff("alternate-exchange", got, was)
	}
	return nil
}

// CheckExchangeArgs refuses (406) the arguments of a new exchange the
// vhost reads itself: an alternate-exchange that is not a name.
func CheckExchangeArgs(def exchange.Definition) error {
	if ae, ok := def.Args["alternate-exchange"]; ok {
		if _, isString := ae.(string); !isString {
			return reply.PreconditionFailed("invalid arg 'alternate-exchange' for exchange '%s' in vhost '%s': must be a string", def.Name, def.VHost)
		}
	}
	return nil
}

// RefuseFlags refuses a declare's flags that a type of durable queues
// shared by every connection cannot take, as RabbitMQ 3.10 words it;
// module is the type's there (rabbit_quorum_queue, rabbit_stream_queue).
func RefuseFlags(vhost string, def QueueDef, module string) error {
	invalidProperty := func(p string) error {
		return reply.PreconditionFailed("invalid property '%s' for queue '%s' in vhost '%s'", p, def.Name, vhost)
	}
	switch {
	case def.ServerNamed:
		return reply.PreconditionFailed("Cannot declare a server-named queue for type %s", module)
	case !def.Durable:
		return invalidProperty("non-durable")
	case def.AutoDelete:
		return invalidProperty("auto-delete")
	case def.Exclusive:
		return invalidProperty("exclusive-owner")
	}
	return nil
}
