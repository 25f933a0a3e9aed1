package queuetype

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Host is what a queue type's queues may ask of their vhost (core/vhost
// implements it): its store, its cluster and Raft groups, routing a dead
// letter, calls to another node's member and consuming through one. Its
// methods say which of the vhost's locks their caller holds.
type Host interface {
	// Name is the vhost's name.
	Name() string
	// Self is this node's name, "" on a node of its own.
	Self() string
	// Logger is the vhost's logger.
	Logger() *zerolog.Logger
	// Store is the vhost's store; nil when nothing persists.
	Store() Store
	// Groups runs this node's Raft groups; nil when it runs none.
	Groups() *cluster.Groups
	// Up says node can be reached; on a node of its own, false.
	Up(node string) bool
	// NodeID is the Raft id of node's current incarnation (0: none).
	NodeID(node string) uint64
	// Cluster is the vhost's cluster; nil on a node of its own.
	Cluster() Cluster
	// Removed says whether id is an incarnation the cluster removed.
	Removed(id uint64) bool
	// Policy is the policy in force on the queue name; nil when none is.
	Policy(name string) *policy.Policy
	// Lookup is the queue named name; nil when there is none.
	Lookup(name string) Queue
	// List is every queue of the vhost, for work done without its locks.
	List() []Queue
	// Register adds q to the vhost's queues, reached by routing and by name;
	// defMu is held.
	Register(q Queue)
	// ParseDeclare checks a declare's arguments and reads its settings.
	ParseDeclare(def topology.QueueDef) (queue.Settings, error)
	// EquivalentDurable refuses (406, or 405 for an exclusive one) a
	// redeclare def of a durable queue declared with args that differs from
	// it in its flags or in the arguments of compared (without any, those a
	// classic or quorum queue compares), as RabbitMQ words it.
	EquivalentDurable(args protocol.Table, def topology.QueueDef, compared ...string) error
	// Equivalent refuses (406, or 405 for exclusivity) a redeclare def of a
	// queue of shape s that differs from it in its flags or in the arguments
	// a classic queue compares.
	Equivalent(s topology.Shape, def topology.QueueDef) error
	// CheckOwner refuses (405) owner the use of t when it is another
	// connection's exclusive queue.
	CheckOwner(t Queue, owner any) error
	// Owner is def's owner as a queue records it: nil for a declaration a
	// command of the cluster made.
	Owner(def topology.QueueDef) any
	// Redeclare answers a declare def of t, a queue that exists, as a
	// redeclare from a client does: 405, 404 for a home that is down, 406.
	Redeclare(t Queue, def topology.QueueDef) error
	// Shared is the queue name as the cluster knows it: nil for a local
	// exclusive queue nobody bound yet (and none homed elsewhere behind it).
	Shared(name string) Queue
	// Unregister takes q out of the maps again (its restore failed); defMu
	// is held.
	Unregister(q Queue)
	// Drop deletes q, which dropped itself (x-expires, auto-delete), if it is
	// still the queue of its name, and in a cluster proposes its delete.
	Drop(q Queue)

	// ---- classic queues

	// Memory is each classic queue's in-memory bound before paging.
	Memory() queue.MemoryLimit
	// Bodies lends classic queues the buffers large bodies paged back in are
	// read into; nil: allocated.
	Bodies() *message.Bodies
	// NextOrder numbers a new Local for its lock order (moveInto).
	NextOrder() uint64
	// QueueStore is the store a classic queue keeps its messages in: nil
	// (an interface that is nil) when the vhost has none.
	QueueStore() queue.Store
	// Keeps says whether a declaration is written to the store: a durable
	// one when there is a store, and in a cluster every replicated one.
	Keeps(durable bool) bool
	// MoveDeadLetters moves dead letters that left l to its dead-letter
	// exchange's queues (core/vhost's deadletter.go); no lock is held.
	MoveDeadLetters(l Local, dead []queue.Dead)
	// AfterSync calls done once everything written so far is on disk.
	AfterSync(done func(error))

	// ---- the cluster's commands

	// Propose commits c through the cluster and waits for this node's
	// result of applying it.
	Propose(c topology.Command) error
	// NewIncarnation is a fresh nonzero incarnation for a queue to declare.
	NewIncarnation() uint64
	// AddRemote registers def, a classic queue homed on another node (its
	// Home), storing it when persist is set; defMu is held.
	AddRemote(def topology.QueueDef, persist bool) error
	// Lost records a restored queue the restart ended (transient or
	// exclusive, shared with the cluster): the vhost's DropLost proposes its delete once
	// the node is back in its cluster. defMu is held.
	Lost(name string, incarnation uint64)
	// DeclaredAlready says whether a queue named as def is there already,
	// and if so what a declare of def gets (nil, or 406).
	DeclaredAlready(def topology.QueueDef) (bool, error)

	// ---- groups

	// ProposeDelete proposes a replicated queue's delete once its conditions
	// hold, and returns the count delete-ok reports.
	ProposeDelete(name string, incarnation uint64, consumers, held, ready int, ifUnused, ifEmpty bool) (int, error)

	// ---- messages and time

	// DeadLetter republishes m, which left queue from as reason, to its
	// dead-letter exchange's queues (s says which), with x-death, counting it
	// in counters and the vhost's. With done nil it is at most once: what
	// cannot be routed is dropped. With done (at least once) it says whether
	// every queue reached took the message (and synced it, when it is
	// persistent); false leaves the message with the caller for another try.
	DeadLetter(from string, s queue.Settings, m *message.Message, reason queue.Reason, counters *stats.Meter, done func(ok bool))
	// Expired deletes q, which x-expires found unused: in a cluster by a
	// proposal, on a node of its own if it is still the queue of its name and
	// still unused once defMu is held.
	Expired(q Queue, unused func() bool)
	// Every calls f every d, from a goroutine started at the first call of
	// that name, until the vhost closes.
	Every(name string, d time.Duration, f func())

	// ---- other nodes

	// CallHome asks rq's node to carry out op on it.
	CallHome(rq *RemoteQueue, op string, req protocol.Table) (protocol.Table, error)
	// RemoteStats asks rq's node for its figures.
	RemoteStats(rq *RemoteQueue) (queue.Stats, error)
	// Elsewhere refuses what needs a queue on this node for rq, homed on
	// another: 405 for an exclusive one, 404 for a home that is down, else a
	// 404 that names the node to use.
	Elsewhere(rq *RemoteQueue) error
	// RemoteSource consumes rq through its node.
	RemoteSource(rq *RemoteQueue) *remote.Source
	// HandleConsumerCall answers a consuming node's call (CallConsume,
	// CallCancel, CallSettle, CallGet) about src, a member here.
	HandleConsumerCall(op string, src Source, req protocol.Table) (protocol.Table, error)
}

// Store is what a vhost keeps on disk through: the queues' index and
// messages, and the durable topology. *storage.Store implements it. Every
// metadata write returns once it is synced, so the -ok that follows it is
// a promise the broker can keep after a crash.
type Store interface {
	queue.Store
	PutMeta(kind storage.Kind, vhost, name string, rec protocol.Table) error
	DeleteMeta(kind storage.Kind, vhost, name string) error
	PutBinding(vhost string, seq uint64, rec protocol.Table) error
	DeleteBinding(vhost string, seq uint64) error
	// ScanHeldAt reads held messages (storage/held.go; core/vhost's hold.go).
	ScanHeldAt(sp storage.HeldSpan, from *storage.HeldAfter, limit int, fn func(due int64, seq uint64, rec []byte) bool) error
}

// Cluster is what a vhost of a cluster member, and its queues, need from
// the cluster.
type Cluster interface {
	// Node is this node's name.
	Node() string
	// Propose commits a command and returns this node's result of
	// applying it.
	Propose(cmd protocol.Table) error
	// ProposeLater proposes a command without waiting for it: the changes
	// a node makes of its own accord (an auto-delete queue's delete).
	ProposeLater(cmd protocol.Table)
	// Call asks node to carry out req and returns its answer.
	Call(node string, req protocol.Table) (protocol.Table, error)
	// Up reports whether node is reachable.
	Up(node string) bool
	// Nodes names the cluster's nodes.
	Nodes() []string
	// NodeID is the Raft id of node's current incarnation, from the
	// member table (0: the cluster has no such node). Ids are per
	// incarnation: a node whose data was lost comes back under a new one.
	NodeID(node string) uint64
	// Removed says whether id is an incarnation the cluster removed: its
	// node was forgotten, or came back as a new incarnation.
	Removed(id uint64) bool
	// Sync returns once this node has applied every change committed
	// before the call: a lookup that missed looks again after it, so that
	// what a client made through another node a moment ago is found.
	Sync() error
	// Forward hands m to the queues named, in vhost, on node home (its
	// vhost's Deliver) and calls done with the outcome. Messages forwarded to one
	// node arrive in the order they were forwarded. With wait (a client's
	// publish, no lock held) it first waits while too much is on its way
	// to that node already.
	Forward(home, vhost string, queues []string, m *message.Message, wait bool, done func(error))
}

// CallQueueDelete, CallQueuePurge and CallQueueCounts are calls to a
// classic queue's home.
const (
	CallQueueDelete = "queue.delete"
	CallQueuePurge  = "queue.purge"
	CallQueueCounts = "queue.counts"
)

// CallMember asks a member to change the members (GroupQueue.ChangeMember);
// CallLead asks it to have the group's leadership move (GroupQueue.Lead).
const (
	CallMember = "quorum.member"
	CallLead   = "quorum.lead"
)

// The calls another node's member answers (Queue.HandleCall) beside its
// type's own.
const (
	CallConsume = remote.CallConsume
	CallCancel  = remote.CallCancel
	CallSettle  = remote.CallSettle
	CallGet     = remote.CallGet
)

// Stored wraps a failed metadata write as the error its client sees.
func Stored(err error) error {
	if err != nil {
		return reply.Internal("could not store the change: %v", err)
	}
	return nil
}
