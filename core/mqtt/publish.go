package mqtt

import (
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/mqtt"
)

// publish runs a client's PUBLISH: permission on the exchange and the
// routing key, the message routed, and for QoS 1 a PUBACK once its
// queues have it (stored and synced when persistent, as AMQP's confirm).
func (c *Conn) publish(m *mqtt.Publish) error {
	qos := m.QoS
	if qos == mqtt.QoS2 {
		if c.version == mqtt.V5 {
			c.log.Warn().Msg("closing MQTT connection: a QoS 2 PUBLISH, above the Maximum QoS announced")
			c.disconnect(mqtt.ReasonQoSNotSupported)
			return errClosed
		}
		// RabbitMQ 3.10 takes a QoS 2 PUBLISH as QoS 1, PUBACK and all.
		qos = mqtt.QoS1
	}
	if c.version == mqtt.V5 {
		if m.Properties.TopicAlias != 0 {
			c.log.Warn().Msg("closing MQTT connection: a Topic Alias, above the Topic Alias Maximum of 0")
			c.disconnect(mqtt.ReasonTopicAliasInvalid)
			return errClosed
		}
		if m.Retain && !c.srv.retaining() {
			c.log.Warn().Msg("closing MQTT connection: a retained PUBLISH, Retain Available being 0")
			c.disconnect(mqtt.ReasonRetainNotSupported)
			return errClosed
		}
	}
	var props *mqtt.Properties
	if c.version == mqtt.V5 {
		props = &m.Properties
	}
	if m.Retain {
		c.retain(m.Topic, qos, m.Payload, props)
	}
	code, err := c.route(m.Topic, qos, m.Dup, props, m.Payload, qos == mqtt.QoS1, m.PacketID)
	if err != nil {
		c.log.Warn().Err(err).Str("topic", m.Topic).Msg("closing MQTT connection: a PUBLISH refused")
		c.disconnect(code)
		return errClosed
	}
	return nil
}

// mayPublish says whether the user may publish to topic: write on the
// exchange, and the topic permission's write on the routing key.
func (c *Conn) mayPublish(topic string) error {
	exName := c.srv.Settings.Exchange
	if err := c.grant.Publish(exName); err != nil {
		return err
	}
	return c.grant.PublishTopic(exName, TopicToKey(topic))
}

// retain keeps a retained PUBLISH's (or will's) message for its topic,
// or deletes it when the payload is empty, if the user may publish
// there and retained messages are kept; a failure is logged, and the
// message is still routed.
func (c *Conn) retain(topic string, qos mqtt.QoS, payload []byte, props *mqtt.Properties) {
	if !c.srv.retaining() || c.mayPublish(topic) != nil {
		return
	}
	if err := c.srv.retained().set(c.vh.Name, retainedOf(topic, qos, payload, props)); err != nil {
		c.log.Error().Err(err).Str("topic", topic).Msg("an MQTT retained message was not kept")
	}
}

// route publishes one message to the exchange. With confirm, a PUBACK
// for packetID is sent once its queues took it. An error ends the
// connection, with code for MQTT 5, but for a refusal an MQTT 5 QoS 1
// PUBACK can carry.
func (c *Conn) route(topic string, qos mqtt.QoS, dup bool, props *mqtt.Properties, payload []byte, confirm bool, packetID uint16) (mqtt.ReasonCode, error) {
	exName := c.srv.Settings.Exchange
	if refused := c.mayPublish(topic); refused != nil {
		if confirm && c.version == mqtt.V5 {
			c.log.Warn().Err(refused).Str("topic", topic).Msg("MQTT PUBLISH refused")
			c.confirms.settle(c.confirms.add(packetID), mqtt.ReasonNotAuthorized)
			return 0, nil
		}
		return mqtt.ReasonNotAuthorized, refused
	}
	x, err := c.vh.FindExchange(exName)
	if err != nil {
		return mqtt.ReasonImplementationSpecificError, err
	}
	if x.Type != exchange.TypeTopic {
		return mqtt.ReasonImplementationSpecificError, errNotTopic
	}
	msg, err := toAMQP(exName, topic, qos, dup, props, payload)
	if err != nil {
		return mqtt.ReasonPayloadFormatInvalid, err
	}
	out, err := c.vh.Publish(x, msg, &c.router)
	if err != nil {
		return mqtt.ReasonImplementationSpecificError, err
	}
	msg.Release()
	if !confirm {
		return 0, nil
	}
	seq := c.confirms.add(packetID)
	ok := mqtt.ReasonSuccess
	if !out.Routed() {
		ok = mqtt.ReasonNoMatchingSubscribers
	}
	switch {
	case out.Rejected:
		c.confirms.settle(seq, mqtt.ReasonQuotaExceeded)
	case !out.Routed() && out.HomesDown > 0:
		c.confirms.settle(seq, mqtt.ReasonUnspecifiedError)
	case out.Forwarded != nil:
		stored := out.Stored
		out.Forwarded.Then(func(err error) {
			if err != nil || !stored {
				c.confirms.settleErr(seq, ok, err)
				return
			}
			c.vh.AfterSync(func(err error) { c.confirms.settleErr(seq, ok, err) })
		})
	case out.Stored:
		c.syncWait = append(c.syncWait, seq)
	default:
		c.confirms.settle(seq, ok)
	}
	return 0, nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errNotTopic = constError("mqtt.exchange is not a topic exchange")

// registerSyncs asks the store for one sync callback for the stored
// publishes read since the last: the store syncs in commit order, so one
// covers them all.
func (c *Conn) registerSyncs() {
	if len(c.syncWait) == 0 {
		return
	}
	seqs := c.syncWait
	c.syncWait = nil
	c.vh.AfterSync(func(err error) {
		for _, seq := range seqs {
			c.confirms.settleErr(seq, mqtt.ReasonSuccess, err)
		}
	})
}

// publishWill publishes the will, as a PUBLISH of its QoS.
func (c *Conn) publishWill() {
	w := c.will
	var props *mqtt.Properties
	if c.version == mqtt.V5 {
		props = &w.Properties
	}
	if w.Retain {
		c.retain(w.Topic, w.QoS, w.Payload, props)
	}
	if _, err := c.route(w.Topic, w.QoS, false, props, w.Payload, false, 0); err != nil {
		c.log.Warn().Err(err).Str("topic", w.Topic).Msg("MQTT will not published")
	}
}

// confirms are a connection's PUBACKs waiting for their messages to be
// taken. They go out in the order of their PUBLISHes ([MQTT-4.6.0-2]),
// each once it and those before it are settled.
type confirms struct {
	mu      lockorder.Mutex[lockorder.MQTTConfirms]
	out     *outbound
	first   uint64 // the sequence number of pending[0]
	next    uint64
	pending []pendingAck
}

type pendingAck struct {
	packetID uint16
	code     mqtt.ReasonCode
	done     bool
}

// add records a PUBACK to send and returns its sequence number.
func (k *confirms) add(packetID uint16) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	seq := k.next
	k.next++
	k.pending = append(k.pending, pendingAck{packetID: packetID})
	return seq
}

func (k *confirms) settleErr(seq uint64, ok mqtt.ReasonCode, err error) {
	if err != nil {
		ok = mqtt.ReasonUnspecifiedError
	}
	k.settle(seq, ok)
}

// settle marks a PUBACK ready with code, and sends those ready in order.
func (k *confirms) settle(seq uint64, code mqtt.ReasonCode) {
	k.mu.Lock()
	defer k.mu.Unlock()
	i := int(seq - k.first)
	if i < 0 || i >= len(k.pending) {
		return
	}
	k.pending[i].code, k.pending[i].done = code, true
	n := 0
	for n < len(k.pending) && k.pending[n].done {
		p := k.pending[n]
		k.out.send(&mqtt.Puback{PacketID: p.packetID, ReasonCode: p.code})
		n++
	}
	if n > 0 {
		k.pending = append(k.pending[:0], k.pending[n:]...)
		k.first += uint64(n)
	}
}
