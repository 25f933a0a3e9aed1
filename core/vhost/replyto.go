package vhost

import (
	"crypto/rand"
	"encoding/base64"
	"strings"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
)

// Direct reply-to, as RabbitMQ has it: a client consumes (no-ack) from the
// pseudo-queue amq.rabbitmq.reply-to, publishes requests whose reply_to is
// that name, and the channel rewrites it to a token naming the channel.
// A reply published to the default exchange with the token as its routing
// key goes straight to that channel, never through a queue. Tokens name
// the node their channel is on, so a reply published on another node of a
// cluster is forwarded there.

// ReplyToQueue is the pseudo-queue's name.
const ReplyToQueue = "amq.rabbitmq.reply-to"

// replyTokenPrefix begins every token.
const replyTokenPrefix = ReplyToQueue + "."

// ReplyTarget is a channel consuming from amq.rabbitmq.reply-to.
type ReplyTarget interface {
	// DeliverReply hands m to the channel's reply consumer; false when
	// it has none any more. It must not block.
	DeliverReply(m *message.Message) bool
}

// IsReplyToken says whether name is a direct reply-to token (the
// routing key of a reply).
func IsReplyToken(name string) bool { return strings.HasPrefix(name, replyTokenPrefix) }

// RegisterReply makes a token for a channel that starts consuming from
// amq.rabbitmq.reply-to.
func (v *VHost) RegisterReply(t ReplyTarget) string {
	var secret [18]byte
	_, _ = rand.Read(secret[:])
	node := "local"
	if v.cluster != nil {
		node = base64.RawURLEncoding.EncodeToString([]byte(v.cluster.Node()))
	}
	token := replyTokenPrefix + node + "." + base64.RawURLEncoding.EncodeToString(secret[:])
	v.replyMu.Lock()
	defer v.replyMu.Unlock()
	if v.replies == nil {
		v.replies = map[string]ReplyTarget{}
	}
	v.replies[token] = t
	return token
}

// UnregisterReply forgets a token: its channel stopped consuming, or
// closed. Replies to it are unroutable from now on.
func (v *VHost) UnregisterReply(token string) {
	v.replyMu.Lock()
	defer v.replyMu.Unlock()
	delete(v.replies, token)
}

// replyTarget is the channel a token of this node names.
func (v *VHost) replyTarget(token string) ReplyTarget {
	v.replyMu.Lock()
	defer v.replyMu.Unlock()
	return v.replies[token]
}

// replyNode is the node a token names ("" for this one, or one that does
// not decode).
func (v *VHost) replyNode(token string) string {
	if v.cluster == nil {
		return ""
	}
	rest := strings.TrimPrefix(token, replyTokenPrefix)
	i := strings.IndexByte(rest, '.')
	if i <= 0 {
		return ""
	}
	node, err := base64.RawURLEncoding.DecodeString(rest[:i])
	if err != nil || string(node) == v.cluster.Node() {
		return ""
	}
	return string(node)
}

// ReplyExists says whether queue.declare of name (the pseudo-queue or a
// token) succeeds: the pseudo-queue always exists, a token while its
// channel consumes. A token of another node is taken as existing while
// that node is up (asking it would cost a round trip per declare).
func (v *VHost) ReplyExists(name string) bool {
	if name == ReplyToQueue {
		return true
	}
	if node := v.replyNode(name); node != "" {
		return v.cluster.Up(node)
	}
	return v.replyTarget(name) != nil
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
	if t := v.replyTarget(token); t != nil && t.DeliverReply(m) {
		return Outcome{Queues: 1}
	}
	return Outcome{}
}
