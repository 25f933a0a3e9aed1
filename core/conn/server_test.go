package conn

import (
	"bytes"
	"testing"
	"time"

	"github.com/warrenmq/warren/protocol"
)

func (s *Server) counts() (handshaking, opened int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handshaking, s.opened
}

func TestHandshakeOpens(t *testing.T) {
	s := newTestServer(t, Limits{FrameMax: 131072, ChannelMax: 16})
	c := connect(t, s)
	c.handshake()
	c.openChannel(1)
	if h, o := s.counts(); h != 0 || o != 1 {
		t.Fatalf("%d in the handshake, %d opened; want 0 and 1", h, o)
	}
	c.close()
	if h, o := s.counts(); h != 0 || o != 0 {
		t.Fatalf("after close: %d in the handshake, %d opened", h, o)
	}
}

// A header the broker does not speak gets its own header back, then the
// socket closes.
func TestWrongProtocolHeader(t *testing.T) {
	s := newTestServer(t, Limits{})
	c := connect(t, s)
	c.write([]byte("AMQP\x00\x00\x09\x00"))
	if got := c.readHeader(); !bytes.Equal(got, protocol.ProtocolHeader[:]) {
		t.Fatalf("got %q back", got)
	}
}

func TestWrongPasswordClosesWith403(t *testing.T) {
	s := newTestServer(t, Limits{})
	c := connect(t, s)
	c.hello()
	c.send(0, &protocol.ConnectionStartOk{
		ClientProperties: protocol.Table{"capabilities": protocol.Table{"authentication_failure_close": true}},
		Mechanism:        "PLAIN", Response: "\x00guest\x00wrong", Locale: "en_US",
	})
	c.expectClose(protocol.AccessRefused)
	c.expectHangup()
}

// A method out of order in the handshake is 503, naming it.
func TestHandshakeOutOfOrder(t *testing.T) {
	s := newTestServer(t, Limits{})
	c := connect(t, s)
	c.hello()
	c.send(0, &protocol.ConnectionOpen{VirtualHost: "/"})
	cl := c.expectClose(protocol.CommandInvalid)
	if cl.FailingClassID != 10 || cl.FailingMethodID != 40 {
		t.Fatalf("failing method %d.%d, want 10.40", cl.FailingClassID, cl.FailingMethodID)
	}
	c.expectHangup()
}

// A socket that never finishes the handshake is closed after
// HandshakeTimeout and stops counting.
func TestHandshakeTimeout(t *testing.T) {
	s := newTestServer(t, Limits{HandshakeTimeout: 20 * time.Millisecond})
	c := connect(t, s)
	c.hello()
	c.expectHangup()
	<-c.served
	if h, o := s.counts(); h != 0 || o != 0 {
		t.Fatalf("%d in the handshake, %d opened after the timeout", h, o)
	}
}

// max_connections counts connections past connection.open: sockets still
// in the handshake, however many, never lock a client out, and the one
// over the limit is refused at connection.open with RabbitMQ's 530.
func TestMaxConnectionsCountsOpenedConnections(t *testing.T) {
	s := newTestServer(t, Limits{MaxConnections: 2})
	for i := 0; i < 3; i++ {
		connect(t, s).hello()
	}
	first := connect(t, s)
	first.handshake()
	second := connect(t, s)
	second.handshake()

	third := connect(t, s)
	third.hello()
	third.login("guest", "guest")
	third.tuneAndOpen()
	cl := third.expectClose(protocol.NotAllowed)
	const want = "NOT_ALLOWED - access to vhost '/' refused for user 'guest': connection limit (2) is reached"
	if cl.ReplyText != want || cl.FailingClassID != 10 || cl.FailingMethodID != 40 {
		t.Fatalf("got %q on %d.%d, want %q on 10.40", cl.ReplyText, cl.FailingClassID, cl.FailingMethodID, want)
	}
	third.expectHangup()

	// A place frees when a connection ends.
	first.close()
	connect(t, s).handshake()
}

// max_handshakes bounds the sockets in the handshake: one more is closed at
// once, and a place frees as soon as one of them opens or goes.
func TestMaxHandshakesRefusesSockets(t *testing.T) {
	s := newTestServer(t, Limits{MaxHandshakes: 1})
	pending := connect(t, s)
	pending.hello()

	refused := connect(t, s)
	<-refused.served
	refused.expectHangup()

	// Once the pending one is open, it no longer takes a handshake place.
	pending.login("guest", "guest")
	pending.tuneAndOpen()
	expect[*protocol.ConnectionOpenOk](pending)
	connect(t, s).handshake()
}
