package conn

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

func tags(us []unacked) []uint64 {
	out := make([]uint64, 0, len(us))
	for _, u := range us {
		out = append(out, u.tag)
	}
	return out
}

func TestUnackedListSettles(t *testing.T) {
	var l unackedList
	for tag := uint64(1); tag <= 10; tag++ {
		l.push(unacked{tag: tag})
	}
	steps := []struct {
		tag      uint64
		multiple bool
		want     string // the tags taken, or "refused"
	}{
		{3, false, "[3]"},
		{3, false, "refused"}, // settled already
		{11, false, "refused"},
		// multiple needs the tag itself outstanding, and takes nothing
		// when it is not (RabbitMQ 3.10.8 closes the channel, 406).
		{11, true, "refused"},
		{3, true, "refused"},
		{5, true, "[1 2 4 5]"},
		{5, true, "refused"}, // nothing left up to 5
		{7, false, "[7]"},
		{0, true, "[6 8 9 10]"}, // 0 with multiple: everything
		{0, true, "[]"},         // and on an empty list that is no error
	}
	for _, s := range steps {
		got, ok := l.take(s.tag, s.multiple)
		desc := fmt.Sprint(tags(got))
		if !ok {
			desc = "refused"
		}
		if desc != s.want {
			t.Fatalf("take(%d, multiple=%v) = %s, want %s", s.tag, s.multiple, desc, s.want)
		}
	}
	if l.len() != 0 || l.n != 0 {
		t.Fatalf("%d left, %d entries", l.len(), l.n)
	}
}

// TestUnackedListAgainstAModel settles at random (single tags, multiple,
// out of order) while deliveries keep arriving, so the ring wraps and
// grows in every position; it must agree with a plain list throughout.
func TestUnackedListAgainstAModel(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var l unackedList
	var model []uint64 // outstanding tags, in order
	next := uint64(1)
	for step := range 20000 {
		switch r := rng.Intn(10); {
		case r < 5 || len(model) == 0:
			for range rng.Intn(3) + 1 {
				l.push(unacked{tag: next})
				model = append(model, next)
				next++
			}
		case r < 8:
			tag := model[rng.Intn(len(model))]
			got, ok := l.take(tag, false)
			if !ok || len(got) != 1 || got[0].tag != tag {
				t.Fatalf("step %d: take(%d) = %v %v", step, tag, tags(got), ok)
			}
			model = slices.DeleteFunc(model, func(x uint64) bool { return x == tag })
		default:
			upTo := model[rng.Intn(len(model))]
			got, ok := l.take(upTo, true)
			var want []uint64
			for len(model) > 0 && model[0] <= upTo {
				want, model = append(want, model[0]), model[1:]
			}
			if !ok || !slices.Equal(tags(got), want) {
				t.Fatalf("step %d: take(%d, multiple) = %v, want %v", step, upTo, tags(got), want)
			}
		}
		if l.len() != len(model) {
			t.Fatalf("step %d: %d outstanding, the model has %d", step, l.len(), len(model))
		}
	}
	if all := l.takeAll(); !slices.Equal(tags(all), model) {
		t.Fatalf("takeAll: %v, want %v", tags(all), model)
	}
}

// Settled entries in the middle are swept once they are half the list, so
// a consumer that acks out of order does not grow it without bound.
func TestUnackedListCompacts(t *testing.T) {
	var l unackedList
	for tag := uint64(1); tag <= 100; tag++ {
		l.push(unacked{tag: tag})
	}
	for tag := uint64(2); tag <= 100; tag += 2 {
		if _, ok := l.take(tag, false); !ok {
			t.Fatalf("tag %d refused", tag)
		}
	}
	if l.len() != 50 || l.n > 60 {
		t.Fatalf("%d outstanding in %d entries", l.len(), l.n)
	}
	if !l.has(99) || l.has(98) {
		t.Fatal("has disagrees with what was settled")
	}
	all := l.takeAll()
	if len(all) != 50 || all[0].tag != 1 || all[49].tag != 99 {
		t.Fatalf("takeAll: %v", tags(all))
	}
}

// channelOn builds a channel whose frames are left in its connection's
// outbound buffer for the test to read.
func channelOn() *channel {
	c := &Conn{out: newOutbound(false), frameMax: 131072, consumers: make(map[*consumer]struct{})}
	return &channel{c: c, id: 1, consumers: make(map[string]*consumer)}
}

// sent decodes the methods written to ch's connection since the last call.
func sent(t *testing.T, ch *channel) []protocol.Method {
	t.Helper()
	buf, _, _, _, _ := ch.c.out.take(nil, nil, nil)
	ch.c.out.relieved() // the writer's "written"
	r := protocol.NewFrameReader(bytes.NewReader(buf))
	var dec protocol.MethodDecoder
	var out []protocol.Method
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Type != protocol.FrameMethod {
			continue
		}
		m, err := dec.Decode(f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) { // the decoder reuses its structs
		case *protocol.BasicDeliver:
			copied := *m
			out = append(out, &copied)
		case *protocol.BasicAck:
			copied := *m
			out = append(out, &copied)
		case *protocol.BasicNack:
			copied := *m
			out = append(out, &copied)
		default:
			out = append(out, m)
		}
	}
}

func delivered(t *testing.T, ch *channel) string {
	t.Helper()
	var out []string
	for _, m := range sent(t, ch) {
		if d, ok := m.(*protocol.BasicDeliver); ok {
			out = append(out, fmt.Sprintf("%d%s", d.DeliveryTag, map[bool]string{true: "r"}[d.Redelivered]))
		}
	}
	return fmt.Sprint(out)
}

func addConsumer(t *testing.T, ch *channel, q *queue.Queue, tag string, prefetch uint16) *consumer {
	t.Helper()
	k := &consumer{ch: ch, q: q, tag: tag, prefetch: prefetch}
	ch.consumers[tag] = k
	ch.c.addConsumer(k)
	if err := q.Consume(k, nil); err != nil {
		t.Fatal(err)
	}
	return k
}

func newQueue(t *testing.T, name string) *queue.Queue {
	t.Helper()
	q := queue.New(queue.Config{Name: name, VHost: "/", Settings: queue.DefaultSettings()})
	t.Cleanup(func() { q.Delete(false, false) })
	return q
}

func enqueue(t *testing.T, q *queue.Queue, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		m, err := message.New("", q.Name, 0, nil, []byte("m"))
		if err != nil {
			t.Fatal(err)
		}
		q.Enqueue(m)
	}
}

// Per-consumer prefetch holds deliveries back; settling gives the credit
// back and the queue delivers again, whichever way the message was settled.
func TestPrefetchCreditComesBackOnEverySettlement(t *testing.T) {
	ch := channelOn()
	q := newQueue(t, "q")
	k := addConsumer(t, ch, q, "k", 2)
	enqueue(t, q, 6)
	if got := delivered(t, ch); got != "[1 2]" {
		t.Fatalf("delivered %s, want tags 1 and 2", got)
	}
	if !k.blocked || k.unacked != 2 {
		t.Fatalf("blocked %v with %d unacked", k.blocked, k.unacked)
	}

	steps := []struct {
		name     string
		settle   func() error
		want     string
		ready    int
		consumed int // k.unacked afterwards
	}{
		{"ack", func() error { return ch.ack(1, false) }, "[3]", 3, 2},
		{"reject", func() error { return ch.nack(2, false, false) }, "[4]", 2, 2},
		{"nack multiple", func() error { return ch.nack(4, true, false) }, "[5 6]", 0, 2},
		{"requeue", func() error { return ch.nack(5, false, true) }, "[7r]", 0, 2},
		{"recover", func() error { return ch.recover(true, false) }, "[8r 9r]", 0, 2},
	}
	for _, s := range steps {
		if err := s.settle(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := delivered(t, ch); got != s.want {
			t.Fatalf("%s: delivered %s, want %s", s.name, got, s.want)
		}
		if st := q.Stats(); st.Ready != s.ready || st.Unacked != 2 || k.unacked != s.consumed {
			t.Fatalf("%s: queue ready %d unacked %d, consumer unacked %d", s.name, st.Ready, st.Unacked, k.unacked)
		}
	}
	if err := ch.ack(0, true); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Ready != 0 || st.Unacked != 0 || k.unacked != 0 {
		t.Fatalf("after ack-all: %+v, consumer unacked %d", st, k.unacked)
	}
}

func TestUnknownDeliveryTagIs406(t *testing.T) {
	ch := channelOn()
	q := newQueue(t, "q")
	addConsumer(t, ch, q, "k", 0)
	enqueue(t, q, 1)
	delivered(t, ch)
	for _, settle := range []func() error{
		func() error { return ch.ack(2, false) },
		func() error { return ch.nack(7, false, true) },
		// multiple up to a tag never delivered settles nothing below it
		func() error { return ch.ack(10, true) },
		func() error { return ch.nack(10, true, false) },
	} {
		e := reply.As(settle())
		if e == nil || e.Code != protocol.PreconditionFailed || e.Text == "" {
			t.Fatalf("got %v, want 406", e)
		}
	}
	if e := reply.As(ch.ack(10, true)); e == nil || e.Text != "PRECONDITION_FAILED - unknown delivery tag 10" {
		t.Fatalf("multiple past the last tag: %v", e)
	}
	if err := ch.ack(1, false); err != nil {
		t.Fatalf("the real tag: %v", err)
	}
	if e := reply.As(ch.ack(1, false)); e == nil || e.Text != "PRECONDITION_FAILED - unknown delivery tag 1" {
		t.Fatalf("double ack: %v", e)
	}
}

// basic.qos global=true caps the channel's unacked deliveries across its
// consumers; credit freed on one queue lets another's consumer go on.
func TestGlobalPrefetchSpansConsumers(t *testing.T) {
	ch := channelOn()
	ch.globalPrefetch = 2
	a, b := newQueue(t, "a"), newQueue(t, "b")
	addConsumer(t, ch, a, "ka", 0)
	kb := addConsumer(t, ch, b, "kb", 0)
	enqueue(t, a, 2)
	enqueue(t, b, 1)
	if got := delivered(t, ch); got != "[1 2]" {
		t.Fatalf("delivered %s", got)
	}
	if !kb.blocked {
		t.Fatal("b's consumer not waiting for credit")
	}
	if err := ch.ack(1, false); err != nil {
		t.Fatal(err)
	}
	if got := delivered(t, ch); got != "[3]" {
		t.Fatalf("after an ack on a: delivered %s, want b's message", got)
	}
	if st := b.Stats(); st.Ready != 0 || st.Unacked != 1 {
		t.Fatalf("b: %+v", st)
	}
}

// basic.qos global=false after a global one lifts the channel's limit:
// each consumer then has its own (RabbitMQ 3.10.8 delivers 5 + 5 after
// qos 2 global, qos 5).
func TestPerConsumerQosLiftsTheGlobalOne(t *testing.T) {
	ch := channelOn()
	for _, qos := range []*protocol.BasicQos{{PrefetchCount: 2, Global: true}, {PrefetchCount: 5}} {
		if err := ch.qos(qos); err != nil {
			t.Fatal(err)
		}
	}
	a, b := newQueue(t, "a"), newQueue(t, "b")
	ka := addConsumer(t, ch, a, "ka", ch.prefetch)
	kb := addConsumer(t, ch, b, "kb", ch.prefetch)
	enqueue(t, a, 10)
	enqueue(t, b, 10)
	sent(t, ch)
	if ka.unacked != 5 || kb.unacked != 5 {
		t.Fatalf("consumers hold %d and %d, want 5 each", ka.unacked, kb.unacked)
	}
}

// Closing a channel requeues what it had not settled, in delivery order,
// and stops deliveries to it.
func TestTeardownRequeuesInOrder(t *testing.T) {
	ch := channelOn()
	q := newQueue(t, "q")
	addConsumer(t, ch, q, "k", 3)
	enqueue(t, q, 5)
	delivered(t, ch)
	if err := ch.ack(2, false); err != nil {
		t.Fatal(err)
	}
	ch.teardown()
	if st := q.Stats(); st.Ready != 4 || st.Unacked != 0 || st.Consumers != 0 {
		t.Fatalf("after teardown: %+v", st)
	}
	var got []string
	for {
		d, _, ok := q.Get(true)
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%d%v", d.Entry.Seq, d.Redelivered))
	}
	if fmt.Sprint(got) != "[1true 3true 4true 5false]" {
		t.Fatalf("queue after teardown: %v", got)
	}
}

// Publisher confirms go out in sequence: settled ones coalesce into one
// ack with multiple, a nack goes alone, and one still waiting for the disk
// holds back those after it.
func TestConfirmsCoalesceInOrder(t *testing.T) {
	ch := channelOn()
	ch.confirm.enable()
	for i := 0; i < 5; i++ {
		ch.confirm.add()
	}
	ch.confirm.settle(1, true)
	ch.confirm.settle(2, true)
	ch.confirm.settle(4, false)
	ch.confirm.settle(5, true) // 3 still waits
	if !ch.confirm.pending() {
		t.Fatal("nothing pending after settlements")
	}
	ch.flushConfirms()
	if got := confirmsSent(t, ch); got != "[ack 2+]" {
		t.Fatalf("first flush: %s", got)
	}
	ch.Durable(3, nil)
	if got := confirmsSent(t, ch); got != "[ack 3+ nack 4 ack 5+]" {
		t.Fatalf("after 3 synced: %s", got)
	}
	ch.confirm.add()
	ch.Durable(6, fmt.Errorf("disk full"))
	if got := confirmsSent(t, ch); got != "[nack 6]" {
		t.Fatalf("failed sync: %s", got)
	}
	// Once the channel is gone, late settlements send nothing.
	ch.confirm.add()
	ch.confirm.close()
	ch.Durable(7, nil)
	if got := confirmsSent(t, ch); got != "[]" {
		t.Fatalf("after close: %s", got)
	}
}

func confirmsSent(t *testing.T, ch *channel) string {
	t.Helper()
	var out []string
	for _, m := range sent(t, ch) {
		switch m := m.(type) {
		case *protocol.BasicAck:
			out = append(out, fmt.Sprintf("ack %d%s", m.DeliveryTag, map[bool]string{true: "+"}[m.Multiple]))
		case *protocol.BasicNack:
			out = append(out, fmt.Sprintf("nack %d%s", m.DeliveryTag, map[bool]string{true: "+"}[m.Multiple]))
		}
	}
	return fmt.Sprint(out)
}
