package mqtt

import (
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/protocol/mqtt"
)

func TestTopicToKey(t *testing.T) {
	for _, c := range []struct{ topic, key string }{
		{"sensors/1/temp", "sensors.1.temp"},
		{"sensors/+/temp", "sensors.*.temp"},
		{"sensors/#", "sensors.#"},
		{"#", "#"},
		{"a.b/c", "a/b.c"}, // a dot stays inside its word
		{"/leading", ".leading"},
		{"plain", "plain"},
	} {
		if got := TopicToKey(c.topic); got != c.key {
			t.Errorf("TopicToKey(%q) = %q, want %q", c.topic, got, c.key)
		}
		if !mqtt.HasWildcards(c.topic) {
			if back := KeyToTopic(c.key); back != c.topic {
				t.Errorf("KeyToTopic(%q) = %q, want %q", c.key, back, c.topic)
			}
		}
	}
}

func TestSplitUsername(t *testing.T) {
	for _, c := range []struct{ in, vhost, user string }{
		{"guest", "", "guest"},
		{"iot:guest", "iot", "guest"},
		{"a:b:c", "a", "b:c"},
		{":guest", "", "guest"},
	} {
		vh, u, _ := splitUsername(c.in)
		if vh != c.vhost || u != c.user {
			t.Errorf("splitUsername(%q) = %q, %q", c.in, vh, u)
		}
	}
}

func TestToAMQPAndBack(t *testing.T) {
	props := &mqtt.Properties{
		ContentType: "application/json", CorrelationData: []byte("req-1"), ResponseTopic: "replies/me",
		MessageExpiryInterval: 30, UserProperties: []mqtt.UserProperty{{Key: "k", Value: "v"}},
	}
	m, err := toAMQP("amq.topic", "a/b", mqtt.QoS1, false, props, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	if m.RoutingKey != "a.b" || !m.Persistent || m.TTL != 30_000 || string(m.Body) != "body" {
		t.Fatalf("message %+v", m)
	}
	p, err := m.Properties()
	if err != nil {
		t.Fatal(err)
	}
	if p.ContentType != "application/json" || p.CorrelationID != "req-1" || p.Headers["k"] != "v" ||
		p.Headers[HeaderReplyToTopic] != "replies.me" || p.Headers[HeaderQoS] != int8(1) || p.Headers[HeaderDup] != false {
		t.Fatalf("properties %+v", p)
	}
	if qosOf(m) != mqtt.QoS1 {
		t.Fatal("qos")
	}
	var out mqtt.Publish
	toPublish(&out, m, mqtt.V5)
	if out.Topic != "a/b" || out.Properties.ContentType != "application/json" || string(out.Properties.CorrelationData) != "req-1" ||
		out.Properties.ResponseTopic != "replies/me" || out.Properties.MessageExpiryInterval != 30 ||
		len(out.Properties.UserProperties) != 1 || out.Properties.UserProperties[0] != (mqtt.UserProperty{Key: "k", Value: "v"}) {
		t.Fatalf("publish %+v", out)
	}
	// 3.1.1 carries none of it.
	var old mqtt.Publish
	toPublish(&old, m, mqtt.V311)
	if !old.Properties.IsEmpty() {
		t.Fatalf("3.1.1 publish has properties %+v", old.Properties)
	}
}

func TestBinaryCorrelationData(t *testing.T) {
	cd := []byte{0, 1, 2}
	m, err := toAMQP("amq.topic", "a", mqtt.QoS0, true, &mqtt.Properties{CorrelationData: cd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := m.Properties()
	if p.Flags&protocol.FlagCorrelationID != 0 || string(p.Headers[HeaderCorrelationID].([]byte)) != string(cd) || m.Persistent {
		t.Fatalf("properties %+v", p)
	}
	if qosOf(m) != mqtt.QoS0 {
		t.Fatal("qos")
	}
	var out mqtt.Publish
	toPublish(&out, m, mqtt.V5)
	if string(out.Properties.CorrelationData) != string(cd) {
		t.Fatalf("correlation data %v", out.Properties.CorrelationData)
	}
}

func TestQoSOfAMQPMessage(t *testing.T) {
	m, err := message.NewFromClient("amq.topic", "k", 0, nil, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if qosOf(m) != mqtt.QoS1 {
		t.Fatal("a message without x-mqtt-publish-qos is not QoS 1")
	}
}

// Filters match topics as MQTT says, '$' topics kept from wildcards.
func TestTopicMatches(t *testing.T) {
	for _, tc := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/#", "a", true},
		{"a/#", "a/b/c", true},
		{"#", "a/b", true},
		{"+/+", "a/b", true},
		{"+", "", true},
		{"a/+/c", "a//c", true},
		{"#", "$SYS/x", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/x", true},
		{"a/b/c", "a/b", false},
	} {
		if got := TopicMatches(tc.filter, tc.topic); got != tc.want {
			t.Errorf("%q on %q: %v, want %v", tc.filter, tc.topic, got, tc.want)
		}
	}
}

// A retained message is stored as a record and read back the same.
func TestRetainedRecord(t *testing.T) {
	props := &mqtt.Properties{ContentType: "text/plain", ResponseTopic: "r/t", CorrelationData: []byte{1, 2},
		PayloadFormatIndicator: 1, UserProperties: []mqtt.UserProperty{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}}
	m := retainedOf("t/1", mqtt.QoS1, []byte("21"), props)
	back := retainedFrom("t/1", m.record())
	if back.qos != m.qos || string(back.payload) != "21" || back.props.ContentType != "text/plain" || back.props.ResponseTopic != "r/t" ||
		string(back.props.CorrelationData) != "\x01\x02" || back.props.PayloadFormatIndicator != 1 || len(back.props.UserProperties) != 2 ||
		back.props.UserProperties[1].Value != "2" || !back.expires.IsZero() {
		t.Fatalf("read back as %+v", back)
	}
}
