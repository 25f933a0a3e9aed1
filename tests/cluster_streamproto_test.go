package tests

import (
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
