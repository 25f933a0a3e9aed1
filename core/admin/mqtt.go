package admin

import (
	"github.com/warrenmq/warren/core/mqtt"
)

// MQTT connections (core/mqtt) are listed in /api/connections beside
// AMQP's and the stream protocol's, as RabbitMQ lists its MQTT plugin's
// connections: protocol "MQTT 3.1.1" or "MQTT 5.0", the client id among
// the client properties, the keep-alive as timeout. They have no
// channels; closing one through the API disconnects it (MQTT 5:
// Administrative action).

// mqttConnectionJSON is an MQTT connection as /api/connections shows it.
type mqttConnectionJSON struct {
	AuthMechanism          string            `json:"auth_mechanism"`
	Channels               int               `json:"channels"`
	ClientProperties       map[string]string `json:"client_properties"`
	ConnectedAt            int64             `json:"connected_at"`
	Host                   string            `json:"host"`
	Name                   string            `json:"name"`
	Node                   string            `json:"node"`
	PeerHost               string            `json:"peer_host"`
	PeerPort               int               `json:"peer_port"`
	Port                   int               `json:"port"`
	Protocol               string            `json:"protocol"`
	RecvOct                uint64            `json:"recv_oct"`
	RecvOctDetails         details           `json:"recv_oct_details"`
	SendOct                uint64            `json:"send_oct"`
	SendOctDetails         details           `json:"send_oct_details"`
	SSL                    bool              `json:"ssl"`
	State                  string            `json:"state"`
	Timeout                uint16            `json:"timeout"`
	User                   string            `json:"user"`
	UserWhoPerformedAction string            `json:"user_who_performed_action"`
	VHost                  string            `json:"vhost"`
	// Warren's: the session's topic filters and QoS 1 deliveries waiting
	// for PUBACK.
	Subscriptions int `json:"mqtt_subscriptions"`
	Unacked       int `json:"messages_unacknowledged"`
}

func mqttConnectionView(ci mqtt.ConnInfo, node string) mqttConnectionJSON {
	host, port := splitAddr(ci.Local)
	peer, peerPort := splitAddr(ci.Peer)
	return mqttConnectionJSON{
		AuthMechanism: "PLAIN", ClientProperties: map[string]string{"client_id": ci.ClientID},
		ConnectedAt: ci.ConnectedAt.UnixMilli(), Host: host, Name: ci.Name, Node: node, PeerHost: peer, PeerPort: peerPort,
		Port: port, Protocol: ci.Protocol, RecvOct: ci.RecvOctets, SendOct: ci.SendOctets, State: "running",
		Timeout: ci.KeepAlive, User: ci.User, UserWhoPerformedAction: ci.User, VHost: ci.VHost,
		Subscriptions: ci.Subscriptions, Unacked: ci.Unacked,
	}
}

// visibleMQTTConnections are the MQTT connections the user may see, of
// vhostName when it is not "".
func (a *api) visibleMQTTConnections(c *call, vhostName string) []mqtt.ConnInfo {
	return visibleTo(c, a.b.MQTT().Connections(), vhostName, func(ci mqtt.ConnInfo) (string, string) { return ci.User, ci.VHost })
}

// findAnyMQTTConnection is the MQTT connection named by the path's name,
// in any vhost, if the user may see it.
func (a *api) findAnyMQTTConnection(c *call) (mqtt.ConnInfo, bool) {
	for _, ci := range a.visibleMQTTConnections(c, "") {
		if ci.Name == c.path("name") {
			return ci, true
		}
	}
	return mqtt.ConnInfo{}, false
}

// closeMQTT disconnects an MQTT connection; a user who is not an
// administrator may close only its own.
func (a *api) closeMQTT(c *call, ci mqtt.ConnInfo) (any, error) {
	if !c.isAdmin() && ci.User != c.u.Name {
		return nil, notAuthorised("Not administrator user")
	}
	if !a.b.MQTT().Close(ci.Name) {
		return nil, errNotFound
	}
	return nil, nil
}
