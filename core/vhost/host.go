package vhost

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// Host is what a queue type's queues may ask of their vhost (see Queue):
// its store, its cluster and Raft groups, routing a dead letter, calls to
// another node's member and consuming through one. It is a handle, copied
// freely; its methods say which locks their caller holds.
type Host struct{ v *VHost }

// Host is the vhost's handle for queue types.
func (v *VHost) Host() Host { return Host{v} }

// Name is the vhost's name.
func (h Host) Name() string { return h.v.Name }

// Self is this node's name, "" on a node of its own.
func (h Host) Self() string { return h.v.self() }

// Logger is the vhost's logger.
func (h Host) Logger() *zerolog.Logger { return &h.v.log }

// Store is the vhost's store; nil when nothing persists.
func (h Host) Store() Store { return h.v.store }

// Groups runs this node's Raft groups; nil when it runs none.
func (h Host) Groups() *cluster.Groups { return h.v.groups }

// Up says node can be reached; on a node of its own, false.
func (h Host) Up(node string) bool { return h.v.cluster != nil && h.v.cluster.Up(node) }

// NodeID is the Raft id of node's current incarnation (0: none).
func (h Host) NodeID(node string) uint64 { return h.v.cluster.NodeID(node) }

// Cluster is the vhost's cluster; nil on a node of its own.
func (h Host) Cluster() Cluster { return h.v.cluster }

// Removed says whether id is an incarnation the cluster removed.
func (h Host) Removed(id uint64) bool { return h.v.cluster.Removed(id) }

// Policy is the policy in force on the queue name; nil when none is.
func (h Host) Policy(name string) *policy.Policy {
	h.v.mu.RLock()
	defer h.v.mu.RUnlock()
	return h.v.queuePolicy(name)
}

// Lookup is the queue named name; nil when there is none.
func (h Host) Lookup(name string) Queue { return h.v.lookup(name) }

// List is every queue of the vhost, for work done without its locks.
func (h Host) List() []Queue { return h.v.queueList() }

// Register adds q to the vhost's queues, reached by routing and by name;
// defMu is held.
func (h Host) Register(q Queue) { h.v.register(q) }

// ParseDeclare checks a declare's arguments and reads its settings.
func (h Host) ParseDeclare(def topology.QueueDef) (queue.Settings, error) {
	return h.v.parseDeclare(def)
}

// EquivalentDurable refuses (406, or 405 for an exclusive one) a
// redeclare def of a durable queue declared with args that differs from
// it in its flags or in the arguments of compared (without any, those a
// classic or quorum queue compares), as RabbitMQ words it.
func (h Host) EquivalentDurable(args protocol.Table, def topology.QueueDef, compared ...string) error {
	return topology.EquivalentQueue(h.v.Name, topology.Shape{Durable: true, Args: args}, def, compared...)
}

// Equivalent refuses (406, or 405 for exclusivity) a redeclare def of a
// queue of shape s that differs from it in its flags or in the arguments
// a classic queue compares.
func (h Host) Equivalent(s topology.Shape, def topology.QueueDef) error {
	return topology.EquivalentQueue(h.v.Name, s, def)
}

// CheckOwner refuses (405) owner the use of t when it is another
// connection's exclusive queue.
func (h Host) CheckOwner(t Queue, owner any) error { return h.v.checkOwner(t, owner) }

// Owner is def's owner as a queue records it: nil for a declaration a
// command of the cluster made.
func (h Host) Owner(def topology.QueueDef) any {
	if def.Owner == anyOwner {
		return nil
	}
	return def.Owner
}

// Redeclare answers a declare def of t, a queue that exists, as a
// redeclare from a client does: 405, 404 for a home that is down, 406.
func (h Host) Redeclare(t Queue, def topology.QueueDef) error {
	_, _, err := h.v.redeclare(t, def)
	return err
}

// Shared is the queue name as the cluster knows it: nil for a local
// exclusive queue nobody bound yet (and none homed elsewhere behind it).
func (h Host) Shared(name string) Queue {
	h.v.mu.RLock()
	defer h.v.mu.RUnlock()
	return h.v.shared(name)
}

// Unregister takes q out of the maps again (its restore failed); defMu
// is held.
func (h Host) Unregister(q Queue) { h.v.unregister(q) }

// Drop deletes q, which dropped itself (x-expires, auto-delete), if it is
// still the queue of its name, and in a cluster proposes its delete.
func (h Host) Drop(q Queue) { h.v.dropQueue(q) }

// ---- classic queues

// Memory is each classic queue's in-memory bound before paging.
func (h Host) Memory() queue.MemoryLimit { return h.v.memory }

// Bodies lends classic queues the buffers large bodies paged back in are
// read into; nil: allocated.
func (h Host) Bodies() *message.Bodies { return h.v.bodies }

// NextOrder numbers a new Local for its lock order (moveInto).
func (h Host) NextOrder() uint64 { return h.v.queueSeq.Add(1) }

// QueueStore is the store a classic queue keeps its messages in: nil
// (an interface that is nil) when the vhost has none.
func (h Host) QueueStore() queue.Store { return h.v.storeOrNil() }

// Keeps says whether a declaration is written to the store: a durable
// one when there is a store, and in a cluster every replicated one.
func (h Host) Keeps(durable bool) bool { return h.v.keeps(durable) }

// MoveDeadLetters moves dead letters that left l to its dead-letter
// exchange's queues (deadletter.go); no lock is held.
func (h Host) MoveDeadLetters(l Local, dead []queue.Dead) {
	h.v.moveDeadLetters([]deadLetters{{q: l, dead: dead}})
}

// AfterSync calls done once everything written so far is on disk.
func (h Host) AfterSync(done func(error)) { h.v.AfterSync(done) }

// ---- the cluster's commands

// Propose commits c through the cluster and waits for this node's
// result of applying it.
func (h Host) Propose(c topology.Command) error { return h.v.propose(c) }

// NewIncarnation is a fresh nonzero incarnation for a queue to declare.
func (h Host) NewIncarnation() uint64 { return newIncarnation() }

// AddRemote registers def, a classic queue homed on another node (its
// Home), storing it when persist is set; defMu is held.
func (h Host) AddRemote(def topology.QueueDef, persist bool) error {
	return h.v.addRemote(&RemoteQueue{Name: def.Name, Home: def.Home, Durable: def.Durable, AutoDelete: def.AutoDelete,
		Exclusive: def.Exclusive, Args: def.Args, ID: def.ID}, persist)
}

// Lost records a restored queue the restart ended (transient or
// exclusive, shared with the cluster): DropLost proposes its delete once
// the node is back in its cluster. defMu is held.
func (h Host) Lost(name string, incarnation uint64) {
	h.v.lost = append(h.v.lost, lostQueue{name: name, id: incarnation})
}

// DeclaredAlready says whether a queue named as def is there already,
// and if so what a declare of def gets (nil, or 406).
func (h Host) DeclaredAlready(def topology.QueueDef) (bool, error) { return h.v.declaredAlready(def) }

// ---- groups

// ProposeDelete proposes a replicated queue's delete once its conditions
// hold, and returns the count delete-ok reports.
func (h Host) ProposeDelete(name string, incarnation uint64, consumers, held, ready int, ifUnused, ifEmpty bool) (int, error) {
	return h.v.proposeDelete(name, incarnation, consumers, held, ready, ifUnused, ifEmpty)
}

// ---- messages and time

// DeadLetter republishes m, which left queue from as reason, to its
// dead-letter exchange's queues (s says which), with x-death, counting it
// in counters and the vhost's. With done nil it is at most once: what
// cannot be routed is dropped. With done (at least once) it says whether
// every queue reached took the message (and synced it, when it is
// persistent); false leaves the message with the caller for another try.
func (h Host) DeadLetter(from string, s queue.Settings, m *message.Message, reason queue.Reason, counters *stats.Meter, done func(ok bool)) {
	h.v.deadLetterOne(from, s, m, reason, counters, done)
}

// Expired deletes q, which x-expires found unused: in a cluster by a
// proposal, on a node of its own if it is still the queue of its name and
// still unused once defMu is held.
func (h Host) Expired(q Queue, unused func() bool) {
	v := h.v
	if v.cluster != nil {
		if unused() {
			v.queueGone(q.Name(), q.Incarnation()) // deleted on every node when it is applied
		}
		return
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.lookup(q.Name()) == q && unused() {
		v.forget(q)
	}
}

// Every calls f every d, from a goroutine started at the first call of
// that name, until the vhost closes.
func (h Host) Every(name string, d time.Duration, f func()) {
	v := h.v
	if _, started := v.loops.LoadOrStore(name, true); started {
		return
	}
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-v.closing:
				return
			case <-t.C:
			}
			f()
		}
	}()
}

// ---- other nodes

// The calls another node's member answers (Queue.HandleCall) beside its
// type's own.
const (
	CallConsume = remote.CallConsume
	CallCancel  = remote.CallCancel
	CallSettle  = remote.CallSettle
	CallGet     = remote.CallGet
)

// CallHome asks rq's node to carry out op on it.
func (h Host) CallHome(rq *RemoteQueue, op string, req protocol.Table) (protocol.Table, error) {
	return h.v.callHome(rq, op, req)
}

// RemoteStats asks rq's node for its figures.
func (h Host) RemoteStats(rq *RemoteQueue) (queue.Stats, error) { return h.v.remoteStats(rq) }

// Elsewhere refuses what needs a queue on this node for rq, homed on
// another: 405 for an exclusive one, 404 for a home that is down, else a
// 404 that names the node to use.
func (h Host) Elsewhere(rq *RemoteQueue) error { return h.v.elsewhere(rq) }

// RemoteSource consumes rq through its node.
func (h Host) RemoteSource(rq *RemoteQueue) *remote.Source {
	v := h.v
	return v.consuming.Source(remote.Home{Node: rq.Home, Queue: rq.Name,
		Call: func(op string, req protocol.Table) (protocol.Table, error) { return v.callHome(rq, op, req) }})
}

// HandleConsumerCall answers a consuming node's call (CallConsume,
// CallCancel, CallSettle, CallGet) about src, a member here.
func (h Host) HandleConsumerCall(op string, src Source, req protocol.Table) (protocol.Table, error) {
	return h.v.consuming.HandleConsumerCall(op, src, req)
}

// Stored wraps a failed metadata write as the error its client sees.
func Stored(err error) error { return stored(err) }
