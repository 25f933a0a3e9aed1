package vhost

import (
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// Consuming: what a channel reads a queue through (a Source), and the
// vhost's share of consuming across nodes (core/remote: a Source for a
// queue on another node, and the consumers other nodes have here).

// Source returns what a client on this node reads the named queue
// through: the queue itself, or a remote.Source for one homed on another
// node. The checks are Queue's.
func (v *VHost) Source(name string, owner any) (queuetype.Source, error) {
	if !v.HasQueue(name) {
		v.caughtUp() // declared through another node a moment ago
	}
	t := v.lookup(name)
	if t == nil {
		return nil, reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
	}
	if err := v.checkOwner(t, owner); err != nil {
		return nil, err
	}
	return t.Source()
}

// ConsumerArgs checks basic.consume's arguments for the named queue as
// RabbitMQ 3.10.8 does for its type (queue.CheckConsumeArgs: 406 for an
// x-priority that is not an integer, an x-cancel-on-ha-failover that is
// not a boolean, an argument another type takes) and returns the
// consumer's x-priority, 0 when it has none. RabbitMQ takes a priority of
// any size, and so does Warren, up to a long's (AMQP's widest integer):
// 2^40 comes before 2^31-1.
func (v *VHost) ConsumerArgs(queueName string, args protocol.Table) (int, error) {
	if err := queue.CheckConsumeArgs(queueName, v.Name, v.queueType(queueName), args); err != nil {
		return 0, err
	}
	n, _ := queue.Integer(args["x-priority"])
	return int(n), nil
}

// queueType is the named queue's type, classic when it is not known.
func (v *VHost) queueType(name string) string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if t := v.queues[name]; t != nil {
		return t.Type()
	}
	return queue.Classic
}

// CheckConsumers ends the remote consumers of nodes that cannot be
// reached, cancels this node's consumers of queues whose home cannot be,
// and has the quorum queues this node leads end the consumers of members
// that cannot be; the broker calls it now and then.
func (v *VHost) CheckConsumers() {
	if v.cluster == nil {
		return
	}
	v.consuming.Check()
	for _, t := range v.queueList() {
		t.Tidy()
	}
}

// SourceBase is the first remote.Source id of this run: the homes of
// queues forget the consumers this node had before (ForgetConsumersOf).
func (v *VHost) SourceBase() uint64 { return v.consuming.Base() }

// ForgetConsumersOf ends the remote consumers node had before its current
// run, whose ids are below before: it restarted, and has none of them.
func (v *VHost) ForgetConsumersOf(node string, before uint64) {
	v.consuming.ForgetConsumersOf(node, before)
}
