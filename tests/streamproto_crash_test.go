package tests

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	samqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/internal/poll"
)

// streamEnvAt connects the Go stream client to a stream listener's
// address.
func streamEnvAt(t testing.TB, addr string) *stream.Environment {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("stream listener %q: %v", addr, err)
	}
	p, _ := strconv.Atoi(port)
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(host).SetPort(p).
		SetUser("guest").SetPassword("guest").SetMaxProducersPerClient(1).SetMaxConsumersPerClient(1))
	if err != nil {
		t.Fatalf("stream environment: %v", err)
	}
	return env
}

// readStreamBodies reads a stream from first until n messages came or the
// deadline passed, and returns their bodies by offset.
func readStreamBodies(t testing.TB, env *stream.Environment, name string, n int) []string {
	t.Helper()
	var c collector
	consumer, err := env.NewConsumer(name, c.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	poll.Until(t, 30*time.Second, fmt.Sprintf("%d messages", n), func() bool { return c.count() >= n })
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.messages))
	for i, m := range c.messages {
		if c.offsets[i] != int64(i) {
			t.Fatalf("message %d came at offset %d", i, c.offsets[i])
		}
		out[i] = string(m.GetData())
	}
	return out
}

// A kill -9 while a named producer publishes in batches loses no
// confirmed message; after the restart the producer, resending from the
// sequence the broker tracked for it, stores each message exactly once,
// and a resend of messages it confirmed is dropped. The check itself is
// checked: a message confirmed and missing, or stored twice, fails it
// (streamCrashCheck's self-test below).
func TestStreamProtocolKillDuringBatchedPublishing(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	env := streamEnvAt(t, p.stream)
	name := uniq(t, "crash")
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatal(err)
	}
	producer, err := env.NewProducer(name, stream.NewProducerOptions().SetProducerName("crasher").SetBatchSize(100))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	confirmed := map[int64]bool{}
	confirmations := producer.NotifyPublishConfirmation() // before any send: the client's handler reads it
	go func() {
		for batch := range confirmations {
			mu.Lock()
			for _, c := range batch {
				if c.IsConfirmed() {
					confirmed[c.GetPublishingId()] = true
				}
			}
			mu.Unlock()
		}
	}()
	const total = 20000
	var sent atomic.Int64
	go func() {
		for i := 1; i <= total; i++ {
			m := samqp.NewMessage([]byte(strconv.Itoa(i)))
			m.SetPublishingId(int64(i))
			if producer.Send(m) != nil {
				return
			}
			sent.Store(int64(i))
		}
	}()
	poll.Until(t, 30*time.Second, "a few thousand confirms", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed) >= 3000
	})
	p.stop(syscall.SIGKILL)
	_ = env.Close()
	mu.Lock()
	acked := make(map[int64]bool, len(confirmed))
	for id := range confirmed {
		acked[id] = true
	}
	mu.Unlock()
	t.Logf("%d sent, %d confirmed before the kill", sent.Load(), len(acked))

	p = startProcess(t, dir)
	env = streamEnvAt(t, p.stream)
	defer env.Close()
	last, err := env.QuerySequence("crasher", name)
	if err != nil {
		t.Fatal(err)
	}
	var maxAcked int64
	for id := range acked {
		maxAcked = max(maxAcked, id)
	}
	if last < maxAcked {
		t.Fatalf("the tracked sequence %d is below a confirmed id %d", last, maxAcked)
	}
	// Resend everything from 1, as a producer that lost its state would:
	// what the broker has is dropped, the rest stored once.
	producer, err = env.NewProducer(name, stream.NewProducerOptions().SetProducerName("crasher"))
	if err != nil {
		t.Fatal(err)
	}
	const after = 200 // more than the kill could have left unsent
	n := int(last) + after
	// The confirms are read while sending: the client's Send blocks on
	// a confirmation channel nobody reads.
	confirms := producer.NotifyPublishConfirmation()
	var got atomic.Int64
	go func() {
		for batch := range confirms {
			got.Add(int64(len(batch)))
		}
	}()
	for i := 1; i <= n; i++ {
		m := samqp.NewMessage([]byte(strconv.Itoa(i)))
		m.SetPublishingId(int64(i))
		if err := producer.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 60*time.Second, "the resends' confirms", func() bool { return got.Load() >= int64(n) })
	bodies := readStreamBodies(t, env, name, n)
	if err := streamCrashCheck(bodies, acked, n); err != nil {
		t.Fatal(err)
	}
}

// streamCrashCheck says what is wrong with a stream's bodies after the
// kill and the resend: each of 1..n once, in order, every confirmed id
// among them.
func streamCrashCheck(bodies []string, confirmed map[int64]bool, n int) error {
	if len(bodies) != n {
		return fmt.Errorf("the stream holds %d messages, want %d (each of 1..%d once)", len(bodies), n, n)
	}
	for i, b := range bodies {
		if b != strconv.Itoa(i+1) {
			return fmt.Errorf("offset %d holds %q, want %d: lost or duplicated around it", i, b, i+1)
		}
	}
	for id := range confirmed {
		if id < 1 || int(id) > n {
			return fmt.Errorf("confirmed id %d is not in the stream", id)
		}
	}
	return nil
}

// The crash check reports a lost message and a duplicate.
func TestStreamCrashCheckSeesLossAndDuplicates(t *testing.T) {
	confirmed := map[int64]bool{1: true, 2: true}
	if err := streamCrashCheck([]string{"1", "2", "3"}, confirmed, 3); err != nil {
		t.Fatalf("a good stream: %v", err)
	}
	if err := streamCrashCheck([]string{"1", "3", "4"}, confirmed, 3); err == nil {
		t.Fatal("a lost message was not seen")
	}
	if err := streamCrashCheck([]string{"1", "2", "2", "3"}, confirmed, 3); err == nil {
		t.Fatal("a duplicate was not seen")
	}
	if err := streamCrashCheck([]string{"1", "2"}, map[int64]bool{3: true}, 2); err == nil {
		t.Fatal("a confirmed message missing was not seen")
	}
}
