// Package classicqueue is the classic queue (x-queue-type classic, the
// default) as a vhost holds it: a queuetype.Type and its queuetype.Queue,
// which is a queuetype.Local over a core/queue.Queue that keeps the messages.
//
// A classic queue lives on one node, its home. On a node of its own a
// declare makes it at once. In a cluster a queue every connection shares
// is declared through the metadata group (DeclareReplicated proposes it
// with an incarnation its declarer chose; ApplyDeclare makes it on its
// home and a queue homed there, queuetype.RemoteQueue, on the others), while
// an exclusive queue is its connection's and is declared on its node
// alone; it becomes known to the cluster, and gets its incarnation
// (Share), when it is first bound.
//
// Invariants:
//
//   - A durable queue's record is stored before it is registered, so a
//     queue a client heard declare-ok for survives a crash; the record
//     names its store id, under which its messages are kept.
//   - A queue that drops itself (x-expires, auto-delete, its owner gone)
//     leaves its vhost through Host.Drop, which in a cluster also
//     proposes its delete to the others.
//   - Its incarnation changes once, from 0 (Share).
package classicqueue

import (
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// A classic queue takes a publisher's messages in the publisher's
// goroutine (queuetype.Local); one homed on another node is a Remote here.
var (
	_ queuetype.Local      = (*Queue)(nil)
	_ queuetype.RemoteType = Type{}
)

// Type is the classic queue type, for queuetype.NewTypes.
type Type struct{}

// Name is its x-queue-type.
func (Type) Name() string { return queue.Classic }

// Check refuses a new classic queue's arguments.
func (Type) Check(h queuetype.Host, def topology.QueueDef) error {
	_, err := queue.ParseArgs(def.Name, h.Name(), def.Args)
	return err
}

// Declare makes a classic queue on this node, or checks the one there
// is; defMu is held.
func (Type) Declare(h queuetype.Host, def topology.QueueDef) (queuetype.Queue, bool, error) {
	if def.Exclusive {
		// An exclusive queue ends with its connection, so RabbitMQ
		// declares it non-durable whatever the flag says: it is listed
		// so, and a redeclare with either value matches.
		def.Durable = false
	}
	settings, err := h.ParseDeclare(def)
	if err != nil {
		return nil, false, err
	}
	if t := h.Lookup(def.Name); t != nil {
		if err := h.CheckOwner(t, def.Owner); err != nil {
			return nil, false, err
		}
		if err := t.Equivalent(def); err != nil {
			return nil, false, err
		}
		t.Touch()
		return t, false, nil
	}
	q, err := create(h, def, settings)
	if err != nil {
		return nil, false, err
	}
	return q, true, nil
}

// DeclareReplicated proposes a classic queue homed on this node to the
// cluster and returns the queue of the name once the declare is applied
// here.
func (Type) DeclareReplicated(h queuetype.Host, def topology.QueueDef) (queuetype.Queue, bool, error) {
	if _, err := h.ParseDeclare(def); err != nil {
		return nil, false, err
	}
	def.Home, def.ID = h.Self(), h.NewIncarnation()
	if err := h.Propose(topology.DeclareQueue{Def: def}); err != nil {
		return nil, false, err
	}
	t := h.Lookup(def.Name)
	if t == nil {
		// Deleted again before this lookup.
		return nil, false, reply.NotFound("no queue '%s' in vhost '%s'", def.Name, h.Name())
	}
	if err := h.Redeclare(t, def); err != nil {
		return nil, false, err
	}
	return t, t.Elsewhere() == "", nil
}

// ApplyDeclare carries out a declare the cluster committed: the queue
// itself on its home, a queue homed there on the others; defMu is held.
func (Type) ApplyDeclare(h queuetype.Host, def topology.QueueDef) error {
	if def.Home == h.Self() {
		if t := h.Lookup(def.Name); t != nil {
			return t.Equivalent(def)
		}
		settings, err := h.ParseDeclare(def)
		if err != nil {
			return err
		}
		_, err = create(h, def, settings)
		return err
	}
	if t := h.Shared(def.Name); t != nil {
		return t.Equivalent(def)
	}
	return h.AddRemote(def, true)
}

// Restore reopens a stored classic queue under its store id and loads its
// messages from levels; in a cluster, one homed on another node is
// registered as such. defMu is held.
func (Type) Restore(h queuetype.Host, def topology.QueueDef, id uint64, levels []storage.Level) error {
	if self := h.Self(); self != "" && def.Home != "" && def.Home != self {
		return h.AddRemote(def, false)
	}
	settings, err := queue.ParseArgs(def.Name, h.Name(), def.Args)
	if err != nil {
		return err
	}
	q := newQueue(h, def, settings, id)
	// Registered first: messages expiring as they are loaded are
	// dead-lettered, perhaps back into this queue by name.
	h.Register(q)
	if def.ID != 0 && (!def.Durable || def.Exclusive) {
		h.Lost(def.Name, def.ID)
	}
	if err := q.q.Restore(levels); err != nil {
		_, _ = q.q.Delete(false, false)
		h.Unregister(q)
		return err
	}
	q.PolicyChanged()
	return nil
}

// create makes a new queue: stored when it is kept, given its policy,
// then registered; defMu is held.
func create(h queuetype.Host, def topology.QueueDef, settings queue.Settings) (*Queue, error) {
	var storeID uint64
	if st := h.Store(); st != nil && def.Durable && !def.Exclusive {
		storeID = st.NewID()
	}
	q := newQueue(h, def, settings, storeID)
	if q.q.Persists() || h.Keeps(false) && def.ID != 0 {
		if err := h.Store().PutMeta(storage.KindQueue, h.Name(), def.Name, q.Record().Table()); err != nil {
			_, _ = q.q.Delete(false, false)
			return nil, queuetype.Stored(err)
		}
	}
	// It holds nothing yet, so its policy cannot dead-letter.
	q.PolicyChanged()
	h.Register(q)
	return q, nil
}

// Queue is a classic queue homed on this node.
type Queue struct {
	q           *queue.Queue
	h           queuetype.Host
	incarnation atomic.Uint64
}

// newQueue makes a queue, not yet registered.
func newQueue(h queuetype.Host, def topology.QueueDef, settings queue.Settings, storeID uint64) *Queue {
	cq := &Queue{h: h}
	cq.incarnation.Store(def.ID)
	var owner any
	if def.Exclusive {
		owner = h.Owner(def)
	}
	cq.q = queue.New(queue.Config{
		Name: def.Name, VHost: h.Name(), Durable: def.Durable, Exclusive: def.Exclusive,
		AutoDelete: def.AutoDelete, Args: def.Args, Owner: owner, Settings: settings, Events: events{cq},
		Store: h.QueueStore(), QID: storeID, Memory: h.Memory(), Order: h.NextOrder(), Bodies: h.Bodies(),
	})
	return cq
}

// Of is the core/queue.Queue under t when t is a classic queue homed here:
// what reads its messages directly (the management API's get, tests).
func Of(t queuetype.Queue) (*queue.Queue, bool) {
	if cq, ok := t.(*Queue); ok {
		return cq.q, true
	}
	return nil, false
}

// events are the queue's reports to its vhost (queue.Events).
type events struct{ cq *Queue }

func (e events) DeadLetter(_ *queue.Queue, dead []queue.Dead) { e.cq.h.MoveDeadLetters(e.cq, dead) }
func (e events) Unused(*queue.Queue)                          { e.cq.h.Drop(e.cq) }
func (e events) Abandoned(*queue.Queue)                       { e.cq.h.Drop(e.cq) }

// ---- queuetype.Queue

func (cq *Queue) Name() string              { return cq.q.Name }
func (cq *Queue) Type() string              { return queue.Classic }
func (cq *Queue) Kind() string              { return "classic queue" }
func (cq *Queue) Arguments() protocol.Table { return cq.q.Args }
func (cq *Queue) Incarnation() uint64       { return cq.incarnation.Load() }
func (cq *Queue) Touch()                    { cq.q.Touch() }

// Record is its stored declaration; once the cluster shares it, with its
// home (this node) and incarnation.
func (cq *Queue) Record() topology.QueueRecord {
	q := cq.q
	rec := topology.QueueRecord{Durable: q.Durable, AutoDelete: q.AutoDelete, Exclusive: q.Exclusive, Args: q.Args, StoreID: q.QID()}
	if id := cq.Incarnation(); id != 0 {
		rec.Home, rec.Incarnation = cq.h.Self(), id
	}
	return rec
}

func (cq *Queue) Figures() (queue.Stats, *stats.Meter, error) {
	return cq.q.Stats(), &cq.q.Counters, nil
}

func (cq *Queue) Status() (queuetype.QuorumView, bool) { return queuetype.QuorumView{}, false }

func (cq *Queue) DeclareCounts() (ready, consumers int, err error) {
	st := cq.q.Stats()
	return st.Ready, st.Consumers, nil
}

func (cq *Queue) CheckArgs(def topology.QueueDef) error {
	_, err := queue.ParseArgs(def.Name, cq.h.Name(), def.Args)
	return err
}

func (cq *Queue) Equivalent(def topology.QueueDef) error {
	q := cq.q
	return cq.h.Equivalent(topology.Shape{Durable: q.Durable, AutoDelete: q.AutoDelete, Exclusive: q.Exclusive, Args: q.Args}, def)
}

// DeleteChecks deletes the queue if its conditions hold: checking them
// and dropping the messages are one step under the queue's lock.
func (cq *Queue) DeleteChecks(ifUnused, ifEmpty bool) (int, error) {
	return cq.q.Delete(ifUnused, ifEmpty)
}

// DeleteReplicated proposes the delete of a queue the cluster shares,
// once its conditions hold; the delete is applied here like everywhere.
func (cq *Queue) DeleteReplicated(ifUnused, ifEmpty bool) (int, error) {
	st := cq.q.Stats()
	return cq.h.ProposeDelete(cq.q.Name, cq.Incarnation(), st.Consumers, st.Ready, st.Ready, ifUnused, ifEmpty)
}

// Release deletes what the queue holds, once it left the maps.
func (cq *Queue) Release() { _, _ = cq.q.Delete(false, false) }

func (cq *Queue) Purge() (int, error) { return cq.q.Purge(), nil }

// PolicyChanged applies the policy in force; applying a limit can
// dead-letter, so no lock but defMu is held.
func (cq *Queue) PolicyChanged() {
	var def protocol.Table
	if p := cq.h.Policy(cq.q.Name); p != nil {
		def = p.Definition
	}
	cq.q.ApplyPolicy(def)
}

func (cq *Queue) Close(time.Time) {}

// Source is the queue itself: a channel consumes from it directly.
func (cq *Queue) Source() (queuetype.Source, error) { return cq.q, nil }

func (cq *Queue) Here() bool                  { return true }
func (cq *Queue) Via() *queuetype.RemoteQueue { return nil }
func (cq *Queue) Elsewhere() string           { return "" }
func (cq *Queue) Replicated() bool            { return false }
func (cq *Queue) MemberNodes() []string       { return nil }
func (cq *Queue) Member() bool                { return true } // its home is its one member
func (cq *Queue) Tidy()                       {}

// Enqueue takes a message forwarded or moved to it outside a publisher's
// run, and calls done once it is safe.
func (cq *Queue) Enqueue(m *message.Message, done func(error)) {
	_, rejected, stored := cq.q.Enqueue(m)
	switch {
	case rejected:
		done(queuetype.ErrRejected)
	case stored:
		cq.h.AfterSync(done)
	default:
		done(nil)
	}
}

// HandleCall answers another node's call to the queue: a delete, a
// purge, its counts, and its consumers there.
func (cq *Queue) HandleCall(op string, req protocol.Table) (protocol.Table, error) {
	q := cq.q
	switch op {
	case queuetype.CallQueueDelete:
		n, err := cq.DeleteReplicated(remote.Bool(req, "if_unused"), remote.Bool(req, "if_empty"))
		return protocol.Table{"messages": int64(n)}, err
	case queuetype.CallQueuePurge:
		return protocol.Table{"messages": int64(q.Purge())}, nil
	case queuetype.CallConsume, queuetype.CallCancel, queuetype.CallSettle, queuetype.CallGet:
		return cq.h.HandleConsumerCall(op, q, req)
	case queuetype.CallQueueCounts:
		st := q.Stats()
		return protocol.Table{"messages": int64(st.Ready), "consumers": int64(st.Consumers), "bytes": st.ReadyBytes,
			"unacked": int64(st.Unacked), "ready_rate": st.ReadyRate, "unacked_rate": st.UnackedRate,
			"max_priority": int64(st.MaxPriority)}, nil
	}
	return nil, reply.Internal("unknown call %q (a node of a newer version?)", op)
}

// ---- queuetype.Local

func (cq *Queue) Persists() bool { return cq.q.Persists() }

func (cq *Queue) Take(m *message.Message, w *queue.Writes) (accepted, rejected, stored bool) {
	return cq.q.EnqueueFrom(m, w)
}

func (cq *Queue) Order() uint64 { return cq.q.Order() }
func (cq *Queue) LockForMove()  { cq.q.LockForMove() }
func (cq *Queue) EnqueueMoved(m *message.Message, txn *storage.Txn) bool {
	return cq.q.EnqueueMoved(m, txn)
}
func (cq *Queue) UnlockMoved() []queue.Dead { return cq.q.UnlockMoved() }
func (cq *Queue) Serve() []queue.Dead       { return cq.q.Serve() }

func (cq *Queue) DeadLetterFrom() (queue.Settings, uint64, bool) { return cq.q.Source() }

func (cq *Queue) MemoryBytes() int64  { return cq.q.MemoryBytes() }
func (cq *Queue) Meter() *stats.Meter { return &cq.q.Counters }

func (cq *Queue) Sample(now time.Time) queue.Stats {
	cq.q.Counters.Sample(now)
	return cq.q.SampleDepth(now)
}

func (cq *Queue) Exclusive() bool { return cq.q.Exclusive }
func (cq *Queue) Owner() any      { return cq.q.Owner }

// Share gives the queue incarnation id unless it has one.
func (cq *Queue) Share(id uint64) uint64 {
	cq.incarnation.CompareAndSwap(0, id)
	return cq.incarnation.Load()
}
