package vhost

import (
	"fmt"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
)

// A classic queue homed on another node is, on this node, a Queue like
// those of the registered types (remoteQueue): routing reaches it and
// forwards its messages home (Via), consumers read it through its home
// (core/remote), and what needs its state (counts, a conditional delete,
// a purge) is a call to its home, which answers 404 "home node ... is
// down or inaccessible" as RabbitMQ does when that node cannot be
// reached. It holds nothing here.

// RemoteQueue is a queue as another node holds it: where a message for it
// is forwarded, and what calls to that node name.
type RemoteQueue struct {
	Name, Home                     string
	Durable, Exclusive, AutoDelete bool
	Args                           protocol.Table
	ID                             uint64 // incarnation
}

func (rq *RemoteQueue) String() string { return fmt.Sprintf("%s@%s", rq.Name, rq.Home) }

func (rq *RemoteQueue) shape() Shape {
	return Shape{Durable: rq.Durable, AutoDelete: rq.AutoDelete, Exclusive: rq.Exclusive, Args: rq.Args}
}

// remoteQueue is a classic queue homed on another node, as this node's
// vhost holds it.
type remoteQueue struct {
	rq *RemoteQueue
	v  *VHost
}

func (r *remoteQueue) Name() string              { return r.rq.Name }
func (r *remoteQueue) Type() string              { return queue.TypeOf(r.rq.Args) }
func (r *remoteQueue) Kind() string              { return "queue" }
func (r *remoteQueue) Arguments() protocol.Table { return r.rq.Args }
func (r *remoteQueue) Incarnation() uint64       { return r.rq.ID }
func (r *remoteQueue) Elsewhere() string         { return r.rq.Home }
func (r *remoteQueue) Touch()                    {}

func (r *remoteQueue) Record() QueueRecord {
	rq := r.rq
	return QueueRecord{Durable: rq.Durable, AutoDelete: rq.AutoDelete, Exclusive: rq.Exclusive, Args: rq.Args,
		Home: rq.Home, Incarnation: rq.ID}
}

// noCounters are a remote queue's message statistics here: none, its
// home counts them.
var noCounters stats.Meter

func (r *remoteQueue) Figures() (queue.Stats, *stats.Meter, error) {
	if r.rq.Exclusive {
		return queue.Stats{}, &noCounters, nil // its connection's business
	}
	st, err := r.v.remoteStats(r.rq)
	return st, &noCounters, err
}

func (r *remoteQueue) Status() (QuorumView, bool) { return QuorumView{}, false }

func (r *remoteQueue) DeclareCounts() (ready, consumers int, err error) {
	ans, err := r.v.callHome(r.rq, CallQueueCounts, protocol.Table{})
	if err != nil {
		return 0, 0, err
	}
	return int(remote.Int(ans, "messages")), int(remote.Int(ans, "consumers")), nil
}

func (r *remoteQueue) CheckArgs(def QueueDef) error {
	_, err := queue.ParseArgs(def.Name, r.v.Name, def.Args)
	return err
}

// Equivalent compares what this node knows of it; a client's redeclare
// asks whether its home is up first (redeclare).
func (r *remoteQueue) Equivalent(def QueueDef) error { return r.v.equivalentQueue(r.rq.shape(), def) }

// DeleteChecks refuses: a queue homed elsewhere is deleted through its
// home (DeleteReplicated), or by a committed delete.
func (r *remoteQueue) DeleteChecks(bool, bool) (int, error) {
	return 0, reply.Internal("queue '%s' in vhost '%s' is homed on node '%s'", r.rq.Name, r.v.Name, r.rq.Home)
}

func (r *remoteQueue) DeleteReplicated(ifUnused, ifEmpty bool) (int, error) {
	ans, err := r.v.callHome(r.rq, CallQueueDelete, protocol.Table{"if_unused": ifUnused, "if_empty": ifEmpty})
	return int(remote.Int(ans, "messages")), err
}

func (r *remoteQueue) Purge() (int, error) {
	ans, err := r.v.callHome(r.rq, CallQueuePurge, protocol.Table{})
	return int(remote.Int(ans, "messages")), err
}

func (r *remoteQueue) Release()              {}
func (r *remoteQueue) PolicyChanged()        {}
func (r *remoteQueue) Close(time.Time)       {}
func (r *remoteQueue) Here() bool            { return false }
func (r *remoteQueue) Via() *RemoteQueue     { return r.rq }
func (r *remoteQueue) Replicated() bool      { return false }
func (r *remoteQueue) MemberNodes() []string { return nil }
func (r *remoteQueue) Member() bool          { return false }
func (r *remoteQueue) Tidy()                 {}

// Source consumes it through its home.
func (r *remoteQueue) Source() (Source, error) {
	if r.rq.Exclusive || !r.v.cluster.Up(r.rq.Home) {
		return nil, r.v.elsewhere(r.rq)
	}
	return r.v.Host().RemoteSource(r.rq), nil
}

// Enqueue is never asked of it (Here is false: its messages are
// forwarded); it refuses.
func (r *remoteQueue) Enqueue(_ *message.Message, done func(error)) {
	done(reply.Internal("queue '%s' in vhost '%s' is homed on node '%s'", r.rq.Name, r.v.Name, r.rq.Home))
}

func (r *remoteQueue) HandleCall(string, protocol.Table) (protocol.Table, error) {
	return nil, reply.NotFound("no queue '%s' in vhost '%s'", r.rq.Name, r.v.Name)
}

// homeDown is RabbitMQ's answer for a queue whose node is unreachable.
func (v *VHost) homeDown(rq *RemoteQueue) error {
	kind := "queue"
	if rq.Durable {
		kind = "durable queue"
	}
	return reply.NotFound("home node '%s' of %s '%s' in vhost '%s' is down or inaccessible", rq.Home, kind, rq.Name, v.Name)
}

// elsewhere refuses what needs a queue on this node for one homed on
// another.
func (v *VHost) elsewhere(rq *RemoteQueue) error {
	if rq.Exclusive {
		return v.locked(rq.Name)
	}
	if !v.cluster.Up(rq.Home) {
		return v.homeDown(rq)
	}
	return reply.NotFound("queue '%s' in vhost '%s' is on node '%s': consume from it and get from it through that node", rq.Name, v.Name, rq.Home)
}

// callHome asks a RemoteQueue's home node to carry out op on it.
func (v *VHost) callHome(rq *RemoteQueue, op string, req protocol.Table) (protocol.Table, error) {
	if rq.Exclusive {
		return nil, v.locked(rq.Name)
	}
	if !v.cluster.Up(rq.Home) {
		return nil, v.homeDown(rq)
	}
	req["op"], req["vhost"], req["name"], req["id"], req["from"] = op, v.Name, rq.Name, int64(rq.ID), v.self()
	ans, err := v.cluster.Call(rq.Home, req)
	if err != nil {
		if reply.As(err).Code == protocol.InternalError {
			return nil, v.homeDown(rq)
		}
		return nil, err
	}
	return ans, nil
}

// remoteStats asks a queue's home for its depth.
func (v *VHost) remoteStats(rq *RemoteQueue) (queue.Stats, error) {
	ans, err := v.callHome(rq, CallQueueCounts, protocol.Table{})
	if err != nil {
		return queue.Stats{}, err
	}
	f := func(k string) float64 { x, _ := ans[k].(float64); return x }
	return queue.Stats{Ready: int(remote.Int(ans, "messages")), ReadyBytes: int64(remote.Int(ans, "bytes")), Unacked: int(remote.Int(ans, "unacked")),
		Consumers: int(remote.Int(ans, "consumers")), ReadyRate: f("ready_rate"), UnackedRate: f("unacked_rate")}, nil
}
