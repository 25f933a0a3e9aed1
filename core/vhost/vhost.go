// Package vhost is one virtual host: its exchanges, queues, bindings and
// policies, and the path a message takes through them.
//
// # The path of a message
//
// Publish routes a message from its exchange: the exchange's Router picks
// bindings; bindings to exchanges are followed (each exchange at most once,
// which cuts cycles); an exchange that matched nothing hands the message to
// its alternate exchange, whose own alternate may follow; every queue
// reached is collected once. The queues then take the message (Enqueue).
// Routing runs under the topology read lock, so any number of publishers
// route at once; declares, binds and deletes take the write lock.
//
// # Invariants
//
//   - mu guards the maps and every Exchange's bindings and router. Queue
//     state has its own lock (see package queue); the vhost never holds a
//     queue's lock while taking mu.
//   - A binding exists at most once per (source, destination, key,
//     arguments); the exchange's Router sees each exactly once, in Seq order.
//   - The default exchange "" is bound implicitly to every queue by name and
//     takes no explicit bindings.
//   - Dead-lettered messages are routed like publishes, from the dead-letter
//     exchange, with x-death recording where they have been.
package vhost

import (
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
)

// VHost is one virtual host.
type VHost struct {
	Name     string
	types    *exchange.Registry
	log      zerolog.Logger
	holds    *holdQueue
	bindSeq  atomic.Uint64
	queueSeq atomic.Uint64 // numbers queues for their lock order
	store    Store         // nil: nothing persists
	memory   queue.MemoryLimit

	mu        sync.RWMutex
	exchanges map[string]*Exchange
	queues    map[string]*queue.Queue
	defaults  map[string]*exchange.Binding // each queue's implicit binding from ""
	bindings  map[bindingKey]*exchange.Binding
	byDest    map[exchange.Destination][]*exchange.Binding
	policies  policy.Set
	closed    bool
}

// Config is what a vhost needs from the broker.
type Config struct {
	Name   string
	Types  *exchange.Registry
	Logger zerolog.Logger
	Store  Store             // nil: a vhost that keeps nothing across restarts
	Memory queue.MemoryLimit // each queue's in-memory bound before paging
}

// New creates a vhost with the default and predeclared exchanges.
func New(c Config) *VHost {
	v := &VHost{
		Name:      c.Name,
		types:     c.Types,
		store:     c.Store,
		memory:    c.Memory,
		log:       c.Logger.With().Str("vhost", c.Name).Logger(),
		exchanges: make(map[string]*Exchange),
		queues:    make(map[string]*queue.Queue),
		defaults:  make(map[string]*exchange.Binding),
		bindings:  make(map[bindingKey]*exchange.Binding),
		byDest:    make(map[exchange.Destination][]*exchange.Binding),
	}
	v.holds = newHoldQueue(v)
	v.exchanges[""] = &Exchange{Definition: exchange.Definition{VHost: c.Name, Type: "direct", Durable: true}, router: &defaultRouter{v: v}}
	for name, typ := range map[string]string{
		"amq.direct": "direct", "amq.fanout": "fanout", "amq.topic": "topic",
		"amq.headers": "headers", "amq.match": "headers",
	} {
		def := exchange.Definition{VHost: c.Name, Name: name, Type: typ, Durable: true}
		t, _ := c.Types.Lookup(typ)
		router, _ := t.Create(def)
		v.exchanges[name] = &Exchange{Definition: def, typ: t, router: router}
	}
	return v
}

// Close stops the vhost's timers. Queues and exchanges stay as they are, for
// a store to have recorded.
func (v *VHost) Close() {
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	v.holds.stop()
}
