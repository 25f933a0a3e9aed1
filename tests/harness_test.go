package tests

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
)

// startBroker runs an in-process broker on a free loopback port and stops
// it when the test ends. tweak adjusts the configuration first.
func startBroker(t testing.TB, tweak ...func(*config.Config)) *broker.Broker {
	t.Helper()
	cfg := config.Default()
	cfg.AMQP.Listen = "127.0.0.1:0"
	cfg.Admin.Listen = ""
	cfg.Storage.DataDir = t.TempDir()
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
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
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
func dial(t testing.TB, b *broker.Broker) *amqp.Connection {
	t.Helper()
	c, err := amqp.Dial(url(b))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// channel opens a channel on a fresh connection.
func channel(t testing.TB, b *broker.Broker) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	c := dial(t, b)
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

// nothing asserts that no delivery arrives for a short while.
func nothing(t testing.TB, d <-chan amqp.Delivery) {
	t.Helper()
	select {
	case m := <-d:
		t.Fatalf("unexpected delivery: %q (key %q)", m.Body, m.RoutingKey)
	case <-time.After(100 * time.Millisecond):
	}
}

func publish(t testing.TB, ch *amqp.Channel, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	if err := ch.PublishWithContext(context.Background(), exchange, key, false, false, msg); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func body(s string) amqp.Publishing { return amqp.Publishing{Body: []byte(s)} }
