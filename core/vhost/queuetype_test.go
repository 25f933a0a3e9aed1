package vhost_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/quorumqueue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/streamqueue"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// TestQueueAdaptersAnswerForTheirType: a stream and a quorum queue,
// declared and then reached through the vhost's calls that take a queue
// by name, each answer for its own type; DeclareQueue, which wants a
// classic queue, refuses both by type (it once dereferenced a stream's
// missing home).
func TestQueueAdaptersAnswerForTheirType(t *testing.T) {
	st := memStore(t)
	groups := cluster.NewGroups(zerolog.Nop())
	t.Cleanup(groups.Stop)
	types := queuetype.NewTypes(queue.Quorum, classicqueue.Type{}, quorumqueue.Type{}, streamqueue.Type{})
	v := newVHost(t, vhost.Config{QueueTypes: types, Store: st, Groups: groups})
	for _, c := range []struct{ name, typ, kind string }{
		{"s", "stream", "stream"},
		{"qq", "quorum", "quorum queue"},
	} {
		def := topology.QueueDef{Name: c.name, Durable: true, Args: protocol.Table{"x-queue-type": c.typ}}
		if _, err := v.Declare(def, false); err != nil {
			t.Fatalf("declare %s: %v", c.typ, err)
		}
		_, _, err := v.DeclareQueue(topology.QueueDef{Name: c.name}, true)
		var re *reply.Error
		if !errors.As(err, &re) || re.Code != protocol.PreconditionFailed || !strings.Contains(err.Error(), "is a "+c.kind) {
			t.Errorf("DeclareQueue of a %s: %v", c.kind, err)
		}
		info, ok := v.QueueInfo(c.name)
		if !ok || info.Type != c.typ {
			t.Errorf("QueueInfo of a %s: %+v, %v", c.kind, info.QueueEntry, ok)
		}
		if _, err := v.DeleteQueue(c.name, nil, false, false); err != nil {
			t.Fatalf("delete %s: %v", c.typ, err)
		}
		if v.HasQueue(c.name) {
			t.Errorf("the %s is still there after its delete", c.kind)
		}
	}
}
