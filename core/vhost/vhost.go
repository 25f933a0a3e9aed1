// Package vhost is one virtual host: its exchanges, queues, bindings and
// policies, and the path a message takes through them.
//
// # The path of a message
//
// Publish routes a message from its exchange: the exchange's Router picks
// bindings; bindings to exchanges are followed (each exchange at most once,
// which cuts cycles); an exchange that matched nothing hands the message to
// its alternate exchange, whose own alternate may follow; every queue
// reached is collected once. The queues then take the message, one at a
// time and with no vhost lock held: a Local (a classic queue) in the
// publisher's goroutine (Take), any other through Enqueue, and one homed
// on another node by forwarding.
//
// # Queues
//
// Every queue is a queuetype.Queue of a registered queuetype.Type, in one
// map (queuemap.go); no file of this package names a type. The vhost
// keeps the maps, bindings, routing, policies, dead-lettering and the
// delayed hold; a type keeps its queues' messages and answers for them.
// What a declaration is and how a redeclare compares, and the records the
// store and the cluster carry, are core/topology's.
//
// # Locks
//
// Three kinds of lock, each with one job (LOCKS.md at the repository's root
// places them among all of Warren's):
//
//   - defMu serializes changes to the topology: declares, deletes, binds,
//     unbinds, policies, exchange types coming and going. It may be held
//     across a plugin call and a synced metadata write, and it is never
//     taken on the path of a message, so a slow plugin or disk delays other
//     declares, never a publish or a delivery.
//   - Exchange.mu guards one exchange's router and bindings. Route holds it
//     shared while the router (perhaps a plugin) picks bindings; a change to
//     the router holds it exclusively. So a plugin call stalls at most the
//     publishers of its own exchange.
//   - mu guards the maps (exchanges, queues, bindings, policies). It is a
//     leaf: held only to read or write a map, never across a call into a
//     router, a queue, a plugin or the store.
//
// The topology maps and every exchange's bindings and policy change only
// under defMu, with mu (for a map) or Exchange.mu (for an exchange) taken
// as well, so code holding defMu reads them without either.
//
// No vhost lock is held while a queue's lock is taken, and a queue never
// calls the vhost with its own lock held: queue and vhost locks never nest.
// Dead letters are moved by a work list (deadletter.go), never by calling
// back into a queue that is still locked.
//
// # Invariants
//
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
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/denseset"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/hold"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/replyto"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
)

// VHost is one virtual host.
type VHost struct {
	Name     string
	types    *exchange.Registry
	log      zerolog.Logger
	holds    *hold.Queue
	bindSeq  atomic.Uint64
	queueSeq atomic.Uint64   // numbers queues for their lock order
	store    queuetype.Store // nil: nothing persists
	memory   queue.MemoryLimit
	bodies   *message.Bodies
	closed   atomic.Bool
	cluster  queuetype.Cluster               // nil on a node of its own; see cluster.go
	limits   atomic.Pointer[topology.Limits] // limits.go; nil: none
	meta     atomic.Pointer[topology.Metadata]

	// Counters are the vhost's message statistics: what its channels count
	// (the connection layer adds to both) and its queues' dead letters.
	Counters stats.Meter

	// defMu serializes topology changes; see the package doc.
	defMu lockorder.Mutex[lockorder.VHostDef]

	// mu guards the maps below and the policy set; a leaf lock.
	mu        lockorder.RWMutex[lockorder.VHostMaps]
	exchanges map[string]*Exchange
	queues    map[string]queuetype.Queue   // of every type (core/queuetype)
	shadowed  map[string]queuetype.Queue   // homed elsewhere, behind a local exclusive queue (cluster.go)
	defaults  map[string]*exchange.Binding // each queue's implicit binding from ""
	bindings  map[topology.BindingKey]*exchange.Binding
	byDest    map[exchange.Destination]*denseset.Set[*exchange.Binding]
	policies  policy.Set
	// operatorPolicies cap the policies on queues (policies.go).
	operatorPolicies policy.Set
	lost             []lostQueue // for DropLost; under defMu

	queueTypes *queuetype.Types
	groups     *cluster.Groups // runs replicated queues' groups; nil: none here
	closing    chan struct{}   // closed by Close: ends the loops of Host.Every
	changed    func()          // Config.Changed
	loops      sync.Map        // Host.Every's loops by name

	// consuming is consuming across nodes (core/remote); idle on a node
	// of its own.
	consuming *remote.Consuming

	replies *replyto.Tokens // direct reply-to (replyto.go)
}

// Config is what a vhost needs from the broker.
type Config struct {
	Name   string
	Types  *exchange.Registry
	Logger zerolog.Logger
	Store  queuetype.Store   // nil: a vhost that keeps nothing across restarts
	Memory queue.MemoryLimit // each queue's in-memory bound before paging
	// Bodies lends queues the buffers large bodies paged back in are read
	// into; nil: allocated.
	Bodies *message.Bodies
	// Cluster, on a cluster member, shares the topology with the other
	// nodes; nil on a node of its own.
	Cluster queuetype.Cluster
	// Groups runs replicated queues' Raft groups; nil refuses them.
	Groups *cluster.Groups
	// QueueTypes are the queue types it serves; nil: none (it declares
	// no queue).
	QueueTypes *queuetype.Types
	// Changed, when set, is called after an exchange, a queue, a binding
	// or the policies changed (watch.go). It is called with the vhost's
	// locks held, so it must not block nor call the vhost: a
	// non-blocking send that wakes a goroutine of the caller's.
	Changed func()
}

// New creates a vhost with the default and predeclared exchanges.
func New(c Config) *VHost {
	v := &VHost{
		Name:       c.Name,
		types:      c.Types,
		store:      c.Store,
		memory:     c.Memory,
		bodies:     c.Bodies,
		cluster:    c.Cluster,
		replies:    replyto.NewTokens(nodeOf(c.Cluster)),
		log:        c.Logger.With().Str("vhost", c.Name).Logger(),
		exchanges:  make(map[string]*Exchange),
		queues:     make(map[string]queuetype.Queue),
		shadowed:   make(map[string]queuetype.Queue),
		defaults:   make(map[string]*exchange.Binding),
		bindings:   make(map[topology.BindingKey]*exchange.Binding),
		byDest:     make(map[exchange.Destination]*denseset.Set[*exchange.Binding]),
		queueTypes: c.QueueTypes,
		groups:     c.Groups,
		closing:    make(chan struct{}),
		changed:    c.Changed,
	}
	v.holds = v.newHold()
	v.consuming = remote.New(c.Name, c.Cluster, v.log)
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

// Close stops the vhost's timers and refuses new queues. Queues and
// exchanges stay as they are, for a store to have recorded.
func (v *VHost) Close() {
	if !v.closed.Swap(true) {
		close(v.closing)
	}
	v.holds.Stop()
	// What the queues took just before (acks) is committed, within
	// a second for all of them.
	deadline := time.Now().Add(time.Second)
	for _, t := range v.queueList() {
		t.Close(deadline)
	}
}
