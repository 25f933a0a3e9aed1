package vhost

import (
	"time"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Queue types.
//
// Every queue is a Queue: a classic queue (core/classicqueue), a quorum
// queue (core/quorumqueue), a stream (core/streamqueue), and a classic
// queue homed on another node of a cluster (classicqueue.Remote). The vhost
// holds them in one map and asks them, through this interface, for what
// every type answers in its own way. RabbitMQ's rabbit_queue_type is the
// model. A type is a QueueType, registered with the broker's QueueTypes;
// the vhost asks it to declare and restore queues, and offers it a Host:
// the vhost's services (the store, the cluster, routing a dead letter,
// calls to other nodes) without its internals. What only some queues do
// is a capability, an interface of its own that the vhost asks for by
// assertion (Local, below). No file of this package names a type.

// Queue is a queue as the vhost holds it.
type Queue interface {
	// Name is the queue's name; Type its x-queue-type; Kind what the
	// replies call it ("classic queue", "quorum queue", "stream").
	Name() string
	Type() string
	Kind() string
	// Arguments are its declaration's.
	Arguments() protocol.Table
	// Incarnation is its id in a cluster: a replicated queue's group's,
	// the one a classic queue's declarer chose; 0 for a queue the
	// cluster does not share (a classic queue on a node of its own, an
	// exclusive one nobody bound yet). A delete names it.
	Incarnation() uint64
	// Record is its stored (and replicated) declaration.
	Record() topology.QueueRecord
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
	CheckArgs(def topology.QueueDef) error
	Equivalent(def topology.QueueDef) error
	// DeleteChecks refuses a delete whose conditions (if-unused,
	// if-empty) do not hold, and says how many messages were ready. A
	// type may delete its messages here already, when checking and
	// deleting must be one step (a classic queue's, under its lock).
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
	// is another (a classic queue declared through it; classicqueue.Remote),
	// "" for every other queue: a client here reaches it through Via.
	Elsewhere() string
	// Enqueue takes m and calls done once it is safe (ErrRejected for a
	// refusal its publisher is nacked for).
	Enqueue(m *message.Message, done func(error))
	// HandleCall answers another node's call to this node's member.
	HandleCall(op string, req protocol.Table) (protocol.Table, error)

	// Replicated says it is a queue of a cluster's Raft group (and a
	// GroupQueue).
	Replicated() bool
	// MemberNodes are its group's nodes, by name, the one placed to lead
	// first; nil for a queue of no group, or of a node of its own.
	MemberNodes() []string
	// Member says this node runs a member of it: its messages are here
	// (for a classic queue, it is its home).
	Member() bool
	// Tidy ends the consumers of members that are down and of this
	// node's earlier runs (CheckConsumers, every few seconds).
	Tidy()
}

// A GroupQueue is a queue of a cluster's Raft group (a quorum queue, a
// replicated stream; core/membership places and changes their members).
type GroupQueue interface {
	Queue
	// RecordMembers records new members, in memory and in the store;
	// defMu is held.
	RecordMembers(members []string) error
	// Join starts this node's member, one the group is adding; Leave
	// stops it. defMu is held.
	Join() error
	Leave()
	// ChangeMember adds node to its group or removes it, through a
	// member (ChangeQuorumMember).
	ChangeMember(node string, add bool) error
	// Rejoin has this node's member, when its group does not count this
	// node's incarnation, ask a member to add it (CheckMembers).
	Rejoin()
}

// A QueueType is what the vhost asks of a type before it has a queue of
// it. Each method but Check and DeclareReplicated is called with the
// vhost's defMu held.
type QueueType interface {
	// Name is its x-queue-type.
	Name() string
	// Check refuses a new declare's arguments and flags, all of them: a
	// stream takes arguments a classic queue refuses.
	Check(h Host, def topology.QueueDef) error
	// Declare makes one on a node of its own, or checks the one there is.
	Declare(h Host, def topology.QueueDef) (q Queue, created bool, err error)
	// DeclareReplicated proposes one to the cluster and returns the queue
	// of the name once the declare is applied here.
	DeclareReplicated(h Host, def topology.QueueDef) (q Queue, created bool, err error)
	// ApplyDeclare carries out a declare the cluster committed.
	ApplyDeclare(h Host, def topology.QueueDef) error
	// Restore reopens a stored one at start, with its messages in the
	// store's levels as recovery counted them (classic queues').
	Restore(h Host, def topology.QueueDef, id uint64, levels []storage.Level) error
}

// A Local queue keeps its messages in this process and takes a
// publisher's message in the publisher's own goroutine (a classic
// queue): routing collects Locals apart from other queues, so a
// persistent message bound for several is stored once (enqueue), and
// dead letters and held messages move into them under their locks, taken
// in Order, across one store Txn (moveInto).
type Local interface {
	Queue
	// Persists says it stores the persistent messages it takes.
	Persists() bool
	// Take takes m: accepted, refused (overflow reject-publish), written
	// to the store. w, when set, takes the socket writes of the
	// deliveries it makes (the publisher's run).
	Take(m *message.Message, w *queue.Writes) (accepted, rejected, stored bool)
	// Order ranks it among Locals for locking several at once.
	Order() uint64
	// LockForMove, EnqueueMoved and UnlockMoved bracket a move: its lock
	// is held from before the Txn is written until after it commits;
	// UnlockMoved and Serve return the dead letters the move produced.
	LockForMove()
	EnqueueMoved(m *message.Message, txn *storage.Txn) bool
	UnlockMoved() []queue.Dead
	Serve() []queue.Dead
	// DeadLetterFrom is what moving its dead letters needs: its
	// settings, its store id and whether it was deleted meanwhile.
	DeadLetterFrom() (s queue.Settings, storeID uint64, deleted bool)
	// Meter are its message statistics; Sample samples them and its
	// depth for their rates.
	Meter() *stats.Meter
	Sample(now time.Time) queue.Stats
	// Exclusive says it is one connection's, Owner's (nil for one a
	// command of the cluster declared).
	Exclusive() bool
	Owner() any
	// Share gives it incarnation id if it has none yet, and returns the
	// one it has: an exclusive queue gets one when it is first bound.
	Share(id uint64) uint64
}

// QueueTypes are the queue types a broker serves.
type QueueTypes struct {
	byName map[string]QueueType
	// untyped takes a replicated declaration that names no type: written
	// before a second replicated type came.
	untyped QueueType
}

// NewQueueTypes registers types by name; untyped names the one a
// replicated declaration without an x-queue-type is (older records). A
// declaration that names no type is a classic queue's (queue.Classic).
func NewQueueTypes(untyped string, types ...QueueType) *QueueTypes {
	ts := &QueueTypes{byName: make(map[string]QueueType, len(types))}
	for _, t := range types {
		ts.byName[t.Name()] = t
	}
	ts.untyped = ts.byName[untyped]
	return ts
}

// asked is the type def's arguments ask for: classic when they name none.
func (ts *QueueTypes) asked(def topology.QueueDef) (QueueType, bool) {
	if ts == nil {
		return nil, false
	}
	qt, ok := ts.byName[queue.TypeOf(def.Args)]
	return qt, ok
}

// restored is the type of a stored or replicated declaration.
func (ts *QueueTypes) restored(def topology.QueueDef) (QueueType, bool) {
	if def.Members != nil {
		return ts.replicated(def)
	}
	return ts.asked(def)
}

// replicated is the type of a replicated declaration (def.Members set).
func (ts *QueueTypes) replicated(def topology.QueueDef) (QueueType, bool) {
	if _, named := def.Args["x-queue-type"]; named {
		return ts.asked(def)
	}
	return ts.untyped, ts != nil && ts.untyped != nil
}

// typeOf is the type a declare of def is: that of the queue of the name
// there is, or the one it asks for; defMu is held. A vhost without the
// type (a test's, a broker that does not serve it) refuses the declare.
func (v *VHost) typeOf(def topology.QueueDef) (QueueType, error) {
	name := queue.TypeOf(def.Args)
	if t := v.queues[def.Name]; t != nil {
		name = t.Type()
	}
	if v.queueTypes != nil {
		if qt, ok := v.queueTypes.byName[name]; ok {
			return qt, nil
		}
	}
	return nil, reply.Internal("this node serves no queue of type '%s'", name)
}

// listEntry is t's listing entry; mu is held.
func (v *VHost) listEntry(t Queue) QueueEntry {
	rec := t.Record()
	e := QueueEntry{Name: t.Name(), Durable: rec.Durable, Exclusive: rec.Exclusive, AutoDelete: rec.AutoDelete,
		Args: t.Arguments(), Type: t.Type(), Home: t.Elsewhere(), t: t}
	if p := v.policies.For(policy.Queues, e.Name); p != nil {
		e.Policy = p.Name
	}
	if p := v.operatorPolicies.For(policy.Queues, e.Name); p != nil {
		e.OperatorPolicy = p.Name
	}
	return e
}

// lookup is the queue named name, or nil.
func (v *VHost) lookup(name string) Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.queues[name]
}

// queueList is every queue, for work done without mu.
func (v *VHost) queueList() []Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]Queue, 0, len(v.queues))
	for _, q := range v.queues {
		out = append(out, q)
	}
	return out
}

// localOnly says t is this node's alone: an exclusive classic queue
// nobody bound yet, which the cluster does not know of (cluster.go).
func localOnly(t Queue) bool {
	l, ok := t.(Local)
	return ok && l.Exclusive() && l.Incarnation() == 0
}

// register adds t and its implicit binding from the default exchange
// to the maps; defMu is held. A queue homed elsewhere whose name a local
// exclusive queue holds here waits behind it (shadowed, cluster.go).
func (v *VHost) register(t Queue) {
	v.mu.Lock()
	defer v.mu.Unlock()
	name := t.Name()
	if cur := v.queues[name]; cur != nil && cur != t && localOnly(cur) && t.Elsewhere() != "" {
		v.shadowed[name] = t
		return
	}
	v.queues[name] = t
	v.defaults[name] = &exchange.Binding{
		Destination: exchange.Destination{Kind: exchange.ToQueue, Name: name},
		Key:         name, Target: t, Durable: t.Record().Durable,
	}
}

// unregister takes t out of the maps again (a restore that failed);
// defMu is held.
func (v *VHost) unregister(t Queue) {
	v.mu.Lock()
	defer v.mu.Unlock()
	name := t.Name()
	if v.queues[name] == t {
		delete(v.queues, name)
		delete(v.defaults, name)
	}
}

// forget removes t from the maps with its bindings and its record,
// then releases what it runs here; defMu is held. A queue of that name
// that is not t (another incarnation) stays; a queue homed elsewhere that
// t shadowed takes its place.
func (v *VHost) forget(t Queue) {
	name := t.Name()
	v.mu.Lock()
	if v.shadowed[name] == t {
		delete(v.shadowed, name)
		v.mu.Unlock()
		v.deleteRecord(t)
		return
	}
	if v.queues[name] != t {
		v.mu.Unlock()
		return
	}
	delete(v.queues, name)
	delete(v.defaults, name)
	bound := v.boundTo(exchange.Destination{Kind: exchange.ToQueue, Name: name})
	shadowed := v.shadowed[name]
	delete(v.shadowed, name)
	v.mu.Unlock()
	v.removeBindings(bound)
	v.deleteRecord(t)
	t.Release()
	if shadowed != nil {
		v.register(shadowed)
	}
}

// deleteRecord deletes t's stored declaration, if it has one: a Local
// has one when it persists or the cluster shares it.
func (v *VHost) deleteRecord(t Queue) {
	if v.store == nil {
		return
	}
	if l, ok := t.(Local); ok && !l.Persists() && !(v.keeps(false) && l.Incarnation() != 0) {
		return
	}
	if err := v.store.DeleteMeta(storage.KindQueue, v.Name, t.Name()); err != nil {
		v.log.Error().Err(err).Str("queue", t.Name()).Str("type", t.Type()).
			Msg("could not delete the stored queue; it will come back after a restart")
	}
}

// dropQueue deletes t, which dropped itself (a classic queue's x-expires,
// auto-delete, or its exclusive owner gone), if it is still the queue of
// its name; in a cluster that shares it, its delete is proposed to the
// others (applied here, it finds the queue gone).
func (v *VHost) dropQueue(t Queue) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	v.dropped(t)
}

// dropped is dropQueue's work; defMu is held.
func (v *VHost) dropped(t Queue) {
	if v.queues[t.Name()] != t {
		return
	}
	v.forget(t)
	v.queueGone(t.Name(), t.Incarnation())
}

// enqueueOthers hands m to the queues not Local routing reached and empties
// r.others; f hears from each.
func enqueueOthers(m *message.Message, r *RouteBuffers, f *Forwarding) {
	for i, t := range r.others {
		t.Enqueue(m, f.done)
		r.others[i] = nil
	}
	r.others = r.others[:0]
}
