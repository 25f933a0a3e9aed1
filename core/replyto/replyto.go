// Package replyto keeps direct reply-to's tokens, as RabbitMQ has them: a
// client consumes (no-ack) from the pseudo-queue amq.rabbitmq.reply-to,
// publishes requests whose reply_to is that name, and its channel rewrites
// it to a token naming the channel. A reply published to the default
// exchange with the token as its routing key goes straight to that
// channel, never through a queue (core/vhost routes it).
//
// A token names the node its channel is on, so that a reply published on
// another node of a cluster is forwarded there, and a secret, so that it
// cannot be guessed. Tokens holds one vhost's tokens on this node; its
// lock is a leaf, released before a reply is handed over.
package replyto

import (
	"crypto/rand"
	"encoding/base64"
	"strings"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/internal/lockorder"
)

// Queue is the pseudo-queue's name.
const Queue = "amq.rabbitmq.reply-to"

// prefix begins every token.
const prefix = Queue + "."

// local stands for the node in the tokens of a node of its own.
const local = "local"

// Target is a channel consuming from amq.rabbitmq.reply-to.
type Target interface {
	// DeliverReply hands m to the channel's reply consumer; false when
	// it has none any more. It must not block.
	DeliverReply(m *message.Message) bool
}

// IsToken says whether name is a token (the routing key of a reply).
func IsToken(name string) bool { return strings.HasPrefix(name, prefix) }

// Node is the node a token names: "" for a token of a node of its own, or
// one that does not decode.
func Node(token string) string {
	rest := strings.TrimPrefix(token, prefix)
	i := strings.IndexByte(rest, '.')
	if i <= 0 || rest[:i] == local {
		return ""
	}
	node, err := base64.RawURLEncoding.DecodeString(rest[:i])
	if err != nil {
		return ""
	}
	return string(node)
}

// Tokens are a vhost's tokens on this node, by the channels they name.
type Tokens struct {
	node    string // encoded as tokens carry it
	mu      lockorder.Mutex[lockorder.ReplyToTokens]
	targets map[string]Target
}

// NewTokens makes the tokens of a vhost on node ("" on a node of its own).
func NewTokens(node string) *Tokens {
	enc := local
	if node != "" {
		enc = base64.RawURLEncoding.EncodeToString([]byte(node))
	}
	return &Tokens{node: enc, targets: map[string]Target{}}
}

// Register makes a token for a channel that starts consuming from
// amq.rabbitmq.reply-to.
func (r *Tokens) Register(t Target) string {
	var secret [18]byte
	_, _ = rand.Read(secret[:])
	token := prefix + r.node + "." + base64.RawURLEncoding.EncodeToString(secret[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	r.targets[token] = t
	return token
}

// Unregister forgets a token: its channel stopped consuming, or closed.
// Replies to it are unroutable from now on.
func (r *Tokens) Unregister(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.targets, token)
}

// Target is the channel a token names; nil when it names none here.
func (r *Tokens) Target(token string) Target {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.targets[token]
}
