package vhost

import (
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Queue types beside classic queues.
//
// A queue of a type that keeps its messages outside package queue (a
// quorum queue in core/quorumqueue, a stream in core/streamqueue), and a
// classic queue homed on another node of a cluster (remotequeue.go), is a
// Queue: the vhost holds it in one map and asks it, through this
// interface, for what every type answers in its own way. RabbitMQ's
// rabbit_queue_type is the model. A type is a QueueType, registered with
// the broker's QueueTypes; the vhost asks it to declare and restore
// queues, and offers it a Host: the vhost's services (the store, the
// cluster, routing a dead letter, calls to other nodes) without its
// internals. No file of this package names a type.

// Queue is a queue of a registered type, or one homed on another node, as
// the vhost holds it.
type Queue interface {
	// Name is the queue's name; Type its x-queue-type; Kind what the
	// replies call it ("quorum queue", "stream").
	Name() string
	Type() string
	Kind() string
	// Arguments are its declaration's.
	Arguments() protocol.Table
	// Incarnation is its id: its store id, and in a cluster its group's.
	Incarnation() uint64
	// Record is its stored (and replicated) declaration.
	Record() QueueRecord
	// Figures are its depth and consumers, from its member here or one on
	// another node, and its message statistics.
	Figures() (queue.Stats, *stats.Meter, error)
	// Status is its group as this node sees it (QueueEntry.QuorumStatus).
	Status() (QuorumView, bool)
	// DeclareCounts are the ready messages and consumers declare-ok
	// reports.
	DeclareCounts() (ready, consumers int, err error)
	// Touch records a client's use, for x-expires.
	Touch()

	// CheckArgs refuses a redeclare's arguments its type cannot take;
	// Equivalent refuses a redeclare that differs from it (406).
	CheckArgs(def QueueDef) error
	Equivalent(def QueueDef) error
	// DeleteChecks refuses a delete whose conditions (if-unused,
	// if-empty) do not hold, and says how many messages were ready.
	DeleteChecks(ifUnused, ifEmpty bool) (ready int, err error)
	// DeleteReplicated proposes its delete to the cluster once the
	// conditions hold (Host.ProposeDelete).
	DeleteReplicated(ifUnused, ifEmpty bool) (int, error)
	// Release ends what runs for it on this node and deletes its data,
	// once it has left the maps; defMu is held.
	Release()
	// Purge drops its ready messages and says how many.
	Purge() (int, error)
	// PolicyChanged puts the policy now in force on it; defMu is held.
	PolicyChanged()
	// Close stops what it runs (the vhost closing), by deadline.
	Close(deadline time.Time)

	// Source is what a client on this node consumes from it through: its
	// member here, or one on another node.
	Source() (Source, error)
	// Here says its messages are taken on this node: Enqueue hands them
	// over. Otherwise Via is the node a message for it is forwarded to,
	// nil when none can be reached.
	Here() bool
	Via() *RemoteQueue
	// Elsewhere is the node a queue of one node is homed on when that
	// is another (a classic queue declared through it; remotequeue.go),
	// "" for every other queue: a client here reaches it through Via.
	Elsewhere() string
	// Enqueue takes m and calls done once it is safe (ErrRejected for a
	// refusal its publisher is nacked for).
	Enqueue(m *message.Message, done func(error))
	// HandleCall answers another node's call to this node's member.
	HandleCall(op string, req protocol.Table) (protocol.Table, error)

	// Replicated says it is a queue of a cluster's group; the methods
	// below matter only then.
	Replicated() bool
	// MemberNodes are its group's nodes, by name, the one placed to lead
	// first; nil on a node of its own.
	MemberNodes() []string
	// Member says this node runs a member of its group; Group is that
	// member's group.
	Member() bool
	Group() *cluster.Group
	// Rejoining is its member's state as CheckMembers sees it.
	Rejoining() *Rejoining
	// RecordMembers records new members, in memory and in the store;
	// defMu is held.
	RecordMembers(members []string) error
	// Join starts this node's member, one the group is adding; Leave
	// stops it. defMu is held.
	Join() error
	Leave()
	// Tidy ends the consumers of members that are down and of this
	// node's earlier runs (CheckConsumers, every few seconds).
	Tidy()
}

// A QueueType is what the vhost asks of a type before it has a queue of
// it. Each method but Check and DeclareReplicated is called with the
// vhost's defMu held.
type QueueType interface {
	// Name is its x-queue-type.
	Name() string
	// Check refuses a new declare's arguments and flags, all of them: a
	// stream takes arguments a classic queue refuses.
	Check(h Host, def QueueDef) error
	// Declare makes one on a node of its own, or checks the one there is.
	Declare(h Host, def QueueDef) (q Queue, created bool, err error)
	// DeclareReplicated proposes one to the cluster and returns the queue
	// of the name once the declare is applied here.
	DeclareReplicated(h Host, def QueueDef) (q Queue, created bool, err error)
	// ApplyDeclare carries out a declare the cluster committed.
	ApplyDeclare(h Host, def QueueDef) error
	// Restore reopens a stored one at start.
	Restore(h Host, def QueueDef, id uint64) error
}

// QueueTypes are the queue types beside classic a broker serves.
type QueueTypes struct {
	byName map[string]QueueType
	// untyped takes a replicated declaration that names no type: written
	// before a second replicated type came.
	untyped QueueType
}

// NewQueueTypes registers types by name; untyped names the one a
// replicated declaration without an x-queue-type is (older records).
func NewQueueTypes(untyped string, types ...QueueType) *QueueTypes {
	ts := &QueueTypes{byName: make(map[string]QueueType, len(types))}
	for _, t := range types {
		ts.byName[t.Name()] = t
	}
	ts.untyped = ts.byName[untyped]
	return ts
}

// asked is the type def's arguments ask for beside classic, if any.
func (ts *QueueTypes) asked(def QueueDef) (QueueType, bool) {
	if ts == nil {
		return nil, false
	}
	name, _ := def.Args["x-queue-type"].(string)
	qt, ok := ts.byName[name]
	return qt, ok
}

// replicated is the type of a replicated declaration (def.Members set).
func (ts *QueueTypes) replicated(def QueueDef) (QueueType, bool) {
	if qt, ok := ts.asked(def); ok {
		return qt, true
	}
	return ts.untyped, ts != nil && ts.untyped != nil
}

// typeOf is the type a declare of def is: that of the queue of the name
// there is, or, with no classic queue of the name, the one it asks for;
// mu or defMu is held.
func (v *VHost) typeOf(def QueueDef) (QueueType, bool) {
	if t := v.typed[def.Name]; t != nil {
		qt, ok := v.queueTypes.byName[t.Type()]
		return qt, ok
	}
	if v.queues[def.Name] != nil {
		return nil, false
	}
	return v.queueTypes.asked(def)
}

// typedEntry is t's listing entry; mu is held.
func (v *VHost) typedEntry(t Queue) QueueEntry {
	rec := t.Record()
	e := QueueEntry{Name: t.Name(), Durable: rec.Durable, Exclusive: rec.Exclusive, AutoDelete: rec.AutoDelete,
		Args: t.Arguments(), Type: t.Type(), Home: t.Elsewhere(), t: t}
	if p := v.policies.For(policy.Queues, e.Name); p != nil {
		e.Policy = p.Name
	}
	return e
}

// typedQueue is the typed queue named name, or nil; nil too when a
// classic queue here has the name (a local exclusive queue shadows one
// homed elsewhere; see cluster.go).
func (v *VHost) typedQueue(name string) Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.queues[name] != nil {
		return nil
	}
	return v.typed[name]
}

// typedList is every typed queue, for work done without mu.
func (v *VHost) typedList() []Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]Queue, 0, len(v.typed))
	for _, q := range v.typed {
		out = append(out, q)
	}
	return out
}

// registerTyped adds t and its implicit binding from the default exchange
// to the maps; defMu is held.
func (v *VHost) registerTyped(t Queue) {
	v.mu.Lock()
	defer v.mu.Unlock()
	name := t.Name()
	v.typed[name] = t
	v.defaults[name] = &exchange.Binding{
		Destination: exchange.Destination{Kind: exchange.ToQueue, Name: name},
		Key:         name, Target: t, Durable: true,
	}
}

// deleteTyped deletes t if its conditions hold, with its bindings and
// data; defMu is held.
func (v *VHost) deleteTyped(t Queue, ifUnused, ifEmpty bool) (int, error) {
	ready, err := t.DeleteChecks(ifUnused, ifEmpty)
	if err != nil {
		return 0, err
	}
	v.forgetTyped(t)
	return ready, nil
}

// forgetTyped removes t from the maps with its bindings and its record,
// then releases what it runs here; defMu is held. A queue of that name
// that is not t (another incarnation) stays.
func (v *VHost) forgetTyped(t Queue) {
	name := t.Name()
	v.mu.Lock()
	if v.typed[name] != t {
		v.mu.Unlock()
		return
	}
	delete(v.typed, name)
	if b := v.defaults[name]; b != nil && b.Target == t {
		// (A local exclusive queue that shadows a queue homed elsewhere
		// keeps its own.)
		delete(v.defaults, name)
	}
	bound := v.boundTo(exchange.Destination{Kind: exchange.ToQueue, Name: name})
	v.mu.Unlock()
	v.removeBindings(bound)
	if v.store != nil {
		if err := v.store.DeleteMeta(storage.KindQueue, v.Name, name); err != nil {
			v.log.Error().Err(err).Str("queue", name).Str("type", t.Type()).
				Msg("could not delete the stored queue; it will come back after a restart")
		}
	}
	t.Release()
}

// enqueueTyped hands m to the typed queues routing reached and empties
// r.typed; f hears from each.
func enqueueTyped(m *message.Message, r *RouteBuffers, f *Forwarding) {
	for i, t := range r.typed {
		t.Enqueue(m, f.done)
		r.typed[i] = nil
	}
	r.typed = r.typed[:0]
}
