package classicqueue_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// newVHost is a vhost that serves classic queues, on st when it is set.
func newVHost(t *testing.T, st *storage.Store) *vhost.VHost {
	t.Helper()
	c := vhost.Config{Name: "/", Types: exchange.NewRegistry(), Logger: zerolog.Nop(),
		QueueTypes: queuetype.NewTypes(queue.Quorum, classicqueue.Type{})}
	if st != nil {
		c.Store = st
	}
	v := vhost.New(c)
	t.Cleanup(v.Close)
	return v
}

// openStore opens the store on fs and recovers it, keeping the queues of
// keep; it returns the levels recovery counted for each.
func openStore(t *testing.T, fs vfs.FS, keep map[uint64]bool) (*storage.Store, map[uint64][]storage.Level) {
	t.Helper()
	st, err := storage.Open("data", storage.Options{FS: fs, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Recover(keep)
	if err != nil {
		t.Fatal(err)
	}
	return st, rec.Queues
}

func code(err error) uint16 {
	var re *reply.Error
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func publish(t *testing.T, v *vhost.VHost, key, body string) vhost.Outcome {
	t.Helper()
	p := protocol.Properties{Flags: protocol.FlagDeliveryMode, DeliveryMode: 2}
	props, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.New("", key, p.Flags, props, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	x, err := v.Exchange("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := v.Publish(x, m, &vhost.RouteBuffers{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func classic(t *testing.T, v *vhost.VHost, name string) *queue.Queue {
	t.Helper()
	dq, err := v.Queue(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, ok := classicqueue.Of(dq)
	if !ok {
		t.Fatalf("%s is a %s", name, dq.Kind())
	}
	return q
}

// TestDeclare: what a declare of a classic queue answers, as RabbitMQ
// 3.10.8 does: an exclusive queue is listed non-durable whatever the flag
// said, and a redeclare with either value matches; another connection
// gets 405 for it; a redeclare that differs in an argument gets 406; a
// queue of another type of the same name is refused by DeclareQueue.
func TestDeclare(t *testing.T) {
	v := newVHost(t, nil)
	owner, other := new(int), new(int)
	d, err := v.Declare(topology.QueueDef{Name: "mine", Durable: true, Exclusive: true, Owner: owner}, false)
	if err != nil || !d.Created || d.Type() != queue.Classic {
		t.Fatalf("declare: %+v, %v", d, err)
	}
	if info, _ := v.QueueInfo("mine"); info.Durable || !info.Exclusive {
		t.Fatalf("listed %+v, want exclusive and not durable", info)
	}
	for _, durable := range []bool{false, true} {
		if d, err := v.Declare(topology.QueueDef{Name: "mine", Durable: durable, Exclusive: true, Owner: owner}, false); err != nil || d.Created {
			t.Fatalf("redeclare durable=%v: %+v, %v", durable, d, err)
		}
	}
	if _, err := v.Declare(topology.QueueDef{Name: "mine", Exclusive: true, Owner: other}, false); code(err) != protocol.ResourceLocked {
		t.Fatalf("another connection's redeclare: %v", err)
	}
	if _, err := v.Declare(topology.QueueDef{Name: "mine", Owner: other}, true); code(err) != protocol.ResourceLocked {
		t.Fatalf("another connection's passive declare: %v", err)
	}
	if _, err := v.Queue("mine", other); code(err) != protocol.ResourceLocked {
		t.Fatalf("another connection's use: %v", err)
	}

	if _, err := v.Declare(topology.QueueDef{Name: "q", Durable: true, Args: protocol.Table{"x-max-length": int64(3)}}, false); err != nil {
		t.Fatal(err)
	}
	_, err = v.Declare(topology.QueueDef{Name: "q", Durable: true, Args: protocol.Table{"x-max-length": int64(4)}}, false)
	if code(err) != protocol.PreconditionFailed {
		t.Fatalf("a redeclare with another x-max-length: %v", err)
	}
	if _, err := v.Declare(topology.QueueDef{Name: "q", Durable: true, Args: protocol.Table{"x-max-length": "three"}}, false); code(err) != protocol.PreconditionFailed {
		t.Fatalf("a redeclare with a bad argument: %v", err)
	}

	// A vhost that serves no classic queue refuses the declare, by name.
	bare := vhost.New(vhost.Config{Name: "/", Types: exchange.NewRegistry(), Logger: zerolog.Nop()})
	t.Cleanup(bare.Close)
	if _, err := bare.Declare(topology.QueueDef{Name: "q"}, false); code(err) != protocol.InternalError {
		t.Fatalf("a vhost without the type: %v", err)
	}
}

// TestDroppedQueuesLeaveTheVHost: a queue that drops itself (auto-delete
// once its last consumer left, x-expires, its exclusive owner gone)
// leaves the vhost with its bindings, through Host.Drop.
func TestDroppedQueuesLeaveTheVHost(t *testing.T) {
	v := newVHost(t, nil)
	if _, err := v.Declare(topology.QueueDef{Name: "auto", AutoDelete: true}, false); err != nil {
		t.Fatal(err)
	}
	if err := v.Bind("amq.direct", exchange.Destination{Kind: exchange.ToQueue, Name: "auto"}, "k", nil, nil); err != nil {
		t.Fatal(err)
	}
	c := &consumer{}
	if err := classic(t, v, "auto").Consume(c, nil); err != nil {
		t.Fatal(err)
	}
	classic(t, v, "auto").Cancel(c)
	poll.Until(t, 10*time.Second, "the auto-delete queue gone", func() bool { return !v.HasQueue("auto") })
	if n := len(v.Bindings()); n != 0 {
		t.Fatalf("%d bindings left", n)
	}

	if _, err := v.Declare(topology.QueueDef{Name: "expires", Args: protocol.Table{"x-expires": int64(10)}}, false); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the expired queue gone", func() bool { return !v.HasQueue("expires") })

	owner := new(int)
	if _, err := v.Declare(topology.QueueDef{Name: "excl", Exclusive: true, Owner: owner}, false); err != nil {
		t.Fatal(err)
	}
	v.OwnerGone(owner)
	if v.HasQueue("excl") {
		t.Fatal("the exclusive queue outlived its owner")
	}
}

// TestRestore: a durable queue's persistent messages come back, in their
// order, when the vhost is made again from the store; a transient queue
// does not.
func TestRestore(t *testing.T) {
	fs := vfs.NewMem()
	st, _ := openStore(t, fs, nil)
	v := newVHost(t, st)
	if _, err := v.Declare(topology.QueueDef{Name: "kept", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Declare(topology.QueueDef{Name: "gone"}, false); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 5 {
		body := fmt.Sprintf("m%d", i)
		want = append(want, body)
		if out := publish(t, v, "kept", body); out.Queues != 1 || !out.Stored {
			t.Fatalf("publish: %+v", out)
		}
	}
	synced := make(chan error, 1)
	v.AfterSync(func(err error) { synced <- err })
	if err := poll.Receive(t, 10*time.Second, "the sync", synced); err != nil {
		t.Fatal(err)
	}
	ids := v.QueueIDs()
	if len(ids) != 1 {
		t.Fatalf("store ids %v, want the durable queue's only", ids)
	}
	info, _ := v.QueueInfo("kept")
	v.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, levels := openStore(t, fs, map[uint64]bool{ids[0]: true})
	t.Cleanup(func() { st.Close() })
	w := newVHost(t, st)
	def := topology.QueueDef{Name: "kept", Durable: info.Durable, Args: info.Args}
	if err := w.RestoreQueue(def, ids[0], levels[ids[0]]); err != nil {
		t.Fatal(err)
	}
	q := classic(t, w, "kept")
	var got []string
	for {
		d, _, ok := q.Get(true)
		if !ok {
			break
		}
		got = append(got, string(d.Entry.Msg.Body))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("restored %q, want %q", got, want)
	}
	if w.HasQueue("gone") {
		t.Fatal("the transient queue came back")
	}
}

// TestShare: a queue's incarnation changes once, from 0, and its record
// names it (and its home) from then on.
func TestShare(t *testing.T) {
	v := newVHost(t, nil)
	l, _, err := v.DeclareQueue(topology.QueueDef{Name: "q", Exclusive: true, Owner: new(int)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if l.Incarnation() != 0 || l.Record().Incarnation != 0 {
		t.Fatalf("a new exclusive queue is shared: %d, %+v", l.Incarnation(), l.Record())
	}
	if got := l.Share(5); got != 5 {
		t.Fatalf("first share: %d", got)
	}
	if got := l.Share(7); got != 5 {
		t.Fatalf("second share changed the incarnation to %d", got)
	}
	if rec := l.Record(); rec.Incarnation != 5 || !rec.Exclusive {
		t.Fatalf("record %+v", rec)
	}
}

// consumer takes nothing: it only needs to be there.
type consumer struct{}

func (*consumer) Deliver(queue.Delivery) bool { return false }
func (*consumer) Cancelled()                  {}
func (*consumer) NoAck() bool                 { return false }
func (*consumer) Exclusive() bool             { return false }
