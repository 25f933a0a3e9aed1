package vhost

import (
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// A classic queue homed on another node is, on this node, a Queue its
// type makes (RemoteType; core/classicqueue's Remote): routing reaches it
// and forwards its messages home (Via), and what needs its state is a
// call to its home (callHome), answered 404 "home node ... is down or
// inaccessible", as RabbitMQ answers, when that node cannot be reached.

// homeDown is RabbitMQ's answer for a queue whose node is unreachable.
func (v *VHost) homeDown(rq *queuetype.RemoteQueue) error {
	kind := "queue"
	if rq.Durable {
		kind = "durable queue"
	}
	return reply.NotFound("home node '%s' of %s '%s' in vhost '%s' is down or inaccessible", rq.Home, kind, rq.Name, v.Name)
}

// elsewhere refuses what needs a queue on this node for one homed on
// another.
func (v *VHost) elsewhere(rq *queuetype.RemoteQueue) error {
	if rq.Exclusive {
		return v.locked(rq.Name)
	}
	if !v.cluster.Up(rq.Home) {
		return v.homeDown(rq)
	}
	return reply.NotFound("queue '%s' in vhost '%s' is on node '%s': consume from it and get from it through that node", rq.Name, v.Name, rq.Home)
}

// callHome asks a RemoteQueue's home node to carry out op on it.
func (v *VHost) callHome(rq *queuetype.RemoteQueue, op string, req protocol.Table) (protocol.Table, error) {
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
func (v *VHost) remoteStats(rq *queuetype.RemoteQueue) (queue.Stats, error) {
	ans, err := v.callHome(rq, queuetype.CallQueueCounts, protocol.Table{})
	if err != nil {
		return queue.Stats{}, err
	}
	f := func(k string) float64 { x, _ := ans[k].(float64); return x }
	return queue.Stats{Ready: int(remote.Int(ans, "messages")), ReadyBytes: int64(remote.Int(ans, "bytes")), Unacked: int(remote.Int(ans, "unacked")),
		Consumers: int(remote.Int(ans, "consumers")), MaxPriority: int(remote.Int(ans, "max_priority")),
		ReadyRate: f("ready_rate"), UnackedRate: f("unacked_rate")}, nil
}
