package tests

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/internal/poll"
	wire "github.com/warrenmq/warren/protocol/stream"
)

// The stream protocol across three Warren processes: metadata names a
// replicated stream's leader and replicas by the host and port their
// nodes advertise, whichever node is asked, so the official client
// publishes through the leader and reads from a replica even when it
// first connects to a node that holds none.

// streamPort is the port of n's stream listener, which it advertises.
func streamPort(t *testing.T, n *clusterNode) uint32 {
	t.Helper()
	_, port, err := net.SplitHostPort(n.stream)
	if err != nil {
		t.Fatalf("%s has no stream listener: %v", n.name, err)
	}
	p, _ := strconv.Atoi(port)
	return uint32(p)
}

// streamMetadata asks n for one stream's metadata: its code, its leader's
// port and its replicas' ports.
func streamMetadata(t *testing.T, n *clusterNode, name string) (code wire.ResponseCode, leader uint32, replicas []uint32) {
	t.Helper()
	c, open := openStreamAt(t, n.stream, "guest", "guest", "/")
	if open != wire.CodeOK {
		t.Fatalf("open on %s: %v", n.name, open)
	}
	defer c.nc.Close()
	c.corr++
	c.send(&wire.Metadata{CorrelationID: c.corr, Streams: []string{name}})
	for {
		resp, ok := c.next().(*wire.MetadataResponse)
		if !ok {
			continue
		}
		port := map[uint16]uint32{}
		for _, b := range resp.Brokers {
			if b.Host != "localhost" {
				t.Fatalf("%s advertises %q, want localhost (its listener's loopback address)", n.name, b.Host)
			}
			port[b.Reference] = b.Port
		}
		sm := resp.Streams[0]
		for _, r := range sm.Replicas {
			replicas = append(replicas, port[r])
		}
		slices.Sort(replicas)
		return sm.Code, port[sm.Leader], replicas
	}
}

func TestClusterStreamProtocolMetadata(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch1 := n1.dial(t)
	// client-local: n1 leads, n2 is the other member, n3 holds nothing.
	args := amqp.Table{"x-queue-type": "stream", "x-initial-cluster-size": int32(2)}
	if _, err := ch1.QueueDeclare("pair", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "n1 leading the stream", func() bool { return leaderOf(n3, "pair") == "n1" })
	for _, asked := range nodes {
		waitUntil(t, asked.name+"'s metadata: leader n1, replica n2", func() bool {
			code, leader, replicas := streamMetadata(t, asked, "pair")
			return code == wire.CodeOK && leader == streamPort(t, n1) && slices.Equal(replicas, []uint32{streamPort(t, n2)})
		})
	}
	if code, _, _ := streamMetadata(t, n3, "no-such-stream"); code != wire.CodeStreamDoesNotExist {
		t.Fatalf("a missing stream: %v", code)
	}

	// The client connected to n3 alone publishes and reads.
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
		SetHost("localhost").SetPort(int(streamPort(t, n3))).SetUser("guest").SetPassword("guest"))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	p, err := env.NewProducer("pair", nil)
	if err != nil {
		t.Fatalf("a producer through a node without a replica: %v", err)
	}
	sendConfirmed(t, p, "m", 100)
	var got collector
	c, err := env.NewConsumer("pair", got.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatalf("a consumer through a node without a replica: %v", err)
	}
	poll.Until(t, 20*time.Second, "the hundred messages", func() bool { return got.count() == 100 })
	_ = c.Close()
	_ = p.Close()

	// The leader's node killed, the other member alone cannot elect
	// one: the stream is not available, as RabbitMQ says of a stream
	// without its leader. Back, one of the two leads and the other is
	// its replica again.
	n1.stop(syscall.SIGKILL)
	waitUntil(t, "n3's metadata: not available", func() bool {
		code, _, _ := streamMetadata(t, n3, "pair")
		return code == wire.CodeStreamNotAvailable
	})
	n1.restart(t)
	waitUntil(t, "n3's metadata: a leader and its replica", func() bool {
		code, leader, replicas := streamMetadata(t, n3, "pair")
		p1, p2 := streamPort(t, n1), streamPort(t, n2)
		return code == wire.CodeOK && (leader == p1 && slices.Equal(replicas, []uint32{p2}) || leader == p2 && slices.Equal(replicas, []uint32{p1}))
	})
}

// publishRaw publishes ids from..to (inclusive) as messages "m-<id>"
// through publisher 1 of c, fifty to a frame, and waits until each is
// confirmed; a publish error fails the test.
func publishRaw(t *testing.T, c *rawStream, from, to uint64) {
	t.Helper()
	for id := from; id <= to; {
		p := &wire.Publish{PublisherID: 1}
		for ; id <= to && len(p.Messages) < 50; id++ {
			p.Messages = append(p.Messages, wire.PublishedMessage{PublishingID: id, Message: []byte(fmt.Sprint("m-", id))})
		}
		c.send(p)
	}
	confirmed := map[uint64]bool{}
	for uint64(len(confirmed)) < to-from+1 {
		switch m := c.next().(type) {
		case *wire.PublishConfirm:
			for _, id := range m.PublishingIDs {
				confirmed[id] = true
			}
		case *wire.PublishError:
			t.Fatalf("publish errors: %+v", m.Errors)
		}
	}
}

// publisherSequence asks c for the last publishing id the stream took
// from reference.
func publisherSequence(t *testing.T, c *rawStream, stream, reference string) uint64 {
	t.Helper()
	c.corr++
	c.send(&wire.QueryPublisherSequence{CorrelationID: c.corr, Reference: reference, Stream: stream})
	for {
		if r, ok := c.next().(*wire.QueryPublisherSequenceResponse); ok && r.CorrelationID == c.corr {
			if r.Code != wire.CodeOK {
				t.Fatalf("query publisher sequence: %v", r.Code)
			}
			return r.Sequence
		}
	}
}

// Deduplication outlives the leader: a named publisher on a follower's
// node has ids 1-200 confirmed, the leader's node is killed, and once
// another leads, ids 150-300 sent again store only 201-300; every node,
// the old leader back included, says 300 for the publisher and holds
// each message once, in order.
func TestClusterStreamProtocolDeduplicationAcrossLeaders(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch1 := n1.dial(t)
	if _, err := ch1.QueueDeclare("dedup", true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "n1 leading the stream", func() bool { return leaderOf(n3, "dedup") == "n1" })
	c, code := openStreamAt(t, n2.stream, "guest", "guest", "/")
	if code != wire.CodeOK {
		t.Fatalf("open on n2: %v", code)
	}
	if code := c.call(&wire.DeclarePublisher{PublisherID: 1, Reference: "orders", Stream: "dedup"}); code != wire.CodeOK {
		t.Fatalf("declare publisher: %v", code)
	}
	publishRaw(t, c, 1, 200)

	n1.stop(syscall.SIGKILL)
	waitUntil(t, "another leader", func() bool { l := leaderOf(n3, "dedup"); return l == "n2" || l == "n3" })
	publishRaw(t, c, 150, 300)
	if seq := publisherSequence(t, c, "dedup", "orders"); seq != 300 {
		t.Fatalf("n2 says the publisher's sequence is %d, want 300", seq)
	}

	n1.restart(t)
	want := make([]string, 300)
	for i := range want {
		want[i] = fmt.Sprint("m-", i+1)
	}
	for _, n := range nodes {
		sameLog(t, n.name+"'s stream", readStream(t, n, "dedup", 300), want)
		r, code := openStreamAt(t, n.stream, "guest", "guest", "/")
		if code != wire.CodeOK {
			t.Fatalf("open on %s: %v", n.name, code)
		}
		waitUntil(t, n.name+" saying 300 for the publisher", func() bool { return publisherSequence(t, r, "dedup", "orders") == 300 })
	}
}
