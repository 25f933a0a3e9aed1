package vhost

import (
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/replyto"
)

// Direct reply-to (core/replyto): the vhost routes a reply published to
// the default exchange with a token as its routing key to the token's
// channel, on this node or forwarded to the token's.

// Replies are the vhost's direct reply-to tokens on this node.
func (v *VHost) Replies() *replyto.Tokens { return v.replies }

// nodeOf is the cluster's name for this node, "" on a node of its own.
func nodeOf(c queuetype.Cluster) string {
	if c == nil {
		return ""
	}
	return c.Node()
}

// replyNode is the node a token names when that is another ("" for this
// one, or one that does not decode).
func (v *VHost) replyNode(token string) string {
	if n := replyto.Node(token); v.cluster != nil && n != v.cluster.Node() {
		return n
	}
	return ""
}

// ReplyExists says whether queue.declare of name (the pseudo-queue or a
// token) succeeds: the pseudo-queue always exists, a token while its
// channel consumes. A token of another node is taken as existing while
// that node is up (asking it would cost a round trip per declare).
func (v *VHost) ReplyExists(name string) bool {
	if name == replyto.Queue {
		return true
	}
	if node := v.replyNode(name); node != "" {
		return v.cluster.Up(node)
	}
	return v.replies.Target(name) != nil
}

// ReplyAbsent is the 404 for a token whose channel is gone.
func (v *VHost) ReplyAbsent(name string) error {
	return reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
}

// publishReply delivers a reply published to the default exchange with a
// token as its routing key: to the channel on this node, or forwarded to
// the token's node. The outcome is unrouted when the channel is gone
// here (a mandatory reply comes back); a forwarded one counts as routed.
func (v *VHost) publishReply(token string, m *message.Message) Outcome {
	if node := v.replyNode(token); node != "" {
		if !v.cluster.Up(node) {
			return Outcome{}
		}
		m.Pin() // the forward keeps it, uncounted (message.Bodies)
		v.cluster.Forward(node, v.Name, []string{token}, m, true, func(error) {})
		return Outcome{Queues: 1}
	}
	if t := v.replies.Target(token); t != nil && t.DeliverReply(m) {
		return Outcome{Queues: 1}
	}
	return Outcome{}
}
