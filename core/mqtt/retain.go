package mqtt

import (
	"strings"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/protocol/mqtt"
)

// Retained messages: a PUBLISH (or will) with RETAIN is kept per vhost
// and topic, the last one replacing the one before, and an empty one
// deleting it; a new subscription is sent the retained messages its
// filter matches, with RETAIN set, at QoS min(subscription, message), as
// mosquitto does (RabbitMQ 3.10 sends them for filters without
// wildcards only). They are kept in the broker's store (RetainStore),
// node by node, as RabbitMQ's retainer keeps them: a cluster's nodes
// each have their own.

// RetainStore keeps retained messages across restarts: the broker's
// store, a record per vhost and topic.
type RetainStore interface {
	PutRetained(vhost, topic string, rec protocol.Table) error
	DeleteRetained(vhost, topic string) error
	Retained(vhost string) (map[string]protocol.Table, error)
}

// retained is one retained message.
type retained struct {
	topic   string
	qos     mqtt.QoS
	payload []byte
	// props are the 5.0 properties it keeps: payload format, content
	// type, response topic, correlation data, user properties.
	props   mqtt.Properties
	expires time.Time // from a Message Expiry Interval; zero: never
}

// retainer holds the retained messages of each vhost, read from the
// store at their first use. mu is held across a store write, so that
// the stored message of a topic is the last one set.
type retainer struct {
	store  RetainStore
	mu     lockorder.Mutex[lockorder.MQTTRetained]
	vhosts map[string]map[string]*retained
}

// of returns vhost's retained messages; mu is held.
func (r *retainer) of(vhost string) (map[string]*retained, error) {
	if m, ok := r.vhosts[vhost]; ok {
		return m, nil
	}
	recs, err := r.store.Retained(vhost)
	if err != nil {
		return nil, err
	}
	m := make(map[string]*retained, len(recs))
	for topic, rec := range recs {
		m[topic] = retainedFrom(topic, rec)
	}
	if r.vhosts == nil {
		r.vhosts = map[string]map[string]*retained{}
	}
	r.vhosts[vhost] = m
	return m, nil
}

// set retains m for its topic, or deletes what its topic retained when
// its payload is empty.
func (r *retainer) set(vhost string, m *retained) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	all, err := r.of(vhost)
	if err != nil {
		return err
	}
	if len(m.payload) == 0 {
		if _, had := all[m.topic]; !had {
			return nil
		}
		if err := r.store.DeleteRetained(vhost, m.topic); err != nil {
			return err
		}
		delete(all, m.topic)
		return nil
	}
	if err := r.store.PutRetained(vhost, m.topic, m.record()); err != nil {
		return err
	}
	all[m.topic] = m
	return nil
}

// matching are vhost's retained messages whose topics filter matches,
// those expired left out.
func (r *retainer) matching(vhost, filter string) ([]*retained, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	all, err := r.of(vhost)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []*retained
	for topic, m := range all {
		if (m.expires.IsZero() || m.expires.After(now)) && TopicMatches(filter, topic) {
			out = append(out, m)
		}
	}
	return out, nil
}

// forget drops a vhost's messages from memory (the vhost was deleted,
// and its records with it).
func (r *retainer) forget(vhost string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.vhosts, vhost)
}

// TopicMatches says whether an MQTT topic filter matches a topic name:
// '+' is one level, '#' (last) the level before it and any below, and a
// topic beginning with '$' is matched by no wildcard at its first level
// ([MQTT-4.7.2-1]).
func TopicMatches(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	f, t := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, level := range f {
		if level == "#" {
			return true
		}
		if i >= len(t) || (level != "+" && level != t[i]) {
			return false
		}
	}
	return len(f) == len(t)
}

// retainedOf is a PUBLISH's (or will's) message to retain.
func retainedOf(topic string, qos mqtt.QoS, payload []byte, props *mqtt.Properties) *retained {
	m := &retained{topic: topic, qos: min(qos, mqtt.QoS1), payload: append([]byte(nil), payload...)}
	if props != nil {
		m.props = mqtt.Properties{PayloadFormatIndicator: props.PayloadFormatIndicator, ContentType: props.ContentType,
			ResponseTopic: props.ResponseTopic, CorrelationData: append([]byte(nil), props.CorrelationData...),
			UserProperties: append([]mqtt.UserProperty(nil), props.UserProperties...)}
		if props.MessageExpiryInterval > 0 {
			m.expires = time.Now().Add(time.Duration(props.MessageExpiryInterval) * time.Second)
		}
	}
	return m
}

// record is m as the store keeps it.
func (m *retained) record() protocol.Table {
	t := protocol.Table{"qos": int64(m.qos), "payload": m.payload}
	p := m.props
	if p.PayloadFormatIndicator != 0 {
		t["payload_format"] = int64(p.PayloadFormatIndicator)
	}
	if p.ContentType != "" {
		t["content_type"] = p.ContentType
	}
	if p.ResponseTopic != "" {
		t["response_topic"] = p.ResponseTopic
	}
	if len(p.CorrelationData) > 0 {
		t["correlation_data"] = p.CorrelationData
	}
	if len(p.UserProperties) > 0 {
		users := make([]any, len(p.UserProperties))
		for i, u := range p.UserProperties {
			users[i] = protocol.Table{"key": u.Key, "value": u.Value}
		}
		t["user_properties"] = users
	}
	if !m.expires.IsZero() {
		t["expires"] = m.expires.UnixMilli()
	}
	return t
}

// retainedFrom reads a stored record; what it cannot read is left out.
func retainedFrom(topic string, t protocol.Table) *retained {
	m := &retained{topic: topic}
	if q, ok := t["qos"].(int64); ok && q == 1 {
		m.qos = mqtt.QoS1
	}
	m.payload, _ = t["payload"].([]byte)
	if f, ok := t["payload_format"].(int64); ok {
		m.props.PayloadFormatIndicator = byte(f)
	}
	m.props.ContentType, _ = t["content_type"].(string)
	m.props.ResponseTopic, _ = t["response_topic"].(string)
	m.props.CorrelationData, _ = t["correlation_data"].([]byte)
	if users, ok := t["user_properties"].([]any); ok {
		for _, u := range users {
			if ut, ok := u.(protocol.Table); ok {
				k, _ := ut["key"].(string)
				v, _ := ut["value"].(string)
				m.props.UserProperties = append(m.props.UserProperties, mqtt.UserProperty{Key: k, Value: v})
			}
		}
	}
	if ms, ok := t["expires"].(int64); ok && ms > 0 {
		m.expires = time.UnixMilli(ms)
	}
	return m
}

// publish is m as a PUBLISH to a subscription of qos, in version v:
// RETAIN set, its remaining expiry as 5.0's Message Expiry Interval.
func (m *retained) publish(qos mqtt.QoS, v mqtt.Version) mqtt.Publish {
	p := mqtt.Publish{Topic: m.topic, QoS: min(qos, m.qos), Retain: true, Payload: m.payload}
	if v == mqtt.V5 {
		p.Properties = m.props
		if !m.expires.IsZero() {
			p.Properties.MessageExpiryInterval = uint32(max(time.Until(m.expires).Round(time.Second)/time.Second, 1))
		}
	}
	return p
}
