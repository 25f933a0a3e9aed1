package tests

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	samqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/internal/poll"
	wire "github.com/warrenmq/warren/protocol/stream"
)

// Single active consumers and filtering, the stream features of RabbitMQ
// 3.11 and 3.13, driven by the official Go stream client, which turns
// them on by the version Warren gives.

// sacUpdates records the ConsumerUpdates a client's consumers hear, in
// order, and answers each with the offset its consumer asks for.
type sacUpdates struct {
	mu    sync.Mutex
	heard []string // "name:stream:active" or "name:stream:inactive"
}

func (u *sacUpdates) update(name string, from stream.OffsetSpecification) stream.ConsumerUpdate {
	return func(streamName string, active bool) stream.OffsetSpecification {
		u.mu.Lock()
		defer u.mu.Unlock()
		state := "inactive"
		if active {
			state = "active"
		}
		u.heard = append(u.heard, name+":"+streamName+":"+state)
		return from
	}
}

func (u *sacUpdates) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.heard)
}

// Three consumers of one name on one stream: the first reads, the others
// wait; when it goes the next takes over from the offset its update
// answers with, and the third still waits. The listing shows who reads.
func TestStreamProtocolSingleActiveConsumer(t *testing.T) {
	s := startWarren(t)
	env := streamEnv(t, s)
	name := streamName(t, s, "sac")
	p := declaredProducer(t, env, name)
	sendConfirmed(t, p, "a", 10)

	var updates sacUpdates
	var got [3]collector
	var consumers [3]*stream.Consumer
	for i := range consumers {
		from := stream.OffsetSpecification{}.First()
		if i == 1 {
			from = stream.OffsetSpecification{}.Offset(5) // where it takes over
		}
		var err error
		consumers[i], err = env.NewConsumer(name, got[i].handle, stream.NewConsumerOptions().
			SetConsumerName("group").SetManualCommit().
			SetSingleActiveConsumer(stream.NewSingleActiveConsumer(updates.update(fmt.Sprint("c", i), from))))
		if err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
	}
	poll.Until(t, 10*time.Second, "the first consumer reads the ten", func() bool { return got[0].count() == 10 })
	states := func() []string {
		var out []string
		for _, c := range s.b.Streams().Consumers() {
			if c.Stream == name {
				out = append(out, c.ActivityStatus())
			}
		}
		slices.Sort(out)
		return out
	}
	if st := states(); !slices.Equal(st, []string{"single_active", "waiting", "waiting"}) {
		t.Fatalf("activity statuses %v, want one single_active and two waiting", st)
	}

	if err := consumers[0].Close(); err != nil {
		t.Fatal(err)
	}
	sendConfirmed(t, p, "b", 5)
	poll.Until(t, 10*time.Second, "the second consumer takes over from offset 5", func() bool { return got[1].count() == 10 })
	got[1].mu.Lock()
	first := got[1].offsets[0]
	got[1].mu.Unlock()
	if first != 5 {
		t.Fatalf("the second consumer started at %d, want 5 (its update's answer)", first)
	}
	if n := got[2].count(); n != 0 {
		t.Fatalf("the third consumer, waiting, got %d messages", n)
	}
	if n := got[0].count(); n != 10 {
		t.Fatalf("the first consumer, gone, got %d messages, want its 10", n)
	}
	// The first heard it was active and nothing else; the second heard it
	// once it took over; the third heard nothing.
	if h := updates.list(); !slices.Equal(h, []string{"c0:" + name + ":active", "c1:" + name + ":active"}) {
		t.Fatalf("updates heard %v", h)
	}
	_ = consumers[1].Close()
	poll.Until(t, 10*time.Second, "the third consumer takes over", func() bool { return got[2].count() == 15 })
	_ = consumers[2].Close()
}

// A super stream's partitions spread over its single active consumers by
// the partition's index: with two consumers the first reads partitions 0
// and 2 and the second partition 1; when the second comes, the first
// steps down from partition 1 before the second is told to read it; when
// the second goes, the first reads all three again.
func TestStreamProtocolSuperStreamSingleActiveConsumers(t *testing.T) {
	s := startStreams(t)
	needsRabbitMQ(t, s, "3.13")
	env := streamEnv(t, s)
	super := streamName(t, s, "invoices")
	if err := env.DeclareSuperStream(super, stream.NewPartitionsOptions(3)); err != nil {
		t.Fatal(err)
	}
	partitions, err := env.QueryPartitions(super)
	if err != nil || len(partitions) != 3 {
		t.Fatalf("partitions %v, %v", partitions, err)
	}
	publish := func(prefix string) {
		for _, part := range partitions {
			p, err := env.NewProducer(part, nil)
			if err != nil {
				t.Fatal(err)
			}
			sendConfirmed(t, p, prefix, 5)
			_ = p.Close()
		}
	}

	var updates sacUpdates
	type byPartition struct {
		mu sync.Mutex
		n  map[string]int
	}
	handle := func(b *byPartition) stream.MessagesHandler {
		return func(ctx stream.ConsumerContext, _ *samqp.Message) {
			b.mu.Lock()
			b.n[ctx.Consumer.GetStreamName()]++
			b.mu.Unlock()
		}
	}
	counts := func(b *byPartition) map[string]int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return copyCounts(b.n)
	}
	newConsumer := func(who string, b *byPartition) *stream.SuperStreamConsumer {
		c, err := env.NewSuperStreamConsumer(super, handle(b), stream.NewSuperStreamConsumerOptions().
			SetConsumerName("billing").SetOffset(stream.OffsetSpecification{}.First()).
			SetSingleActiveConsumer(stream.NewSingleActiveConsumer(updates.update(who, stream.OffsetSpecification{}.First()))))
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		return c
	}

	publish("a")
	a := &byPartition{n: map[string]int{}}
	ca := newConsumer("A", a)
	poll.Until(t, 10*time.Second, "A reads every partition", func() bool {
		n := counts(a)
		return n[partitions[0]] == 5 && n[partitions[1]] == 5 && n[partitions[2]] == 5
	})

	b := &byPartition{n: map[string]int{}}
	cb := newConsumer("B", b)
	poll.Until(t, 10*time.Second, "B reads partition 1 from its start", func() bool { return counts(b)[partitions[1]] == 5 })
	publish("b")
	poll.Until(t, 10*time.Second, "A reads partitions 0 and 2, B partition 1", func() bool {
		na, nb := counts(a), counts(b)
		return na[partitions[0]] == 10 && na[partitions[2]] == 10 && nb[partitions[1]] == 10
	})
	if n := counts(a)[partitions[1]]; n != 5 {
		t.Fatalf("A read %d of partition 1, want the 5 from before it stepped down", n)
	}
	if n := counts(b); n[partitions[0]] != 0 || n[partitions[2]] != 0 {
		t.Fatalf("B read partitions it was not given: %v", n)
	}
	// A stepped down from partition 1 before B was told to read it.
	h := updates.list()
	down, up := slices.Index(h, "A:"+partitions[1]+":inactive"), slices.Index(h, "B:"+partitions[1]+":active")
	if down < 0 || up < 0 || down > up {
		t.Fatalf("updates %v: want A's step-down from %s before B's activation", h, partitions[1])
	}

	if err := cb.Close(); err != nil {
		t.Fatal(err)
	}
	publish("c")
	poll.Until(t, 10*time.Second, "A reads partition 1 again once B is gone", func() bool {
		n := counts(a)
		return n[partitions[0]] == 15 && n[partitions[2]] == 15 && n[partitions[1]] >= 10
	})
	_ = ca.Close()
}

func copyCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// A single active consumer needs a name: without one, Subscribe answers
// PRECONDITION_FAILED, as RabbitMQ does.
func TestStreamProtocolSingleActiveConsumerNeedsAName(t *testing.T) {
	s := startStreams(t)
	needsRabbitMQ(t, s, "3.11")
	env := streamEnv(t, s)
	name := streamName(t, s, "sacname")
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatal(err)
	}
	c := dialStream(t, s)
	if code := c.call(&wire.Subscribe{SubscriptionID: 1, Stream: name, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 1,
		Properties: map[string]string{"single-active-consumer": "true"}}); code != wire.CodePreconditionFailed {
		t.Fatalf("a nameless single active consumer: code %v, want PRECONDITION_FAILED", code)
	}
	if code := c.call(&wire.Subscribe{SubscriptionID: 1, Stream: name, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 1,
		Properties: map[string]string{"single-active-consumer": "true", "name": "g"}}); code != wire.CodeOK {
		t.Fatalf("a named single active consumer: code %v", code)
	}
	// It is the group's only member: the server asks where to start.
	for {
		if u, ok := c.next().(*wire.ConsumerUpdate); ok {
			if !u.Active || u.SubscriptionID != 1 {
				t.Fatalf("update %+v, want subscription 1 active", u)
			}
			break
		}
	}
}

// Filtering: a consumer that asks for filter values is sent no chunk
// without one of them, whether the value came with a stream-protocol
// publish (v2) or an AMQP 0-9-1 message's x-stream-filter-value header;
// match-unfiltered asks for messages without a value too.
func TestStreamProtocolFiltering(t *testing.T) {
	s := startStreams(t)
	needsRabbitMQ(t, s, "3.13")
	env := streamEnv(t, s)
	name := streamName(t, s, "filter")
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer(name, stream.NewProducerOptions().SetFilter(stream.NewProducerFilter(func(m message.StreamMessage) string {
		v, _ := m.GetApplicationProperties()["state"].(string)
		return v
	})))
	if err != nil {
		t.Fatal(err)
	}
	sendState := func(state string, n int) {
		confirms := p.NotifyPublishConfirmation()
		var msgs []message.StreamMessage
		for i := range n {
			m := samqp.NewMessage([]byte(fmt.Sprintf("%s-%d", state, i)))
			m.ApplicationProperties = map[string]any{"state": state}
			msgs = append(msgs, m)
		}
		if err := p.BatchSend(msgs); err != nil {
			t.Fatal(err)
		}
		confirmed := 0
		deadline := time.After(10 * time.Second)
		for confirmed < n {
			select {
			case batch := <-confirms:
				confirmed += len(batch)
			case <-deadline:
				t.Fatalf("%d of %d confirmed", confirmed, n)
			}
		}
	}
	// More than a chunk's worth (256) of Alabama, then New York, then
	// messages without a value from a producer without a filter (the Go
	// client v1.8.3 sends a filtering producer's empty value as four
	// bytes it does not count in the frame's size, against any broker).
	sendState("Alabama", 600)
	sendState("New York", 20)
	plain, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	sendConfirmed(t, plain, "", 20)
	// And one over AMQP 0-9-1 with the header.
	_, ch := channel(t, s)
	if err := ch.Publish("", name, false, false, amqp.Publishing{Body: []byte("amqp-ny"), Headers: amqp.Table{"x-stream-filter-value": "New York"}}); err != nil {
		t.Fatal(err)
	}

	consume := func(values []string, matchUnfiltered bool) *collector {
		var c collector
		consumer, err := env.NewConsumer(name, c.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()).
			SetFilter(stream.NewConsumerFilter(values, matchUnfiltered, func(*samqp.Message) bool { return true })))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = consumer.Close() })
		return &c
	}
	ny := consume([]string{"New York"}, false)
	poll.Until(t, 10*time.Second, "every New York message", func() bool {
		return countBodies(ny, "New York-") == 20 && countBodies(ny, "amqp-ny") == 1
	})
	// The first chunks hold Alabama alone and are not sent.
	if n := countBodies(ny, "Alabama-"); n >= 600-256 {
		t.Fatalf("%d Alabama messages sent to a New York consumer: whole Alabama chunks were not skipped", n)
	}
	unfiltered := consume([]string{"Texas"}, true)
	poll.Until(t, 10*time.Second, "the twenty without a value", func() bool { return countUnvalued(unfiltered) == 20 })
	if n := countBodies(unfiltered, "Alabama-"); n >= 600-256 {
		t.Fatalf("%d Alabama messages sent for Texas and unfiltered", n)
	}
}

// countBodies counts c's messages whose body starts with prefix.
func countBodies(c *collector, prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.messages {
		if b := m.GetData(); len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix {
			n++
		}
	}
	return n
}

// countUnvalued counts c's messages without the state property.
func countUnvalued(c *collector) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.messages {
		if _, ok := m.ApplicationProperties["state"]; !ok && len(m.GetData()) > 0 && m.GetData()[0] == '-' {
			n++
		}
	}
	return n
}

// A consumer told to step down that goes without answering lets the
// group's next consumer be chosen all the same: the partition is not
// left without a reader.
func TestStreamProtocolStepDownUnansweredThenGone(t *testing.T) {
	s := startStreams(t)
	needsRabbitMQ(t, s, "3.13")
	env := streamEnv(t, s)
	super := streamName(t, s, "stepdown")
	if err := env.DeclareSuperStream(super, stream.NewPartitionsOptions(2)); err != nil {
		t.Fatal(err)
	}
	partitions, err := env.QueryPartitions(super)
	if err != nil || len(partitions) != 2 {
		t.Fatalf("partitions %v, %v", partitions, err)
	}
	// Partition 1 of a group of two goes to the second to subscribe.
	subscribe := func(c *rawStream) {
		if code := c.call(&wire.Subscribe{SubscriptionID: 1, Stream: partitions[1], Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 1,
			Properties: map[string]string{"single-active-consumer": "true", "name": "g", "super-stream": super}}); code != wire.CodeOK {
			t.Fatalf("subscribe: %v", code)
		}
	}
	update := func(c *rawStream) *wire.ConsumerUpdate {
		for {
			if u, ok := c.next().(*wire.ConsumerUpdate); ok {
				return u
			}
		}
	}
	x, y := dialStream(t, s), dialStream(t, s)
	subscribe(x)
	if u := update(x); !u.Active {
		t.Fatalf("the first consumer: %+v, want active", u)
	}
	subscribe(y)
	if u := update(x); u.Active {
		t.Fatalf("the first consumer, a second come: %+v, want a step-down", u)
	}
	x.nc.Close() // gone without answering
	if u := update(y); !u.Active || u.SubscriptionID != 1 {
		t.Fatalf("the second consumer: %+v, want active", u)
	}
}

// A client that reads Deliver version 2 (it says so in
// ExchangeCommandVersions) gets it, with the stream's committed chunk
// id; one that does not gets version 1.
func TestStreamProtocolDeliverVersion2(t *testing.T) {
	s := startStreams(t)
	needsRabbitMQ(t, s, "3.11")
	_, ch := channel(t, s)
	name := streamName(t, s, "deliver2")
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	// One confirmed at a time: each is a write, and a chunk, of its own.
	for i := range 10 {
		publishConfirmed(t, ch, "", name, amqp.Publishing{Body: []byte(fmt.Sprint(i))})
	}
	first := func(c *rawStream) *wire.Deliver {
		if code := c.call(&wire.Subscribe{SubscriptionID: 1, Stream: name, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 1}); code != wire.CodeOK {
			t.Fatalf("subscribe: %v", code)
		}
		for {
			if d, ok := c.next().(*wire.Deliver); ok {
				return d
			}
		}
	}
	v2 := dialStream(t, s)
	if code := v2.call(&wire.ExchangeCommandVersions{Commands: []wire.CommandVersion{
		{Key: wire.KeyDeliver, MinVersion: 1, MaxVersion: 2}, {Key: wire.KeyPublish, MinVersion: 1, MaxVersion: 2},
	}}); code != wire.CodeOK {
		t.Fatalf("exchange command versions: %v", code)
	}
	if d := first(v2); d.Version != 2 || d.CommittedChunkID != 9 {
		t.Fatalf("deliver version %d, committed chunk id %d; want version 2, 9 (the last message's own chunk)", d.Version, d.CommittedChunkID)
	}
	if d := first(dialStream(t, s)); d.Version != 1 {
		t.Fatalf("deliver version %d to a client that did not ask for 2", d.Version)
	}
}
