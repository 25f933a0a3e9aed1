// Package exchange defines what an exchange type is and implements the
// built-in ones: direct, fanout, topic and headers.
//
// A Type is a factory registered under the name clients put in
// exchange.declare; it creates one Router per exchange. The Router holds that
// exchange's bindings in whatever shape routes fastest (a map for direct, a
// trie for topic, pre-compiled matchers for headers) and answers Route with
// the bindings a message matches. The WASM plugin host implements the same
// two interfaces, so the vhost never knows which kind of type it talks to.
//
// The built-in routers keep their bindings in denseset.Sets (a topic
// trie's, per pattern): removing a binding costs the same whatever the
// exchange's size, so a queue's delete takes no longer on an exchange of a
// million bindings than on one of a hundred (issue 29), and Route returns
// the bindings it matches in no particular order.
//
// Invariants every Router relies on, guaranteed by its caller (the vhost):
//   - Route, ValidateBinding and Info may run concurrently with each other
//     and with other calls of their own on the same Router, never with
//     AddBinding, RemoveBindings, PolicyChanged or Delete. (The vhost holds
//     the exchange's lock shared for Route and Info, exclusively for the
//     changes, and no lock for ValidateBinding.)
//   - AddBinding is only called for a binding that is not already present
//     (same destination, key and arguments), and RemoveBindings only for
//     present ones; the vhost keeps the authoritative binding set.
//   - Bindings are added in a deterministic order (their Seq), at creation
//     and again when a router is rebuilt, so order-sensitive types (a hash
//     ring) come back the same after a restart.
//   - Route may return a binding more than once; the vhost delivers at most
//     one copy per destination.
package exchange

import (
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

// Definition is what exchange.declare fixed about an exchange.
type Definition struct {
	VHost      string
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       protocol.Table
}

// DestKind says whether a binding leads to a queue or to another exchange.
type DestKind uint8

const (
	ToQueue DestKind = iota
	ToExchange
)

func (k DestKind) String() string {
	if k == ToExchange {
		return "exchange"
	}
	return "queue"
}

// Destination names the end of a binding. It is comparable, so it can key maps.
type Destination struct {
	Kind DestKind
	Name string
}

// Binding links a source exchange to a destination under a key and arguments.
type Binding struct {
	Source      string
	Destination Destination
	Key         string
	Args        protocol.Table
	// Seq orders bindings by creation within a vhost; replay follows it.
	Seq uint64
	// Durable bindings (both ends durable) are stored and survive a restart.
	Durable bool
	// Target is the vhost's resolved destination. Routers must not touch it.
	Target any
}

// Type is one exchange type: a built-in or a plugin's.
type Type interface {
	// Name is the type name clients declare, e.g. "topic" or "x-consistent-hash".
	Name() string
	// ValidateDeclare checks a declare's arguments before the exchange exists.
	// It returns a *reply.Error (usually 406) naming the bad argument.
	ValidateDeclare(def Definition) error
	// Create returns the routing state of a new or recovered exchange.
	Create(def Definition) (Router, error)
}

// Router is the routing state of one exchange.
type Router interface {
	// ValidateBinding checks a binding's key and arguments before it is added.
	ValidateBinding(b *Binding) error
	AddBinding(b *Binding) error
	RemoveBindings(bs []*Binding) error
	// Route appends the bindings m matches to r.Bindings, or hands the
	// message to another type (r.Via), possibly after holding it (r.Hold).
	// An error fails only this publish.
	Route(m *message.Message, r *Result) error
	// PolicyChanged hands the router the definition of the policy now in
	// force for its exchange (nil when none).
	PolicyChanged(policy protocol.Table) error
	// Delete releases the router; it is not used afterwards.
	Delete()
	// Info returns type-specific figures for the admin API; nil when none.
	Info() map[string]any
}

// Result is what Route produces. The vhost resets it between messages and
// reuses its slice, so routing does not allocate per message.
type Result struct {
	Bindings []*Binding
	// Via, when set, asks the vhost to route the message over this
	// exchange's own bindings with the type named Via instead, after holding
	// it for Hold (zero: at once). The vhost owns the timer and the durable
	// store of held messages; the delayed-message type is built on this.
	Via  string
	Hold time.Duration
	// SetHeaders, with a Via that holds, are headers to set on the held
	// message (a nil value removes the header): the delayed-message type
	// negates x-delay this way.
	SetHeaders protocol.Table
}

// Reset empties r for the next message, keeping its capacity.
func (r *Result) Reset() {
	clear(r.Bindings)
	r.Bindings = r.Bindings[:0]
	r.Via = ""
	r.Hold = 0
	r.SetHeaders = nil
}
