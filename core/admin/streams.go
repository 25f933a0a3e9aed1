package admin

import (
	"fmt"

	"github.com/warrenmq/warren/core/streamproto"
)

// The stream protocol's connections, publishers and consumers, as
// RabbitMQ 3.10.8's rabbitmq_stream_management plugin serves them under
// /api/stream/. Who sees what is as for AMQP connections (access.go): a
// user its own, monitoring and administrator all; a path naming a vhost
// needs access to it, and one naming a stream needs the stream to exist.
// Stream connections are in /api/connections too, as in RabbitMQ, with
// protocol "stream" (connections.go).
//
// Fields RabbitMQ has and Warren leaves out: reductions and
// garbage_collection (the Erlang process's), recv_cnt and send_cnt
// (socket packet counts Warren does not keep), and the peer_cert_* and
// ssl_* details of a TLS connection.
func (a *api) routeStreams(mux *router) {
	a.handle(mux, "GET /api/stream/connections", management, a.streamConnections)
	a.handle(mux, "GET /api/stream/connections/{vhost}", management, a.streamConnections)
	a.handle(mux, "GET /api/stream/connections/{vhost}/{name}", management, a.streamConnection)
	a.handle(mux, "DELETE /api/stream/connections/{vhost}/{name}", management, a.closeStreamConnection)
	a.handle(mux, "GET /api/stream/connections/{vhost}/{name}/publishers", management, a.streamPublishers)
	a.handle(mux, "GET /api/stream/connections/{vhost}/{name}/consumers", management, a.streamConsumers)
	a.handle(mux, "GET /api/stream/publishers", management, a.streamPublishers)
	a.handle(mux, "GET /api/stream/publishers/{vhost}", management, a.streamPublishers)
	a.handle(mux, "GET /api/stream/publishers/{vhost}/{stream}", management, a.streamPublishers)
	a.handle(mux, "GET /api/stream/consumers", management, a.streamConsumers)
	a.handle(mux, "GET /api/stream/consumers/{vhost}", management, a.streamConsumers)
}

// streamConnectionJSON is a stream connection as RabbitMQ lists it: the
// stream reader's creation keys and statistics (rabbit_stream_reader's
// CREATION_EVENT_KEYS and OTHER_METRICS) with the management plugin's
// *_details. Warren keeps no byte rates for them: the rates are 0.
type streamConnectionJSON struct {
	AuthMechanism          string            `json:"auth_mechanism"`
	ChannelMax             int               `json:"channel_max"`
	Channels               int               `json:"channels"`
	ClientProperties       map[string]string `json:"client_properties"`
	ConnectedAt            int64             `json:"connected_at"`
	FrameMax               uint32            `json:"frame_max"`
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
	SendPend               int               `json:"send_pend"`
	SSL                    bool              `json:"ssl"`
	State                  string            `json:"state"`
	Timeout                uint32            `json:"timeout"`
	User                   string            `json:"user"`
	UserWhoPerformedAction string            `json:"user_who_performed_action"`
	VHost                  string            `json:"vhost"`
}

func streamConnectionView(ci streamproto.ConnInfo, node string) streamConnectionJSON {
	host, port := splitAddr(ci.Local)
	peer, peerPort := splitAddr(ci.Peer)
	return streamConnectionJSON{
		AuthMechanism: "PLAIN", ClientProperties: orEmpty(ci.ClientProperties), ConnectedAt: ci.ConnectedAt.UnixMilli(), FrameMax: ci.FrameMax,
		Host: host, Name: ci.Name, Node: node, PeerHost: peer, PeerPort: peerPort, Port: port, Protocol: "stream",
		RecvOct: ci.RecvOctets, SendOct: ci.SendOctets, SSL: ci.TLS, State: "running", Timeout: ci.Heartbeat,
		User: ci.User, UserWhoPerformedAction: ci.User, VHost: ci.VHost,
	}
}

// visibleStreamConnections are the open stream connections the user may
// see, of vhostName when it is not "".
func (a *api) visibleStreamConnections(c *call, vhostName string) []streamproto.ConnInfo {
	return visibleTo(c, a.b.Streams().Connections(), vhostName, func(ci streamproto.ConnInfo) (string, string) { return ci.User, ci.VHost })
}

// visibleTo keeps the connections of another protocol (all, a fresh
// list) that the user may see, of vhostName when it is not "";
// owner gives a connection's user and vhost.
func visibleTo[T any](c *call, all []T, vhostName string, owner func(T) (user, vhost string)) []T {
	out := all[:0]
	for _, ci := range all {
		if user, vh := owner(ci); (vhostName == "" || vh == vhostName) && c.seesConnection(user, vh) {
			out = append(out, ci)
		}
	}
	return out
}

// pathVHost checks the vhost the path names, if any, and returns its name.
func (c *call) pathVHost() (string, error) {
	if c.path("vhost") == "" {
		return "", nil
	}
	v, err := c.vhost()
	if err != nil {
		return "", err
	}
	return v.Name, nil
}

var streamConnectionLister = lister[streamproto.ConnInfo]{name: func(x streamproto.ConnInfo) string { return x.Name }}

func (a *api) streamConnections(c *call) (any, error) {
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return nil, err
	}
	vhostName, err := c.pathVHost()
	if err != nil {
		return nil, err
	}
	node := a.b.NodeName()
	return list(a.visibleStreamConnections(c, vhostName), p, streamConnectionLister,
		func(ci streamproto.ConnInfo) streamConnectionJSON { return streamConnectionView(ci, node) })
}

// findStreamConnection is the connection the path names, in the path's
// vhost, if the user may see it.
func (a *api) findStreamConnection(c *call) (streamproto.ConnInfo, error) {
	for _, ci := range a.visibleStreamConnections(c, c.path("vhost")) {
		if ci.Name == c.path("name") {
			return ci, nil
		}
	}
	return streamproto.ConnInfo{}, errNotFound
}

func (a *api) streamConnection(c *call) (any, error) {
	ci, err := a.findStreamConnection(c)
	if err != nil {
		return nil, err
	}
	return streamConnectionView(ci, a.b.NodeName()), nil
}

func (a *api) closeStreamConnection(c *call) (any, error) {
	ci, err := a.findStreamConnection(c)
	if err != nil {
		return nil, err
	}
	return a.closeStream(c, ci)
}

// closeStream closes a stream connection for the API, with the X-Reason
// header as its reason. Only an administrator closes another user's
// (RabbitMQ's is_authorized_user, which says it so).
func (a *api) closeStream(c *call, ci streamproto.ConnInfo) (any, error) {
	if !c.isAdmin() && ci.User != c.u.Name {
		return nil, notAuthorised("User not authorised to access object")
	}
	if !a.b.Streams().Close(ci.Name, closeReason(c)) {
		return nil, errNotFound
	}
	return nil, nil
}

// streamConnDetails is the connection_details of a stream publisher or
// consumer.
type streamConnDetails struct {
	Name     string `json:"name"`
	Node     string `json:"node"`
	PeerHost string `json:"peer_host"`
	PeerPort int    `json:"peer_port"`
	User     string `json:"user"`
}

type streamPublisherJSON struct {
	Confirmed         uint64            `json:"confirmed"`
	ConnectionDetails streamConnDetails `json:"connection_details"`
	Errored           uint64            `json:"errored"`
	Published         uint64            `json:"published"`
	PublisherID       uint8             `json:"publisher_id"`
	Queue             queueRef          `json:"queue"`
	Reference         string            `json:"reference"`
}

type streamConsumerJSON struct {
	Active            bool              `json:"active"`
	ActivityStatus    string            `json:"activity_status"`
	ConnectionDetails streamConnDetails `json:"connection_details"`
	Consumed          uint64            `json:"consumed"`
	Credits           int               `json:"credits"`
	Offset            uint64            `json:"offset"`
	OffsetLag         uint64            `json:"offset_lag"`
	Properties        map[string]string `json:"properties"`
	Queue             queueRef          `json:"queue"`
	SubscriptionID    uint8             `json:"subscription_id"`
}

// streamScope is what a publishers' or consumers' path narrows the
// listing to, and the connections the user may see there, by name.
type streamScope struct {
	stream string // "" for any
	conns  map[string]streamproto.ConnInfo
	node   string
}

// scope checks the path's vhost, connection and stream.
func (a *api) streamScope(c *call) (streamScope, error) {
	s := streamScope{stream: c.path("stream"), node: a.b.NodeName()}
	var conns []streamproto.ConnInfo
	if c.path("name") != "" {
		// A connection's: it must be one the user sees.
		ci, err := a.findStreamConnection(c)
		if err != nil {
			return s, err
		}
		conns = []streamproto.ConnInfo{ci}
	} else {
		vhostName, err := c.pathVHost()
		if err != nil {
			return s, err
		}
		if s.stream != "" {
			v, _ := a.b.VHost(vhostName)
			if _, ok := v.QueueInfo(s.stream); !ok {
				return s, errNotFound
			}
		}
		conns = a.visibleStreamConnections(c, vhostName)
	}
	s.conns = make(map[string]streamproto.ConnInfo, len(conns))
	for _, ci := range conns {
		s.conns[ci.Name] = ci
	}
	return s, nil
}

// streamListing reads a publishers' or consumers' listing's paging and
// scope.
func (a *api) streamListing(c *call) (paging, streamScope, error) {
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return p, streamScope{}, err
	}
	s, err := a.streamScope(c)
	return p, s, err
}

// details is the connection_details of one of conn's publishers or
// consumers; ok is false when the listing leaves them out.
func (s streamScope) details(conn, stream string) (streamConnDetails, queueRef, bool) {
	ci, ok := s.conns[conn]
	if !ok || (s.stream != "" && stream != s.stream) {
		return streamConnDetails{}, queueRef{}, false
	}
	peer, port := splitAddr(ci.Peer)
	return streamConnDetails{Name: ci.Name, Node: s.node, PeerHost: peer, PeerPort: port, User: ci.User},
		queueRef{Name: stream, VHost: ci.VHost}, true
}

// streamEntityName orders publishers and consumers by connection, then id.
func streamEntityName(conn string, id uint8) string { return fmt.Sprintf("%s#%03d", conn, id) }

var streamPublisherLister = lister[streamPublisherJSON]{name: func(x streamPublisherJSON) string {
	return streamEntityName(x.ConnectionDetails.Name, x.PublisherID)
}}

var streamConsumerLister = lister[streamConsumerJSON]{name: func(x streamConsumerJSON) string {
	return streamEntityName(x.ConnectionDetails.Name, x.SubscriptionID)
}}

func (a *api) streamPublishers(c *call) (any, error) {
	p, s, err := a.streamListing(c)
	if err != nil {
		return nil, err
	}
	out := []streamPublisherJSON{}
	for _, pi := range a.b.Streams().Publishers() {
		if d, q, ok := s.details(pi.Conn, pi.Stream); ok {
			out = append(out, streamPublisherJSON{
				Confirmed: pi.Confirmed, ConnectionDetails: d, Errored: pi.Errored, Published: pi.Published,
				PublisherID: pi.ID, Queue: q, Reference: pi.Reference,
			})
		}
	}
	return list(out, p, streamPublisherLister, same)
}

func (a *api) streamConsumers(c *call) (any, error) {
	p, s, err := a.streamListing(c)
	if err != nil {
		return nil, err
	}
	out := []streamConsumerJSON{}
	for _, k := range a.b.Streams().Consumers() {
		if d, q, ok := s.details(k.Conn, k.Stream); ok {
			out = append(out, streamConsumerJSON{
				Active: k.Active, ActivityStatus: k.ActivityStatus(), ConnectionDetails: d, Consumed: k.Consumed, Credits: k.Credit, Offset: k.Offset, OffsetLag: k.Lag,
				Properties: orEmpty(k.Properties), Queue: q, SubscriptionID: k.ID,
			})
		}
	}
	return list(out, p, streamConsumerLister, same)
}
