package queuetype

import (
	"fmt"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

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
	// Lead asks its group's leader to hand the leadership to node, a
	// member, through a member (rebalancing leaders); it returns at once.
	Lead(node string) error
	// Rejoin has this node's member, when its group does not count this
	// node's incarnation, ask a member to add it (CheckMembers).
	Rejoin()
}

// A Type is what the vhost asks of a queue type before it has a queue of
// it. Each method but Check and DeclareReplicated is called with the
// vhost's defMu held.
type Type interface {
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
// persistent message bound for several is stored once (the vhost's enqueue), and
// dead letters and held messages move into them under their locks, taken
// in Order, across one store Txn (the vhost's moveInto).
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
	// MemoryBytes is what the messages it holds in memory take.
	MemoryBytes() int64
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

// A RemoteType makes the queue that stands on this node for one of its
// queues homed on another.
type RemoteType interface {
	Remote(h Host, rq *RemoteQueue) Queue
}

// RemoteQueue is a queue as another node holds it: where a message for it
// is forwarded, and what calls to that node name.
type RemoteQueue struct {
	Name, Home                     string
	Durable, Exclusive, AutoDelete bool
	Args                           protocol.Table
	ID                             uint64 // incarnation
}

func (rq *RemoteQueue) String() string { return fmt.Sprintf("%s@%s", rq.Name, rq.Home) }

// QuorumView is a replicated queue's group as this node sees it.
type QuorumView struct {
	// Leader, Members and Online name nodes; on a node of its own they
	// are empty (the node is the only member).
	Leader          string
	Members, Online []string
	// Raft is this node's member's view (Role "" on a node that is not
	// a member); Match is, on the leader, each member's log position by
	// node name; Voters are its configuration's voters by node name (an
	// incarnation the cluster no longer has by its id, in hexadecimal).
	Raft   cluster.GroupStatus
	Match  map[string]uint64
	Voters []string
}

// ErrRejected is a forwarded message a queue refused (overflow
// reject-publish): its publisher is nacked.
var ErrRejected = reply.PreconditionFailed("a queue refused the message (overflow reject-publish)")

// ErrNoMember is a message for a quorum queue none of whose members this
// node can reach: its publisher is nacked.
var ErrNoMember = reply.Internal("no member of the quorum queue can be reached")
