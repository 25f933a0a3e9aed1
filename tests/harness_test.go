package tests

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// server is the broker under test: an in-process Warren, or, when
// WARREN_REFERENCE_URL is set, whatever broker that URL reaches (RabbitMQ),
// so the same test shows what the reference does.
type server struct {
	b      *broker.Broker // nil for the reference broker
	url    string
	stream string // the reference's stream listener, host:port (streamproto_test.go)
	t      testing.TB

	mu        sync.Mutex
	queues    []string // to delete from the reference broker at the end
	exchanges []string
}

// scratchDir holds what a test run builds once and shares (the warren
// binaries, the test plugins, the wasm compilation cache); TestMain removes
// it, so a run leaves nothing behind in the system's temporary directory.
var scratchDir string

func TestMain(m *testing.M) {
	if spec := os.Getenv(holdEnv); spec != "" {
		os.Exit(holdConnections(spec)) // a child of TestWebUIManyConnections
	}
	dir, err := os.MkdirTemp("", "warren-tests")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratchDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// reference returns the reference broker's URL, if one is configured.
func reference() string { return os.Getenv("WARREN_REFERENCE_URL") }

// start returns the broker under test for a test that needs no special
// configuration: it runs against the reference broker too.
func start(t testing.TB) *server {
	t.Helper()
	if u := reference(); u != "" {
		return &server{url: u, t: t}
	}
	b := startBroker(t)
	return &server{b: b, url: url(b), t: t}
}

// startWarren is start for tests of Warren's own configuration; they skip
// against the reference broker.
func startWarren(t testing.TB, tweak ...func(*config.Config)) *server {
	t.Helper()
	if reference() != "" {
		t.Skip("needs Warren's configuration")
	}
	b := startBroker(t, tweak...)
	return &server{b: b, url: url(b), t: t}
}

// startBroker runs an in-process broker on a free loopback port and stops
// it when the test ends. tweak adjusts the configuration first.
func startBroker(t testing.TB, tweak ...func(*config.Config)) *broker.Broker {
	t.Helper()
	b := newBroker(t, tweak...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
	return b
}

// newBroker runs an in-process broker that the test itself shuts down.
func newBroker(t testing.TB, tweak ...func(*config.Config)) *broker.Broker {
	t.Helper()
	cfg := config.Default()
	cfg.AMQP.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Stream.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.MQTT.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Admin.Listen = ""
	cfg.Storage.DataDir = t.TempDir()
	cfg.Plugins.CacheDir = sharedWasmCache(t)
	for _, f := range tweak {
		f(&cfg)
	}
	log := zerolog.New(io.Discard)
	if testing.Verbose() {
		log = zerolog.New(zerolog.ConsoleWriter{Out: testWriter{t}}).Level(zerolog.DebugLevel)
	}
	b, err := broker.New(cfg, log)
	if err != nil {
		t.Fatalf("broker: %v", err)
	}
	if err := b.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	return b
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}

func url(b *broker.Broker) string {
	return fmt.Sprintf("amqp://guest:guest@%s/", b.Addr())
}

// dial connects as guest and closes the connection when the test ends.
func dial(t testing.TB, s *server) *amqp.Connection {
	t.Helper()
	c, err := amqp.Dial(s.url)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// channel opens a channel on a fresh connection.
func channel(t testing.TB, s *server) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	c := dial(t, s)
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	return c, ch
}

// amqpCode returns the reply code of an amqp.Error, 0 otherwise.
func amqpCode(err error) int {
	if e, ok := err.(*amqp.Error); ok {
		return e.Code
	}
	return 0
}

// expectCode fails unless err is an AMQP error with the given code.
func expectCode(t testing.TB, err error, code int) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected AMQP error %d, got success", code)
	}
	if got := amqpCode(err); got != code {
		t.Fatalf("expected AMQP error %d, got %v", code, err)
	}
}

// receive waits for one delivery.
func receive(t testing.TB, d <-chan amqp.Delivery) amqp.Delivery {
	t.Helper()
	select {
	case m, ok := <-d:
		if !ok {
			t.Fatal("delivery channel closed")
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery within 5s")
	}
	return amqp.Delivery{}
}

// fence checks that nothing more is on its way to the consumers ds: it
// publishes one marker per consumer through exchange and key, after all
// the test did so far, and fails unless the next delivery on each of ds is
// a marker, a different one each. A queue hands its messages to a consumer
// in order, and a channel's deliveries reach the client in order, so
// whatever was sent to a consumer before its marker arrives first; waiting
// a while for nothing instead would pass whenever the broker is slow. Each
// of ds must be able to take its marker: one at its prefetch limit leaves
// the marker in the queue, and there the queue's ready count is the check.
// Consumers of one queue get one marker each when they share it
// round-robin.
func fence(t testing.TB, ch *amqp.Channel, exchange, key string, ds ...<-chan amqp.Delivery) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	markers := map[string]bool{}
	for i := range ds {
		m := fmt.Sprintf("fence %d", i)
		markers[m] = true
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, body(m))
		if err != nil {
			t.Fatalf("publishing the fence: %v", err)
		}
		if dc == nil {
			continue // not in confirm mode: the channel keeps the order anyway
		}
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("the fence was not confirmed (%v)", err)
		}
	}
	for i, d := range ds {
		m := receive(t, d)
		if !markers[string(m.Body)] {
			t.Fatalf("consumer %d got %q (key %q, redelivered %v) before the fence", i, m.Body, m.RoutingKey, m.Redelivered)
		}
		delete(markers, string(m.Body))
	}
}

func publish(t testing.TB, ch *amqp.Channel, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	if err := ch.PublishWithContext(context.Background(), exchange, key, false, false, msg); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func body(s string) amqp.Publishing { return amqp.Publishing{Body: []byte(s)} }

// uniq names an entity after the test, so tests sharing the reference
// broker never meet.
func uniq(t testing.TB, suffix string) string {
	n := "warren-test." + strings.ReplaceAll(t.Name(), "/", ".")
	if suffix != "" {
		n += "." + suffix
	}
	return n
}

// own records a queue or exchange to delete when the test ends. Only the
// shared reference broker needs it: an in-process Warren dies with the
// test.
func (s *server) own(queue, exchange string) {
	if s.b != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queues)+len(s.exchanges) == 0 {
		s.t.Cleanup(s.sweep)
	}
	if queue != "" {
		s.queues = append(s.queues, queue)
	}
	if exchange != "" {
		s.exchanges = append(s.exchanges, exchange)
	}
}

func (s *server) ownQueue(name string)    { s.own(name, "") }
func (s *server) ownExchange(name string) { s.own("", name) }

// sweep deletes what the test declared, on a connection of its own.
func (s *server) sweep() {
	c, err := amqp.Dial(s.url)
	if err != nil {
		s.t.Logf("cleanup: %v", err)
		return
	}
	defer c.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ch *amqp.Channel
	do := func(f func(*amqp.Channel) error) {
		if ch == nil || ch.IsClosed() {
			if ch, err = c.Channel(); err != nil {
				return
			}
		}
		_ = f(ch)
	}
	for _, q := range s.queues {
		do(func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err })
	}
	for _, x := range s.exchanges {
		do(func(ch *amqp.Channel) error { return ch.ExchangeDelete(x, false, false) })
	}
}

// declareQueue declares a plain queue named after the test and suffix.
func declareQueue(t testing.TB, s *server, ch *amqp.Channel, suffix string, args amqp.Table) string {
	t.Helper()
	name := uniq(t, suffix)
	s.ownQueue(name)
	if _, err := ch.QueueDeclare(name, false, false, false, false, args); err != nil {
		t.Fatalf("queue.declare %s: %v", name, err)
	}
	return name
}

// declareExchange declares an exchange named after the test and suffix.
func declareExchange(t testing.TB, s *server, ch *amqp.Channel, suffix, kind string, args amqp.Table) string {
	t.Helper()
	name := uniq(t, suffix)
	s.ownExchange(name)
	if err := ch.ExchangeDeclare(name, kind, false, false, false, false, args); err != nil {
		t.Fatalf("exchange.declare %s: %v", name, err)
	}
	return name
}

func bind(t testing.TB, ch *amqp.Channel, queue, key, exchange string, args amqp.Table) {
	t.Helper()
	if err := ch.QueueBind(queue, key, exchange, false, args); err != nil {
		t.Fatalf("queue.bind %s -> %s (%q): %v", exchange, queue, key, err)
	}
}

// confirmChannel opens a channel in confirm mode on a fresh connection.
func confirmChannel(t testing.TB, s *server) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	c, ch := channel(t, s)
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("confirm.select: %v", err)
	}
	return c, ch
}

// publishConfirmed publishes on a channel in confirm mode and waits for the
// ack, so the message is in its queues when it returns.
func publishConfirmed(t testing.TB, ch *amqp.Channel, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	if !confirmPublish(t, ch, exchange, key, false, msg) {
		t.Fatalf("publish to %q/%q was nacked", exchange, key)
	}
}

// confirmPublish publishes on a channel in confirm mode and reports whether
// the broker acked it.
func confirmPublish(t testing.TB, ch *amqp.Channel, exchange, key string, mandatory bool, msg amqp.Publishing) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, mandatory, false, msg)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if dc == nil {
		t.Fatal("publishConfirmed needs a channel in confirm mode")
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		t.Fatalf("waiting for the confirm: %v", err)
	}
	return ok
}

// expectClose waits for a NotifyClose channel to report an error with code.
func expectClose(t testing.TB, notify <-chan *amqp.Error, code int) *amqp.Error {
	t.Helper()
	select {
	case e, ok := <-notify:
		if !ok || e == nil {
			t.Fatalf("closed without an error, expected %d", code)
		}
		if e.Code != code {
			t.Fatalf("expected close %d, got %v", code, e)
		}
		return e
	case <-time.After(5 * time.Second):
		t.Fatalf("no close %d within 5s", code)
	}
	return nil
}

// get fetches one message with basic.get and auto-ack.
func get(t testing.TB, ch *amqp.Channel, queue string) amqp.Delivery {
	t.Helper()
	m, ok, err := ch.Get(queue, true)
	if err != nil {
		t.Fatalf("basic.get %s: %v", queue, err)
	}
	if !ok {
		t.Fatalf("basic.get %s: empty", queue)
	}
	return m
}

// empty asserts basic.get finds nothing.
func empty(t testing.TB, ch *amqp.Channel, queue string) {
	t.Helper()
	m, ok, err := ch.Get(queue, true)
	if err != nil {
		t.Fatalf("basic.get %s: %v", queue, err)
	}
	if ok {
		t.Fatalf("basic.get %s: unexpected message %q", queue, m.Body)
	}
}

// count returns the number of ready messages in a queue.
func count(t testing.TB, ch *amqp.Channel, queue string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatalf("queue.declare passive %s: %v", queue, err)
	}
	return q.Messages
}

// eventually waits for cond for at most 5 seconds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, what, cond)
}

// consume starts a consumer and fails the test on error.
func consume(t testing.TB, ch *amqp.Channel, queue string, autoAck bool) <-chan amqp.Delivery {
	t.Helper()
	d, err := ch.Consume(queue, "", autoAck, false, false, false, nil)
	if err != nil {
		t.Fatalf("basic.consume %s: %v", queue, err)
	}
	return d
}

// bodies receives n deliveries and returns their bodies.
func bodies(t testing.TB, d <-chan amqp.Delivery, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, string(receive(t, d).Body))
	}
	return out
}

// drain takes every ready message off a queue with basic.get and returns
// the bodies in order.
func drain(t testing.TB, ch *amqp.Channel, queue string) []string {
	t.Helper()
	var out []string
	for {
		m, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("basic.get %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, string(m.Body))
	}
}

// netListen opens a loopback listener on a free port.
func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// sharedWasmCache is one compilation cache for every broker of a test run,
// so each shipped plugin is compiled once, not once per test.
var (
	wasmCacheOnce sync.Once
	wasmCacheDir  string
)

func sharedWasmCache(t testing.TB) string {
	wasmCacheOnce.Do(func() {
		wasmCacheDir, _ = os.MkdirTemp(scratchDir, "wasm-cache")
	})
	return wasmCacheDir
}
