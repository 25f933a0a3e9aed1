package tests

import (
	"net"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
	mqttc "github.com/warrenmq/warren/protocol/mqtt"
)

// MQTT 3.1.1 meeting AMQP 0-9-1 in amq.topic, the same walk against
// Warren and against RabbitMQ 3.10.8 with its MQTT plugin: what a client
// sees is the same.

// mqttCrossScenario: MQTT to AMQP, AMQP to MQTT (a binary payload
// intact), and a will published when a client's connection drops.
func mqttCrossScenario(t *testing.T, mqttAddr, amqpURL string) {
	c, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"plant.*.temp", "wills.#"} {
		if err := ch.QueueBind(q.Name, key, "amq.topic", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	d, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}

	// MQTT to AMQP.
	got := make(chan string, 10)
	o := mqttAddrOpts(mqttAddr, "cross-pub", got)
	m := mqttConnect(t, o)
	mqttWait(t, "subscribe", m.Subscribe("cmd/+/set", 1, nil))
	mqttWait(t, "publish", m.Publish("plant/p1/temp", 1, false, "21.5"))
	if msg := receive(t, d); string(msg.Body) != "21.5" || msg.RoutingKey != "plant.p1.temp" || msg.Exchange != "amq.topic" {
		t.Fatalf("the AMQP consumer got %q with key %q from %q", msg.Body, msg.RoutingKey, msg.Exchange)
	}

	// AMQP to MQTT, a binary payload intact.
	payload := string([]byte{0, 1, 2, 0xff, 0xfe})
	if err := ch.Publish("amq.topic", "cmd.valve7.set", false, false, amqp.Publishing{Body: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != payload {
			t.Fatalf("the MQTT subscriber got %x, want %x", p, payload)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the MQTT subscriber got nothing from AMQP")
	}

	// A retained message, sent with RETAIN to a subscription made
	// after it (an exact filter: RabbitMQ 3.10 matches no wildcard).
	mqttWait(t, "retain", m.Publish("state/door1", 1, true, "open"))
	late := make(chan paho.Message, 4)
	l := mqttConnect(t, mqttAddrOpts(mqttAddr, "cross-late", nil))
	mqttWait(t, "subscribe late", l.Subscribe("state/door1", 1, func(_ paho.Client, msg paho.Message) { late <- msg }))
	if msg := poll.Receive(t, 5*time.Second, "the retained message", late); string(msg.Payload()) != "open" || !msg.Retained() {
		t.Fatalf("a late subscription got %q (retained %v)", msg.Payload(), msg.Retained())
	}

	// A will, when a client's connection drops without DISCONNECT.
	nc, err := net.Dial("tcp", mqttAddr)
	if err != nil {
		t.Fatal(err)
	}
	conn := &mqttc.Connect{Version: mqttc.V311, CleanStart: true, KeepAlive: 30, ClientID: "dropper",
		HasUsername: true, Username: "guest", HasPassword: true, Password: []byte("guest"),
		Will: &mqttc.Will{QoS: mqttc.QoS1, Topic: "wills/dropper", Payload: []byte("gone")}}
	if _, err := nc.Write(conn.Append(nil, mqttc.V311)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	pkt, err := mqttc.NewPacketReader(nc, mqttc.DefaultMaxPacketSize).ReadPacket()
	if err != nil {
		t.Fatalf("no CONNACK: %v", err)
	}
	if ack, err := mqttc.Decode(mqttc.V311, pkt); err != nil || ack.(*mqttc.Connack).ReturnCode != 0 {
		t.Fatalf("CONNACK %v %v", ack, err)
	}
	nc.Close()
	if msg := receive(t, d); string(msg.Body) != "gone" || msg.RoutingKey != "wills.dropper" {
		t.Fatalf("the AMQP consumer got %q with key %q, want the will", msg.Body, msg.RoutingKey)
	}
}

func TestMqttCrossProtocol(t *testing.T) {
	s := startWarren(t)
	mqttCrossScenario(t, s.b.MQTTAddr(), s.url)
}

func TestMqttCrossProtocolReference(t *testing.T) {
	r := startRabbitMQ(t, "rabbitmq_mqtt")
	mqttCrossScenario(t, r.mqtt, r.url())
}

// mqttAddrOpts are a guest client's options for the MQTT listener at
// addr, with a clean session; what it receives goes to got.
func mqttAddrOpts(addr, clientID string, got chan<- string) *paho.ClientOptions {
	return paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).SetUsername("guest").SetPassword("guest").
		SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(true).
		SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
			if got != nil {
				got <- string(m.Payload())
			}
		})
}
