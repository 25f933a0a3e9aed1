package streamproto

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/stream"
)

// stage is how far a connection's handshake has come.
type stage uint8

const (
	stageStart         stage = iota // waiting for PeerProperties
	stagePeered                     // waiting for SaslHandshake or SaslAuthenticate
	stageAuthenticated              // Tune sent, waiting for the client's
	stageTuned                      // waiting for Open
	stageOpen
)

// Conn is one stream-protocol connection.
type Conn struct {
	srv  *Server
	nc   net.Conn
	r    *stream.FrameReader
	log  zerolog.Logger
	id   uint64
	name string // as RabbitMQ names a connection: "peer -> local"

	out       *outbound
	heartbeat chan time.Duration // the negotiated interval, to the writer
	done      chan struct{}      // closed when the reader ends
	closing   atomic.Bool        // a Close was sent or received

	// Set by the reader during the handshake, read only afterwards.
	stage     stage
	mechanism string
	peer      map[string]string
	user      *auth.User
	vh        *vhost.VHost
	grant     auth.Grant
	frameMax  uint32
	hbSecs    uint32
	opened    atomic.Pointer[ConnInfo]
	connected time.Time
	admitted  func() // uncounts the connection (Server.Admit)

	// The reader's, which alone changes them, under mu so that listings
	// may read them.
	mu         lockorder.Mutex[lockorder.StreamprotoConn]
	publishers map[uint8]*publisher
	subs       map[uint8]*subscription

	// unconfirmed counts messages waiting for their confirm; confirmed
	// wakes a reader waiting for it to fall (MaxUnconfirmed).
	// ConsumerUpdates sent and not answered, by correlation id, and the
	// id sent last: sacAgent.mu's (sac.go).
	sacRequests    map[uint32]sacRequest
	sacCorrelation uint32

	// deliverVersion is the Deliver version the client reads, 0 (1)
	// unless it said 2 (ExchangeCommandVersions); read as chunks go.
	deliverVersion atomic.Uint32

	unconfirmed atomic.Int64
	confirmed   chan struct{}
	// recvOct counts the bytes read, for listings (outbound counts those
	// written).
	recvOct atomic.Uint64
}

// PublisherInfo is a publisher as listings show it.
type PublisherInfo struct {
	Conn      string // the connection's name
	ID        uint8
	Stream    string
	Reference string
	// Messages published, confirmed and refused (publish errors).
	Published, Confirmed, Errored uint64
}

// ConsumerInfo is a subscription as listings show it.
type ConsumerInfo struct {
	Conn     string // the connection's name
	ID       uint8
	Stream   string
	Credit   int
	Offset   uint64 // the next offset it will be sent
	Consumed uint64 // messages sent
	// Lag is how many offsets the stream holds past Offset (RabbitMQ's
	// offset_lag, there the committed offset less the consumer's).
	Lag        uint64
	Properties map[string]string
	// Active is false for a single active consumer that waits its turn;
	// SingleActive marks one (sac.go).
	Active, SingleActive bool
}

// ActivityStatus is RabbitMQ's word for a consumer's state: up, or a
// single active consumer's single_active or waiting.
func (ci ConsumerInfo) ActivityStatus() string {
	switch {
	case !ci.SingleActive:
		return "up"
	case ci.Active:
		return "single_active"
	}
	return "waiting"
}

// ConnInfo is an open connection as listings show it.
type ConnInfo struct {
	ID               uint64
	Name             string
	User, VHost      string
	Peer, Local      string
	TLS              bool
	ClientProperties map[string]string
	FrameMax         uint32
	Heartbeat        uint32 // seconds
	ConnectedAt      time.Time
	Publishers       int
	Subscriptions    int
	RecvOctets       uint64
	SendOctets       uint64
}

func newConn(s *Server, nc net.Conn, id uint64) *Conn {
	name := nc.RemoteAddr().String() + " -> " + nc.LocalAddr().String()
	return &Conn{
		srv: s, nc: nc, id: id, name: name,
		log:        s.Log.With().Str("conn", name).Str("protocol", "stream").Logger(),
		out:        newOutbound(),
		heartbeat:  make(chan time.Duration, 1),
		done:       make(chan struct{}),
		publishers: map[uint8]*publisher{},
		subs:       map[uint8]*subscription{},
		confirmed:  make(chan struct{}, 1),
		connected:  time.Now(),
	}
}

// countingReader counts the bytes a connection read.
type countingReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(uint64(n))
	return n, err
}

// Info is the connection as listings show it; ok is false before Open.
func (c *Conn) Info() (ConnInfo, bool) {
	p := c.opened.Load()
	if p == nil {
		return ConnInfo{}, false
	}
	info := *p
	info.RecvOctets, info.SendOctets = c.recvOct.Load(), c.out.sent.Load()
	c.mu.Lock()
	info.Publishers, info.Subscriptions = len(c.publishers), len(c.subs)
	c.mu.Unlock()
	return info, true
}

// run serves the connection until it ends.
func (c *Conn) run() {
	c.r = stream.NewFrameReader(countingReader{c.nc, &c.recvOct}, stream.InitialFrameMax)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.out.write(c.nc, c.heartbeat, c.done)
	}()
	err := c.read()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !c.closing.Load() {
		c.log.Debug().Err(err).Msg("stream connection ended")
	}
	c.end()
	if c.admitted != nil {
		c.admitted()
	}
	close(c.done)
	<-writerDone
	c.nc.Close()
}

// end lets go of everything the connection holds: subscriptions leave
// their streams, publishers' unconfirmed messages are forgotten.
func (c *Conn) end() {
	c.mu.Lock()
	subs, pubs := c.subs, c.publishers
	c.subs, c.publishers = map[uint8]*subscription{}, map[uint8]*publisher{}
	c.mu.Unlock()
	// Each takes its stream's lock, which comes before mu.
	for _, p := range pubs {
		p.unwatch()
	}
	for _, sub := range subs {
		sub.cancel()
	}
}

// Publishers lists the connection's publishers.
func (c *Conn) Publishers() []PublisherInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]PublisherInfo, 0, len(c.publishers))
	for _, p := range c.publishers {
		out = append(out, PublisherInfo{
			Conn: c.name, ID: p.id, Stream: p.stream, Reference: p.reference,
			Published: p.published.Load(), Confirmed: p.confirmed.Load(), Errored: p.errored.Load(),
		})
	}
	return out
}

// Consumers lists the connection's subscriptions.
func (c *Conn) Consumers() []ConsumerInfo {
	c.mu.Lock()
	subs := make([]*subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	out := make([]ConsumerInfo, 0, len(subs))
	for _, s := range subs {
		out = append(out, s.info())
	}
	return out
}

// read runs commands until the connection ends.
func (c *Conn) read() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.Settings.HandshakeTimeout))
	for {
		frame, err := c.r.ReadFrame()
		if err != nil {
			var tooLarge *stream.FrameTooLargeError
			if errors.As(err, &tooLarge) {
				c.closeWith(tooLarge.Code(), err.Error())
			}
			return err
		}
		if c.stage == stageOpen {
			c.extendDeadline()
		}
		cmd, err := stream.Decode(frame)
		if err != nil {
			var coded interface{ Code() stream.ResponseCode }
			code := stream.CodeUnknownFrame
			if errors.As(err, &coded) {
				code = coded.Code()
			}
			c.log.Warn().Err(err).Msg("closing a stream connection: a frame that does not decode")
			c.closeWith(code, err.Error())
			return err
		}
		// A Credit's chunks are written by this goroutine once the
		// frames read are served (outbound.hold); anything else first
		// has them written, since it may wait (a publisher on its
		// confirms).
		if _, isCredit := cmd.(*stream.Credit); isCredit {
			c.out.hold()
		} else if c.out.held.Load() {
			c.out.flush(c.nc)
		}
		if err := c.handle(cmd); err != nil {
			c.out.flush(c.nc)
			return err
		}
		if c.out.held.Load() && !c.r.FrameBuffered() {
			c.out.flush(c.nc)
		}
	}
}

// extendDeadline gives the client two heartbeats (and a little) to send
// its next frame, as RabbitMQ counts a missed heartbeat.
func (c *Conn) extendDeadline() {
	if c.hbSecs == 0 {
		_ = c.nc.SetReadDeadline(time.Time{})
		return
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Duration(c.hbSecs)*2*time.Second + time.Second))
}

// errClosed ends the reader after a Close it answered or sent.
var errClosed = errors.New("streamproto: connection closed")

// closeWith sends the client a Close; the reader ends when it answers or
// the writer hangs up.
func (c *Conn) closeWith(code stream.ResponseCode, reason string) {
	if c.closing.Swap(true) {
		return
	}
	c.out.sendClose(&stream.Close{CorrelationID: 0, Code: code, Reason: reason})
}

// outOfPlace closes the connection over a command the handshake's stage
// does not allow.
func (c *Conn) outOfPlace(cmd stream.Command) error {
	c.log.Warn().Str("command", cmd.Key().String()).Msg("closing a stream connection: a command out of place")
	c.closeWith(stream.CodeUnknownFrame, "command "+cmd.Key().String()+" out of place")
	return errClosed
}

// handle runs one command.
func (c *Conn) handle(cmd stream.Command) error {
	switch m := cmd.(type) {
	case *stream.Heartbeat:
		return nil
	case *stream.Close:
		c.closing.Store(true)
		c.out.send(&stream.CloseResponse{CorrelationID: m.CorrelationID, Code: stream.CodeOK})
		return errClosed
	case *stream.CloseResponse:
		return errClosed
	}
	if c.closing.Load() {
		return nil // only Close and its answer count now
	}
	if c.stage != stageOpen {
		return c.handshake(cmd)
	}
	switch m := cmd.(type) {
	case *stream.DeclarePublisher:
		c.declarePublisher(m)
	case *stream.Publish:
		return c.publish(m)
	case *stream.QueryPublisherSequence:
		c.queryPublisherSequence(m)
	case *stream.DeletePublisher:
		c.deletePublisher(m)
	case *stream.Subscribe:
		c.subscribe(m)
	case *stream.Credit:
		c.credit(m)
	case *stream.Unsubscribe:
		c.unsubscribe(m)
	case *stream.StoreOffset:
		c.storeOffset(m)
	case *stream.QueryOffset:
		c.queryOffset(m)
	case *stream.Create:
		c.create(m)
	case *stream.Delete:
		c.delete(m)
	case *stream.Metadata:
		c.metadata(m)
	case *stream.StreamStats:
		c.streamStats(m)
	case *stream.Route:
		c.route(m)
	case *stream.Partitions:
		c.partitions(m)
	case *stream.CreateSuperStream:
		c.createSuperStream(m)
	case *stream.DeleteSuperStream:
		c.deleteSuperStream(m)
	case *stream.ExchangeCommandVersions:
		// A client that reads Deliver version 2 gets it, with the
		// committed chunk id, as RabbitMQ 3.11+ sends it.
		for _, cv := range m.Commands {
			if cv.Key == stream.KeyDeliver && cv.MaxVersion >= 2 {
				c.deliverVersion.Store(2)
			}
		}
		c.out.send(&stream.ExchangeCommandVersionsResponse{CorrelationID: m.CorrelationID, Code: stream.CodeOK, Commands: commandVersions})
	case *stream.ResolveOffsetSpec:
		c.resolveOffsetSpec(m)
	case *stream.ConsumerUpdateResponse:
		c.srv.answered(c, m)
	default:
		return c.outOfPlace(cmd)
	}
	return nil
}

// commandVersions are the versions of each command Warren serves.
var commandVersions = []stream.CommandVersion{
	{Key: stream.KeyDeclarePublisher, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyPublish, MinVersion: 1, MaxVersion: 2},
	{Key: stream.KeyQueryPublisherSequence, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyDeletePublisher, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeySubscribe, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyCredit, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyStoreOffset, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyQueryOffset, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyUnsubscribe, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyCreate, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyDelete, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyMetadata, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyPeerProperties, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeySaslHandshake, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeySaslAuthenticate, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyTune, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyOpen, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyClose, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyHeartbeat, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyExchangeCommandVersions, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyStreamStats, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyRoute, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyPartitions, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyCreateSuperStream, MinVersion: 1, MaxVersion: 1},
	{Key: stream.KeyDeleteSuperStream, MinVersion: 1, MaxVersion: 1},
}

// handshake runs a command before Open.
func (c *Conn) handshake(cmd stream.Command) error {
	switch m := cmd.(type) {
	case *stream.PeerProperties:
		if c.stage != stageStart {
			return c.outOfPlace(cmd)
		}
		c.peer = m.Properties
		c.stage = stagePeered
		c.out.send(&stream.PeerPropertiesResponse{CorrelationID: m.CorrelationID, Code: stream.CodeOK, Properties: c.serverProperties()})
	case *stream.SaslHandshake:
		if c.stage != stagePeered {
			return c.outOfPlace(cmd)
		}
		c.out.send(&stream.SaslHandshakeResponse{CorrelationID: m.CorrelationID, Code: stream.CodeOK, Mechanisms: []string{"PLAIN"}})
	case *stream.SaslAuthenticate:
		if c.stage != stagePeered {
			return c.outOfPlace(cmd)
		}
		return c.authenticate(m)
	case *stream.TuneResponse:
		if c.stage != stageAuthenticated {
			return c.outOfPlace(cmd)
		}
		return c.tune(m)
	case *stream.Tune:
		// The Node client answers Tune with a Tune (key 0x0014, no
		// response bit), which RabbitMQ takes as the answer too.
		if c.stage != stageAuthenticated {
			return c.outOfPlace(cmd)
		}
		return c.tune(&stream.TuneResponse{FrameMax: m.FrameMax, Heartbeat: m.Heartbeat})
	case *stream.Open:
		if c.stage != stageTuned {
			return c.outOfPlace(cmd)
		}
		return c.open(m)
	default:
		return c.outOfPlace(cmd)
	}
	return nil
}

func (c *Conn) serverProperties() map[string]string {
	return map[string]string{
		"product":        "Warren",
		"version":        RabbitMQVersion,
		"warren_version": c.srv.Version,
		"platform":       "Go",
		"copyright":      "The Warren developers",
		"information":    "RabbitMQ's stream protocol over Warren's streams",
	}
}

func (c *Conn) authenticate(m *stream.SaslAuthenticate) error {
	if m.Mechanism != "PLAIN" {
		c.out.send(&stream.SaslAuthenticateResponse{CorrelationID: m.CorrelationID, Code: stream.CodeSaslMechanismNotSupported})
		c.closeWith(stream.CodeSaslMechanismNotSupported, "mechanism "+m.Mechanism+" is not supported")
		return errClosed
	}
	code := stream.CodeSaslError
	user, password, err := auth.ParsePlain(m.Data)
	if err == nil {
		c.user, err = c.srv.Users.Login(user, password, isLoopback(c.nc.RemoteAddr()))
		code = stream.CodeSaslAuthenticationFailureLoopback // unless the password was wrong
		if errors.Is(err, auth.ErrBadCredentials) {
			code = stream.CodeAuthenticationFailure
		}
	}
	if err != nil {
		c.log.Warn().Str("user", user).Err(err).Msg("stream login refused")
		c.out.send(&stream.SaslAuthenticateResponse{CorrelationID: m.CorrelationID, Code: code})
		c.closeWith(code, "authentication failed")
		return errClosed
	}
	c.out.send(&stream.SaslAuthenticateResponse{CorrelationID: m.CorrelationID, Code: stream.CodeOK})
	c.stage = stageAuthenticated
	c.out.send(&stream.Tune{FrameMax: c.srv.Settings.FrameMax, Heartbeat: uint32(c.srv.Settings.Heartbeat / time.Second)})
	return nil
}

func isTLS(nc net.Conn) bool {
	_, ok := nc.(*tls.Conn)
	return ok
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// tune takes the client's answer to Tune: it may lower the frame max and
// the heartbeat, never raise them past the server's (0 is no limit).
func (c *Conn) tune(m *stream.TuneResponse) error {
	c.frameMax = lower(c.srv.Settings.FrameMax, m.FrameMax)
	c.hbSecs = lower(uint32(c.srv.Settings.Heartbeat/time.Second), m.Heartbeat)
	c.r.SetMaxFrameSize(c.frameMax)
	c.stage = stageTuned
	return nil
}

// lower is the lower of two limits where 0 means none.
func lower(a, b uint32) uint32 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

func (c *Conn) open(m *stream.Open) error {
	refuse := func(why string) error {
		c.log.Warn().Str("vhost", m.VirtualHost).Str("user", c.user.Name).Msg(why)
		c.out.send(&stream.OpenResponse{CorrelationID: m.CorrelationID, Code: stream.CodeVirtualHostAccessFailure})
		c.closeWith(stream.CodeVirtualHostAccessFailure, why)
		return errClosed
	}
	vh, ok := c.srv.VHosts.VHost(m.VirtualHost)
	if !ok {
		return refuse("vhost " + m.VirtualHost + " not found")
	}
	grant, ok := c.srv.Users.Grant(m.VirtualHost, c.user.Name)
	if !ok {
		return refuse("access to vhost '" + m.VirtualHost + "' refused for user '" + c.user.Name + "'")
	}
	if c.srv.Admit != nil {
		release, err := c.srv.Admit(vh.Name, c.user.Name)
		if err != nil {
			return refuse(err.Error())
		}
		c.admitted = release
	}
	c.vh, c.grant = vh, grant
	c.stage = stageOpen
	c.opened.Store(&ConnInfo{
		ID: c.id, Name: c.name, User: c.user.Name, VHost: vh.Name,
		Peer: c.nc.RemoteAddr().String(), Local: c.nc.LocalAddr().String(), TLS: isTLS(c.nc),
		ClientProperties: c.peer, FrameMax: c.frameMax, Heartbeat: c.hbSecs, ConnectedAt: c.connected,
	})
	c.out.send(&stream.OpenResponse{CorrelationID: m.CorrelationID, Code: stream.CodeOK, Properties: map[string]string{
		"advertised_host": c.srv.Settings.AdvertisedHost,
		"advertised_port": strconv.FormatUint(uint64(c.srv.Settings.AdvertisedPort), 10),
	}})
	if c.hbSecs > 0 {
		c.heartbeat <- time.Duration(c.hbSecs) * time.Second
	}
	c.extendDeadline()
	return nil
}
