package conn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// The tests in this package drive a Server over net.Pipe with a client
// written against the codec, so each case controls every frame and sees
// every frame the broker sends.

// ioTimeout bounds how long a test client waits for a frame that must
// come; it fails the test rather than hang it, and is never a measurement.
const ioTimeout = 10 * time.Second

type vhostMap map[string]*vhost.VHost

func (m vhostMap) VHost(name string) (*vhost.VHost, bool) {
	v, ok := m[name]
	return v, ok
}

// newTestServer serves vhost "/" to user guest (password guest) with every
// permission.
func newTestServer(t *testing.T, limits Limits) *Server {
	t.Helper()
	users := auth.NewStore(nil)
	users.PutUser(&auth.User{Name: "guest", PasswordHash: auth.HashPassword("guest")})
	all, err := auth.NewPermission(".*", ".*", ".*")
	if err != nil {
		t.Fatal(err)
	}
	users.SetPermission("/", "guest", all)
	vh := vhost.New(vhost.Config{Name: "/", Types: exchange.NewRegistry(), Logger: zerolog.Nop(),
		QueueTypes: queuetype.NewTypes(queue.Quorum, classicqueue.Type{})})
	t.Cleanup(vh.Close)
	return &Server{Limits: limits, Users: users, VHosts: vhostMap{"/": vh}, Alarm: &Alarm{}, Log: zerolog.Nop(), Version: "test"}
}

// testClient is the client end of a pipe the server serves.
type testClient struct {
	t      *testing.T
	nc     net.Conn
	r      *protocol.FrameReader
	dec    protocol.MethodDecoder
	served chan struct{} // closed when Serve has returned
}

// connect starts serving a new pipe and returns its client end.
func connect(t *testing.T, s *Server) *testClient {
	t.Helper()
	client, server := net.Pipe()
	c := &testClient{t: t, nc: client, r: protocol.NewFrameReader(client), served: make(chan struct{})}
	go func() {
		defer close(c.served)
		s.Serve(server)
	}()
	t.Cleanup(func() {
		client.Close()
		<-c.served
	})
	return c
}

func (c *testClient) write(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *testClient) send(channel uint16, m protocol.Method) {
	c.t.Helper()
	c.write(protocol.AppendMethodFrame(nil, channel, m))
}

// next returns the next method the broker sends, skipping heartbeats, or
// the read error.
func (c *testClient) next() (protocol.Method, uint16, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			return nil, 0, err
		}
		if f.Type == protocol.FrameHeartbeat {
			continue
		}
		if f.Type != protocol.FrameMethod {
			return nil, 0, errors.New("content frame where a method was expected")
		}
		m, err := c.dec.Decode(f.Payload)
		return m, f.Channel, err
	}
}

// expect reads the next method, which must be of m's type, into m.
func expect[M protocol.Method](c *testClient) M {
	c.t.Helper()
	m, _, err := c.next()
	if err != nil {
		c.t.Fatalf("reading: %v", err)
	}
	got, ok := m.(M)
	if !ok {
		var want M
		c.t.Fatalf("got %s, want %T", m.Name(), want)
	}
	return got
}

// expectClose reads until connection.close and returns it, answering with
// close-ok.
func (c *testClient) expectClose(code uint16) *protocol.ConnectionClose {
	c.t.Helper()
	for {
		m, _, err := c.next()
		if err != nil {
			c.t.Fatalf("reading connection.close %d: %v", code, err)
		}
		if cl, ok := m.(*protocol.ConnectionClose); ok {
			if cl.ReplyCode != code {
				c.t.Fatalf("connection.close %d %q, want %d", cl.ReplyCode, cl.ReplyText, code)
			}
			copied := *cl
			c.send(0, &protocol.ConnectionCloseOk{})
			return &copied
		}
	}
}

// expectHangup reads until the broker closes the socket.
func (c *testClient) expectHangup() {
	c.t.Helper()
	for {
		if _, _, err := c.next(); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				return
			}
			c.t.Fatalf("waiting for the broker to hang up: %v", err)
		}
	}
}

// hello sends the protocol header and reads connection.start.
func (c *testClient) hello() {
	c.t.Helper()
	c.write(protocol.ProtocolHeader[:])
	expect[*protocol.ConnectionStart](c)
}

// login sends start-ok with PLAIN credentials, announcing the
// capabilities today's clients announce.
func (c *testClient) login(user, password string) {
	c.t.Helper()
	c.send(0, &protocol.ConnectionStartOk{
		ClientProperties: protocol.Table{"capabilities": protocol.Table{"connection.blocked": true, "consumer_cancel_notify": true}},
		Mechanism:        "PLAIN", Response: "\x00" + user + "\x00" + password, Locale: "en_US",
	})
}

// tuneAndOpen reads tune, accepts it and asks to open vhost "/".
func (c *testClient) tuneAndOpen() {
	c.t.Helper()
	tune := expect[*protocol.ConnectionTune](c)
	c.send(0, &protocol.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	c.send(0, &protocol.ConnectionOpen{VirtualHost: "/"})
}

// handshake opens the connection on vhost "/" as guest.
func (c *testClient) handshake() {
	c.t.Helper()
	c.hello()
	c.login("guest", "guest")
	c.tuneAndOpen()
	expect[*protocol.ConnectionOpenOk](c)
}

// close closes the connection as a client does: close, close-ok, hang up.
func (c *testClient) close() {
	c.t.Helper()
	c.send(0, &protocol.ConnectionClose{ReplyCode: 200, ReplyText: "bye"})
	expect[*protocol.ConnectionCloseOk](c)
	c.nc.Close()
	<-c.served
}

// openChannel opens a channel.
func (c *testClient) openChannel(id uint16) {
	c.t.Helper()
	c.send(id, &protocol.ChannelOpen{})
	expect[*protocol.ChannelOpenOk](c)
}

// publish sends a message with body to the default exchange.
func (c *testClient) publish(channel uint16, key string, body []byte) {
	c.t.Helper()
	b := protocol.AppendMethodFrame(nil, channel, &protocol.BasicPublish{RoutingKey: key})
	b = protocol.AppendContentFrames(b, channel, protocol.ClassBasic, 0, nil, body, 0)
	c.write(b)
}

// readHeader reads the 8 bytes the broker answers a bad protocol header with.
func (c *testClient) readHeader() []byte {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	got, err := io.ReadAll(c.nc)
	if err != nil && !errors.Is(err, io.ErrClosedPipe) {
		c.t.Fatalf("reading: %v", err)
	}
	return bytes.Clone(got)
}
