package tests

import (
	"slices"
	"testing"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/internal/poll"
)

// The stream plugin's management routes (RabbitMQ 3.10.8's
// rabbitmq_stream_management): stream connections, publishers and
// consumers as its JSON has them, closing a connection, and who sees
// what. Warren's own broker only: the stream client needs its listener.

type streamConnDetailsJSON struct {
	Name     string `json:"name"`
	Node     string `json:"node"`
	PeerHost string `json:"peer_host"`
	PeerPort int    `json:"peer_port"`
	User     string `json:"user"`
}

type streamQueueJSON struct {
	Name  string `json:"name"`
	VHost string `json:"vhost"`
}

type streamPublisherRow struct {
	Confirmed         uint64                `json:"confirmed"`
	ConnectionDetails streamConnDetailsJSON `json:"connection_details"`
	Errored           uint64                `json:"errored"`
	Published         uint64                `json:"published"`
	PublisherID       *int                  `json:"publisher_id"`
	Queue             streamQueueJSON       `json:"queue"`
	Reference         string                `json:"reference"`
}

type streamConsumerRow struct {
	Active            bool                  `json:"active"`
	ActivityStatus    string                `json:"activity_status"`
	ConnectionDetails streamConnDetailsJSON `json:"connection_details"`
	Consumed          uint64                `json:"consumed"`
	Credits           *int                  `json:"credits"`
	Offset            uint64                `json:"offset"`
	OffsetLag         *uint64               `json:"offset_lag"`
	Properties        map[string]string     `json:"properties"`
	Queue             streamQueueJSON       `json:"queue"`
	SubscriptionID    *int                  `json:"subscription_id"`
}

type streamConnRow struct {
	AuthMechanism    string            `json:"auth_mechanism"`
	ClientProperties map[string]string `json:"client_properties"`
	ConnectedAt      int64             `json:"connected_at"`
	FrameMax         *int              `json:"frame_max"`
	Host             string            `json:"host"`
	Name             string            `json:"name"`
	Node             string            `json:"node"`
	PeerHost         string            `json:"peer_host"`
	PeerPort         int               `json:"peer_port"`
	Port             int               `json:"port"`
	Protocol         string            `json:"protocol"`
	RecvOct          uint64            `json:"recv_oct"`
	RecvOctDetails   *struct {
		Rate float64 `json:"rate"`
	} `json:"recv_oct_details"`
	SendOct uint64 `json:"send_oct"`
	SSL     *bool  `json:"ssl"`
	State   string `json:"state"`
	Timeout *int   `json:"timeout"`
	User    string `json:"user"`
	VHost   string `json:"vhost"`
}

func names[T any](rows []T, name func(T) string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = name(r)
	}
	return out
}

func connName(r streamConnRow) string { return r.Name }

// streamTraffic declares a stream, has a producer named admin-ref
// publish three confirmed messages to it and a consumer read them from
// the first; both stay open until the test ends.
func streamTraffic(t *testing.T, s *server) (name string) {
	t.Helper()
	env := streamEnv(t, s)
	name = uniq(t, "smgmt")
	if err := env.DeclareStream(name, nil); err != nil {
		t.Fatal(err)
	}
	p, err := env.NewProducer(name, stream.NewProducerOptions().SetProducerName("admin-ref"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	sendConfirmed(t, p, "s", 3)
	var col collector
	consumer, err := env.NewConsumer(name, col.handle, stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = consumer.Close() })
	poll.Until(t, 10*time.Second, "three messages consumed", func() bool { return col.count() >= 3 })
	return name
}

// /metrics counts the stream protocol's connections, publishers,
// consumers and messages.
func TestStreamMetrics(t *testing.T) {
	m := startWarrenMgmt(t)
	streamTraffic(t, m.s)
	_, families := scrapeMetrics(t, m.s)
	value := func(name string) float64 {
		f := family(t, families, name)
		if len(f.Metric) != 1 {
			t.Fatalf("%s: %v", name, f.Metric)
		}
		if c := f.Metric[0].GetCounter(); c != nil {
			return c.GetValue()
		}
		return f.Metric[0].GetGauge().GetValue()
	}
	for name, want := range map[string]float64{
		"warren_stream_publishers": 1, "warren_stream_consumers": 1,
		"warren_stream_messages_published_total": 3, "warren_stream_messages_confirmed_total": 3,
		"warren_stream_messages_errored_total": 0, "warren_stream_messages_consumed_total": 3,
	} {
		if got := value(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := value("warren_stream_connections"); got < 2 {
		t.Errorf("warren_stream_connections = %v, want the producer's and the consumer's at least", got)
	}
}

func TestStreamManagementRoutes(t *testing.T) {
	m := startWarrenMgmt(t)
	name := streamTraffic(t, m.s)

	// Publishers: everyone's, the vhost's, the stream's.
	var pubs []streamPublisherRow
	poll.Until(t, 10*time.Second, "the publisher's confirms counted", func() bool {
		m.expect("GET", "/api/stream/publishers", "", 200).json(t, &pubs)
		return len(pubs) == 1 && pubs[0].Confirmed == 3
	})
	pub := pubs[0]
	if pub.PublisherID == nil || pub.Reference != "admin-ref" || pub.Published != 3 || pub.Errored != 0 ||
		pub.Queue != (streamQueueJSON{Name: name, VHost: "/"}) || pub.ConnectionDetails.User != "guest" ||
		pub.ConnectionDetails.Node == "" || pub.ConnectionDetails.PeerHost == "" || pub.ConnectionDetails.PeerPort == 0 {
		t.Fatalf("publisher: %+v", pub)
	}
	pubConn := pub.ConnectionDetails.Name
	for _, path := range []string{"/api/stream/publishers/%2F", "/api/stream/publishers/%2F/" + esc(name),
		"/api/stream/connections/%2F/" + esc(pubConn) + "/publishers"} {
		var got []streamPublisherRow
		m.expect("GET", path, "", 200).json(t, &got)
		if len(got) != 1 || got[0].ConnectionDetails.Name != pubConn {
			t.Fatalf("GET %s: %+v", path, got)
		}
	}
	m.expectNotFound("GET", "/api/stream/publishers/%2F/no-such-stream")
	m.expectNotFound("GET", "/api/stream/publishers/no-such-vhost")
	var none []streamPublisherRow
	m.expect("GET", "/api/stream/publishers/"+m.v(), "", 200).json(t, &none)
	if len(none) != 0 {
		t.Fatalf("publishers of an empty vhost: %+v", none)
	}

	// Consumers.
	var cons []streamConsumerRow
	poll.Until(t, 10*time.Second, "the consumer at offset 3", func() bool {
		m.expect("GET", "/api/stream/consumers/%2F", "", 200).json(t, &cons)
		return len(cons) == 1 && cons[0].Offset == 3
	})
	k := cons[0]
	if k.SubscriptionID == nil || k.Credits == nil || k.Consumed != 3 || k.OffsetLag == nil || *k.OffsetLag != 0 ||
		k.Properties == nil || k.Queue != (streamQueueJSON{Name: name, VHost: "/"}) || k.ConnectionDetails.User != "guest" ||
		!k.Active || k.ActivityStatus != "up" {
		t.Fatalf("consumer: %+v", k)
	}
	consConn := k.ConnectionDetails.Name
	var got []streamConsumerRow
	m.expect("GET", "/api/stream/consumers", "", 200).json(t, &got)
	if len(got) != 1 {
		t.Fatalf("all consumers: %+v", got)
	}
	m.expect("GET", "/api/stream/connections/%2F/"+esc(consConn)+"/consumers", "", 200).json(t, &got)
	if len(got) != 1 || got[0].ConnectionDetails.Name != consConn {
		t.Fatalf("the connection's consumers: %+v", got)
	}
	m.expectNotFound("GET", "/api/stream/connections/"+m.v()+"/"+esc(consConn)+"/consumers") // another vhost's path

	// Connections: the list, the vhost's, one, and in /api/connections.
	var conns []streamConnRow
	m.expect("GET", "/api/stream/connections", "", 200).json(t, &conns)
	if !slices.Contains(names(conns, connName), pubConn) || !slices.Contains(names(conns, connName), consConn) {
		t.Fatalf("stream connections %v lack %q or %q", names(conns, connName), pubConn, consConn)
	}
	m.expect("GET", "/api/stream/connections/%2F", "", 200).json(t, &conns)
	if !slices.Contains(names(conns, connName), pubConn) {
		t.Fatalf("the vhost's stream connections %v lack %q", names(conns, connName), pubConn)
	}
	m.expect("GET", "/api/stream/connections/"+m.v(), "", 200).json(t, &conns)
	if len(conns) != 0 {
		t.Fatalf("stream connections of an empty vhost: %v", names(conns, connName))
	}
	var paged struct {
		Items      []streamConnRow `json:"items"`
		TotalCount int             `json:"total_count"`
	}
	m.expect("GET", "/api/stream/connections?page=1&page_size=1", "", 200).json(t, &paged)
	if len(paged.Items) != 1 || paged.TotalCount < 2 {
		t.Fatalf("a page of stream connections: %+v", paged)
	}
	var one streamConnRow
	m.expect("GET", "/api/stream/connections/%2F/"+esc(pubConn), "", 200).json(t, &one)
	if one.Name != pubConn || one.Protocol != "stream" || one.User != "guest" || one.VHost != "/" || one.AuthMechanism != "PLAIN" ||
		one.Node == "" || one.Port == 0 || one.PeerPort == 0 || one.ConnectedAt == 0 || one.FrameMax == nil || one.Timeout == nil ||
		one.SSL == nil || *one.SSL || one.State != "running" || one.RecvOct == 0 || one.SendOct == 0 || one.RecvOctDetails == nil ||
		one.ClientProperties["product"] == "" {
		t.Fatalf("stream connection: %+v", one)
	}
	m.expectNotFound("GET", "/api/stream/connections/"+m.v()+"/"+esc(pubConn))
	var amqpList []streamConnRow
	m.expect("GET", "/api/connections", "", 200).json(t, &amqpList)
	if i := slices.Index(names(amqpList, connName), pubConn); i < 0 || amqpList[i].Protocol != "stream" {
		t.Fatalf("/api/connections %v lacks %q as a stream connection", names(amqpList, connName), pubConn)
	}
	m.expect("GET", "/api/connections/"+esc(pubConn), "", 200).json(t, &one)
	if one.Name != pubConn || one.Protocol != "stream" {
		t.Fatalf("/api/connections/{name} of a stream connection: %+v", one)
	}
	m.expect("GET", "/api/connections/"+esc(pubConn)+"/channels", "", 200).expectBody(t, "[]")

	// A management user sees its own stream connections only; a
	// monitoring user sees all but closes only its own.
	m.addUser("smgmt-alice", "alice", "management", "/")
	m.addUser("smgmt-mon", "mon", "monitoring", "/")
	mine := dialStreamAs(t, m.s, "smgmt-alice", "alice", "/")
	_ = mine
	as := func(user, pw, method, path string, want int) response {
		t.Helper()
		r := m.callAs(user, pw, method, path, "", nil)
		if r.status != want {
			t.Fatalf("%s %s as %s: %d %s, want %d", method, path, user, r.status, r.body, want)
		}
		return r
	}
	as("smgmt-alice", "alice", "GET", "/api/stream/connections", 200).json(t, &conns)
	if len(conns) != 1 || conns[0].User != "smgmt-alice" {
		t.Fatalf("alice's stream connections: %v", names(conns, connName))
	}
	as("smgmt-alice", "alice", "GET", "/api/connections", 200).json(t, &amqpList)
	if slices.Contains(names(amqpList, connName), pubConn) {
		t.Fatalf("alice sees guest's connection in /api/connections")
	}
	as("smgmt-alice", "alice", "GET", "/api/stream/connections/%2F/"+esc(pubConn), 404)
	as("smgmt-alice", "alice", "DELETE", "/api/stream/connections/%2F/"+esc(pubConn), 404)
	as("smgmt-alice", "alice", "GET", "/api/stream/publishers", 200).json(t, &none)
	if len(none) != 0 {
		t.Fatalf("alice sees guest's publishers: %+v", none)
	}
	as("smgmt-alice", "alice", "GET", "/api/stream/consumers/%2F", 200).json(t, &got)
	if len(got) != 0 {
		t.Fatalf("alice sees guest's consumers: %+v", got)
	}
	as("smgmt-mon", "mon", "GET", "/api/stream/connections/%2F/"+esc(pubConn), 200)
	as("smgmt-mon", "mon", "GET", "/api/stream/publishers", 200).json(t, &pubs)
	if len(pubs) != 1 {
		t.Fatalf("the monitoring user's publishers: %+v", pubs)
	}
	as("smgmt-mon", "mon", "DELETE", "/api/stream/connections/%2F/"+esc(pubConn), 401)

	// Closing: the connection goes, with its publisher.
	r := m.callAs("guest", "guest", "DELETE", "/api/stream/connections/%2F/"+esc(pubConn), "", map[string]string{"X-Reason": "bye"})
	if r.status != 204 {
		t.Fatalf("DELETE the publisher's connection: %d %s", r.status, r.body)
	}
	poll.Until(t, 10*time.Second, "the closed connection gone", func() bool {
		m.expect("GET", "/api/stream/connections", "", 200).json(t, &conns)
		return !slices.Contains(names(conns, connName), pubConn)
	})
	m.expectNotFound("GET", "/api/stream/connections/%2F/"+esc(pubConn))
	m.expect("GET", "/api/stream/publishers", "", 200).json(t, &pubs)
	if len(pubs) != 0 {
		t.Fatalf("publishers after the close: %+v", pubs)
	}
}
