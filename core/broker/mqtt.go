package broker

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/mqtt"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// newMQTTServer builds the MQTT server from [mqtt]; its listeners open
// in Start.
func newMQTTServer(cfg config.Config, log zerolog.Logger, b *Broker) *mqtt.Server {
	return &mqtt.Server{
		Settings: mqtt.Settings{
			VHost:            cfg.MQTT.VHost,
			Exchange:         cfg.MQTT.Exchange,
			AllowAnonymous:   cfg.MQTT.AllowAnonymous,
			DefaultUser:      cfg.Defaults.User,
			DefaultPassword:  cfg.Defaults.Password,
			Prefetch:         cfg.MQTT.Prefetch,
			MaxPacketSize:    int(cfg.MQTT.MaxPacketSize), // in range: Validate
			SubscriptionTTL:  time.Duration(cfg.MQTT.SubscriptionTTL),
			HandshakeTimeout: time.Duration(cfg.Limits.HandshakeTimeout),
		},
		Users:    b.users,
		VHosts:   b,
		Log:      log,
		Admit:    b.srv.AdmitOther,
		Retained: retainedStore{b},
	}
}

// retainedStore keeps MQTT retained messages in the store, node by node
// (storage.KindMQTTRetained, removed with their vhost).
type retainedStore struct{ b *Broker }

func (r retainedStore) PutRetained(vhost, topic string, rec protocol.Table) error {
	return r.b.store.PutMeta(storage.KindMQTTRetained, vhost, topic, rec)
}

func (r retainedStore) DeleteRetained(vhost, topic string) error {
	return r.b.store.DeleteMeta(storage.KindMQTTRetained, vhost, topic)
}

func (r retainedStore) Retained(vhost string) (map[string]protocol.Table, error) {
	recs, err := r.b.store.Meta(storage.KindMQTTRetained, vhost)
	if err != nil {
		return nil, err
	}
	out := make(map[string]protocol.Table, len(recs))
	for _, rec := range recs {
		out[rec.Name] = rec.Rec
	}
	return out, nil
}

// MQTT is the MQTT server, for the admin API's listings.
func (b *Broker) MQTT() *mqtt.Server { return b.mqtt }

// startMQTTListeners opens mqtt.listen.
func (b *Broker) startMQTTListeners() error {
	for _, addr := range b.cfg.MQTT.Listen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("mqtt listener %s: %w", addr, err)
		}
		b.serve(ln, "mqtt", b.mqtt.Serve)
	}
	return nil
}

// MQTTAddr is the address of the first MQTT listener, "" when there is
// none.
func (b *Broker) MQTTAddr() string {
	for _, l := range b.Listeners() {
		if l.Protocol == "mqtt" {
			return net.JoinHostPort(l.IP, strconv.Itoa(l.Port))
		}
	}
	return ""
}
