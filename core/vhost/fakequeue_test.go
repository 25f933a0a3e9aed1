package vhost_test

import (
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// fakeType is a queue type that keeps its messages in a slice: the least
// a type is, to show that the vhost reaches a queue only through its
// registration and the Queue interface. It is registered under the name
// of a type the declare arguments accept ("quorum").
type fakeType struct{ released chan string }

func (fakeType) Name() string                                                             { return queue.Quorum }
func (fakeType) Check(queuetype.Host, topology.QueueDef) error                            { return nil }
func (fakeType) ApplyDeclare(queuetype.Host, topology.QueueDef) error                     { return nil }
func (fakeType) Restore(queuetype.Host, topology.QueueDef, uint64, []storage.Level) error { return nil }
func (t fakeType) DeclareReplicated(h queuetype.Host, def topology.QueueDef) (queuetype.Queue, bool, error) {
	return t.Declare(h, def)
}

func (t fakeType) Declare(h queuetype.Host, def topology.QueueDef) (queuetype.Queue, bool, error) {
	if q := h.Lookup(def.Name); q != nil {
		return q, false, nil
	}
	q := &fakeQueue{name: def.Name, args: def.Args, released: t.released}
	h.Register(q)
	return q, true, nil
}

type fakeQueue struct {
	name     string
	args     protocol.Table
	released chan string
	counters stats.Meter

	mu   sync.Mutex
	msgs []*message.Message
}

func (q *fakeQueue) Name() string              { return q.name }
func (q *fakeQueue) Type() string              { return queue.Quorum }
func (q *fakeQueue) Kind() string              { return "fake queue" }
func (q *fakeQueue) Arguments() protocol.Table { return q.args }
func (q *fakeQueue) Incarnation() uint64       { return 1 }
func (q *fakeQueue) Record() topology.QueueRecord {
	return topology.QueueRecord{Durable: true, Args: q.args}
}
func (q *fakeQueue) Status() (queuetype.QuorumView, bool)                      { return queuetype.QuorumView{}, false }
func (q *fakeQueue) Touch()                                                    {}
func (q *fakeQueue) CheckArgs(topology.QueueDef) error                         { return nil }
func (q *fakeQueue) Equivalent(topology.QueueDef) error                        { return nil }
func (q *fakeQueue) DeleteReplicated(bool, bool) (int, error)                  { return 0, nil }
func (q *fakeQueue) Release()                                                  { q.released <- q.name }
func (q *fakeQueue) PolicyChanged()                                            {}
func (q *fakeQueue) Close(time.Time)                                           {}
func (q *fakeQueue) Source() (queuetype.Source, error)                         { return nil, nil }
func (q *fakeQueue) Here() bool                                                { return true }
func (q *fakeQueue) Elsewhere() string                                         { return "" }
func (q *fakeQueue) Via() *queuetype.RemoteQueue                               { return nil }
func (q *fakeQueue) HandleCall(string, protocol.Table) (protocol.Table, error) { return nil, nil }
func (q *fakeQueue) Replicated() bool                                          { return false }
func (q *fakeQueue) MemberNodes() []string                                     { return nil }
func (q *fakeQueue) Member() bool                                              { return true }
func (q *fakeQueue) Tidy()                                                     {}

func (q *fakeQueue) depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}

func (q *fakeQueue) Figures() (queue.Stats, *stats.Meter, error) {
	return queue.Stats{Ready: q.depth()}, &q.counters, nil
}

func (q *fakeQueue) DeclareCounts() (int, int, error) { return q.depth(), 0, nil }

func (q *fakeQueue) DeleteChecks(bool, bool) (int, error) { return q.depth(), nil }

func (q *fakeQueue) Purge() (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.msgs)
	q.msgs = nil
	return n, nil
}

func (q *fakeQueue) Enqueue(m *message.Message, done func(error)) {
	q.mu.Lock()
	q.msgs = append(q.msgs, m)
	q.mu.Unlock()
	done(nil)
}

// TestAQueueTypeIsOneAdapterAndOneRegistration: a type the vhost has
// never heard of, registered under a name, is declared, routed to by the
// default exchange and by a binding, listed, counted, purged and deleted
// through the vhost's ordinary calls.
func TestAQueueTypeIsOneAdapterAndOneRegistration(t *testing.T) {
	released := make(chan string, 1)
	types := queuetype.NewTypes(queue.Quorum, classicqueue.Type{}, fakeType{released: released})
	v := newVHost(t, vhost.Config{QueueTypes: types})

	d, err := v.Declare(topology.QueueDef{Name: "f", Durable: true, Args: protocol.Table{"x-queue-type": "quorum"}}, false)
	if err != nil || !d.Created || d.Type() != queue.Quorum {
		t.Fatalf("declare: %+v, %v", d, err)
	}
	if err := v.Bind("amq.direct", exchange.Destination{Kind: exchange.ToQueue, Name: "f"}, "k", nil, nil); err != nil {
		t.Fatal(err)
	}
	var r vhost.RouteBuffers
	for _, c := range []struct{ exchange, key string }{{"", "f"}, {"amq.direct", "k"}} {
		x, err := v.Exchange(c.exchange)
		if err != nil {
			t.Fatal(err)
		}
		m, err := message.New(c.exchange, c.key, 0, nil, []byte("body"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := v.Publish(x, m, &r)
		if err != nil || out.Forwarded == nil {
			t.Fatalf("publish to %q %q: %+v, %v: not handed to the queue", c.exchange, c.key, out, err)
		}
		confirmed := make(chan error, 1)
		out.Forwarded.Then(func(err error) { confirmed <- err })
		if err := <-confirmed; err != nil {
			t.Fatalf("publish to %q %q: %v", c.exchange, c.key, err)
		}
	}
	info, ok := v.QueueInfo("f")
	if !ok || info.Type != queue.Quorum || info.Ready != 2 {
		t.Fatalf("listing: %+v, %v; want the queue with its 2 messages", info, ok)
	}
	if ready, _, err := v.Counts(d); err != nil || ready != 2 {
		t.Fatalf("declare-ok counts: %d, %v", ready, err)
	}
	if n, err := v.PurgeQueue("f", nil); err != nil || n != 2 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, err := v.DeleteQueue("f", nil, false, false); err != nil {
		t.Fatal(err)
	}
	if got := <-released; got != "f" {
		t.Fatalf("released %q", got)
	}
	if v.HasQueue("f") || len(v.Bindings()) != 0 {
		t.Fatalf("after the delete: queue there %v, bindings %v", v.HasQueue("f"), v.Bindings())
	}
}
