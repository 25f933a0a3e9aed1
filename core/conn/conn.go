package conn

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// closeTimeout is how long the broker waits for connection.close-ok after
// sending connection.close before it hangs up anyway.
const closeTimeout = 3 * time.Second

// Conn is one client connection.
type Conn struct {
	srv  *Server
	nc   net.Conn
	id   uint64
	name string
	// peer and local are the socket's addresses, host:port, fixed for its
	// life (listings read them for every connection).
	peer, local string
	log         zerolog.Logger
	r           *protocol.FrameReader
	out         *outbound
	dec         protocol.MethodDecoder
	since       time.Time

	// Fixed by the handshake.
	frameMax    uint32
	channelMax  uint16
	heartbeat   time.Duration
	clientProps protocol.Table
	caps        capabilities
	user        *auth.User
	grant       auth.Grant // the user's rights in vh
	origin      origin     // set before run
	vh          *vhost.VHost

	// Under srv.mu: counted in the server's handshaking or opened total.
	handshaking, counted bool
	countedIn            string // the vhost it is counted in, once counted

	opened   atomic.Pointer[openedInfo] // set once connection.open succeeds
	channels map[uint16]*channel        // the reader's
	// The reader's run (run.go): its frames so far (0: none going on),
	// and the other connections its deliveries are to flush.
	runFrames int
	writes    queue.Writes
	syncWait  []*channel // channels whose run stored confirmed publishes
	// The method being run, named in connection.close and channel.close.
	lastClass, lastMethod uint16
	nchan                 atomic.Int32

	// closing is set once the broker has sent connection.close; from then on
	// only close and close-ok are read.
	closing atomic.Bool
	reads   atomic.Uint64 // frames read, for the heartbeat monitor
	// blocked is set while the reader waits out a resource alarm; the
	// heartbeat monitor does not count that time against the client.
	blocked atomic.Bool
	// flowing is set while the reader waits for a channel's publishes to
	// be answered (flow.go); flowWake tells it an answer came.
	flowing  atomic.Bool
	flowWake chan struct{}

	hbStart    chan time.Duration
	writerDone chan struct{}
	// stop is closed when the broker forces the connection closed: the
	// reader gives up any wait that does not involve the socket (a
	// resource alarm, a transaction's sync) instead of holding shutdown.
	stop     chan struct{}
	stopOnce sync.Once

	consumersMu lockorder.Mutex[lockorder.ConnConsumers]
	consumers   map[*consumer]struct{} // kicked when the socket drains

	// live mirrors channels for the admin API, which cannot read the
	// reader's map; retired holds the statistics of closed channels, so
	// the connection's totals outlive them.
	liveMu  lockorder.Mutex[lockorder.ConnLive]
	live    map[uint16]*channel
	retired stats.Meter
	io      ioCounts // socket traffic, for the admin API
}

type capabilities struct {
	consumerCancelNotify bool
	connectionBlocked    bool
	authFailureClose     bool
}

func newConn(s *Server, nc net.Conn, id uint64) *Conn {
	peer, local := nc.RemoteAddr().String(), nc.LocalAddr().String()
	c := &Conn{
		srv: s, nc: nc, id: id, peer: peer, local: local,
		name:       peer + " -> " + local,
		out:        newSocketOutbound(nc),
		since:      time.Now(),
		channels:   make(map[uint16]*channel),
		live:       make(map[uint16]*channel),
		hbStart:    make(chan time.Duration, 1),
		writerDone: make(chan struct{}),
		stop:       make(chan struct{}),
		flowWake:   make(chan struct{}, 1),
		consumers:  make(map[*consumer]struct{}),
		frameMax:   s.Limits.FrameMax,
		channelMax: s.Limits.ChannelMax,
	}
	c.r = protocol.NewFrameReader(countingReader{nc, &c.io})
	c.log = s.Log.With().Uint64("conn", id).Str("peer", peer).Logger()
	return c
}

// run serves the connection: handshake, frame loop, cleanup.
func (c *Conn) run() {
	go c.writeLoop()
	defer c.finish()
	defer c.contain()
	if c.srv.Limits.HandshakeTimeout > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.Limits.HandshakeTimeout))
	}
	err := c.handshake()
	c.srv.handshakeOver(c)
	if err != nil {
		c.log.Debug().Err(err).Msg("handshake failed")
		return
	}
	if !c.closing.Load() {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	c.log.Info().Str("user", c.user.Name).Str("vhost", c.vh.Name).Msg("connection opened")
	c.loop()
}

// contain turns a panic on this connection's goroutine — a bug — into
// 541 INTERNAL_ERROR for this client alone, logged with its stack, instead
// of taking every other client down with the process.
func (c *Conn) contain() {
	if r := recover(); r != nil {
		c.log.Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Msg("internal error; connection closed")
		c.sendClose(reply.Internal("internal error"), c.lastClass, c.lastMethod)
	}
}

// finish releases everything the connection held, then lets the writer
// flush and hang up.
func (c *Conn) finish() {
	c.dropChannels()
	if c.vh != nil {
		c.vh.OwnerGone(c)
	}
	c.out.close()
	select {
	case <-c.writerDone:
	case <-time.After(closeTimeout):
		c.nc.Close()
		<-c.writerDone
	}
	if c.user != nil {
		c.log.Info().Msg("connection closed")
	}
}

// loop reads and dispatches frames until the connection ends.
func (c *Conn) loop() {
	defer c.endRun()
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			c.readFailed(err)
			return
		}
		c.reads.Add(1)
		if c.closing.Load() {
			c.endRun()
			if c.whileClosing(f) {
				return
			}
			continue
		}
		if quick(f) {
			c.beginRun()
		} else {
			c.endRun()
		}
		if err := c.dispatch(f); err != nil {
			if c.fail(err, f.Channel) {
				return
			}
		}
		if !c.r.HasBufferedFrame() {
			c.flushPoint()
			c.endRun()
		}
	}
}

// readFailed reports why reading stopped.
func (c *Conn) readFailed(err error) {
	switch {
	case c.closing.Load():
		// We were hanging up anyway.
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		c.log.Info().Msg("client closed the connection without connection.close")
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Warn().Msg("connection timed out")
	default:
		var code interface{ Code() uint16 }
		if errors.As(err, &code) {
			c.sendClose(asReply(err), 0, 0)
			c.log.Warn().Err(err).Msg("bad frame; connection closed")
			// The stream cannot be read as frames any more, but what the
			// client still sends is read and dropped until it hangs up
			// (or the close timeout): a socket closed with unread input
			// is reset, and the client would see the reset, not
			// connection.close.
			_, _ = io.Copy(io.Discard, c.nc)
			return
		}
		c.log.Info().Err(err).Msg("connection read failed")
	}
}

// whileClosing handles a frame after either side sent connection.close and
// reports whether the connection is done.
func (c *Conn) whileClosing(f protocol.Frame) bool {
	if f.Type != protocol.FrameMethod || f.Channel != 0 {
		return false
	}
	m, err := c.dec.Decode(f.Payload)
	if err != nil {
		return true
	}
	switch m.(type) {
	case *protocol.ConnectionCloseOk:
		return true
	case *protocol.ConnectionClose:
		// Answered every time, and the socket left to the client (until
		// the close timeout), as RabbitMQ does: a client that closes from
		// two goroutines at once reads both answers, not a reset.
		c.out.appendFinal(protocol.AppendMethodFrame(nil, 0, &protocol.ConnectionCloseOk{}))
	}
	return false
}

// dispatch runs one frame.
func (c *Conn) dispatch(f protocol.Frame) error {
	switch f.Type {
	case protocol.FrameHeartbeat:
		if f.Channel != 0 {
			return reply.New(protocol.UnexpectedFrame, "heartbeat frame on channel %d", f.Channel)
		}
		return nil
	case protocol.FrameMethod:
		m, err := c.dec.Decode(f.Payload)
		if err != nil {
			return methodError(err)
		}
		c.lastClass, c.lastMethod = m.ClassID(), m.MethodID()
		if f.Channel == 0 {
			return c.connectionMethod(m)
		}
		return c.channelMethod(f.Channel, m)
	case protocol.FrameHeader, protocol.FrameBody:
		if f.Channel == 0 {
			return reply.New(protocol.UnexpectedFrame, "content frame on channel 0")
		}
		ch := c.channels[f.Channel]
		if ch == nil {
			return reply.New(protocol.ChannelError, "expected 'channel.open' on channel %d", f.Channel)
		}
		return ch.content(f)
	}
	return reply.New(protocol.FrameError, "unknown frame type %d", f.Type)
}

// asReply turns a codec error into the reply it calls for. The codec's
// texts already start with the code's name.
func asReply(err error) *reply.Error {
	var code interface{ Code() uint16 }
	if errors.As(err, &code) {
		return &reply.Error{Code: code.Code(), Text: err.Error()}
	}
	return reply.As(err)
}

// methodError is the reply to a method frame that does not decode. Like
// RabbitMQ, arguments that do not parse are a frame error (501, "cannot
// decode"); an unknown class or method is 503.
func methodError(err error) *reply.Error {
	var bad *protocol.BadSyntaxError
	if errors.As(err, &bad) {
		return reply.New(protocol.FrameError, "cannot decode method frame: %s", strings.TrimPrefix(bad.Text, "SYNTAX_ERROR - "))
	}
	return asReply(err)
}

// fail handles an error from dispatch: soft errors close the channel, hard
// ones the connection. It reports whether the connection is finished.
func (c *Conn) fail(err error, channelID uint16) bool {
	if errors.Is(err, errForced) {
		return false
	}
	e := reply.As(err)
	classID, methodID := c.lastClass, c.lastMethod
	if !e.Hard() && channelID != 0 {
		if ch := c.channels[channelID]; ch != nil {
			ch.closeWith(e, classID, methodID)
			return false
		}
	}
	if e.Code == protocol.InternalError {
		c.log.Error().Str("error", e.Text).Msg("internal error; closing connection")
	} else {
		c.log.Warn().Uint16("code", e.Code).Str("error", e.Text).Uint16("channel", channelID).Msg("closing connection")
	}
	c.sendClose(e, classID, methodID)
	return false
}

// sendClose starts the broker's side of connection.close: channels are
// released now, and the reader waits for close-ok. It reports false, doing
// nothing, when the connection was closing already.
func (c *Conn) sendClose(e *reply.Error, classID, methodID uint16) bool {
	if !c.closing.CompareAndSwap(false, true) {
		return false
	}
	c.out.appendFinal(protocol.AppendMethodFrame(nil, 0, &protocol.ConnectionClose{
		ReplyCode: e.Code, ReplyText: e.Text, FailingClassID: classID, FailingMethodID: methodID,
	}))
	_ = c.nc.SetReadDeadline(time.Now().Add(closeTimeout))
	return true
}

// errForced ends a method the reader was waiting in when the broker forced
// the connection closed; connection.close is on its way already.
var errForced = errors.New("connection forced closed while waiting")

// forceClose closes the connection from another goroutine (shutdown): it
// sends 320 CONNECTION_FORCED, releases the reader from waits that do not
// involve the socket, and makes the socket's reads and writes fail at by,
// so neither a silent client nor a full socket keeps the connection alive
// past it.
func (c *Conn) forceClose(reason string, by time.Time) {
	c.sendClose(reply.New(protocol.ConnectionForced, "broker forced connection closure with reason '%s'", reason), 0, 0)
	c.stopOnce.Do(func() { close(c.stop) })
	_ = c.nc.SetDeadline(by)
}

// connectionMethod handles methods on channel 0 after the handshake.
func (c *Conn) connectionMethod(m protocol.Method) error {
	switch m := m.(type) {
	case *protocol.ConnectionClose:
		c.log.Debug().Uint16("code", m.ReplyCode).Str("text", m.ReplyText).Msg("client closed the connection")
		c.closing.Store(true)
		c.dropChannels()
		c.out.appendFinal(protocol.AppendMethodFrame(nil, 0, &protocol.ConnectionCloseOk{}))
		_ = c.nc.SetReadDeadline(time.Now().Add(closeTimeout))
		return nil
	case *protocol.ConnectionCloseOk:
		return reply.New(protocol.UnexpectedFrame, "unexpected connection.close-ok")
	case *protocol.ConnectionUpdateSecret:
		// As RabbitMQ's internal backend: its users' credentials do not
		// expire, so the new secret is taken without being checked (a
		// token-rotating client keeps its connection); a user deleted
		// since the login is refused, as a backend refusing the secret.
		if _, ok := c.srv.Users.User(c.user.Name); !ok {
			return reply.New(protocol.NotAllowed, "New secret was refused by one of the backends")
		}
		c.log.Info().Str("reason", m.Reason).Msg("secret updated")
		c.send(0, &protocol.ConnectionUpdateSecretOk{})
		return nil
	case *protocol.ConnectionBlocked, *protocol.ConnectionUnblocked:
		return reply.New(protocol.CommandInvalid, "%s is sent by the broker, not the client", m.Name())
	}
	return reply.New(protocol.CommandInvalid, "unexpected method %s on channel 0", m.Name())
}

// send appends one method frame.
func (c *Conn) send(channelID uint16, m protocol.Method) {
	b := c.out.begin()
	if b != nil {
		b = protocol.AppendMethodFrame(b, channelID, m)
	}
	c.out.end(b)
}

// flushPoint runs when the reader has consumed everything buffered: the
// moment to send coalesced publisher confirms.
func (c *Conn) flushPoint() {
	for _, ch := range c.channels {
		if ch.confirm.pending() {
			ch.flushConfirms()
		}
	}
}

// writeLoop owns the socket's write side and the heartbeat monitor.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	var spare []byte
	var spareSegs net.Buffers
	var spareHeld []*message.Message
	var tick <-chan time.Time
	var hb heartbeatMonitor
	failed := false
	for {
		select {
		case <-c.out.wake:
		case d := <-c.hbStart:
			t := time.NewTicker(d / 2)
			defer t.Stop()
			tick = t.C
			hb = heartbeatMonitor{interval: d}
			continue
		case <-tick:
			if c.heartbeatTick(&hb) {
				c.log.Warn().Dur("timeout", 2*hb.interval).Msg("missed heartbeats from client; closing connection")
				c.nc.Close()
				failed = true
			}
		}
		b, segs, held, closing, ok := c.out.take(spare, spareSegs, spareHeld)
		if !ok {
			continue // a flush is writing; it wakes the writer after
		}
		if (len(b) > 0 || len(segs) > 0) && !failed {
			var n int64
			var err error
			if len(segs) > 0 {
				vec := segs // WriteTo consumes its receiver
				n, err = vec.WriteTo(c.nc)
			} else {
				var m int
				m, err = c.nc.Write(b)
				n = int64(m)
			}
			if err != nil {
				failed = true
				c.nc.Close() // the reader sees the failure and finishes
			}
			c.out.writes.Add(1)
			c.io.sent(int(n))
		}
		if cap(b) <= keepBuffer {
			spare = b[:0]
		} else {
			spare = nil
		}
		// The written bodies must not stay reachable from the spare. A take
		// without segs did not use spareSegs: it stays the writer's.
		if segs != nil {
			clear(segs)
			spareSegs = segs[:0]
		}
		if held != nil {
			// Written (or never to be): the bodies are free to go back.
			for _, m := range held {
				m.Release()
			}
			clear(held)
			spareHeld = held[:0]
		}
		if c.out.relieved() {
			c.kickConsumers()
		}
		if closing {
			c.nc.Close()
			return
		}
	}
}

type heartbeatMonitor struct {
	interval   time.Duration
	lastReads  uint64
	lastWrites uint64
	quietReads int // ticks without a frame from the client
}

// heartbeatTick runs every half interval. It sends a heartbeat when the
// broker wrote nothing during the last tick, so the client hears from it at
// least once an interval even when timers run late on a busy machine, and
// reports a dead client after two intervals without a frame (time blocked
// by an alarm excepted).
func (c *Conn) heartbeatTick(hb *heartbeatMonitor) (dead bool) {
	if w := c.out.writes.Load(); w != hb.lastWrites {
		hb.lastWrites = w
	} else {
		b := c.out.begin()
		if b != nil {
			b = protocol.AppendHeartbeatFrame(b)
		}
		c.out.end(b)
	}
	if r := c.reads.Load(); r != hb.lastReads || c.blocked.Load() || c.flowing.Load() {
		hb.lastReads, hb.quietReads = r, 0
		return false
	}
	hb.quietReads++
	return hb.quietReads >= 4 // two intervals: four half-interval ticks without a frame
}

// kickConsumers asks the queues of this connection's consumers to deliver
// again, after congestion cleared.
func (c *Conn) kickConsumers() {
	c.consumersMu.Lock()
	list := make([]*consumer, 0, len(c.consumers))
	for k := range c.consumers {
		list = append(list, k)
	}
	c.consumersMu.Unlock()
	for _, k := range list {
		k.q.Kick()
	}
}

// info describes the connection for listings, from any goroutine: the
// handshake's results are read through c.opened, published once it is done.
// openedInfo is what the handshake settled, for other goroutines to read.
type openedInfo struct {
	user, vhost string
	props       protocol.Table
	heartbeat   time.Duration
	frameMax    uint32
	channelMax  uint16
}

func (c *Conn) String() string { return fmt.Sprintf("conn %d (%s)", c.id, c.name) }
