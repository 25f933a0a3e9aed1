package tests

import (
	"encoding/binary"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	samqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/internal/poll"
	wire "github.com/warrenmq/warren/protocol/stream"
)

// The stream protocol on port 5552, driven by the official Go stream
// client (rabbitmq-stream-go-client): what a stream application does
// against RabbitMQ's rabbitmq_stream plugin works against Warren.

// referenceStream is WARREN_REFERENCE_STREAM_URL's host:port, the stream
// listener of the broker WARREN_REFERENCE_URL reaches (e.g.
// rabbitmq-stream://127.0.0.1:5552); "" when unset.
func referenceStream(t testing.TB) string {
	u := os.Getenv("WARREN_REFERENCE_STREAM_URL")
	if u == "" {
		return ""
	}
	pu, err := neturl.Parse(u)
	if err != nil || pu.Host == "" {
		t.Fatalf("WARREN_REFERENCE_STREAM_URL %q is not a URL with a host and port", u)
	}
	return pu.Host
}

// startStreams is start for the stream protocol's tests: an in-process
// Warren, or the reference broker when WARREN_REFERENCE_STREAM_URL and
// WARREN_REFERENCE_URL (the same broker's AMQP) are set. With
// WARREN_REFERENCE_URL alone they skip: its stream listener is unknown.
func startStreams(t testing.TB) *server {
	t.Helper()
	if addr := referenceStream(t); addr != "" {
		if reference() == "" {
			t.Fatal("WARREN_REFERENCE_STREAM_URL needs WARREN_REFERENCE_URL, the same broker's AMQP listener")
		}
		return &server{url: reference(), stream: addr, t: t}
	}
	if reference() != "" {
		t.Skip("set WARREN_REFERENCE_STREAM_URL to run the stream protocol's tests against the reference")
	}
	return startWarren(t)
}

// streamAddr is the broker's stream listener.
func (s *server) streamAddr() string {
	if s.b != nil {
		return s.b.StreamAddr()
	}
	return s.stream
}

// needsRabbitMQ skips a test of a stream feature that a reference broker
// older than version lacks: the clients turn such features on by the
// version the broker gives in its peer properties.
func needsRabbitMQ(t testing.TB, s *server, version string) {
	t.Helper()
	if s.b != nil {
		return
	}
	nc, err := net.Dial("tcp", s.streamAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &rawStream{t: t, nc: nc, r: wire.NewFrameReader(nc, wire.DefaultFrameMax)}
	c.send(&wire.PeerProperties{CorrelationID: 1})
	resp, ok := c.next().(*wire.PeerPropertiesResponse)
	if !ok {
		t.Fatal("no peer properties from the reference")
	}
	if have := resp.Properties["version"]; versionBelow(have, version) {
		t.Skipf("needs RabbitMQ %s or later; the reference is %s", version, have)
	}
}

// versionBelow compares dotted versions numerically ("3.10.8" < "3.11").
func versionBelow(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := range max(len(h), len(w)) {
		var a, b int
		if i < len(h) {
			a, _ = strconv.Atoi(h[i])
		}
		if i < len(w) {
			b, _ = strconv.Atoi(w[i])
		}
		if a != b {
			return a < b
		}
	}
	return false
}

// streamName names a stream after the test and suffix, and has the
// reference broker delete it when the test ends.
func streamName(t testing.TB, s *server, suffix string) string {
	n := uniq(t, suffix)
	s.ownQueue(n)
	return n
}

// streamEnv connects the Go stream client to the broker's stream
// listener as guest, and closes it when the test ends.
func streamEnv(t testing.TB, s *server) *stream.Environment {
	t.Helper()
	host, port, err := net.SplitHostPort(s.streamAddr())
	if err != nil {
		t.Fatalf("no stream listener: %v", err)
	}
	p, _ := strconv.Atoi(port)
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
		SetHost(host).SetPort(p).SetUser("guest").SetPassword("guest"))
	if err != nil {
		t.Fatalf("stream environment: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// declaredProducer declares the stream name through env and returns a
// producer of it.
func declaredProducer(t testing.TB, env *stream.Environment, name string) *stream.Producer {
	t.Helper()
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatalf("declare %s: %v", name, err)
	}
	p, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatalf("producer of %s: %v", name, err)
	}
	return p
}

// collector gathers a stream consumer's messages with their offsets.
type collector struct {
	mu       sync.Mutex
	offsets  []int64
	messages []*samqp.Message
}

func (c *collector) handle(ctx stream.ConsumerContext, m *samqp.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offsets = append(c.offsets, ctx.Consumer.GetOffset())
	c.messages = append(c.messages, m)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.messages)
}

// sendConfirmed publishes n messages named prefix-i and waits for every
// confirm.
func sendConfirmed(t testing.TB, p *stream.Producer, prefix string, n int) {
	t.Helper()
	sendConfirmedBodies(t, p, n, func(i int) []byte { return []byte(fmt.Sprintf("%s-%d", prefix, i)) })
}

// sendConfirmedBodies publishes n messages, body(i) the i-th's body, and
// waits for every confirm.
func sendConfirmedBodies(t testing.TB, p *stream.Producer, n int, body func(i int) []byte) {
	t.Helper()
	confirms := p.NotifyPublishConfirmation()
	var mu sync.Mutex
	confirmed, failed := 0, 0
	go func() {
		for batch := range confirms {
			mu.Lock()
			for _, c := range batch {
				if c.IsConfirmed() {
					confirmed++
				} else {
					failed++
				}
			}
			mu.Unlock()
		}
	}()
	for i := range n {
		if err := p.Send(samqp.NewMessage(body(i))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	poll.Until(t, 20*time.Second, "every message confirmed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return confirmed+failed == n
	})
	if failed > 0 {
		t.Fatalf("%d of %d messages failed", failed, n)
	}
}

// A stream created over the stream protocol takes confirmed messages and
// gives them back in order from first, from an offset and from next, and
// is visible over AMQP as a stream queue.
func TestStreamProtocolPublishAndConsume(t *testing.T) {
	s := startStreams(t)
	env := streamEnv(t, s)
	name := streamName(t, s, "sp")
	if err := env.DeclareStream(name, &stream.StreamOptions{MaxLengthBytes: stream.ByteCapacity{}.MB(100)}); err != nil {
		t.Fatalf("declare: %v", err)
	}
	// Again with the same arguments: the environment takes
	// StreamAlreadyExists as success (the raw client in
	// TestStreamProtocolErrors sees the code itself); with others,
	// PRECONDITION_FAILED, as RabbitMQ answers.
	if err := env.DeclareStream(name, &stream.StreamOptions{MaxLengthBytes: stream.ByteCapacity{}.MB(100)}); err != nil {
		t.Fatalf("declaring it again: %v", err)
	}
	if err := env.DeclareStream(name, nil); err != stream.PreconditionFailed {
		t.Fatalf("declaring it with other arguments: %v, want PreconditionFailed", err)
	}
	p, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	const n = 2000
	sendConfirmed(t, p, "m", n)

	var all collector
	c, err := env.NewConsumer(name, all.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	poll.Until(t, 20*time.Second, "every message consumed", func() bool { return all.count() >= n })
	_ = c.Close()
	all.mu.Lock()
	for i := range n {
		if all.offsets[i] != int64(i) || string(all.messages[i].GetData()) != fmt.Sprintf("m-%d", i) {
			t.Fatalf("message %d: offset %d body %q", i, all.offsets[i], all.messages[i].GetData())
		}
	}
	all.mu.Unlock()

	var from collector
	c, err = env.NewConsumer(name, from.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.Offset(1500)))
	if err != nil {
		t.Fatalf("consumer from 1500: %v", err)
	}
	poll.Until(t, 20*time.Second, "messages from 1500", func() bool { return from.count() >= n-1500 })
	_ = c.Close()
	from.mu.Lock()
	if from.offsets[0] != 1500 || string(from.messages[0].GetData()) != "m-1500" {
		t.Fatalf("from 1500 starts at %d %q", from.offsets[0], from.messages[0].GetData())
	}
	from.mu.Unlock()

	var next collector
	c, err = env.NewConsumer(name, next.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.Next()))
	if err != nil {
		t.Fatalf("consumer from next: %v", err)
	}
	sendConfirmed(t, p, "late", 3)
	poll.Until(t, 20*time.Second, "the messages after next", func() bool { return next.count() >= 3 })
	_ = c.Close()
	next.mu.Lock()
	if next.offsets[0] != n || string(next.messages[0].GetData()) != "late-0" {
		t.Fatalf("from next starts at %d %q", next.offsets[0], next.messages[0].GetData())
	}
	next.mu.Unlock()
	_ = p.Close()

	// RabbitMQ's count follows its writer's counters, a moment behind.
	_, ch := channel(t, s)
	poll.Until(t, 10*time.Second, fmt.Sprint(n+3, " messages counted over AMQP"), func() bool {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, amqp.Table{"x-queue-type": "stream"})
		if err != nil {
			t.Fatalf("over AMQP: %v", err)
		}
		return q.Messages == n+3
	})
	if err := env.DeleteStream(name); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := env.DeleteStream(name); err != stream.StreamDoesNotExist {
		t.Fatalf("deleting it again: %v, want StreamDoesNotExist", err)
	}
}

// One stream, two protocols: a message published over AMQP 0-9-1 reaches
// a stream-protocol consumer with its properties and headers, and one
// published over the stream protocol reaches an AMQP consumer with its
// properties and application properties, at the same offsets.
func TestStreamProtocolAndAMQPShareAStream(t *testing.T) {
	s := startStreams(t)
	env := streamEnv(t, s)
	_, ch := channel(t, s)
	name := streamName(t, s, "both")
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", name, amqp.Publishing{
		Body: []byte("from amqp"), ContentType: "text/plain", MessageId: "a1", CorrelationId: "c1",
		Headers: amqp.Table{"color": "red", "n": int32(7)}, DeliveryMode: amqp.Persistent,
	})

	p, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := samqp.NewMessage([]byte("from stream"))
	m.Properties = &samqp.MessageProperties{MessageID: "s1", ContentType: "application/json", CorrelationID: "c2"}
	m.ApplicationProperties = map[string]interface{}{"shape": "square", "size": int64(3)}
	confirms := p.NotifyPublishConfirmation()
	if err := p.Send(m); err != nil {
		t.Fatal(err)
	}
	for got := false; !got; {
		for _, c := range poll.Receive(t, 10*time.Second, "the confirm", confirms) {
			if !c.IsConfirmed() {
				t.Fatal("not confirmed")
			}
			got = true
		}
	}

	var sc collector
	c, err := env.NewConsumer(name, sc.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	poll.Until(t, 10*time.Second, "both messages over the stream protocol", func() bool { return sc.count() >= 2 })
	sc.mu.Lock()
	first, second := sc.messages[0], sc.messages[1]
	sc.mu.Unlock()
	if string(first.GetData()) != "from amqp" || first.Properties == nil || first.Properties.MessageID != "a1" ||
		first.Properties.ContentType != "text/plain" || first.ApplicationProperties["color"] != "red" {
		t.Fatalf("the AMQP message over the stream protocol: %q %+v %v", first.GetData(), first.Properties, first.ApplicationProperties)
	}
	if string(second.GetData()) != "from stream" || second.Properties.MessageID != "s1" || second.ApplicationProperties["shape"] != "square" {
		t.Fatalf("the stream message read back: %q %+v %v", second.GetData(), second.Properties, second.ApplicationProperties)
	}

	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(name, "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	a := receive(t, ds)
	b := receive(t, ds)
	if string(a.Body) != "from amqp" || a.MessageId != "a1" || a.Headers["x-stream-offset"] != int64(0) {
		t.Fatalf("the AMQP message over AMQP: %q %q %v", a.Body, a.MessageId, a.Headers)
	}
	if string(b.Body) != "from stream" || b.MessageId != "s1" || b.ContentType != "application/json" ||
		b.CorrelationId != "c2" || b.Headers["shape"] != "square" || b.Headers["x-stream-offset"] != int64(1) {
		t.Fatalf("the stream message over AMQP: %q id %q type %q corr %q headers %v", b.Body, b.MessageId, b.ContentType, b.CorrelationId, b.Headers)
	}
}

// The broker lists stream connections, publishers and consumers with
// their figures.
func TestStreamProtocolListings(t *testing.T) {
	s := startWarren(t)
	env := streamEnv(t, s)
	name := streamName(t, s, "list")
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer(name, stream.NewProducerOptions().SetProducerName("lister"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sendConfirmed(t, p, "l", 5)
	var c collector
	consumer, err := env.NewConsumer(name, c.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	poll.Until(t, 10*time.Second, "five messages", func() bool { return c.count() >= 5 })
	srv := s.b.Streams()
	conns := srv.Connections()
	if len(conns) < 2 || conns[0].User != "guest" || conns[0].VHost != "/" || conns[0].RecvOctets == 0 {
		t.Fatalf("connections: %+v", conns)
	}
	pubs := srv.Publishers()
	if len(pubs) != 1 || pubs[0].Stream != name || pubs[0].Reference != "lister" || pubs[0].Published != 5 || pubs[0].Confirmed != 5 {
		t.Fatalf("publishers: %+v", pubs)
	}
	poll.Until(t, 10*time.Second, "the consumer listed at offset 5", func() bool {
		cons := srv.Consumers()
		return len(cons) == 1 && cons[0].Stream == name && cons[0].Offset == 5 && cons[0].Consumed == 5
	})
}

// A producer that batches into sub-entries, with each compression the
// clients offer, has every message stored once at its own offset; a
// deduplicating one's sub-batch sent again is dropped whole.
func TestStreamProtocolSubBatches(t *testing.T) {
	s := startStreams(t)
	env := streamEnv(t, s)
	for _, comp := range []stream.Compression{
		stream.Compression{}.None(), stream.Compression{}.Gzip(), stream.Compression{}.Snappy(),
		stream.Compression{}.Lz4(), stream.Compression{}.Zstd(),
	} {
		name := streamName(t, s, "sub-"+comp.String())
		if err := env.DeclareStream(name, nil); err != nil {
			t.Fatal(err)
		}
		p, err := env.NewProducer(name, stream.NewProducerOptions().SetSubEntrySize(50).SetCompression(comp))
		if err != nil {
			t.Fatal(err)
		}
		sendConfirmed(t, p, "sub", 500)
		_ = p.Close()
		got := readStreamBodies(t, env, name, 500)
		for i, b := range got {
			if b != fmt.Sprintf("sub-%d", i) {
				t.Fatalf("%s: offset %d holds %q", comp, i, b)
			}
		}
	}

	// A sub-batch under a publishing id the stream has is dropped whole.
	raw := dialStream(t, s)
	name := streamName(t, s, "sub-dedup")
	if code := raw.call(&wire.Create{Stream: name}); code != wire.CodeOK {
		t.Fatal(code)
	}
	if code := raw.call(&wire.DeclarePublisher{PublisherID: 1, Reference: "batcher", Stream: name}); code != wire.CodeOK {
		t.Fatal(code)
	}
	subBatch := func(id uint64, bodies ...string) wire.PublishedMessage {
		var data []byte
		for _, b := range bodies {
			data = append(binary.BigEndian.AppendUint32(data, uint32(len(b))), b...)
		}
		return wire.PublishedMessage{PublishingID: id, Message: data,
			SubBatch: &wire.SubBatch{Records: uint16(len(bodies)), UncompressedSize: uint32(len(data))}}
	}
	for _, batch := range [][]wire.PublishedMessage{
		{subBatch(1, "a", "b", "c")},
		{subBatch(1, "a", "b", "c"), subBatch(2, "d")},
	} {
		raw.send(&wire.Publish{PublisherID: 1, Messages: batch})
	}
	confirmed := 0
	for confirmed < 3 {
		if c, ok := raw.next().(*wire.PublishConfirm); ok {
			confirmed += len(c.PublishingIDs)
		}
	}
	// A sub-batch whose records do not add up is refused. (RabbitMQ
	// 3.10.8 stores it as it is, and its readers find it short.)
	if s.b == nil {
		return
	}
	bad := subBatch(3, "e")
	bad.SubBatch.Records = 2
	raw.send(&wire.Publish{PublisherID: 1, Messages: []wire.PublishedMessage{bad}})
	if e, ok := raw.next().(*wire.PublishError); !ok || len(e.Errors) != 1 || e.Errors[0].Code != wire.CodePreconditionFailed {
		t.Fatalf("a bad sub-batch: %#v", e)
	}
	var c collector
	consumer, err := env.NewConsumer(name, c.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	poll.Until(t, 10*time.Second, "four messages", func() bool { return c.count() >= 4 })
	if seq, err := env.QuerySequence("batcher", name); err != nil || seq != 2 {
		t.Fatalf("sequence %d (%v)", seq, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.messages) != 4 {
		t.Fatalf("%d messages, want a b c d", len(c.messages))
	}
}

// A producer is told when its stream is deleted, by this door or
// another, and the client closes it.
func TestStreamProtocolProducerHearsOfDeletion(t *testing.T) {
	s := startStreams(t)
	env := streamEnv(t, s)
	name := streamName(t, s, "deleted")
	p := declaredProducer(t, env, name)
	closed := p.NotifyClose()
	_, ch := channel(t, s)
	if _, err := ch.QueueDelete(name, false, false, false); err != nil {
		t.Fatal(err)
	}
	ev := poll.Receive(t, 10*time.Second, "the producer's close", closed)
	if ev.StreamName != name {
		t.Fatalf("closed for %q", ev.StreamName)
	}
}

// A named producer deduplicates: the sequence it last had confirmed is
// kept, and a resend at or below it is confirmed and dropped.
func TestStreamProtocolDeduplication(t *testing.T) {
	s := startStreams(t)
	env := streamEnv(t, s)
	name := streamName(t, s, "dedup")
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatal(err)
	}
	send := func(ids ...int64) {
		p, err := env.NewProducer(name, stream.NewProducerOptions().SetProducerName("p1"))
		if err != nil {
			t.Fatal(err)
		}
		confirms := p.NotifyPublishConfirmation()
		for _, id := range ids {
			m := samqp.NewMessage([]byte(fmt.Sprintf("id-%d", id)))
			m.SetPublishingId(id)
			if err := p.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		got := 0
		for got < len(ids) {
			got += len(poll.Receive(t, 10*time.Second, "confirms", confirms))
		}
		_ = p.Close()
	}
	send(1, 2, 3)
	if seq, err := env.QuerySequence("p1", name); err != nil || seq != 3 {
		t.Fatalf("sequence %d (%v), want 3", seq, err)
	}
	send(2, 3, 4, 5)
	if seq, err := env.QuerySequence("p1", name); err != nil || seq != 5 {
		t.Fatalf("sequence %d (%v), want 5", seq, err)
	}
	var c collector
	consumer, err := env.NewConsumer(name, c.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	poll.Until(t, 10*time.Second, "five messages", func() bool { return c.count() >= 5 })
	// A sixth would be a duplicate: publish a marker behind them and
	// check it comes sixth.
	send(6)
	poll.Until(t, 10*time.Second, "the marker", func() bool { return c.count() >= 6 })
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.messages {
		if want := fmt.Sprintf("id-%d", i+1); string(m.GetData()) != want {
			t.Fatalf("message %d is %q, want %q", i, m.GetData(), want)
		}
	}
}

// A consumer's offset stored on the server is read back by its name.
func TestStreamProtocolStoredOffsets(t *testing.T) {
	s := startStreams(t)
	env := streamEnv(t, s)
	name := streamName(t, s, "offsets")
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := env.QueryOffset("reader", name); err != stream.OffsetNotFoundError {
		t.Fatalf("no offset yet: %v", err)
	}
	p, err := env.NewProducer(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	sendConfirmed(t, p, "o", 10)
	var c collector
	consumer, err := env.NewConsumer(name, c.handle, stream.NewConsumerOptions().SetConsumerName("reader").
		SetOffset(stream.OffsetSpecification{}.First()).SetManualCommit())
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "ten messages", func() bool { return c.count() >= 10 })
	if err := consumer.StoreCustomOffset(7); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the stored offset", func() bool {
		off, err := env.QueryOffset("reader", name)
		return err == nil && off == 7
	})
	_ = consumer.Close()
}

// Errors come back as the protocol's codes: a missing stream, a producer
// on it, a consumer of it; and a connection that sends garbage is closed
// without disturbing another.
func TestStreamProtocolErrors(t *testing.T) {
	s := startStreams(t)
	env := streamEnv(t, s)
	if _, err := env.NewProducer("no-such-stream", nil); err != stream.StreamDoesNotExist {
		t.Fatalf("producer of a missing stream: %v", err)
	}
	var c collector
	if _, err := env.NewConsumer("no-such-stream", c.handle, nil); err != stream.StreamDoesNotExist {
		t.Fatalf("consumer of a missing stream: %v", err)
	}
	raw := dialStream(t, s)
	name := streamName(t, s, "raw")
	// Warren refuses what RabbitMQ 3.10.8 does not (warrenOnly): it
	// ignores an argument it does not know, and closes the connection
	// over a number or a max-age that does not parse.
	for _, c := range []struct {
		what       string
		cmd        wire.Command
		want       wire.ResponseCode
		warrenOnly bool
	}{
		{"create", &wire.Create{Stream: name}, wire.CodeOK, false},
		{"create again", &wire.Create{Stream: name}, wire.CodeStreamAlreadyExists, false},
		{"an unknown argument", &wire.Create{Stream: streamName(t, s, "x"), Arguments: map[string]string{"colour": "red"}}, wire.CodePreconditionFailed, true},
		{"a max-length-bytes that is no number", &wire.Create{Stream: streamName(t, s, "x"), Arguments: map[string]string{"max-length-bytes": "lots"}}, wire.CodePreconditionFailed, true},
		{"a bad max-age", &wire.Create{Stream: streamName(t, s, "x"), Arguments: map[string]string{"max-age": "-1s"}}, wire.CodePreconditionFailed, true},
		{"a reserved name", &wire.Create{Stream: "amq.mine"}, wire.CodePreconditionFailed, false},
		{"a publisher of a missing stream", &wire.DeclarePublisher{PublisherID: 1, Stream: "no-such-stream"}, wire.CodeStreamDoesNotExist, false},
		{"a publisher", &wire.DeclarePublisher{PublisherID: 1, Stream: name}, wire.CodeOK, false},
		{"the same publisher id again", &wire.DeclarePublisher{PublisherID: 1, Stream: name}, wire.CodePreconditionFailed, false},
		{"deleting a publisher not declared", &wire.DeletePublisher{PublisherID: 9}, wire.CodePublisherDoesNotExist, false},
		{"a subscription", &wire.Subscribe{SubscriptionID: 1, Stream: name, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 1}, wire.CodeOK, false},
		{"the same subscription id again", &wire.Subscribe{SubscriptionID: 1, Stream: name, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 1}, wire.CodeSubscriptionIDAlreadyExists, false},
		{"unsubscribing what is not subscribed", &wire.Unsubscribe{SubscriptionID: 7}, wire.CodeSubscriptionIDDoesNotExist, false},
		{"an offset never stored", &wire.QueryOffset{Reference: "nobody", Stream: name}, wire.CodeNoOffset, false},
		{"delete a missing stream", &wire.Delete{Stream: "no-such-stream"}, wire.CodeStreamDoesNotExist, false},
	} {
		if c.warrenOnly && s.b == nil {
			continue
		}
		if got := raw.call(c.cmd); got != c.want {
			t.Errorf("%s: code %#x, want %#x", c.what, got, c.want)
		}
	}
	// Credit for a subscription that does not exist is answered, without
	// a correlation id.
	raw.send(&wire.Credit{SubscriptionID: 42, Credit: 1})
	if r, ok := raw.next().(*wire.CreditResponse); !ok || r.Code != wire.CodeSubscriptionIDDoesNotExist || r.SubscriptionID != 42 {
		t.Fatalf("credit for no subscription: %#v", r)
	}

	// Garbage on one socket: the broker closes it, the environment above
	// goes on.
	nc, err := net.Dial("tcp", s.streamAddr())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write([]byte{0, 0, 0, 6, 0x7f, 0x7f, 0, 1, 0, 0})
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 256)
	for {
		if _, err := nc.Read(buf); err != nil {
			break // closed by the broker, after its Close
		}
	}
	nc.Close()
	if err := env.DeclareStream(streamName(t, s, "after"), nil); err != nil {
		t.Fatalf("the other connection after the garbage: %v", err)
	}
}

// rawStream is a stream-protocol client written with Warren's codec, for
// what the official client does not send: bad arguments, unknown ids,
// the codes themselves.
type rawStream struct {
	t    testing.TB
	nc   net.Conn
	r    *wire.FrameReader
	corr uint32
}

// dialStream opens a raw connection as guest on vhost "/".
func dialStream(t testing.TB, s *server) *rawStream {
	t.Helper()
	return dialStreamAs(t, s, "guest", "guest", "/")
}

// dialStreamAs opens a raw connection as user on vhost.
func dialStreamAs(t testing.TB, s *server, user, password, vhost string) *rawStream {
	t.Helper()
	c, code := openStreamAs(t, s, user, password, vhost)
	if code != wire.CodeOK {
		t.Fatalf("open: code %#x", code)
	}
	return c
}

// openStreamAs is dialStreamAs that returns Open's code.
func openStreamAs(t testing.TB, s *server, user, password, vhost string) (*rawStream, wire.ResponseCode) {
	t.Helper()
	return openStreamAt(t, s.streamAddr(), user, password, vhost)
}

// openStreamAt is openStreamAs of the stream listener at addr.
func openStreamAt(t testing.TB, addr, user, password, vhost string) (*rawStream, wire.ResponseCode) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawStream{t: t, nc: nc, r: wire.NewFrameReader(nc, wire.DefaultFrameMax)}
	for _, step := range []wire.Command{
		&wire.PeerProperties{Properties: map[string]string{"product": "warren-test"}},
		&wire.SaslHandshake{},
		&wire.SaslAuthenticate{Mechanism: "PLAIN", Data: []byte("\x00" + user + "\x00" + password)},
	} {
		if code := c.call(step); code != wire.CodeOK {
			t.Fatalf("%s: code %#x", step.Key(), code)
		}
	}
	tune, ok := c.next().(*wire.Tune)
	if !ok {
		t.Fatalf("no tune: %#v", tune)
	}
	c.send(&wire.TuneResponse{FrameMax: tune.FrameMax, Heartbeat: 0})
	return c, c.call(&wire.Open{VirtualHost: vhost})
}

func (c *rawStream) send(cmd wire.Command) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(wire.AppendFrame(nil, cmd)); err != nil {
		c.t.Fatal(err)
	}
}

// next reads the next frame that is not a heartbeat.
func (c *rawStream) next() wire.Command {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			c.t.Fatal(err)
		}
		cmd, err := wire.Decode(f)
		if err != nil {
			c.t.Fatal(err)
		}
		if _, hb := cmd.(*wire.Heartbeat); !hb {
			return cmd
		}
	}
}

// call sends a request with the next correlation id and returns the code
// of its response, skipping frames that answer nothing (deliveries).
func (c *rawStream) call(cmd wire.Command) wire.ResponseCode {
	c.t.Helper()
	c.corr++
	setCorrelation(cmd, c.corr)
	c.send(cmd)
	for {
		resp := c.next()
		if code, corr, ok := responseCode(resp); ok && corr == c.corr {
			return code
		}
	}
}

// setCorrelation sets a request's correlation id.
func setCorrelation(cmd wire.Command, id uint32) {
	switch m := cmd.(type) {
	case *wire.PeerProperties:
		m.CorrelationID = id
	case *wire.SaslHandshake:
		m.CorrelationID = id
	case *wire.SaslAuthenticate:
		m.CorrelationID = id
	case *wire.Open:
		m.CorrelationID = id
	case *wire.Create:
		m.CorrelationID = id
	case *wire.Delete:
		m.CorrelationID = id
	case *wire.DeclarePublisher:
		m.CorrelationID = id
	case *wire.DeletePublisher:
		m.CorrelationID = id
	case *wire.Subscribe:
		m.CorrelationID = id
	case *wire.Unsubscribe:
		m.CorrelationID = id
	case *wire.QueryOffset:
		m.CorrelationID = id
	case *wire.QueryPublisherSequence:
		m.CorrelationID = id
	case *wire.Metadata:
		m.CorrelationID = id
	case *wire.StreamStats:
		m.CorrelationID = id
	case *wire.Route:
		m.CorrelationID = id
	case *wire.Partitions:
		m.CorrelationID = id
	case *wire.ResolveOffsetSpec:
		m.CorrelationID = id
	case *wire.CreateSuperStream:
		m.CorrelationID = id
	case *wire.DeleteSuperStream:
		m.CorrelationID = id
	case *wire.ExchangeCommandVersions:
		m.CorrelationID = id
	case *wire.Close:
		m.CorrelationID = id
	}
}

// responseCode reads a response's code and correlation id.
func responseCode(cmd wire.Command) (wire.ResponseCode, uint32, bool) {
	switch m := cmd.(type) {
	case *wire.PeerPropertiesResponse:
		return m.Code, m.CorrelationID, true
	case *wire.SaslHandshakeResponse:
		return m.Code, m.CorrelationID, true
	case *wire.SaslAuthenticateResponse:
		return m.Code, m.CorrelationID, true
	case *wire.OpenResponse:
		return m.Code, m.CorrelationID, true
	case *wire.CreateResponse:
		return m.Code, m.CorrelationID, true
	case *wire.DeleteResponse:
		return m.Code, m.CorrelationID, true
	case *wire.DeclarePublisherResponse:
		return m.Code, m.CorrelationID, true
	case *wire.DeletePublisherResponse:
		return m.Code, m.CorrelationID, true
	case *wire.SubscribeResponse:
		return m.Code, m.CorrelationID, true
	case *wire.UnsubscribeResponse:
		return m.Code, m.CorrelationID, true
	case *wire.QueryOffsetResponse:
		return m.Code, m.CorrelationID, true
	case *wire.QueryPublisherSequenceResponse:
		return m.Code, m.CorrelationID, true
	case *wire.MetadataResponse:
		// The code of the first stream asked about.
		if len(m.Streams) == 0 {
			return wire.CodeOK, m.CorrelationID, true
		}
		return m.Streams[0].Code, m.CorrelationID, true
	case *wire.StreamStatsResponse:
		return m.Code, m.CorrelationID, true
	case *wire.RouteResponse:
		return m.Code, m.CorrelationID, true
	case *wire.PartitionsResponse:
		return m.Code, m.CorrelationID, true
	case *wire.ResolveOffsetSpecResponse:
		return m.Code, m.CorrelationID, true
	case *wire.CreateSuperStreamResponse:
		return m.Code, m.CorrelationID, true
	case *wire.DeleteSuperStreamResponse:
		return m.Code, m.CorrelationID, true
	case *wire.ExchangeCommandVersionsResponse:
		return m.Code, m.CorrelationID, true
	case *wire.CloseResponse:
		return m.Code, m.CorrelationID, true
	}
	return 0, 0, false
}

// Stream connections count toward a vhost's and a user's max-connections
// with AMQP's, as RabbitMQ's connection tracking counts every protocol's
// (RabbitMQ 3.10.8's stream plugin did not check them yet; later ones
// refuse Open with VHOST_ACCESS_FAILURE, as here). A closed one is
// uncounted.
func TestStreamConnectionsCountTowardLimits(t *testing.T) {
	m := startMgmt(t)
	m.expect("PUT", "/api/vhost-limits/"+m.v()+"/max-connections", `{"value":2}`, 204)
	m.channel() // one AMQP connection
	first := dialStreamAs(t, m.s, "guest", "guest", m.vhost)
	if _, code := openStreamAs(t, m.s, "guest", "guest", m.vhost); code != wire.CodeVirtualHostAccessFailure {
		t.Fatalf("a stream connection over the vhost's limit: code %#x", code)
	}
	if c, err := amqp.Dial(m.amqpURL()); err == nil {
		c.Close()
		t.Fatalf("an AMQP connection over a limit a stream connection filled was let in")
	}
	first.nc.Close()
	poll.Until(t, 10*time.Second, "the closed stream connection uncounted", func() bool {
		c, code := openStreamAs(t, m.s, "guest", "guest", m.vhost)
		c.nc.Close()
		return code == wire.CodeOK
	})
	m.expect("DELETE", "/api/vhost-limits/"+m.v()+"/max-connections", "", 204)

	user := uniq(t, "sl")
	m.addUser(user, "pw", "", m.vhost)
	m.expect("PUT", "/api/user-limits/"+esc(user)+"/max-connections", `{"value":1}`, 204)
	dialStreamAs(t, m.s, user, "pw", m.vhost)
	if _, code := openStreamAs(t, m.s, user, "pw", m.vhost); code != wire.CodeVirtualHostAccessFailure {
		t.Fatalf("a stream connection over the user's limit: code %#x", code)
	}
}

// Consumers reading the same chunks at once get them built once and sent
// to each (the broker shares the records and their encoded chunk): each
// gets every message, in order, and the client's CRC check passes.
func TestStreamProtocolConsumersShareChunks(t *testing.T) {
	s := startWarren(t)
	env := streamEnv(t, s)
	name := streamName(t, s, "share")
	p := declaredProducer(t, env, name)
	const n = 3000
	sendConfirmed(t, p, "m", n)
	cs := make([]*collector, 3)
	for i := range cs {
		cs[i] = &collector{}
		c, err := env.NewConsumer(name, cs[i].handle, stream.NewConsumerOptions().
			SetOffset(stream.OffsetSpecification{}.First()).SetCRCCheck(true))
		if err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
		defer c.Close()
	}
	for i, col := range cs {
		poll.Until(t, 20*time.Second, fmt.Sprintf("consumer %d has every message", i), func() bool { return col.count() >= n })
		col.mu.Lock()
		for j := range n {
			if col.offsets[j] != int64(j) || string(col.messages[j].GetData()) != fmt.Sprintf("m-%d", j) {
				col.mu.Unlock()
				t.Fatalf("consumer %d, message %d: offset %d body %q", i, j, col.offsets[j], col.messages[j].GetData())
			}
		}
		col.mu.Unlock()
	}
}

// The Node client answers the server's Tune with a Tune (key 0x0014, no
// response bit); RabbitMQ takes that as the answer, and so does Warren.
func TestStreamProtocolTuneAnsweredWithTune(t *testing.T) {
	s := startStreams(t)
	nc, err := net.Dial("tcp", s.streamAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &rawStream{t: t, nc: nc, r: wire.NewFrameReader(nc, wire.DefaultFrameMax)}
	for _, step := range []wire.Command{
		&wire.PeerProperties{Properties: map[string]string{"product": "warren-test"}},
		&wire.SaslHandshake{},
		&wire.SaslAuthenticate{Mechanism: "PLAIN", Data: []byte("\x00guest\x00guest")},
	} {
		if code := c.call(step); code != wire.CodeOK {
			t.Fatalf("%s: code %#x", step.Key(), code)
		}
	}
	tune, ok := c.next().(*wire.Tune)
	if !ok {
		t.Fatal("no tune")
	}
	c.send(&wire.Tune{FrameMax: tune.FrameMax, Heartbeat: 0})
	if code := c.call(&wire.Open{VirtualHost: "/"}); code != wire.CodeOK {
		t.Fatalf("open after a Tune answered with a Tune: code %#x", code)
	}
}

// A consumer that stops reading while chunks are owed to it still gets
// every chunk, whole and in order, once it reads again: the connection's
// reader writes a Credit's chunks itself only as far as the socket takes
// them without waiting, and leaves the rest (a chunk cut mid-file, the
// frames queued after it) to the writer. The client's receive buffer is
// small and it asks for 16 MB at once, so the socket fills. (Not smaller
// than a few segments: on loopback a segment is 64 KB, and a receive
// buffer under one never advertises a window update, leaving the sender
// to TCP's backed-off zero-window probes: seconds a chunk.)
func TestStreamProtocolSlowReaderGetsEveryChunk(t *testing.T) {
	s := startStreams(t)
	env := streamEnv(t, s)
	name := streamName(t, s, "slow-reader")
	p := declaredProducer(t, env, name)
	const n = 4000
	pad := strings.Repeat("x", 4000)
	body := func(i int) string { return fmt.Sprintf("m-%06d-%s", i, pad) }
	sendConfirmedBodies(t, p, n, func(i int) []byte { return []byte(body(i)) })

	c := dialStream(t, s)
	if err := c.nc.(*net.TCPConn).SetReadBuffer(256 << 10); err != nil {
		t.Fatal(err)
	}
	if code := c.call(&wire.Subscribe{SubscriptionID: 1, Stream: name, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 1}); code != wire.CodeOK {
		t.Fatalf("subscribe: code %#x", code)
	}
	// Credits for every chunk at once, with a request among them whose
	// answer must come too.
	var burst []byte
	for i := range n {
		burst = wire.AppendFrame(burst, &wire.Credit{SubscriptionID: 1, Credit: 1})
		if i == n/2 {
			burst = wire.AppendFrame(burst, &wire.QueryOffset{CorrelationID: 999, Reference: "nobody", Stream: name})
		}
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(burst); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // not reading: the broker's socket fills

	next, answered := uint64(0), false
	poll.Until(t, 30*time.Second, "every message delivered", func() bool {
		switch m := c.next().(type) {
		case *wire.Deliver:
			h, data, err := wire.ParseChunk(m.Chunk)
			if err != nil {
				t.Fatalf("chunk after offset %d: %v", next, err)
			}
			if h.ChunkID != next {
				t.Fatalf("chunk %d, expected %d", h.ChunkID, next)
			}
			for range h.NumEntries {
				e, k, err := wire.ReadEntry(data)
				if err != nil {
					t.Fatalf("entry at offset %d: %v", next, err)
				}
				if !strings.Contains(string(e.Body), body(int(next))) {
					t.Fatalf("offset %d: not its body", next)
				}
				data = data[k:]
				next++
			}
		case *wire.QueryOffsetResponse:
			answered = m.CorrelationID == 999
		}
		return next == n && answered
	})
}
