package admin

import (
	"errors"
	"net"
	"strconv"

	"github.com/warrenmq/warren/core/conn"
	"github.com/warrenmq/warren/core/mqtt"
	"github.com/warrenmq/warren/core/streamproto"
	"github.com/warrenmq/warren/internal/tablejson"
)

func (a *api) routeConnections(mux *router) {
	a.handle(mux, "GET /api/connections", management, a.connections)
	a.handle(mux, "GET /api/vhosts/{vhost}/connections", management, a.connections)
	a.handle(mux, "GET /api/connections/{name}", management, a.connection)
	a.handle(mux, "DELETE /api/connections/{name}", management, a.closeConnection)
	a.handle(mux, "GET /api/connections/{name}/channels", management, a.channels)
	a.handle(mux, "GET /api/channels", management, a.channels)
	a.handle(mux, "GET /api/vhosts/{vhost}/channels", management, a.channels)
	a.handle(mux, "GET /api/channels/{channel}", management, a.channel)
	a.handle(mux, "GET /api/consumers", management, a.consumers)
	a.handle(mux, "GET /api/consumers/{vhost}", management, a.consumers)
}

// connectionJSON is a connection as RabbitMQ lists it. message_stats is
// Warren's addition: RabbitMQ keeps a connection's counts on its channels.
type connectionJSON struct {
	AuthMechanism    string         `json:"auth_mechanism"`
	ChannelMax       int            `json:"channel_max"`
	Channels         int            `json:"channels"`
	ClientProperties map[string]any `json:"client_properties"`
	ConnectedAt      int64          `json:"connected_at"`
	FrameMax         int            `json:"frame_max"`
	Host             string         `json:"host"`
	MessageStats     map[string]any `json:"message_stats,omitempty"`
	Name             string         `json:"name"`
	Node             string         `json:"node"`
	PeerHost         string         `json:"peer_host"`
	PeerPort         int            `json:"peer_port"`
	Port             int            `json:"port"`
	Protocol         string         `json:"protocol"`
	RecvCnt          uint64         `json:"recv_cnt"`
	RecvOct          uint64         `json:"recv_oct"`
	RecvOctDetails   details        `json:"recv_oct_details"`
	SendCnt          uint64         `json:"send_cnt"`
	SendOct          uint64         `json:"send_oct"`
	SendOctDetails   details        `json:"send_oct_details"`
	SendPend         int            `json:"send_pend"`
	SSL              bool           `json:"ssl"`
	State            string         `json:"state"`
	Timeout          int            `json:"timeout"`
	Type             string         `json:"type"`
	User             string         `json:"user"`
	VHost            string         `json:"vhost"`
}

func splitAddr(addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

func (a *api) connectionView(ci conn.ConnInfo, node string) connectionJSON {
	host, port := splitAddr(ci.Local)
	peer, peerPort := splitAddr(ci.Peer)
	state := "running"
	switch {
	case ci.Blocked:
		state = "blocked"
	case ci.Flow:
		state = "flow"
	}
	return connectionJSON{
		AuthMechanism: "PLAIN", ChannelMax: int(ci.ChannelMax), Channels: ci.Channels,
		ClientProperties: tablejson.Render(ci.ClientProp), ConnectedAt: ci.Since.UnixMilli(), FrameMax: int(ci.FrameMax),
		Host: host, MessageStats: messageStats(ci.Stats, ci.Rates), Name: ci.Name, Node: node,
		PeerHost: peer, PeerPort: peerPort, Port: port, Protocol: "AMQP 0-9-1", SSL: ci.TLS, State: state,
		RecvCnt: ci.RecvCnt, RecvOct: ci.RecvOct, RecvOctDetails: details{Rate: ci.RecvOctRate},
		SendCnt: ci.SendCnt, SendOct: ci.SendOct, SendOctDetails: details{Rate: ci.SendOctRate}, SendPend: ci.SendPend,
		Timeout: int(ci.Heartbeat.Seconds()), Type: "network", User: ci.User, VHost: ci.VHost,
	}
}

// visibleConnections are the open connections the user may see, in the
// path's vhost when it names one.
func (a *api) visibleConnections(c *call) ([]conn.ConnInfo, error) {
	vhostName := c.path("vhost")
	if vhostName != "" {
		if _, err := c.vhost(); err != nil {
			return nil, err
		}
	}
	all := a.b.Server().Connections()
	out := all[:0] // filtered in place: a ConnInfo is large, and there may be 10,000
	for i := range all {
		ci := &all[i]
		if ci.User == "" || (vhostName != "" && ci.VHost != vhostName) || !c.seesConnection(ci.User, ci.VHost) {
			continue // still in the handshake, another vhost, or someone else's
		}
		out = append(out, *ci)
	}
	return out, nil
}

// connRow is one row of /api/connections: an AMQP connection or a
// stream-protocol one, which RabbitMQ lists there too (protocol
// "stream").
type connRow struct {
	amqp   *conn.ConnInfo
	stream *streamproto.ConnInfo
	mqtt   *mqtt.ConnInfo
}

func (r connRow) name() string {
	switch {
	case r.amqp != nil:
		return r.amqp.Name
	case r.mqtt != nil:
		return r.mqtt.Name
	}
	return r.stream.Name
}

var connectionLister = lister[connRow]{name: connRow.name}

func (a *api) connections(c *call) (any, error) {
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return nil, err
	}
	cs, err := a.visibleConnections(c)
	if err != nil {
		return nil, err
	}
	streams := a.visibleStreamConnections(c, c.path("vhost"))
	mqtts := a.visibleMQTTConnections(c, c.path("vhost"))
	rows := make([]connRow, 0, len(cs)+len(streams)+len(mqtts))
	for i := range cs {
		rows = append(rows, connRow{amqp: &cs[i]})
	}
	for i := range streams {
		rows = append(rows, connRow{stream: &streams[i]})
	}
	for i := range mqtts {
		rows = append(rows, connRow{mqtt: &mqtts[i]})
	}
	node := a.b.NodeName()
	// Only the page's rows are rendered, unless the sort needs them all.
	return list(rows, p, connectionLister, func(r connRow) any {
		switch {
		case r.amqp != nil:
			return a.connectionView(*r.amqp, node)
		case r.mqtt != nil:
			return mqttConnectionView(*r.mqtt, node)
		}
		return streamConnectionView(*r.stream, node)
	})
}

// findAnyStreamConnection is the stream connection named by the path's
// name, in any vhost, if the user may see it.
func (a *api) findAnyStreamConnection(c *call) (streamproto.ConnInfo, bool) {
	for _, ci := range a.visibleStreamConnections(c, "") {
		if ci.Name == c.path("name") {
			return ci, true
		}
	}
	return streamproto.ConnInfo{}, false
}

func (a *api) findConnection(c *call) (conn.ConnInfo, error) {
	cs, err := a.visibleConnections(c)
	if err != nil {
		return conn.ConnInfo{}, err
	}
	for _, ci := range cs {
		if ci.Name == c.path("name") {
			return ci, nil
		}
	}
	return conn.ConnInfo{}, errNotFound
}

func (a *api) connection(c *call) (any, error) {
	ci, err := a.findConnection(c)
	if errors.Is(err, errNotFound) {
		if sc, ok := a.findAnyStreamConnection(c); ok {
			return streamConnectionView(sc, a.b.NodeName()), nil
		}
		if mc, ok := a.findAnyMQTTConnection(c); ok {
			return mqttConnectionView(mc, a.b.NodeName()), nil
		}
	}
	if err != nil {
		return nil, err
	}
	return a.connectionView(ci, a.b.NodeName()), nil
}

// closeConnection closes a connection with 320 CONNECTION_FORCED and the
// X-Reason header as its text, RabbitMQ's default otherwise. A user who is
// not an administrator may close only its own connections.
func (a *api) closeConnection(c *call) (any, error) {
	ci, err := a.findConnection(c)
	if errors.Is(err, errNotFound) {
		if sc, ok := a.findAnyStreamConnection(c); ok {
			return a.closeStream(c, sc)
		}
		if mc, ok := a.findAnyMQTTConnection(c); ok {
			return a.closeMQTT(c, mc)
		}
	}
	if err != nil {
		return nil, err
	}
	if !c.isAdmin() && ci.User != c.u.Name {
		return nil, notAuthorised("Not administrator user")
	}
	if !a.b.Server().CloseConnection(ci.Name, closeReason(c)) {
		return nil, errNotFound
	}
	return nil, nil
}

// closeReason is the X-Reason header a DELETE of a connection gives its
// client, RabbitMQ's default without one.
func closeReason(c *call) string {
	if reason := c.r.Header.Get("X-Reason"); reason != "" {
		return reason
	}
	return "Closed via management plugin"
}

// channelJSON is a channel as RabbitMQ lists it.
type channelJSON struct {
	ConnectionDetails      connDetails    `json:"connection_details"`
	Confirm                bool           `json:"confirm"`
	ConsumerCount          int            `json:"consumer_count"`
	ConsumerDetails        []consumerJSON `json:"consumer_details,omitempty"`
	GlobalPrefetchCount    int            `json:"global_prefetch_count"`
	MessageStats           map[string]any `json:"message_stats,omitempty"`
	MessagesUnacknowledged int            `json:"messages_unacknowledged"`
	Name                   string         `json:"name"`
	Node                   string         `json:"node"`
	Number                 int            `json:"number"`
	PrefetchCount          int            `json:"prefetch_count"`
	State                  string         `json:"state"`
	Transactional          bool           `json:"transactional"`
	User                   string         `json:"user"`
	VHost                  string         `json:"vhost"`
}

type connDetails struct {
	Name     string `json:"name"`
	PeerHost string `json:"peer_host"`
	PeerPort int    `json:"peer_port"`
}

func channelView(ch conn.ChannelInfo, node string) channelJSON {
	peer, port := splitAddr(ch.Conn.Peer)
	state := "running"
	if ch.Conn.Blocked || ch.Conn.Flow {
		state = "flow"
	}
	return channelJSON{
		ConnectionDetails: connDetails{Name: ch.Conn.Name, PeerHost: peer, PeerPort: port},
		Confirm:           ch.Confirm, ConsumerCount: len(ch.Consumers), GlobalPrefetchCount: int(ch.GlobalPrefetch),
		MessageStats: messageStats(ch.Stats, ch.Rates), MessagesUnacknowledged: ch.Unacked, Name: ch.Name(),
		Node: node, Number: int(ch.Number), PrefetchCount: int(ch.Prefetch), State: state,
		Transactional: ch.Transactional, User: ch.Conn.User, VHost: ch.Conn.VHost,
	}
}

// visibleChannels are the channels the user may see, of the path's
// connection or vhost when it names one.
func (a *api) visibleChannels(c *call) ([]conn.ChannelInfo, error) {
	vhostName, connName := c.path("vhost"), c.path("name")
	if vhostName != "" {
		if _, err := c.vhost(); err != nil {
			return nil, err
		}
	}
	if connName != "" {
		if _, err := a.findConnection(c); err != nil {
			if _, ok := a.findAnyStreamConnection(c); ok && errors.Is(err, errNotFound) {
				return nil, nil // a stream connection has no channels
			}
			if _, ok := a.findAnyMQTTConnection(c); ok && errors.Is(err, errNotFound) {
				return nil, nil // nor an MQTT one
			}
			return nil, err
		}
	}
	var out []conn.ChannelInfo
	for _, ch := range a.b.Server().Channels() {
		if (vhostName != "" && ch.Conn.VHost != vhostName) || (connName != "" && ch.Conn.Name != connName) ||
			!c.seesConnection(ch.Conn.User, ch.Conn.VHost) {
			continue
		}
		out = append(out, ch)
	}
	return out, nil
}

var channelLister = lister[channelJSON]{name: func(x channelJSON) string { return x.Name }}

func (a *api) channels(c *call) (any, error) {
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return nil, err
	}
	chs, err := a.visibleChannels(c)
	if err != nil {
		return nil, err
	}
	node := a.b.NodeName()
	out := make([]channelJSON, 0, len(chs))
	for _, ch := range chs {
		out = append(out, channelView(ch, node))
	}
	return list(out, p, channelLister, same)
}

func (a *api) channel(c *call) (any, error) {
	chs, err := a.visibleChannels(c)
	if err != nil {
		return nil, err
	}
	node := a.b.NodeName()
	for _, ch := range chs {
		if ch.Name() == c.path("channel") {
			out := channelView(ch, node)
			out.ConsumerDetails = []consumerJSON{}
			for _, k := range ch.Consumers {
				out.ConsumerDetails = append(out.ConsumerDetails, consumerView(ch, k, node))
			}
			return out, nil
		}
	}
	return nil, errNotFound
}

// consumerJSON is a consumer as RabbitMQ lists it.
type consumerJSON struct {
	Arguments      map[string]any `json:"arguments"`
	AckRequired    bool           `json:"ack_required"`
	Active         bool           `json:"active"`
	ActivityStatus string         `json:"activity_status"`
	ChannelDetails chanDetails    `json:"channel_details"`
	ConsumerTag    string         `json:"consumer_tag"`
	Exclusive      bool           `json:"exclusive"`
	PrefetchCount  int            `json:"prefetch_count"`
	Queue          queueRef       `json:"queue"`
}

type chanDetails struct {
	ConnectionName string `json:"connection_name"`
	Name           string `json:"name"`
	Node           string `json:"node"`
	Number         int    `json:"number"`
	PeerHost       string `json:"peer_host"`
	PeerPort       int    `json:"peer_port"`
	User           string `json:"user"`
}

type queueRef struct {
	Name  string `json:"name"`
	VHost string `json:"vhost"`
}

func consumerView(ch conn.ChannelInfo, k conn.ConsumerInfo, node string) consumerJSON {
	peer, port := splitAddr(ch.Conn.Peer)
	return consumerJSON{
		Arguments: tablejson.Render(k.Args), AckRequired: !k.NoAck, Active: true, ActivityStatus: "up",
		ChannelDetails: chanDetails{ConnectionName: ch.Conn.Name, Name: ch.Name(), Node: node, Number: int(ch.Number),
			PeerHost: peer, PeerPort: port, User: ch.Conn.User},
		ConsumerTag: k.Tag, Exclusive: k.Exclusive, PrefetchCount: int(k.Prefetch),
		Queue: queueRef{Name: k.Queue, VHost: k.VHost},
	}
}

// consumersOf lists the consumers the user may see, of one vhost when
// vhostName is not "".
func (a *api) consumersOf(c *call, vhostName string) []consumerJSON {
	node := a.b.NodeName()
	out := []consumerJSON{}
	for _, ch := range a.b.Server().Channels() {
		if !c.seesConnection(ch.Conn.User, ch.Conn.VHost) {
			continue
		}
		for _, k := range ch.Consumers {
			if vhostName == "" || k.VHost == vhostName {
				out = append(out, consumerView(ch, k, node))
			}
		}
	}
	return out
}

func (a *api) consumers(c *call) (any, error) {
	vhostName := c.path("vhost")
	if vhostName != "" {
		if _, err := c.vhost(); err != nil {
			return nil, err
		}
	}
	all := a.consumersOf(c, vhostName)
	if !c.seesAll() && vhostName == "" {
		// Only consumers in vhosts the user may use.
		kept := all[:0]
		for _, k := range all {
			if c.mayUse(k.Queue.VHost) {
				kept = append(kept, k)
			}
		}
		all = kept
	}
	return all, nil
}
