package main

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	samqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// list_stream_connections, list_stream_consumers and
// list_stream_publishers, with rabbitmq-streams' default columns and
// some chosen ones, against a stream client's producer and consumer.
func TestListStreamVerbs(t *testing.T) {
	b, url := newBroker(t, func(c *config.Config) { c.Stream.Listen = config.Addrs{"127.0.0.1:0"} })
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(b.StreamAddr())
	p, _ := strconv.Atoi(port)
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(host).SetPort(p).SetUser("guest").SetPassword("guest"))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.DeclareStream("events", nil); err != nil {
		t.Fatal(err)
	}
	producer, err := env.NewProducer("events", stream.NewProducerOptions().SetProducerName("ctl-ref"))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.Send(samqp.NewMessage([]byte("e"))); err != nil {
		t.Fatal(err)
	}
	consumer, err := env.NewConsumer("events", func(stream.ConsumerContext, *samqp.Message) {},
		stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()

	ctlOK := ctlMust(t, url)
	if !poll.Within(10*time.Second, func() bool {
		return strings.Contains(ctlOK("-q", "list_stream_publishers"), "\tevents\tctl-ref\t1\t1\t0\n")
	}) {
		t.Fatalf("list_stream_publishers never showed the confirmed message:\n%s", ctlOK("list_stream_publishers"))
	}
	out := ctlOK("list_stream_publishers")
	if !strings.HasPrefix(out, "Listing stream publishers for vhost / ...\n"+
		"connection_pid\tpublisher_id\tstream\treference\tmessages_published\tmessages_confirmed\tmessages_errored\n") {
		t.Fatalf("list_stream_publishers:\n%s", out)
	}
	if !poll.Within(10*time.Second, func() bool {
		return strings.Contains(ctlOK("-s", "list_stream_consumers", "stream", "messages_consumed", "offset", "offset_lag"), "events\t1\t1\t0\n")
	}) {
		t.Fatalf("list_stream_consumers never showed the consumed message:\n%s", ctlOK("list_stream_consumers"))
	}
	if out := ctlOK("list_stream_consumers"); !strings.Contains(out, "connection_pid\tsubscription_id\tstream\tmessages_consumed\toffset\toffset_lag\tcredits\tproperties\n") {
		t.Fatalf("list_stream_consumers' default columns:\n%s", out)
	}

	var conns []map[string]any
	if err := json.Unmarshal([]byte(ctlOK("list_stream_connections", "--formatter", "json")), &conns); err != nil || len(conns) < 2 {
		t.Fatalf("list_stream_connections --formatter json: %v %v", conns, err)
	}
	if _, ok := conns[0]["conn_name"].(string); !ok || len(conns[0]) != 1 {
		t.Fatalf("list_stream_connections' default column is conn_name: %v", conns[0])
	}
	out = ctlOK("-s", "list_stream_connections", "user", "vhost", "connection_state", "subscriptions")
	if !strings.Contains(out, "guest\t/\trunning\t1\n") || !strings.Contains(out, "guest\t/\trunning\t0\n") {
		t.Fatalf("list_stream_connections with columns (one connection subscribed, one not):\n%s", out)
	}
	if _, err := ctl(t, url, "list_stream_connections", "pid"); err == nil || !strings.Contains(err.Error(), "conn_name") {
		t.Fatalf("an unknown column: %v", err)
	}
}
