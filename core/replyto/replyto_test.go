package replyto

import (
	"testing"

	"github.com/warrenmq/warren/core/message"
)

type channel struct{ got int }

func (c *channel) DeliverReply(*message.Message) bool { c.got++; return true }

// A token names its node and its channel until the channel unregisters
// it; two tokens never collide.
func TestTokens(t *testing.T) {
	for _, node := range []string{"", "rabbit@n1", "n.2"} {
		ts := NewTokens(node)
		ch := &channel{}
		a, b := ts.Register(ch), ts.Register(ch)
		if a == b || !IsToken(a) || IsToken(Queue) || IsToken("amq.gen-x") {
			t.Fatalf("node %q: tokens %q, %q", node, a, b)
		}
		if got := Node(a); got != node {
			t.Errorf("Node(%q) = %q, want %q", a, got, node)
		}
		if ts.Target(a) != ch {
			t.Errorf("node %q: the token names no channel", node)
		}
		ts.Unregister(a)
		if ts.Target(a) != nil || ts.Target(b) != ch {
			t.Errorf("node %q: Unregister forgot the wrong token", node)
		}
	}
	for _, bad := range []string{Queue + ".", Queue + "..x", Queue + ".!!.x", "other"} {
		if n := Node(bad); n != "" {
			t.Errorf("Node(%q) = %q, want none", bad, n)
		}
	}
}
