package vhost_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// stallLimit is how long the watchdog lets one step of a test run before
// it calls the step stalled: a deadlock, never a slow machine.
const stallLimit = 10 * time.Second

// within runs f and fails the test with every goroutine's stack when f has
// not returned within stallLimit.
func within(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(stallLimit):
		// A deadlock also stalls the test's cleanups (even a panic runs
		// them first): end the whole run, with every goroutine's stack to
		// show who holds what.
		fmt.Fprintf(os.Stderr, "--- FAIL: %s: %s stalled for %v (deadlock?)\n%s", t.Name(), what, stallLimit, allStacks())
		os.Exit(1)
	}
}

// allStacks returns every goroutine's stack.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// newVHost makes a vhost from c, closed when the test ends: the name "/"
// and a registry of the built-in exchange types when c has none, and a
// logger that logs nothing.
//
// This is the one place: every test and benchmark of the package builds
// its vhost here, so what every vhost of the tests needs (the queue types:
// classic queues, when c.QueueTypes names none) is added here alone.
func newVHost(t testing.TB, c vhost.Config) *vhost.VHost {
	t.Helper()
	if c.Name == "" {
		c.Name = "/"
	}
	if c.Types == nil {
		c.Types = exchange.NewRegistry()
	}
	if c.QueueTypes == nil {
		c.QueueTypes = queuetype.NewTypes(queue.Quorum, classicqueue.Type{})
	}
	c.Logger = zerolog.Nop()
	v := vhost.New(c)
	t.Cleanup(v.Close)
	return v
}

// newTestVHost makes a vhost with the built-in types. With durable set it
// has a store on an in-memory filesystem.
func newTestVHost(t testing.TB, durable bool) *vhost.VHost {
	t.Helper()
	var c vhost.Config
	if durable {
		c.Store = memStore(t)
	}
	return newVHost(t, c)
}

// memStore is an empty store on an in-memory filesystem, closed when the
// test ends.
func memStore(t testing.TB) *storage.Store {
	t.Helper()
	st, err := storage.Open("data", storage.Options{FS: vfs.NewMem(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Recover(nil); err != nil {
		t.Fatal(err)
	}
	return st
}

func mustExchange(t testing.TB, v *vhost.VHost, name, typ string, args protocol.Table) *vhost.Exchange {
	t.Helper()
	x, err := v.DeclareExchange(exchange.Definition{Name: name, Type: typ, Durable: true, Args: args}, false)
	if err != nil {
		t.Fatalf("declare exchange %s: %v", name, err)
	}
	return x
}

func mustQueue(t testing.TB, v *vhost.VHost, name string, args protocol.Table) *queue.Queue {
	t.Helper()
	l, _, err := v.DeclareQueue(topology.QueueDef{Name: name, Durable: true, Args: args}, false)
	if err != nil {
		t.Fatalf("declare queue %s: %v", name, err)
	}
	q, ok := classicqueue.Of(l)
	if !ok {
		t.Fatalf("queue %s is a %s", name, l.Kind())
	}
	return q
}

// classic is the classic queue name, which must exist.
func classic(t testing.TB, v *vhost.VHost, name string) *queue.Queue {
	t.Helper()
	dq, err := v.Queue(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, ok := classicqueue.Of(dq)
	if !ok {
		t.Fatalf("queue %s is a %s", name, dq.Kind())
	}
	return q
}

func mustBind(t testing.TB, v *vhost.VHost, source, queueName, key string) {
	t.Helper()
	if err := v.Bind(source, exchange.Destination{Kind: exchange.ToQueue, Name: queueName}, key, nil, nil); err != nil {
		t.Fatalf("bind %s -> %s: %v", source, queueName, err)
	}
}

// msg builds a message; persistent sets delivery-mode 2.
func msg(t testing.TB, exchangeName, key, body string, persistent bool) *message.Message {
	t.Helper()
	var props []byte
	var flags uint16
	if persistent {
		p := protocol.Properties{Flags: protocol.FlagDeliveryMode, DeliveryMode: 2}
		var err error
		if props, err = p.Append(nil); err != nil {
			t.Fatal(err)
		}
		flags = p.Flags
	}
	m, err := message.New(exchangeName, key, flags, props, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func publish(t testing.TB, v *vhost.VHost, exchangeName, key, body string) vhost.Outcome {
	t.Helper()
	x, err := v.Exchange(exchangeName)
	if err != nil {
		t.Fatal(err)
	}
	var r vhost.RouteBuffers
	out, err := v.Publish(x, msg(t, exchangeName, key, body, true), &r)
	if err != nil {
		t.Fatalf("publish to %q: %v", exchangeName, err)
	}
	return out
}

func ready(t testing.TB, q *queue.Queue) int {
	t.Helper()
	return q.Stats().Ready
}

// bodies takes every ready message off q with basic.get and returns the
// bodies in order.
func bodies(t testing.TB, q *queue.Queue) []string {
	t.Helper()
	var out []string
	for {
		d, _, ok := q.Get(true)
		if !ok {
			return out
		}
		out = append(out, string(d.Entry.Msg.Body))
	}
}
