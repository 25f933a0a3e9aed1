package tests

import (
	"net"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
	wire "github.com/warrenmq/warren/protocol/stream"
)

// Single active consumers across a cluster: the members of one group,
// connected to different nodes, are one group, coordinated by the node
// leading the stream (as RabbitMQ's stream coordinator does it). One
// reads at a time; when it leaves, or its node dies, the next takes
// over; when the coordinator's node dies, the new leader rebuilds the
// groups from what the nodes report and keeps one reading.

// sacEvents is what a test's consumers heard, in the order they heard it.
type sacEvents struct {
	mu     sync.Mutex
	events []string
}

func (e *sacEvents) add(ev string) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
}

func (e *sacEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}

// index is where ev is in the list, -1 when it is not.
func (e *sacEvents) index(ev string) int { return slices.Index(e.list(), ev) }

// sacConsumer is a raw stream connection with one single active
// subscription, read on a goroutine of its own: it answers each
// ConsumerUpdate (reading from the stream's first offset), grants a
// credit for each chunk, counts the messages, and logs each update as
// "<name> active" or "<name> inactive".
type sacConsumer struct {
	name   string
	nc     net.Conn
	r      *wire.FrameReader
	events *sacEvents
	wmu    sync.Mutex
	mu     sync.Mutex
	got    int
}

func subscribeSAC(t *testing.T, n *clusterNode, name, streamName string, events *sacEvents) *sacConsumer {
	t.Helper()
	c, code := openStreamAt(t, n.stream, "guest", "guest", "/")
	if code != wire.CodeOK {
		t.Fatalf("open on %s: %v", n.name, code)
	}
	if code := c.call(&wire.Subscribe{SubscriptionID: 1, Stream: streamName, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 10,
		Properties: map[string]string{"single-active-consumer": "true", "name": "group"}}); code != wire.CodeOK {
		t.Fatalf("%s subscribes on %s: %v", name, n.name, code)
	}
	sc := &sacConsumer{name: name, nc: c.nc, r: c.r, events: events}
	_ = c.nc.SetReadDeadline(time.Time{})
	go sc.read()
	return sc
}

func (sc *sacConsumer) send(cmd wire.Command) {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	_ = sc.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _ = sc.nc.Write(wire.AppendFrame(nil, cmd))
}

func (sc *sacConsumer) read() {
	for {
		f, err := sc.r.ReadFrame()
		if err != nil {
			return
		}
		cmd, err := wire.Decode(f)
		if err != nil {
			sc.events.add(sc.name + " undecodable frame: " + err.Error())
			return
		}
		switch m := cmd.(type) {
		case *wire.ConsumerUpdate:
			state := " inactive"
			if m.Active {
				state = " active"
			}
			sc.events.add(sc.name + state)
			sc.send(&wire.ConsumerUpdateResponse{CorrelationID: m.CorrelationID, Code: wire.CodeOK, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}})
		case *wire.Deliver:
			h, _, err := wire.ParseChunk(m.Chunk)
			if err != nil {
				sc.events.add(sc.name + " bad chunk: " + err.Error())
				return
			}
			sc.mu.Lock()
			sc.got += int(h.NumRecords)
			sc.mu.Unlock()
			sc.send(&wire.Credit{SubscriptionID: 1, Credit: 1})
		}
	}
}

func (sc *sacConsumer) count() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.got
}

func (sc *sacConsumer) unsubscribe() {
	sc.send(&wire.Unsubscribe{CorrelationID: 1000, SubscriptionID: 1})
}

// sacStream starts three nodes and declares stream name on n1, which
// leads it; ten messages are published to it through pub, a publisher on
// n1. The events are logged when the test fails.
func sacStream(t *testing.T, name string) (nodes []*clusterNode, pub *rawStream, events *sacEvents) {
	t.Helper()
	nodes = threeProcesses(t)
	_, ch1 := nodes[0].dial(t)
	if _, err := ch1.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "n1 leading the stream", func() bool { return leaderOf(nodes[2], name) == "n1" })
	pub, code := openStreamAt(t, nodes[0].stream, "guest", "guest", "/")
	if code != wire.CodeOK {
		t.Fatalf("open on n1: %v", code)
	}
	if code := pub.call(&wire.DeclarePublisher{PublisherID: 1, Stream: name}); code != wire.CodeOK {
		t.Fatalf("declare publisher: %v", code)
	}
	publishRaw(t, pub, 1, 10)
	events = &sacEvents{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the consumers heard %v", events.list())
		}
	})
	return nodes, pub, events
}

func TestClusterStreamProtocolSingleActiveConsumer(t *testing.T) {
	nodes, pub, events := sacStream(t, "sac")
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]

	// One group across the three nodes: a on n2 subscribes first and
	// reads; b on n3 and c on n1 wait.
	a := subscribeSAC(t, n2, "a", "sac", events)
	poll.Until(t, 20*time.Second, "a active, reading the ten", func() bool { return a.count() == 10 })
	b := subscribeSAC(t, n3, "b", "sac", events)
	// The group's order is the order registrations reach the
	// coordinator, and b's and c's come from different nodes: c
	// subscribes once b's has had ample time to arrive.
	time.Sleep(2 * time.Second)
	c := subscribeSAC(t, n1, "c", "sac", events)
	publishRaw(t, pub, 11, 20)
	poll.Until(t, 20*time.Second, "a reading twenty", func() bool { return a.count() == 20 })

	// a leaves: b, next in the order they subscribed, takes over.
	events.add("a leaves")
	a.unsubscribe()
	poll.Until(t, 20*time.Second, "b active, reading twenty", func() bool { return b.count() == 20 })

	// b's node dies: c takes over once the coordinator finds it down.
	events.add("n3 killed")
	n3.stop(syscall.SIGKILL)
	poll.Until(t, 30*time.Second, "c active, reading twenty", func() bool { return c.count() == 20 })
	n3.restart(t)
	waitUntil(t, "three running nodes", func() bool { return len(n1.running(t)) == 3 })

	// d on n2 waits behind c. The coordinator's node (the leader's, c's
	// too) dies: the new leader rebuilds the group from what n2 reports,
	// and d takes over.
	d := subscribeSAC(t, n2, "d", "sac", events)
	publishRaw(t, pub, 21, 30)
	poll.Until(t, 20*time.Second, "c reading thirty", func() bool { return c.count() == 30 })
	events.add("n1 killed")
	n1.stop(syscall.SIGKILL)
	poll.Until(t, 30*time.Second, "d active, reading thirty", func() bool { return d.count() == 30 })

	// The order: each took over after the one before it went, and only
	// then; nobody else was ever told it was active.
	want := []string{"a active", "a leaves", "b active", "n3 killed", "c active", "n1 killed", "d active"}
	if got := events.list(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for _, sc := range []*sacConsumer{b, c, d} {
		_ = sc.nc.Close()
	}
}

// A node paused (SIGSTOP) with the group's active member on it: the
// coordinator, hearing nothing from it, hands the group to a member
// elsewhere; when the node wakes, its member, which still believes
// itself active, is told to step down, and the other keeps reading.
func TestClusterStreamProtocolSingleActiveConsumerPaused(t *testing.T) {
	nodes, pub, events := sacStream(t, "sacp")
	n2, n3 := nodes[1], nodes[2]
	a := subscribeSAC(t, n2, "a", "sacp", events)
	poll.Until(t, 20*time.Second, "a active, reading the ten", func() bool { return a.count() == 10 })
	b := subscribeSAC(t, n3, "b", "sacp", events)

	events.add("n2 paused")
	if err := n2.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n2.cmd.Process.Signal(syscall.SIGCONT) })
	poll.Until(t, 30*time.Second, "b active, reading the ten", func() bool { return b.count() == 10 })
	events.add("n2 resumed")
	if err := n2.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "a told to step down", func() bool { return events.index("a inactive") >= 0 })
	publishRaw(t, pub, 11, 20)
	poll.Until(t, 20*time.Second, "b reading twenty", func() bool { return b.count() == 20 })

	want := []string{"a active", "n2 paused", "b active", "n2 resumed", "a inactive"}
	if got := events.list(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if n := a.count(); n != 10 {
		t.Fatalf("a, stepped down before 11-20 were published, read %d messages, want its 10", n)
	}
	_ = a.nc.Close()
	_ = b.nc.Close()
}
