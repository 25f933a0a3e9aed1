package broker

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/mqtt"
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
		Users:  b.users,
		VHosts: b,
		Log:    log,
		Admit:  b.srv.AdmitOther,
	}
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
