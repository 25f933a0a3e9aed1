package tests

import (
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Connections, channels and consumers as the API lists them, and closing
// a connection with 320 CONNECTION_FORCED and the X-Reason header's text.
func TestMgmtConnectionsChannelsConsumers(t *testing.T) {
	m := startMgmt(t)
	c, ch := m.channel()
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("work", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume("work", "ctag1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	closed := c.NotifyClose(make(chan *amqp.Error, 1))

	type connRow struct {
		Name, User, VHost, Protocol string
		Channels                    int
		PeerPort                    int            `json:"peer_port"`
		ClientProperties            map[string]any `json:"client_properties"`
	}
	// RabbitMQ lists a connection once its statistics are emitted.
	var mine connRow
	waitFor(t, "the connection listed", func() bool {
		var conns []connRow
		m.expect("GET", "/api/vhosts/"+m.v()+"/connections", "", 200).json(t, &conns)
		if len(conns) == 1 && conns[0].Channels == 1 {
			mine = conns[0]
			return true
		}
		return false
	})
	if mine.User != "guest" || mine.VHost != m.vhost || mine.Protocol != "AMQP 0-9-1" || mine.ClientProperties["product"] == nil ||
		!strings.Contains(mine.Name, " -> ") {
		t.Fatalf("connection: %+v", mine)
	}
	m.expect("GET", "/api/connections/"+esc(mine.Name), "", 200)
	m.expectNotFound("GET", "/api/connections/nope")

	type chanRow struct {
		Name          string
		Number        int
		PrefetchCount int `json:"prefetch_count"`
		ConsumerCount int `json:"consumer_count"`
		VHost         string
	}
	var chans []chanRow
	waitFor(t, "the channel listed", func() bool {
		chans = nil
		m.expect("GET", "/api/connections/"+esc(mine.Name)+"/channels", "", 200).json(t, &chans)
		return len(chans) == 1 && chans[0].ConsumerCount == 1
	})
	if chans[0].Name != mine.Name+" (1)" || chans[0].Number != 1 || chans[0].PrefetchCount != 10 {
		t.Fatalf("channel: %+v", chans[0])
	}
	var vchans []chanRow
	m.expect("GET", "/api/vhosts/"+m.v()+"/channels", "", 200).json(t, &vchans)
	if len(vchans) != 1 {
		t.Fatalf("the vhost's channels: %+v", vchans)
	}
	m.expect("GET", "/api/channels/"+esc(chans[0].Name), "", 200)
	m.expectNotFound("GET", "/api/channels/"+esc(mine.Name+" (9)"))

	var cons []struct {
		ConsumerTag   string `json:"consumer_tag"`
		AckRequired   bool   `json:"ack_required"`
		PrefetchCount int    `json:"prefetch_count"`
		Queue         struct{ Name, VHost string }
		ChannelDetail struct {
			Name string `json:"name"`
		} `json:"channel_details"`
	}
	m.expect("GET", "/api/consumers/"+m.v(), "", 200).json(t, &cons)
	if len(cons) != 1 || cons[0].ConsumerTag != "ctag1" || !cons[0].AckRequired || cons[0].PrefetchCount != 10 ||
		cons[0].Queue.Name != "work" || cons[0].ChannelDetail.Name != chans[0].Name {
		t.Fatalf("consumers: %+v", cons)
	}

	r := m.callAs("guest", "guest", "DELETE", "/api/connections/"+esc(mine.Name), "", map[string]string{"X-Reason": "maintenance"})
	if r.status != 204 {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	e := <-closed
	if e == nil || e.Code != 320 || e.Reason != "CONNECTION_FORCED - maintenance" {
		t.Fatalf("the client got %v", e)
	}
	if m.isWarren() {
		// Once the connection is gone, closing it is a 404. (RabbitMQ
		// 3.10.8 answers 500 while its statistics still remember it.)
		waitFor(t, "the closed connection gone", func() bool {
			return m.call("GET", "/api/connections/"+esc(mine.Name), "").status == 404
		})
		m.expectNotFound("DELETE", "/api/connections/"+esc(mine.Name))
	}
}
