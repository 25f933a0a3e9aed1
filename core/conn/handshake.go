package conn

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// Product is the name the broker gives in connection.start.
const Product = "Warren"

// errHandshake ends a handshake that already told the client why.
var errHandshake = errors.New("handshake refused")

// handshake runs protocol header, start/start-ok, tune/tune-ok and open,
// leaving the connection ready for channels.
func (c *Conn) handshake() error {
	header, err := c.r.ReadProtocolHeader()
	if err != nil {
		return err
	}
	if header != protocol.ProtocolHeader {
		// The spec's answer to a header it does not speak: ours, then hang up.
		b := c.out.begin()
		c.out.end(append(b, protocol.ProtocolHeader[:]...))
		return fmt.Errorf("unsupported protocol header %q", header[:])
	}
	c.send(0, &protocol.ConnectionStart{
		VersionMajor: 0, VersionMinor: 9,
		ServerProperties: c.serverProperties(),
		Mechanisms:       "PLAIN AMQPLAIN",
		Locales:          "en_US",
	})

	var startOk *protocol.ConnectionStartOk
	if err := c.expect(&startOk); err != nil {
		return err
	}
	c.clientProps = startOk.ClientProperties
	c.readCapabilities()
	if err := c.authenticate(startOk); err != nil {
		return err
	}

	c.send(0, &protocol.ConnectionTune{
		ChannelMax: c.channelMax,
		FrameMax:   c.frameMax,
		Heartbeat:  uint16(c.srv.Limits.Heartbeat / time.Second),
	})
	var tuneOk *protocol.ConnectionTuneOk
	if err := c.expect(&tuneOk); err != nil {
		return err
	}
	if err := c.tune(tuneOk); err != nil {
		return err
	}

	var open *protocol.ConnectionOpen
	if err := c.expect(&open); err != nil {
		return err
	}
	return c.open(open.VirtualHost)
}

func (c *Conn) serverProperties() protocol.Table {
	cluster := "warren"
	if c.srv.ClusterName != nil {
		cluster = c.srv.ClusterName()
	}
	return protocol.Table{
		"product":      Product,
		"version":      c.srv.Version,
		"platform":     "Go",
		"copyright":    "The Warren developers",
		"information":  "An AMQP 0-9-1 broker with WebAssembly exchange types",
		"cluster_name": cluster,
		"capabilities": protocol.Table{
			"publisher_confirms":           true,
			"exchange_exchange_bindings":   true,
			"basic.nack":                   true,
			"consumer_cancel_notify":       true,
			"connection.blocked":           true,
			"authentication_failure_close": true,
			"per_consumer_qos":             true,
			"consumer_priorities":          true,
			"direct_reply_to":              true,
		},
	}
}

func (c *Conn) readCapabilities() {
	caps, _ := c.clientProps["capabilities"].(protocol.Table)
	flag := func(name string) bool { b, _ := caps[name].(bool); return b }
	c.caps = capabilities{
		consumerCancelNotify: flag("consumer_cancel_notify"),
		connectionBlocked:    flag("connection.blocked"),
		authFailureClose:     flag("authentication_failure_close"),
	}
}

// expect reads the next method on channel 0 into *dst, which must be of the
// type the handshake is at. Heartbeats are skipped; a connection.close from
// the client ends the handshake politely.
func (c *Conn) expect(dst any) error {
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			return err
		}
		if f.Type == protocol.FrameHeartbeat {
			continue
		}
		if c.closing.Load() {
			// The broker is shutting down and said so.
			if c.whileClosing(f) {
				return errHandshake
			}
			continue
		}
		if f.Type != protocol.FrameMethod || f.Channel != 0 {
			return c.refuse(reply.New(protocol.UnexpectedFrame, "expected a connection method on channel 0 during the handshake"))
		}
		m, err := c.dec.Decode(f.Payload)
		if err != nil {
			return c.refuse(asReply(err))
		}
		c.lastClass, c.lastMethod = m.ClassID(), m.MethodID()
		if _, ok := m.(*protocol.ConnectionClose); ok {
			c.out.appendFinal(protocol.AppendMethodFrame(nil, 0, &protocol.ConnectionCloseOk{}))
			return errHandshake
		}
		ok := false
		switch d := dst.(type) {
		case **protocol.ConnectionStartOk:
			var v *protocol.ConnectionStartOk
			if v, ok = m.(*protocol.ConnectionStartOk); ok {
				copied := *v
				*d = &copied
			}
		case **protocol.ConnectionTuneOk:
			var v *protocol.ConnectionTuneOk
			if v, ok = m.(*protocol.ConnectionTuneOk); ok {
				copied := *v
				*d = &copied
			}
		case **protocol.ConnectionOpen:
			var v *protocol.ConnectionOpen
			if v, ok = m.(*protocol.ConnectionOpen); ok {
				copied := *v
				*d = &copied
			}
		}
		if !ok {
			return c.refuse(reply.New(protocol.CommandInvalid, "unexpected method %s during the handshake", m.Name()))
		}
		return nil
	}
}

// refuse closes a connection whose handshake failed, telling the client
// why, and waits a while for its close-ok as the spec asks: a client that
// has pipelined its next methods must not find the socket gone under it.
func (c *Conn) refuse(e *reply.Error) error {
	if c.sendClose(e, c.lastClass, c.lastMethod) {
		c.log.Warn().Uint16("code", e.Code).Str("error", e.Text).Msg("handshake refused")
	}
	for {
		f, err := c.r.ReadFrame()
		if err != nil || c.whileClosing(f) {
			return errHandshake
		}
	}
}

func (c *Conn) authenticate(m *protocol.ConnectionStartOk) error {
	if c.origin == localAsBroker {
		c.user = &auth.User{Name: auth.BrokerUser}
		return nil
	}
	var user, password string
	var err error
	switch m.Mechanism {
	case "PLAIN":
		user, password, err = auth.ParsePlain([]byte(m.Response))
	case "AMQPLAIN":
		user, password, err = parseAMQPlain([]byte(m.Response))
	default:
		return c.refuse(reply.CommandInvalid("unknown authentication mechanism '%s'", m.Mechanism))
	}
	if err == nil {
		c.user, err = c.srv.Users.Login(user, password, c.origin != fromNetwork || isLoopback(c.nc.RemoteAddr()))
	}
	if err != nil {
		c.log.Warn().Str("user", user).Str("mechanism", m.Mechanism).Err(err).Msg("login refused")
		if !c.caps.authFailureClose {
			// Older clients expect the socket to just close.
			return errHandshake
		}
		return c.refuse(reply.AccessRefused("Login was refused using authentication mechanism %s. For details see the broker logfile.", m.Mechanism))
	}
	return nil
}

// parseAMQPlain reads an AMQPLAIN response: a field table without its
// length prefix, holding LOGIN and PASSWORD.
func parseAMQPlain(resp []byte) (user, password string, err error) {
	framed := protocol.AppendLong(make([]byte, 0, 4+len(resp)), uint32(len(resp)))
	framed = append(framed, resp...)
	t, _, err := protocol.DecodeTable(framed)
	if err != nil {
		return "", "", fmt.Errorf("malformed AMQPLAIN response: %v", err)
	}
	user, _ = t["LOGIN"].(string)
	password, _ = t["PASSWORD"].(string)
	return user, password, nil
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// tune applies the client's tune-ok: it may lower channel_max and
// frame_max, never raise them, and picks the heartbeat.
func (c *Conn) tune(m *protocol.ConnectionTuneOk) error {
	switch {
	case c.channelMax == 0:
		c.channelMax = m.ChannelMax
	case m.ChannelMax == 0:
		return c.refuse(reply.New(protocol.NotAllowed, "negotiated channel_max = 0 (no limit) is higher than the maximum allowed value (%d)", c.channelMax))
	case m.ChannelMax > c.channelMax:
		return c.refuse(reply.New(protocol.NotAllowed, "negotiated channel_max = %d is higher than the maximum allowed value (%d)", m.ChannelMax, c.channelMax))
	default:
		c.channelMax = m.ChannelMax
	}
	if m.FrameMax != 0 {
		if m.FrameMax < protocol.FrameMinSize {
			return c.refuse(reply.New(protocol.NotAllowed, "frame_max=%d < %d min size", m.FrameMax, protocol.FrameMinSize))
		}
		if c.frameMax != 0 && m.FrameMax > c.frameMax {
			return c.refuse(reply.New(protocol.NotAllowed, "frame_max=%d > %d max size", m.FrameMax, c.frameMax))
		}
		c.frameMax = m.FrameMax
	}
	c.r.SetMaxFrameSize(c.frameMax)
	c.heartbeat = time.Duration(m.Heartbeat) * time.Second
	if c.heartbeat > 0 {
		c.hbStart <- c.heartbeat
	}
	return nil
}

// userLimit is the connection's user's named limit as it is now (an
// operator may set it while the connection runs); -1 when there is none.
func (c *Conn) userLimit(name string) int64 {
	if u, ok := c.srv.Users.User(c.user.Name); ok {
		return orNone(u.Limit(name))
	}
	return -1
}

// orNone is a limit as the server counts it: -1 when none is set.
func orNone(limit int64, set bool) int64 {
	if !set {
		return -1
	}
	return limit
}

func (c *Conn) open(name string) error {
	vh, ok := c.srv.VHosts.VHost(name)
	if !ok {
		return c.refuse(reply.New(protocol.NotAllowed, "vhost %s not found", name))
	}
	grant, ok := c.srv.Users.Grant(name, c.user.Name)
	if c.origin == localAsBroker {
		grant, ok = auth.BrokerGrant(name), true
	}
	if !ok {
		return c.refuse(reply.New(protocol.NotAllowed, "access to vhost '%s' refused for user '%s'", name, c.user.Name))
	}
	vhostLimit, userLimit := orNone(vh.Limit(topology.LimitMaxConnections)), c.userLimit(auth.UserMaxConnections)
	if e := c.srv.admit(c, name, c.user.Name, vhostLimit, userLimit); e != nil {
		return c.refuse(e)
	}
	c.vh, c.grant = vh, grant
	c.opened.Store(&openedInfo{
		user: c.user.Name, vhost: vh.Name, props: c.clientProps,
		heartbeat: c.heartbeat, frameMax: c.frameMax, channelMax: c.channelMax,
	})
	c.send(0, &protocol.ConnectionOpenOk{})
	return nil
}
