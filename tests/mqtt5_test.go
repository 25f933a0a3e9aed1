package tests

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	amqp "github.com/rabbitmq/amqp091-go"
)

// MQTT 5.0 end to end, with Eclipse Paho's Go client for 5.0
// (paho.golang): properties cross to AMQP 0-9-1 and back as RabbitMQ
// 3.13 maps them, retained messages keep theirs, and what Warren does not
// do yet is said in CONNACK.

// mqtt5Connect connects an MQTT 5 client as guest; received messages go
// to the returned channel.
func mqtt5Connect(t *testing.T, s *server, clientID string) (*paho5.Client, *paho5.Connack, <-chan *paho5.Publish) {
	t.Helper()
	nc, err := net.Dial("tcp", s.b.MQTTAddr())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *paho5.Publish, 100)
	c := paho5.NewClient(paho5.ClientConfig{ClientID: clientID, Conn: nc,
		OnPublishReceived: []func(paho5.PublishReceived) (bool, error){func(r paho5.PublishReceived) (bool, error) {
			got <- r.Packet
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := c.Connect(ctx, &paho5.Connect{ClientID: clientID, KeepAlive: 30, CleanStart: true,
		Username: "guest", UsernameFlag: true, Password: []byte("guest"), PasswordFlag: true})
	if err != nil {
		t.Fatalf("MQTT 5 connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho5.Disconnect{}) })
	return c, ack, got
}

func TestMqtt5PropertiesCrossAMQP(t *testing.T) {
	s := startWarren(t)
	c, ack, got := mqtt5Connect(t, s, "v5-client")
	if ack.ReasonCode != 0 || ack.Properties == nil || ack.Properties.MaximumQoS == nil || *ack.Properties.MaximumQoS != 1 ||
		!ack.Properties.RetainAvailable || ack.Properties.SharedSubAvailable {
		t.Fatalf("CONNACK %+v %+v", ack, ack.Properties)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Subscribe(ctx, &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: "v5/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, ch := channel(t, s)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	bind(t, ch, q.Name, "v5.#", "amq.topic", nil)
	d := consume(t, ch, q.Name, true)

	// MQTT 5 to AMQP and to the MQTT 5 subscriber.
	expiry := uint32(60)
	props := &paho5.PublishProperties{ContentType: "application/json", ResponseTopic: "v5/replies", CorrelationData: []byte("corr-1"),
		MessageExpiry: &expiry, User: paho5.UserProperties{{Key: "site", Value: "north"}}}
	if _, err := c.Publish(ctx, &paho5.Publish{Topic: "v5/data", QoS: 1, Payload: []byte(`{"t":21.5}`), Properties: props}); err != nil {
		t.Fatal(err)
	}
	m := receive(t, d)
	if string(m.Body) != `{"t":21.5}` || m.RoutingKey != "v5.data" || m.ContentType != "application/json" ||
		m.CorrelationId != "corr-1" || m.Expiration != "60000" || m.Headers["site"] != "north" {
		t.Fatalf("the AMQP consumer got %+v", m)
	}
	p := mqtt5Receive(t, got)
	if p.Topic != "v5/data" || string(p.Payload) != `{"t":21.5}` || p.Properties == nil || p.Properties.ContentType != "application/json" ||
		string(p.Properties.CorrelationData) != "corr-1" || p.Properties.ResponseTopic != "v5/replies" || p.Properties.User.Get("site") != "north" {
		t.Fatalf("the MQTT 5 subscriber got %+v %+v", p, p.Properties)
	}

	// AMQP to the MQTT 5 subscriber: headers become user properties.
	publish(t, ch, "amq.topic", "v5.from-amqp", amqp.Publishing{Body: []byte("hello"), ContentType: "text/plain", Headers: amqp.Table{"origin": "amqp"}})
	for {
		p = mqtt5Receive(t, got)
		if p.Topic == "v5/from-amqp" {
			break
		}
	}
	if string(p.Payload) != "hello" || p.Properties == nil || p.Properties.ContentType != "text/plain" || p.Properties.User.Get("origin") != "amqp" {
		t.Fatalf("from AMQP the MQTT 5 subscriber got %+v %+v", p, p.Properties)
	}
}

func mqtt5Receive(t *testing.T, got <-chan *paho5.Publish) *paho5.Publish {
	t.Helper()
	select {
	case p := <-got:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no MQTT 5 message within 5s")
		return nil
	}
}

// What Warren does not do yet is said as MQTT 5 says: CONNACK's Shared
// Subscription Available 0 (so Paho refuses a $share filter itself),
// and QoS 2 granted as QoS 1.
func TestMqtt5RefusesWhatItLacks(t *testing.T) {
	s := startWarren(t)
	c, _, _ := mqtt5Connect(t, s, "v5-lacks")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Subscribe(ctx, &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: "$share/g/jobs/#", QoS: 1}}}); err == nil ||
		!strings.Contains(err.Error(), "shared subscriptions") {
		t.Fatalf("a shared subscription: %v", err)
	}
	ack, err := c.Subscribe(ctx, &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: "jobs/urgent", QoS: 2}}})
	if err != nil || len(ack.Reasons) != 1 || ack.Reasons[0] != 1 {
		t.Fatalf("a QoS 2 subscription: %v %v, want granted QoS 1", ack, err)
	}
}

// A retained MQTT 5 message keeps its properties, and Retain Handling 2
// sends no retained message.
func TestMqtt5Retained(t *testing.T) {
	s := startWarren(t)
	c, _, _ := mqtt5Connect(t, s, "v5-retainer")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	props := &paho5.PublishProperties{ContentType: "text/plain", User: paho5.UserProperties{{Key: "unit", Value: "C"}}}
	if _, err := c.Publish(ctx, &paho5.Publish{Topic: "r5/temp", QoS: 1, Retain: true, Payload: []byte("21"), Properties: props}); err != nil {
		t.Fatal(err)
	}
	sub, _, got := mqtt5Connect(t, s, "v5-late")
	if _, err := sub.Subscribe(ctx, &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: "r5/#", QoS: 1, RetainHandling: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Subscribe(ctx, &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: "r5/temp", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	p := mqtt5Receive(t, got)
	if p.Topic != "r5/temp" || !p.Retain || string(p.Payload) != "21" || p.Properties == nil ||
		p.Properties.ContentType != "text/plain" || p.Properties.User.Get("unit") != "C" {
		t.Fatalf("the retained message came as %+v %+v", p, p.Properties)
	}
	// The fence: had Retain Handling 2 sent one, it would have come first.
	if _, err := c.Publish(ctx, &paho5.Publish{Topic: "r5/fence", QoS: 1, Payload: []byte("end")}); err != nil {
		t.Fatal(err)
	}
	if p := mqtt5Receive(t, got); p.Topic != "r5/fence" {
		t.Fatalf("after the retained message came %s %q, want the fence", p.Topic, p.Payload)
	}
}
