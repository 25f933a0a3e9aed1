package classicqueue

import (
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// A classic queue homed on another node is, on this node, a Remote: a
// queuetype.Queue that holds nothing. Routing reaches it and forwards its
// messages home (Via), consumers read it through its home (core/remote),
// and what needs its state (counts, a conditional delete, a purge) is a
// call to its home, which answers 404 "home node ... is down or
// inaccessible" as RabbitMQ does when that node cannot be reached.

// Remote makes the queue that stands here for rq, homed on another node
// (queuetype.RemoteType).
func (Type) Remote(h queuetype.Host, rq *queuetype.RemoteQueue) queuetype.Queue {
	return &Remote{rq: rq, h: h}
}

// Remote is a classic queue homed on another node, as this node holds it.
type Remote struct {
	rq *queuetype.RemoteQueue
	h  queuetype.Host
}

func (r *Remote) Name() string              { return r.rq.Name }
func (r *Remote) Type() string              { return queue.TypeOf(r.rq.Args) }
func (r *Remote) Kind() string              { return "queue" }
func (r *Remote) Arguments() protocol.Table { return r.rq.Args }
func (r *Remote) Incarnation() uint64       { return r.rq.ID }
func (r *Remote) Elsewhere() string         { return r.rq.Home }
func (r *Remote) Touch()                    {}

func (r *Remote) Record() topology.QueueRecord {
	rq := r.rq
	return topology.QueueRecord{Durable: rq.Durable, AutoDelete: rq.AutoDelete, Exclusive: rq.Exclusive, Args: rq.Args,
		Home: rq.Home, Incarnation: rq.ID}
}

// noCounters are a remote queue's message statistics here: none, its
// home counts them.
var noCounters stats.Meter

func (r *Remote) Figures() (queue.Stats, *stats.Meter, error) {
	if r.rq.Exclusive {
		return queue.Stats{}, &noCounters, nil // its connection's business
	}
	st, err := r.h.RemoteStats(r.rq)
	return st, &noCounters, err
}

func (r *Remote) Status() (queuetype.QuorumView, bool) { return queuetype.QuorumView{}, false }

func (r *Remote) DeclareCounts() (ready, consumers int, err error) {
	ans, err := r.h.CallHome(r.rq, queuetype.CallQueueCounts, protocol.Table{})
	if err != nil {
		return 0, 0, err
	}
	return int(remote.Int(ans, "messages")), int(remote.Int(ans, "consumers")), nil
}

func (r *Remote) CheckArgs(def topology.QueueDef) error {
	_, err := queue.ParseArgs(def.Name, r.h.Name(), def.Args)
	return err
}

// Equivalent compares what this node knows of it; a client's redeclare
// asks whether its home is up first (the vhost's redeclare).
func (r *Remote) Equivalent(def topology.QueueDef) error {
	rq := r.rq
	return r.h.Equivalent(topology.Shape{Durable: rq.Durable, AutoDelete: rq.AutoDelete, Exclusive: rq.Exclusive, Args: rq.Args}, def)
}

// DeleteChecks refuses: a queue homed elsewhere is deleted through its
// home (DeleteReplicated), or by a committed delete.
func (r *Remote) DeleteChecks(bool, bool) (int, error) {
	return 0, reply.Internal("queue '%s' in vhost '%s' is homed on node '%s'", r.rq.Name, r.h.Name(), r.rq.Home)
}

func (r *Remote) DeleteReplicated(ifUnused, ifEmpty bool) (int, error) {
	ans, err := r.h.CallHome(r.rq, queuetype.CallQueueDelete, protocol.Table{"if_unused": ifUnused, "if_empty": ifEmpty})
	return int(remote.Int(ans, "messages")), err
}

func (r *Remote) Purge() (int, error) {
	ans, err := r.h.CallHome(r.rq, queuetype.CallQueuePurge, protocol.Table{})
	return int(remote.Int(ans, "messages")), err
}

func (r *Remote) Release()                    {}
func (r *Remote) PolicyChanged()              {}
func (r *Remote) Close(time.Time)             {}
func (r *Remote) Here() bool                  { return false }
func (r *Remote) Via() *queuetype.RemoteQueue { return r.rq }
func (r *Remote) Replicated() bool            { return false }
func (r *Remote) MemberNodes() []string       { return nil }
func (r *Remote) Member() bool                { return false }
func (r *Remote) Tidy()                       {}

// Source consumes it through its home.
func (r *Remote) Source() (queuetype.Source, error) {
	if r.rq.Exclusive || !r.h.Up(r.rq.Home) {
		return nil, r.h.Elsewhere(r.rq)
	}
	return r.h.RemoteSource(r.rq), nil
}

// Enqueue is never asked of it (Here is false: its messages are
// forwarded); it refuses.
func (r *Remote) Enqueue(_ *message.Message, done func(error)) {
	done(reply.Internal("queue '%s' in vhost '%s' is homed on node '%s'", r.rq.Name, r.h.Name(), r.rq.Home))
}

func (r *Remote) HandleCall(string, protocol.Table) (protocol.Table, error) {
	return nil, reply.NotFound("no queue '%s' in vhost '%s'", r.rq.Name, r.h.Name())
}
