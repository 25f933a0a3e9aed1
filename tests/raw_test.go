package tests

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	neturl "net/url"
	"os"
	"testing"
	"time"
)

// A raw AMQP client for what amqp091-go will not send: bad headers, bad
// frames, methods out of place. It encodes only the few methods the tests
// need, by hand, so it depends on nothing in Warren.

// Frame types and the frame-end octet.
const (
	frameMethod    = 1
	frameHeader    = 2
	frameBody      = 3
	frameHeartbeat = 8
	frameEnd       = 0xCE
)

var amqpHeader = []byte("AMQP\x00\x00\x09\x01")

type rawFrame struct {
	typ     byte
	channel uint16
	payload []byte
}

// classMethod returns a method frame's class and method ids.
func (f rawFrame) classMethod() (uint16, uint16) {
	if f.typ != frameMethod || len(f.payload) < 4 {
		return 0, 0
	}
	return binary.BigEndian.Uint16(f.payload), binary.BigEndian.Uint16(f.payload[2:])
}

func (f rawFrame) is(class, method uint16) bool {
	c, m := f.classMethod()
	return c == class && m == method
}

type rawConn struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

// rawDial opens a TCP connection to the broker under test.
func rawDial(t testing.TB, s *server) *rawConn {
	t.Helper()
	u, err := neturl.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// send writes one frame.
func (c *rawConn) send(typ byte, channel uint16, payload []byte) {
	c.t.Helper()
	c.write(encodeFrame(typ, channel, payload, frameEnd))
}

// method writes a method frame.
func (c *rawConn) method(channel, class, method uint16, args []byte) {
	c.t.Helper()
	c.send(frameMethod, channel, methodPayload(class, method, args))
}

// read returns the next frame, or an error (io.EOF when the broker hung
// up) if none arrives within the timeout.
func (c *rawConn) read(timeout time.Duration) (rawFrame, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	var h [7]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return rawFrame{}, err
	}
	size := binary.BigEndian.Uint32(h[3:])
	if size > 1<<24 {
		return rawFrame{}, errors.New("frame too large")
	}
	buf := make([]byte, size+1)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return rawFrame{}, err
	}
	if buf[size] != frameEnd {
		return rawFrame{}, errors.New("bad frame end from broker")
	}
	return rawFrame{typ: h[0], channel: binary.BigEndian.Uint16(h[1:]), payload: buf[:size]}, nil
}

// next returns the next frame that is not a heartbeat.
func (c *rawConn) next() rawFrame {
	c.t.Helper()
	for {
		f, err := c.read(5 * time.Second)
		if err != nil {
			c.t.Fatalf("reading a frame: %v", err)
		}
		if f.typ != frameHeartbeat {
			return f
		}
	}
}

// expect reads the next frame and fails unless it is the given method.
func (c *rawConn) expect(class, method uint16) rawFrame {
	c.t.Helper()
	f := c.next()
	if !f.is(class, method) {
		cl, m := f.classMethod()
		if cl == 10 && m == 50 {
			code, text := closeReason(f)
			c.t.Fatalf("expected method %d.%d, got connection.close %d %q", class, method, code, text)
		}
		c.t.Fatalf("expected method %d.%d, got frame type %d channel %d method %d.%d", class, method, f.typ, f.channel, cl, m)
	}
	return f
}

// handshakeOpts tune the raw handshake.
type handshakeOpts struct {
	user, password string
	vhost          string
	channelMax     uint16
	frameMax       uint32
	heartbeat      uint16
	authFailClose  bool // announce authentication_failure_close
}

func defaultHandshake() handshakeOpts {
	return handshakeOpts{user: "guest", password: "guest", vhost: "/", channelMax: 2047, frameMax: 131072}
}

// startHandshake sends the protocol header and start-ok with PLAIN, and
// returns the connection.start it answered.
func (c *rawConn) startHandshake(o handshakeOpts) rawFrame {
	c.t.Helper()
	c.write(amqpHeader)
	start := c.expect(10, 10)
	caps := map[string]bool{"authentication_failure_close": o.authFailClose, "consumer_cancel_notify": true, "basic.nack": true}
	var args []byte
	args = appendTable(args, map[string]any{"product": "warren-raw-test", "capabilities": caps})
	args = appendShortStr(args, "PLAIN")
	args = appendLongStr(args, "\x00"+o.user+"\x00"+o.password)
	args = appendShortStr(args, "en_US")
	c.method(0, 10, 11, args)
	return start
}

// handshake runs a whole handshake and returns the broker's tune values.
func (c *rawConn) handshake(o handshakeOpts) (channelMax uint16, frameMax uint32, heartbeat uint16) {
	c.t.Helper()
	c.startHandshake(o)
	tune := c.expect(10, 30)
	a := tune.payload[4:]
	channelMax, frameMax, heartbeat = binary.BigEndian.Uint16(a), binary.BigEndian.Uint32(a[2:]), binary.BigEndian.Uint16(a[6:])
	c.method(0, 10, 31, tuneOk(o.channelMax, o.frameMax, o.heartbeat))
	c.method(0, 10, 40, connectionOpen(o.vhost))
	c.expect(10, 41)
	return
}

// openChannel opens a channel and waits for open-ok.
func (c *rawConn) openChannel(id uint16) {
	c.t.Helper()
	c.method(id, 20, 10, appendShortStr(nil, ""))
	c.expect(20, 11)
}

// consume sends basic.consume of queue on channel id with a server-named
// tag, no-ack as given, without waiting for consume-ok.
// rawConfirmChannel dials s, opens channel 1 and puts it in confirm mode.
func rawConfirmChannel(t testing.TB, s *server) *rawConn {
	t.Helper()
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.openChannel(1)
	r.method(1, 85, 10, []byte{0})
	r.expect(85, 11)
	return r
}

func (c *rawConn) consume(id uint16, queue string, noAck bool) {
	c.t.Helper()
	args := binary.BigEndian.AppendUint16(nil, 0)
	args = appendShortStr(args, queue)
	args = appendShortStr(args, "")
	var bits byte
	if noAck {
		bits = 0x02
	}
	args = append(args, bits) // no-local, no-ack, exclusive, no-wait
	args = appendTable(args, nil)
	c.method(id, 60, 20, args)
}

// expectConnectionClose reads until connection.close, fails unless its
// reply code is code, answers close-ok and returns the reply text.
func (c *rawConn) expectConnectionClose(code uint16) string {
	c.t.Helper()
	for {
		f, err := c.read(5 * time.Second)
		if err != nil {
			c.t.Fatalf("expected connection.close %d, got %v", code, err)
		}
		if f.channel == 0 && f.is(10, 50) {
			got, text := closeReason(f)
			if got != code {
				c.t.Fatalf("expected connection.close %d, got %d %q", code, got, text)
			}
			c.method(0, 10, 51, nil)
			return text
		}
	}
}

// expectChannelClose reads until channel.close on channel id, fails unless
// its reply code is code, answers close-ok and returns the reply text.
func (c *rawConn) expectChannelClose(id, code uint16) string {
	c.t.Helper()
	for {
		f := c.next()
		if f.is(10, 50) {
			got, text := closeReason(f)
			c.t.Fatalf("expected channel.close %d, got connection.close %d %q", code, got, text)
		}
		if f.channel == id && f.is(20, 40) {
			got, text := closeReason(f)
			if got != code {
				c.t.Fatalf("expected channel.close %d, got %d %q", code, got, text)
			}
			c.method(id, 20, 41, nil)
			return text
		}
	}
}

// expectHangup waits until the broker closes the socket, skipping any
// frames it sends first.
func (c *rawConn) expectHangup(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			c.t.Fatalf("broker did not hang up within %v", timeout)
		}
		_, err := c.read(left)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.t.Fatalf("broker did not hang up within %v", timeout)
		}
		return // EOF or reset: hung up
	}
}

// closeReason decodes connection.close or channel.close.
func closeReason(f rawFrame) (uint16, string) {
	a := f.payload[4:]
	if len(a) < 3 {
		return 0, ""
	}
	code := binary.BigEndian.Uint16(a)
	n := int(a[2])
	if len(a) < 3+n {
		return code, ""
	}
	return code, string(a[3 : 3+n])
}

func encodeFrame(typ byte, channel uint16, payload []byte, end byte) []byte {
	b := []byte{typ, byte(channel >> 8), byte(channel)}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	return append(b, end)
}

func methodPayload(class, method uint16, args []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, class)
	b = binary.BigEndian.AppendUint16(b, method)
	return append(b, args...)
}

func tuneOk(channelMax uint16, frameMax uint32, heartbeat uint16) []byte {
	b := binary.BigEndian.AppendUint16(nil, channelMax)
	b = binary.BigEndian.AppendUint32(b, frameMax)
	return binary.BigEndian.AppendUint16(b, heartbeat)
}

func connectionOpen(vhost string) []byte {
	b := appendShortStr(nil, vhost)
	b = appendShortStr(b, "")
	return append(b, 0)
}

// queueDeclareArgs encodes queue.declare (50.10) for a name with no flags.
func queueDeclareArgs(name string) []byte {
	b := []byte{0, 0}
	b = appendShortStr(b, name)
	b = append(b, 0) // passive, durable, exclusive, auto-delete, no-wait
	return appendTable(b, nil)
}

// publishArgs encodes basic.publish (60.40).
func publishArgs(exchange, key string) []byte {
	b := []byte{0, 0}
	b = appendShortStr(b, exchange)
	b = appendShortStr(b, key)
	return append(b, 0)
}

// contentHeader encodes a basic content header with no properties.
func contentHeader(size uint64) []byte {
	b := binary.BigEndian.AppendUint16(nil, 60)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, size)
	return binary.BigEndian.AppendUint16(b, 0)
}

// persistentContentHeader is contentHeader with delivery-mode 2.
func persistentContentHeader(size uint64) []byte {
	b := binary.BigEndian.AppendUint16(nil, 60)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, size)
	b = binary.BigEndian.AppendUint16(b, 0x1000) // delivery-mode present
	return append(b, 2)
}

func appendShortStr(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

func appendLongStr(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// appendTable encodes a field table of strings, bools and nested tables.
func appendTable(b []byte, t map[string]any) []byte {
	var body []byte
	for k, v := range t {
		body = appendShortStr(body, k)
		switch v := v.(type) {
		case string:
			body = appendLongStr(append(body, 'S'), v)
		case bool:
			x := byte(0)
			if v {
				x = 1
			}
			body = append(body, 't', x)
		case map[string]bool:
			m := make(map[string]any, len(v))
			for k, x := range v {
				m[k] = x
			}
			body = appendTable(append(body, 'F'), m)
		case map[string]any:
			body = appendTable(append(body, 'F'), v)
		default:
			panic("appendTable: unsupported value")
		}
	}
	return append(binary.BigEndian.AppendUint32(b, uint32(len(body))), body...)
}
