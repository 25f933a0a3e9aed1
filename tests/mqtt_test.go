package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// MQTT 3.1.1 end to end, with Eclipse Paho's Go client, against Warren's
// core/mqtt.

// mqttOpts are a client's options for s's MQTT listener: guest, a
// persistent session unless clean, no automatic reconnect.
func mqttOpts(t testing.TB, s *server, clientID string, clean bool) *paho.ClientOptions {
	t.Helper()
	if s.b == nil {
		t.Skip("MQTT against the reference broker is not set up")
	}
	o := paho.NewClientOptions().AddBroker("tcp://" + s.b.MQTTAddr()).SetClientID(clientID).
		SetUsername("guest").SetPassword("guest").SetCleanSession(clean).
		SetAutoReconnect(false).SetConnectRetry(false).SetKeepAlive(30 * time.Second).
		SetProtocolVersion(4).SetOrderMatters(true)
	return o
}

// mqttConnect connects a client, disconnected when the test ends.
func mqttConnect(t testing.TB, o *paho.ClientOptions) paho.Client {
	t.Helper()
	c := paho.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("MQTT connect %s: %v", o.ClientID, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(0) })
	return c
}

func mqttWait(t testing.TB, what string, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(5 * time.Second) {
		t.Fatalf("%s: no answer within 5s", what)
	}
	if err := tok.Error(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// mqttSubscribe subscribes to filter and returns the messages that come.
func mqttSubscribe(t testing.TB, c paho.Client, filter string, qos byte) <-chan paho.Message {
	t.Helper()
	got := make(chan paho.Message, 1000)
	mqttWait(t, "subscribe "+filter, c.Subscribe(filter, qos, func(_ paho.Client, m paho.Message) { got <- m }))
	return got
}

func TestMqttPubSubInOrder(t *testing.T) {
	s := startWarren(t)
	for _, qos := range []byte{0, 1} {
		t.Run(fmt.Sprintf("qos%d", qos), func(t *testing.T) {
			sub := mqttConnect(t, mqttOpts(t, s, fmt.Sprintf("sub-%d", qos), true))
			got := mqttSubscribe(t, sub, "sensors/+/temp", qos)
			pub := mqttConnect(t, mqttOpts(t, s, fmt.Sprintf("pub-%d", qos), true))
			const n = 100
			for i := range n {
				mqttWait(t, "publish", pub.Publish(fmt.Sprintf("sensors/%d/temp", i), qos, false, fmt.Sprint(i)))
			}
			for i := range n {
				m := poll.Receive(t, 5*time.Second, "message "+fmt.Sprint(i), got)
				if string(m.Payload()) != fmt.Sprint(i) || m.Topic() != fmt.Sprintf("sensors/%d/temp", i) || m.Qos() != qos {
					t.Fatalf("message %d: %s %q qos %d", i, m.Topic(), m.Payload(), m.Qos())
				}
			}
		})
	}
}

func TestMqttWildcards(t *testing.T) {
	s := startWarren(t)
	sub := mqttConnect(t, mqttOpts(t, s, "wild", true))
	hash := mqttSubscribe(t, sub, "home/#", 1)
	plus := mqttSubscribe(t, sub, "home/+/light", 1)
	pub := mqttConnect(t, mqttOpts(t, s, "wild-pub", true))
	for _, topic := range []string{"home/kitchen/light", "home/kitchen/door", "home", "office/light", "home/a.b/light"} {
		mqttWait(t, "publish", pub.Publish(topic, 1, false, topic))
	}
	// home/# matches home itself too ([MQTT-4.7.1-2]).
	for _, want := range []string{"home/kitchen/light", "home/kitchen/door", "home", "home/a.b/light"} {
		if m := poll.Receive(t, 5*time.Second, want+" on home/#", hash); m.Topic() != want {
			t.Fatalf("home/# got %s, want %s", m.Topic(), want)
		}
	}
	for _, want := range []string{"home/kitchen/light", "home/a.b/light"} {
		if m := poll.Receive(t, 5*time.Second, want+" on home/+/light", plus); m.Topic() != want {
			t.Fatalf("home/+/light got %s, want %s", m.Topic(), want)
		}
	}
	// A fence: nothing else was on its way to either subscription.
	mqttWait(t, "publish", pub.Publish("home/end/light", 1, false, "end"))
	if m := poll.Receive(t, 5*time.Second, "the fence on home/#", hash); m.Topic() != "home/end/light" {
		t.Fatalf("home/# got %s after the expected ones", m.Topic())
	}
	if m := poll.Receive(t, 5*time.Second, "the fence on home/+/light", plus); m.Topic() != "home/end/light" {
		t.Fatalf("home/+/light got %s after the expected ones", m.Topic())
	}
}

func TestMqttCrossesAMQP(t *testing.T) {
	s := startWarren(t)
	_, ch := channel(t, s)
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(q.Name, "devices.*.status", "amq.topic", false, nil); err != nil {
		t.Fatal(err)
	}
	ds := consume(t, ch, q.Name, true)

	c := mqttConnect(t, mqttOpts(t, s, "crosser", true))
	payload := []byte{0, 1, 2, 0xff, 'x'}
	mqttWait(t, "publish", c.Publish("devices/d1/status", 1, false, payload))
	d := receive(t, ds)
	if string(d.Body) != string(payload) || d.RoutingKey != "devices.d1.status" || d.DeliveryMode != amqp.Persistent {
		t.Fatalf("AMQP got %q key %s mode %d", d.Body, d.RoutingKey, d.DeliveryMode)
	}
	if qos, _ := d.Headers["x-mqtt-publish-qos"].(int8); qos != 1 {
		t.Fatalf("headers %v", d.Headers)
	}

	got := mqttSubscribe(t, c, "commands/#", 1)
	if err := ch.Publish("amq.topic", "commands.d1.reboot", false, false, amqp.Publishing{Body: payload}); err != nil {
		t.Fatal(err)
	}
	m := poll.Receive(t, 5*time.Second, "the AMQP message over MQTT", got)
	if string(m.Payload()) != string(payload) || m.Topic() != "commands/d1/reboot" || m.Qos() != 1 {
		t.Fatalf("MQTT got %q on %s qos %d", m.Payload(), m.Topic(), m.Qos())
	}
}

func TestMqttConnectRefused(t *testing.T) {
	s := startWarren(t)
	for _, c := range []struct {
		name, user, pass string
	}{
		{"bad password", "guest", "nope"},
		{"no such user", "nobody", "guest"},
		{"no such vhost", "nowhere:guest", "guest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := mqttOpts(t, s, "refused", true).SetUsername(c.user).SetPassword(c.pass)
			tok := paho.NewClient(o).Connect()
			if !tok.WaitTimeout(5 * time.Second) {
				t.Fatal("no CONNACK")
			}
			if tok.Error() == nil {
				t.Fatal("connected")
			}
		})
	}
	// The vhost named in the user name.
	if _, err := s.b.AddVHost("iot"); err != nil {
		t.Fatal(err)
	}
	if err := s.b.SetPermission("iot", "guest", ".*", ".*", ".*"); err != nil {
		t.Fatal(err)
	}
	mqttConnect(t, mqttOpts(t, s, "in-iot", true).SetUsername("iot:guest"))
	// Anonymous, as guest, from loopback.
	mqttConnect(t, mqttOpts(t, s, "anon", true).SetUsername("").SetPassword(""))
}

func TestMqttAnonymousOff(t *testing.T) {
	s := startWarren(t, func(c *config.Config) { c.MQTT.AllowAnonymous = false })
	tok := paho.NewClient(mqttOpts(t, s, "anon", true).SetUsername("").SetPassword("")).Connect()
	if !tok.WaitTimeout(5*time.Second) || tok.Error() == nil {
		t.Fatalf("anonymous connected with allow_anonymous off: %v", tok.Error())
	}
}

// A persistent session keeps its subscription and the QoS 1 messages
// published while its client is away.
func TestMqttPersistentSession(t *testing.T) {
	s := startWarren(t)
	o := mqttOpts(t, s, "keeper", false)
	c := paho.NewClient(o)
	mqttWait(t, "connect", c.Connect())
	mqttWait(t, "subscribe", c.Subscribe("keep/#", 1, nil))
	c.Disconnect(0)

	pub := mqttConnect(t, mqttOpts(t, s, "keeper-pub", true))
	for i := range 5 {
		mqttWait(t, "publish", pub.Publish("keep/it", 1, false, fmt.Sprint(i)))
	}
	got := make(chan paho.Message, 10)
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { got <- m })
	c2 := paho.NewClient(o)
	tok := c2.Connect()
	mqttWait(t, "reconnect", tok)
	t.Cleanup(func() { c2.Disconnect(0) })
	if !tok.(*paho.ConnectToken).SessionPresent() {
		t.Fatal("session not present")
	}
	for i := range 5 {
		m := poll.Receive(t, 5*time.Second, "kept message "+fmt.Sprint(i), got)
		if string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("kept message %d: %q", i, m.Payload())
		}
	}
	// A clean session drops it.
	c2.Disconnect(0)
	c3 := mqttConnect(t, mqttOpts(t, s, "keeper", true))
	_ = c3
	_, ch := channel(t, s)
	if _, err := ch.QueueDeclarePassive("mqtt-subscription-keeperqos1", true, false, false, false, nil); err == nil {
		t.Fatal("a clean session kept the old session's queue")
	}
}

func TestMqttWill(t *testing.T) {
	s := startWarren(t)
	watcher := mqttConnect(t, mqttOpts(t, s, "watcher", true))
	wills := mqttSubscribe(t, watcher, "wills/#", 1)

	// A client that says DISCONNECT leaves no will.
	polite := mqttConnect(t, mqttOpts(t, s, "polite", true).SetWill("wills/polite", "gone", 1, false))
	polite.Disconnect(1000) // waits for DISCONNECT to be written
	// One whose connection drops does.
	o := mqttOpts(t, s, "dying", true).SetWill("wills/dying", "gone", 1, false)
	dying := mqttConnect(t, o)
	var conn string
	waitFor(t, "the MQTT connection listed", func() bool {
		for _, ci := range s.b.MQTT().Connections() {
			if ci.ClientID == "dying" {
				conn = ci.Name
				return true
			}
		}
		return false
	})
	_ = dying
	if !s.b.MQTT().Close(conn) {
		t.Fatal("connection not found")
	}
	m := poll.Receive(t, 5*time.Second, "the will", wills)
	if m.Topic() != "wills/dying" || string(m.Payload()) != "gone" {
		t.Fatalf("will %s %q", m.Topic(), m.Payload())
	}
}

func TestMqttTakeover(t *testing.T) {
	s := startWarren(t)
	lost := make(chan error, 1)
	first := mqttConnect(t, mqttOpts(t, s, "twin", true).SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err }))
	_ = first
	second := mqttConnect(t, mqttOpts(t, s, "twin", true))
	poll.Receive(t, 5*time.Second, "the first connection lost", lost)
	got := mqttSubscribe(t, second, "twin/x", 1)
	mqttWait(t, "publish", second.Publish("twin/x", 1, false, "hi"))
	poll.Receive(t, 5*time.Second, "the second connection's message", got)
	n := 0
	for _, ci := range s.b.MQTT().Connections() {
		if ci.ClientID == "twin" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d connections of client twin", n)
	}
}

func TestMqttPermissions(t *testing.T) {
	s := startWarren(t)
	pw := "reader"
	if err := s.b.PutUser("reader", &pw, nil); err != nil {
		t.Fatal(err)
	}
	// May configure and read anything, write only its own queues.
	if err := s.b.SetPermission("/", "reader", ".*", "^mqtt-subscription-", ".*"); err != nil {
		t.Fatal(err)
	}
	watcher := mqttConnect(t, mqttOpts(t, s, "perm-watch", true))
	got := mqttSubscribe(t, watcher, "perm/#", 1)

	lost := make(chan error, 1)
	o := mqttOpts(t, s, "perm-reader", true).SetUsername("reader").SetPassword("reader").
		SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err })
	c := mqttConnect(t, o)
	// It may subscribe (write on its queue, read on amq.topic)...
	mqttSubscribe(t, c, "perm/in", 1)
	// ...but not publish: the connection is closed.
	c.Publish("perm/out", 1, false, "no")
	poll.Receive(t, 5*time.Second, "the refused publisher's connection closed", lost)
	mqttWait(t, "publish", watcher.Publish("perm/fence", 1, false, "fence"))
	if m := poll.Receive(t, 5*time.Second, "the fence", got); m.Topic() != "perm/fence" {
		t.Fatalf("a refused publish was routed: %s %q", m.Topic(), m.Payload())
	}

	// A user who may not write to its queue cannot subscribe.
	if err := s.b.SetPermission("/", "reader", ".*", "^nothing$", ".*"); err != nil {
		t.Fatal(err)
	}
	c2 := mqttConnect(t, mqttOpts(t, s, "perm-reader2", true).SetUsername("reader").SetPassword("reader"))
	tok := c2.Subscribe("perm/in", 1, nil)
	if !tok.WaitTimeout(5 * time.Second) {
		t.Fatal("no SUBACK")
	}
	if tok.Error() == nil && !strings.Contains(fmt.Sprint(tok.(*paho.SubscribeToken).Result()), "128") {
		t.Fatalf("subscribe without write permission: %v", tok.(*paho.SubscribeToken).Result())
	}
}

// MQTT connections are listed in /api/connections as RabbitMQ lists its
// MQTT plugin's (protocol, client id, user, vhost), and closing one
// there disconnects the client.
func TestMqttConnectionsInTheAPI(t *testing.T) {
	m := startWarrenMgmt(t)
	c := mqttConnect(t, mqttOpts(t, m.s, "listed-client", true))
	type row struct {
		Name, Protocol, User, VHost string
		ClientProperties            map[string]any `json:"client_properties"`
		Timeout                     int
	}
	var mine row
	waitFor(t, "the MQTT connection listed", func() bool {
		var rows []row
		m.expect("GET", "/api/connections", "", 200).json(t, &rows)
		for _, r := range rows {
			if r.ClientProperties["client_id"] == "listed-client" {
				mine = r
				return true
			}
		}
		return false
	})
	if mine.Protocol != "MQTT 3.1.1" || mine.User != "guest" || mine.VHost != "/" || mine.Timeout != 30 {
		t.Fatalf("the MQTT connection is listed as %+v", mine)
	}
	m.expect("GET", "/api/connections/"+esc(mine.Name), "", 200)
	m.expect("GET", "/api/connections/"+esc(mine.Name)+"/channels", "", 200).expectBody(t, "[]")
	m.expect("DELETE", "/api/connections/"+esc(mine.Name), "", 204)
	waitFor(t, "the client disconnected", func() bool { return !c.IsConnectionOpen() })
}

// /metrics counts the MQTT connections, their subscriptions and their
// QoS 1 deliveries waiting for PUBACK.
func TestMqttMetrics(t *testing.T) {
	m := startWarrenMgmt(t)
	c := mqttConnect(t, mqttOpts(t, m.s, "metered", true))
	mqttSubscribe(t, c, "meter/#", 1)
	mqttSubscribe(t, c, "gauge/+", 0)
	value := func(name string) float64 {
		_, families := scrapeMetrics(t, m.s)
		f := family(t, families, name)
		if len(f.Metric) != 1 {
			t.Fatalf("%s: %v", name, f.Metric)
		}
		return f.Metric[0].GetGauge().GetValue()
	}
	waitFor(t, "the connection and its two subscriptions counted", func() bool {
		return value("warren_mqtt_connections") == 1 && value("warren_mqtt_subscriptions") == 2
	})
	if got := value("warren_mqtt_messages_unacknowledged"); got != 0 {
		t.Fatalf("warren_mqtt_messages_unacknowledged = %v with nothing delivered", got)
	}
}

// Retained messages: kept per topic, the last replacing the one before,
// sent with RETAIN to a new subscription whose filter matches them
// (wildcards too), deleted by an empty retained message, and not sent
// as retained to a subscription that was there when they came.
func TestMqttRetained(t *testing.T) {
	s := startWarren(t)
	pub := mqttConnect(t, mqttOpts(t, s, "retainer", true))
	live := mqttConnect(t, mqttOpts(t, s, "live", true))
	liveGot := mqttSubscribe(t, live, "home/#", 1)
	mqttWait(t, "retain", pub.Publish("home/kitchen/temp", 1, true, "20"))
	mqttWait(t, "retain again", pub.Publish("home/kitchen/temp", 1, true, "21"))
	mqttWait(t, "retain", pub.Publish("home/hall/temp", 0, true, "19"))
	mqttWait(t, "retain", pub.Publish("home/hall/light", 1, true, "on"))
	for range 4 {
		if m := poll.Receive(t, 5*time.Second, "a message to the live subscription", liveGot); m.Retained() {
			t.Fatalf("%s came to a subscription already there as retained", m.Topic())
		}
	}

	late := mqttConnect(t, mqttOpts(t, s, "late", true))
	got := mqttSubscribe(t, late, "home/+/temp", 1)
	seen := map[string]string{}
	for range 2 {
		m := poll.Receive(t, 5*time.Second, "a retained temperature", got)
		if !m.Retained() {
			t.Fatalf("%s came without RETAIN", m.Topic())
		}
		seen[m.Topic()] = string(m.Payload())
	}
	if seen["home/kitchen/temp"] != "21" || seen["home/hall/temp"] != "19" {
		t.Fatalf("retained %v, want the kitchen's last (21) and the hall's", seen)
	}

	// An empty retained message deletes the kitchen's; a fence shows
	// nothing else came.
	mqttWait(t, "delete", pub.Publish("home/kitchen/temp", 1, true, ""))
	later := mqttConnect(t, mqttOpts(t, s, "later", true))
	got = mqttSubscribe(t, later, "home/#", 1)
	var topics []string
	mqttWait(t, "fence", pub.Publish("home/fence", 1, false, "end"))
	for m := poll.Receive(t, 5*time.Second, "the fence", got); m.Topic() != "home/fence"; m = poll.Receive(t, 5*time.Second, "the fence", got) {
		topics = append(topics, m.Topic())
	}
	slices.Sort(topics)
	if !slices.Equal(topics, []string{"home/hall/light", "home/hall/temp"}) {
		t.Fatalf("after the delete a new subscription got retained %v", topics)
	}
}
