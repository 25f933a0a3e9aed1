package main

import (
	"net"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// list_mqtt_connections, as rabbitmqctl's: the MQTT connections alone,
// by client id and name, and chosen columns.
func TestListMqttConnections(t *testing.T) {
	b, url := newBroker(t, func(c *config.Config) { c.MQTT.Listen = config.Addrs{"127.0.0.1:0"} })
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + b.MQTTAddr()).SetClientID("sensor-7").
		SetUsername("guest").SetPassword("guest").SetAutoReconnect(false))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("MQTT connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	ctlOK := ctlMust(t, url)
	if !poll.Within(10*time.Second, func() bool { return strings.Contains(ctlOK("-q", "list_mqtt_connections"), "sensor-7\t") }) {
		t.Fatalf("list_mqtt_connections:\n%s", ctlOK("list_mqtt_connections"))
	}
	out := ctlOK("list_mqtt_connections")
	if !strings.HasPrefix(out, "Listing MQTT connections ...\nclient_id\tconn_name\n") || strings.Count(out, "\n") != 3 {
		t.Fatalf("list_mqtt_connections:\n%s", out)
	}
	_, port, _ := net.SplitHostPort(b.MQTTAddr())
	if got := ctlOK("-q", "list_mqtt_connections", "client_id", "protocol", "user", "vhost", "port"); got != "client_id\tprotocol\tuser\tvhost\tport\nsensor-7\tMQTT 3.1.1\tguest\t/\t"+port+"\n" {
		t.Fatalf("list_mqtt_connections with columns: %q", got)
	}
}
