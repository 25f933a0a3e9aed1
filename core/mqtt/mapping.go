package mqtt

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/protocol/mqtt"
)

// How MQTT meets AMQP 0-9-1: topics and filters as routing keys and
// binding keys, an MQTT PUBLISH as an AMQP message, and back.

// TopicToKey maps an MQTT topic name or filter to an amq.topic routing
// or binding key as RabbitMQ's MQTT plugin does: levels are words, so
// '/' becomes '.'; a '.' inside a level becomes '/', so that it stays one
// word; '+' becomes '*', and '#' stays '#'.
func TopicToKey(topic string) string {
	return swap(topic, '/', '.', '+', '*')
}

// KeyToTopic maps a routing key back to an MQTT topic name: the inverse
// of TopicToKey for topic names.
func KeyToTopic(key string) string {
	return swap(key, '.', '/', '*', '+')
}

// swap replaces a with b and b with a, and c with d.
func swap(s string, a, b, c, d byte) string {
	if strings.IndexByte(s, a) < 0 && strings.IndexByte(s, b) < 0 && strings.IndexByte(s, c) < 0 {
		return s
	}
	out := []byte(s)
	for i, ch := range out {
		switch ch {
		case a:
			out[i] = b
		case b:
			out[i] = a
		case c:
			out[i] = d
		}
	}
	return string(out)
}

// Headers RabbitMQ's MQTT plugin gives the AMQP messages it publishes:
// the PUBLISH's QoS and DUP flag.
const (
	HeaderQoS = "x-mqtt-publish-qos"
	HeaderDup = "x-mqtt-dup"
	// HeaderReplyToTopic holds an MQTT 5 Response Topic, as a routing
	// key, and HeaderCorrelationID Correlation Data that is not a short
	// string; their names are RabbitMQ 3.13's.
	HeaderReplyToTopic  = "x-reply-to-topic"
	HeaderCorrelationID = "x-correlation-id"
)

// toAMQP builds the AMQP message an MQTT PUBLISH (or will) becomes on
// exchange: persistent for QoS 1, with RabbitMQ's x-mqtt-publish-qos and
// x-mqtt-dup headers and, from MQTT 5's properties, the content type,
// the correlation id (x-correlation-id when it is not a short string),
// the response topic (x-reply-to-topic, as a routing key), the user
// properties as string headers (the last of a repeated name) and the
// message expiry as the expiration, in milliseconds.
func toAMQP(exchange, topic string, qos mqtt.QoS, dup bool, props *mqtt.Properties, payload []byte) (*message.Message, error) {
	if qos > mqtt.QoS1 {
		qos = mqtt.QoS1
	}
	p := protocol.Properties{Flags: protocol.FlagHeaders | protocol.FlagDeliveryMode, DeliveryMode: 1}
	if qos == mqtt.QoS1 {
		p.DeliveryMode = 2
	}
	p.Headers = protocol.Table{HeaderQoS: int8(qos), HeaderDup: dup}
	if props != nil {
		for _, up := range props.UserProperties {
			p.Headers[up.Key] = up.Value
		}
		if ct := props.ContentType; ct != "" && len(ct) <= 255 {
			p.Flags |= protocol.FlagContentType
			p.ContentType = ct
		}
		if cd := props.CorrelationData; cd != nil {
			if shortString(cd) {
				p.Flags |= protocol.FlagCorrelationID
				p.CorrelationID = string(cd)
			} else {
				p.Headers[HeaderCorrelationID] = append([]byte(nil), cd...)
			}
		}
		if rt := props.ResponseTopic; rt != "" {
			p.Headers[HeaderReplyToTopic] = TopicToKey(rt)
		}
		if props.Has(mqtt.PropMessageExpiryInterval) {
			p.Flags |= protocol.FlagExpiration
			p.Expiration = strconv.FormatUint(min(uint64(props.MessageExpiryInterval)*1000, message.MaxTTL), 10)
		}
	}
	raw, err := p.Append(nil)
	if err != nil {
		return nil, err
	}
	// The payload aliases the reader's buffer: the message keeps a copy.
	body := append([]byte(nil), payload...)
	return message.NewFromClient(exchange, TopicToKey(topic), p.Flags, raw, body)
}

// shortString says whether b can be an AMQP short string as RabbitMQ
// 3.13 converts one: up to 255 bytes of UTF-8 without NUL.
func shortString(b []byte) bool {
	return len(b) <= 255 && utf8.Valid(b) && !strings.ContainsRune(string(b), 0)
}

// qosOf is the QoS a message was published with: its x-mqtt-publish-qos
// header, or, for a message without one (published over AMQP), QoS 1,
// so that the subscription's QoS decides (RabbitMQ's MQTT plugin does
// the same).
func qosOf(m *message.Message) mqtt.QoS {
	if m.Flags&protocol.FlagHeaders == 0 {
		return mqtt.QoS1
	}
	switch v := m.Headers()[HeaderQoS].(type) {
	case int8:
		return clampQoS(int64(v))
	case uint8:
		return clampQoS(int64(v))
	case int16:
		return clampQoS(int64(v))
	case int32:
		return clampQoS(int64(v))
	case int64:
		return clampQoS(v)
	}
	return mqtt.QoS1
}

func clampQoS(n int64) mqtt.QoS {
	if n <= 0 {
		return mqtt.QoS0
	}
	return mqtt.QoS1
}

// toPublish fills an MQTT PUBLISH from an AMQP message: the topic from
// its routing key, and, for MQTT 5, the properties toAMQP maps, read
// back (other string headers as user properties; a content type, a
// correlation id and an expiration set over AMQP as well).
func toPublish(p *mqtt.Publish, m *message.Message, v mqtt.Version) {
	p.Topic = KeyToTopic(m.RoutingKey)
	p.Payload = m.Body
	if v < mqtt.V5 || m.Flags == 0 || m.IsAMQP10() {
		return
	}
	props, err := m.Properties()
	if err != nil {
		return
	}
	if props.Flags&protocol.FlagContentType != 0 && props.ContentType != "" {
		p.Properties.ContentType = props.ContentType
	}
	if props.Flags&protocol.FlagCorrelationID != 0 && props.CorrelationID != "" {
		p.Properties.CorrelationData = []byte(props.CorrelationID)
	}
	if props.Flags&protocol.FlagExpiration != 0 {
		if ms, err := strconv.ParseUint(props.Expiration, 10, 64); err == nil {
			p.Properties.MessageExpiryInterval = uint32(min((ms+999)/1000, 1<<32-1))
			if p.Properties.MessageExpiryInterval == 0 {
				p.Properties.Zeros |= mqtt.PropertySetOf(mqtt.PropMessageExpiryInterval)
			}
		}
	}
	for _, k := range sortedKeys(props.Headers) {
		switch k {
		case HeaderQoS, HeaderDup:
		case HeaderReplyToTopic:
			if s, ok := textOf(props.Headers[k]); ok && s != "" && mqtt.ValidateTopicName(KeyToTopic(s)) == nil {
				p.Properties.ResponseTopic = KeyToTopic(s)
			}
		case HeaderCorrelationID:
			if b, ok := props.Headers[k].([]byte); ok && p.Properties.CorrelationData == nil {
				p.Properties.CorrelationData = b
			}
		default:
			if s, ok := textOf(props.Headers[k]); ok && mqtt.ValidateString(k) == nil && mqtt.ValidateString(s) == nil {
				p.Properties.UserProperties = append(p.Properties.UserProperties, mqtt.UserProperty{Key: k, Value: s})
			}
		}
	}
}

func textOf(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []byte:
		if utf8.Valid(v) {
			return string(v), true
		}
	}
	return "", false
}

func sortedKeys(t protocol.Table) []string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	// Few headers: insertion sort keeps it allocation-free beyond keys.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// SubscriptionQueue is the queue RabbitMQ's MQTT plugin names for a
// client's subscriptions of one QoS.
func SubscriptionQueue(clientID string, qos mqtt.QoS) string {
	return "mqtt-subscription-" + clientID + "qos" + strconv.Itoa(int(qos))
}

// splitUsername reads RabbitMQ's "vhost:user" form of an MQTT user name:
// the vhost is what comes before the first colon.
func splitUsername(name string) (vhost, user string, ok bool) {
	vhost, user, ok = strings.Cut(name, ":")
	if !ok {
		return "", name, false
	}
	return vhost, user, true
}

// VersionName is the protocol as RabbitMQ's management API names an MQTT
// connection's: "MQTT 3.1.1", "MQTT 5.0", "MQTT 3.1".
func VersionName(v mqtt.Version) string {
	switch v {
	case mqtt.V31:
		return "MQTT 3.1"
	case mqtt.V5:
		return "MQTT 5.0"
	}
	return "MQTT 3.1.1"
}
