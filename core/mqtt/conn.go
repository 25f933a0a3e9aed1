package mqtt

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/mqtt"
)

// takeoverWait bounds how long a CONNECT waits for the connection whose
// session it takes over to let go of it.
const takeoverWait = 10 * time.Second

// Conn is one MQTT connection, and while it lives, its session.
type Conn struct {
	srv  *Server
	nc   net.Conn
	r    *mqtt.PacketReader
	log  zerolog.Logger
	id   uint64
	name string

	out     *outbound
	done    chan struct{} // closed when the reader ends
	ended   chan struct{} // closed once the session is let go of (end)
	kicked  atomic.Bool   // the server ended it (takeover, shutdown, operator)
	recvOct atomic.Uint64

	// Set by the reader at CONNECT, read only afterwards.
	version   mqtt.Version
	clientID  string
	user      *auth.User
	vh        *vhost.VHost
	grant     auth.Grant
	keepAlive uint16
	clean     bool
	// persistent: the session outlives the connection (3.1.1 without
	// clean session, 5.0 with a session expiry); expires is its queues'
	// x-expires in ms (0: none).
	persistent bool
	expires    int64
	will       *mqtt.Will
	// maxOut is the largest packet the client takes (5.0), 0 for any.
	maxOut    int
	connected time.Time
	info      atomic.Pointer[ConnInfo]
	admitted  func()

	// The reader's alone.
	router   vhost.RouteBuffers
	subs     map[string]mqtt.QoS // topic filter -> granted QoS
	nsubs    atomic.Int32
	declared [2]bool // this connection declared the QoS 0 / 1 queue
	graceful bool    // DISCONNECT received: no will

	// Deliveries: consumers of the session's queues, and the QoS 1
	// deliveries in flight (deliver.go).
	deliverMu lockorder.Mutex[lockorder.MQTTDeliver]
	consumers [2]*consumer
	inflight  map[uint16]inflight
	nextPID   uint16
	credit    int // the most QoS 1 deliveries in flight
	stopped   bool

	// PUBACKs waiting for their messages to be taken (publish.go).
	confirms confirms
	syncWait []uint64
}

func newConn(s *Server, nc net.Conn, id uint64) *Conn {
	name := nc.RemoteAddr().String() + " -> " + nc.LocalAddr().String()
	c := &Conn{
		srv: s, nc: nc, id: id, name: name,
		log:       s.Log.With().Str("conn", name).Str("protocol", "mqtt").Logger(),
		out:       newOutbound(),
		done:      make(chan struct{}),
		ended:     make(chan struct{}),
		subs:      map[string]mqtt.QoS{},
		inflight:  map[uint16]inflight{},
		connected: time.Now(),
	}
	c.confirms.out = c.out
	return c
}

// Info is the connection as listings show it; ok is false before CONNECT
// is accepted.
func (c *Conn) Info() (ConnInfo, bool) {
	p := c.info.Load()
	if p == nil {
		return ConnInfo{}, false
	}
	info := *p
	info.RecvOctets, info.SendOctets = c.recvOct.Load(), c.out.sent.Load()
	info.Subscriptions = int(c.nsubs.Load())
	c.deliverMu.Lock()
	info.Unacked = len(c.inflight)
	c.deliverMu.Unlock()
	return info, true
}

type countingReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(uint64(n))
	return n, err
}

// run serves the connection until it ends.
func (c *Conn) run() {
	c.r = mqtt.NewPacketReader(countingReader{c.nc, &c.recvOct}, mqtt.InitialMaxPacketSize)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.out.write(c.nc, c.done)
	}()
	err := c.read()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, errClosed) && !c.kicked.Load() {
		c.log.Debug().Err(err).Msg("MQTT connection ended")
	}
	c.end()
	close(c.done)
	<-writerDone
	c.nc.Close()
	close(c.ended)
}

// errClosed ends the reader once it answered what ends a connection.
var errClosed = errors.New("mqtt: connection closed")

// read runs packets until the connection ends.
func (c *Conn) read() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.Settings.HandshakeTimeout))
	for {
		b, err := c.r.ReadPacket()
		if err != nil {
			var tooLarge *mqtt.PacketTooLargeError
			var de *mqtt.DecodeError
			switch {
			case errors.As(err, &tooLarge) || errors.As(err, &de):
				c.refuse(err)
			case isTimeout(err) && c.version != 0:
				c.disconnect(mqtt.ReasonKeepAliveTimeout)
			}
			return err
		}
		c.extendDeadline()
		p, err := mqtt.Decode(c.version, b)
		if err != nil {
			c.refuse(err)
			return err
		}
		if err := c.handle(p); err != nil {
			return err
		}
		if !c.r.PacketBuffered() {
			c.registerSyncs()
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// extendDeadline gives the client one and a half keep-alive periods to
// send its next packet ([MQTT-3.1.2-24]).
func (c *Conn) extendDeadline() {
	if c.version == 0 {
		return
	}
	if c.keepAlive == 0 {
		_ = c.nc.SetReadDeadline(time.Time{})
		return
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Duration(c.keepAlive) * 1500 * time.Millisecond))
}

// refuse answers a packet that does not decode: before CONNECT, a
// CONNACK refusing the version where that is the fault; after, an MQTT 5
// DISCONNECT with the reason code. The connection then ends.
func (c *Conn) refuse(err error) {
	c.log.Debug().Err(err).Msg("closing an MQTT connection: a packet refused")
	if c.version == 0 {
		var uv *mqtt.UnsupportedVersionError
		if errors.As(err, &uv) {
			if uv.Level == byte(mqtt.V5) {
				c.out.version = mqtt.V5
				c.out.send(&mqtt.Connack{ReasonCode: mqtt.ReasonUnsupportedProtocolVersion})
			} else {
				c.out.version = mqtt.V311
				c.out.send(&mqtt.Connack{ReturnCode: uv.ReturnCode()})
			}
		}
		return
	}
	code, _ := mqtt.CodeOf(err)
	c.disconnect(code)
}

// disconnect sends an MQTT 5 client a DISCONNECT with code (3.1.1 has
// none: the socket just closes).
func (c *Conn) disconnect(code mqtt.ReasonCode) {
	if c.version == mqtt.V5 {
		c.out.send(&mqtt.Disconnect{ReasonCode: code})
	}
}

// kick ends the connection from outside: another took its session over,
// the broker stops, an operator closed it. An MQTT 5 client is told why.
func (c *Conn) kick(code mqtt.ReasonCode, why string) {
	if c.kicked.Swap(true) {
		return
	}
	c.log.Info().Str("client_id", c.clientID).Msg("closing MQTT connection: " + why)
	if c.info.Load() != nil {
		c.disconnect(code)
	}
	// The writer sends what is queued before the socket closes: close
	// the reading side only, so the reader ends and the writer drains.
	if tcp, ok := c.nc.(*net.TCPConn); ok {
		_ = tcp.CloseRead()
	} else {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// protocolError ends the connection over a packet out of place.
func (c *Conn) protocolError(what string) error {
	c.log.Warn().Str("client_id", c.clientID).Msg("closing MQTT connection: " + what)
	c.disconnect(mqtt.ReasonProtocolError)
	return errClosed
}

// handle runs one packet.
func (c *Conn) handle(p mqtt.Packet) error {
	if c.version == 0 {
		cp, ok := p.(*mqtt.Connect)
		if !ok {
			return errClosed // Decode decodes nothing else before CONNECT
		}
		return c.connect(cp)
	}
	switch m := p.(type) {
	case *mqtt.Publish:
		return c.publish(m)
	case *mqtt.Puback:
		c.acked(m.PacketID)
	case *mqtt.Pubrel:
		// Warren never sends PUBREC; answer anyway, so a client that
		// insists is not left waiting.
		c.out.send(&mqtt.Pubcomp{PacketID: m.PacketID, ReasonCode: mqtt.ReasonPacketIdentifierNotFound})
	case *mqtt.Pubrec, *mqtt.Pubcomp:
		return c.protocolError("a " + p.Type().String() + " for a QoS 2 message Warren never sent")
	case *mqtt.Subscribe:
		c.subscribe(m)
	case *mqtt.Unsubscribe:
		c.unsubscribe(m)
	case *mqtt.Pingreq:
		c.out.send(&mqtt.Pingresp{})
	case *mqtt.Disconnect:
		if m.ReasonCode != mqtt.ReasonDisconnectWithWillMessage {
			c.graceful = true
		}
		return errClosed
	case *mqtt.Connect:
		return c.protocolError("a second CONNECT")
	case *mqtt.Auth:
		c.log.Warn().Msg("closing MQTT connection: AUTH without an authentication method")
		c.disconnect(mqtt.ReasonProtocolError)
		return errClosed
	default:
		return c.protocolError("a " + p.Type().String() + " from a client")
	}
	return nil
}

// connect runs CONNECT: the user, the vhost and its permission, the
// session (taking over another connection's), then CONNACK.
func (c *Conn) connect(m *mqtt.Connect) error {
	c.version = m.Version
	c.out.version = m.Version
	s := c.srv.Settings
	refuse := func(code mqtt.ReasonCode, why string) error {
		c.log.Warn().Str("client_id", m.ClientID).Str("user", m.Username).Msg("MQTT connection refused: " + why)
		c.out.send(&mqtt.Connack{ReturnCode: mqtt.ReturnCodeFor(code), ReasonCode: code})
		return errClosed
	}
	if m.Properties.AuthenticationMethod != "" {
		return refuse(mqtt.ReasonBadAuthenticationMethod, "enhanced authentication is not supported")
	}
	if m.Will != nil && m.Version == mqtt.V5 {
		if m.Will.Retain && !c.srv.retaining() {
			return refuse(mqtt.ReasonRetainNotSupported, "a retained will")
		}
		if m.Will.QoS > mqtt.QoS1 {
			return refuse(mqtt.ReasonQoSNotSupported, "a will of QoS 2")
		}
	}
	c.clientID = m.ClientID
	assigned := false
	if c.clientID == "" {
		if !m.CleanStart && m.Version < mqtt.V5 {
			return refuse(mqtt.ReasonClientIdentifierNotValid, "an empty client id without clean session")
		}
		var b [12]byte
		_, _ = rand.Read(b[:])
		c.clientID, assigned = "warren-"+hex.EncodeToString(b[:]), true
	}

	// Who: "vhost:user", or the default vhost; anonymous as the default
	// user when that is allowed.
	vhostName, userName, password := s.VHost, m.Username, string(m.Password)
	if !m.HasUsername {
		if !s.AllowAnonymous {
			return refuse(mqtt.ReasonBadUserNameOrPassword, "no user name, and allow_anonymous is off")
		}
		userName, password = s.DefaultUser, s.DefaultPassword
	} else if vh, u, ok := splitUsername(m.Username); ok {
		vhostName, userName = vh, u
	}
	user, err := c.srv.Users.Login(userName, password, isLoopback(c.nc.RemoteAddr()))
	if err != nil {
		code := mqtt.ReasonNotAuthorized // a loopback-only user from afar
		if errors.Is(err, auth.ErrBadCredentials) {
			code = mqtt.ReasonBadUserNameOrPassword
		}
		return refuse(code, err.Error())
	}
	vh, ok := c.srv.VHosts.VHost(vhostName)
	if !ok {
		return refuse(mqtt.ReasonNotAuthorized, "vhost '"+vhostName+"' not found")
	}
	grant, ok := c.srv.Users.Grant(vhostName, user.Name)
	if !ok {
		return refuse(mqtt.ReasonNotAuthorized, "access to vhost '"+vhostName+"' refused for user '"+user.Name+"'")
	}
	if c.srv.Admit != nil {
		release, err := c.srv.Admit(vh.Name, user.Name)
		if err != nil {
			return refuse(mqtt.ReasonQuotaExceeded, err.Error())
		}
		c.admitted = release
	}
	c.user, c.vh, c.grant = user, vh, grant
	c.keepAlive, c.clean, c.will = m.KeepAlive, m.CleanStart, cloneWill(m.Will)
	if c.will != nil && m.Version < mqtt.V5 && c.will.QoS > mqtt.QoS1 {
		c.will.QoS = mqtt.QoS1 // as a QoS 2 PUBLISH is taken
	}
	c.persistent, c.expires = c.sessionLife(m)
	c.credit = s.Prefetch
	if rm := m.Properties.ReceiveMaximum; rm > 0 && int(rm) < c.credit {
		c.credit = int(rm)
	}
	c.maxOut = int(m.Properties.MaximumPacketSize)

	// The session: take it over from the connection that has it, then
	// start afresh (clean) or take up what its queues hold.
	if old := c.srv.claim(c); old != nil {
		old.kick(mqtt.ReasonSessionTakenOver, "its client id connected again")
		select {
		case <-old.ended:
		case <-time.After(takeoverWait):
			c.srv.release(c)
			return refuse(mqtt.ReasonServerBusy, "the connection it takes over did not close")
		}
	}
	present := false
	if m.CleanStart {
		c.dropSession()
	} else {
		present = c.vh.HasQueue(SubscriptionQueue(c.clientID, mqtt.QoS0)) || c.vh.HasQueue(SubscriptionQueue(c.clientID, mqtt.QoS1))
	}
	c.r.SetMaxPacketSize(s.MaxPacketSize)
	ack := &mqtt.Connack{SessionPresent: present}
	if m.Version == mqtt.V5 {
		ack.Properties = c.connackProperties(m, assigned)
	}
	c.info.Store(&ConnInfo{
		ID: c.id, Name: c.name, Protocol: VersionName(m.Version), ClientID: c.clientID,
		User: user.Name, VHost: vh.Name, Peer: c.nc.RemoteAddr().String(), Local: c.nc.LocalAddr().String(),
		KeepAlive: m.KeepAlive, CleanStart: m.CleanStart, ConnectedAt: c.connected,
	})
	c.out.send(ack)
	c.extendDeadline()
	if present {
		c.resume()
	}
	return nil
}

// sessionLife is whether the session outlives the connection and its
// queues' x-expires: 3.1.1's clean session, or 5.0's Session Expiry
// Interval, granted up to subscription_ttl.
func (c *Conn) sessionLife(m *mqtt.Connect) (persistent bool, expires int64) {
	ttl := c.srv.Settings.SubscriptionTTL.Milliseconds()
	if m.Version < mqtt.V5 {
		return !m.CleanStart, ttl
	}
	secs := m.Properties.SessionExpiryInterval
	if secs == 0 {
		return false, 0
	}
	ms := int64(secs) * 1000
	if secs == 0xFFFFFFFF || ttl > 0 && ms > ttl {
		ms = ttl
	}
	return true, ms
}

// connackProperties tells an MQTT 5 client what Warren does not do, and
// what it chose for it.
func (c *Conn) connackProperties(m *mqtt.Connect, assigned bool) mqtt.Properties {
	p := mqtt.Properties{
		MaximumQoS:                      1,
		RetainAvailable:                 0,
		SharedSubscriptionAvailable:     0,
		SubscriptionIdentifierAvailable: 0,
		MaximumPacketSize:               uint32(c.srv.Settings.MaxPacketSize),
	}
	p.Zeros = mqtt.PropertySetOf(mqtt.PropRetainAvailable, mqtt.PropSharedSubscriptionAvailable, mqtt.PropSubscriptionIdentifierAvailable)
	if c.srv.retaining() {
		// Retain Available is 1 when absent.
		p.Zeros = mqtt.PropertySetOf(mqtt.PropSharedSubscriptionAvailable, mqtt.PropSubscriptionIdentifierAvailable)
	}
	if assigned {
		p.AssignedClientIdentifier = c.clientID
	}
	if secs := m.Properties.SessionExpiryInterval; secs > 0 {
		granted := uint32(c.expires / 1000)
		if c.expires == 0 {
			granted = 0xFFFFFFFF
		}
		if granted != secs {
			p.SessionExpiryInterval = granted
		}
	}
	return p
}

func cloneWill(w *mqtt.Will) *mqtt.Will {
	if w == nil {
		return nil
	}
	cp := *w
	cp.Payload = append([]byte(nil), w.Payload...)
	cp.Properties.CorrelationData = append([]byte(nil), w.Properties.CorrelationData...)
	if len(cp.Properties.CorrelationData) == 0 {
		cp.Properties.CorrelationData = nil
	}
	return &cp
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// end lets go of the session: its will published when the connection
// did not end with a DISCONNECT, its consumers cancelled, what they held
// given back to their queues, a clean session's queues deleted.
func (c *Conn) end() {
	if c.info.Load() == nil {
		return // never past CONNECT
	}
	if !c.graceful && c.will != nil && !c.srv.closedForShutdown() {
		c.publishWill()
	}
	c.stopConsuming()
	c.vh.OwnerGone(c) // a transient session's exclusive queues
	if !c.persistent {
		c.dropSession()
	}
	c.srv.release(c)
	if c.admitted != nil {
		c.admitted()
	}
}

// closedForShutdown says whether the broker is stopping: a will is not
// published then, as the client did not go away.
func (s *Server) closedForShutdown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
