package tests

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Connections: login, tuning, server properties, heartbeats and the
// protocol errors that close a connection.

func TestLoginPlain(t *testing.T) {
	s := start(t)
	c, err := amqp.DialConfig(s.url, amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "guest"}}})
	if err != nil {
		t.Fatalf("PLAIN login: %v", err)
	}
	defer c.Close()
	if _, err := c.Channel(); err != nil {
		t.Fatal(err)
	}
}

func TestLoginAMQPlain(t *testing.T) {
	s := start(t)
	c, err := amqp.DialConfig(s.url, amqp.Config{SASL: []amqp.Authentication{&amqp.AMQPlainAuth{Username: "guest", Password: "guest"}}})
	if err != nil {
		t.Fatalf("AMQPLAIN login: %v", err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Name == "" {
		t.Fatal("no server-named queue")
	}
}

func TestLoginWrongPassword(t *testing.T) {
	t.Parallel() // RabbitMQ waits seconds before closing a failed login
	s := start(t)
	// amqp091-go reports any failure between start-ok and tune as
	// ErrCredentials (403), whatever the broker said.
	_, err := amqp.DialConfig(s.url, amqp.Config{SASL: []amqp.Authentication{&amqp.PlainAuth{Username: "guest", Password: "wrong"}}})
	expectCode(t, err, amqp.AccessRefused)
	_, err = amqp.DialConfig(s.url, amqp.Config{SASL: []amqp.Authentication{&amqp.AMQPlainAuth{Username: "guest", Password: "wrong"}}})
	expectCode(t, err, amqp.AccessRefused)

	// A client that announces authentication_failure_close is told why.
	r := rawDial(t, s)
	o := defaultHandshake()
	o.password, o.authFailClose = "wrong", true
	r.startHandshake(o)
	text := r.expectConnectionClose(amqp.AccessRefused)
	if text == "" {
		t.Fatal("connection.close 403 without a reply text")
	}
	r.expectHangup(5 * time.Second)

	// One that does not only sees the socket close.
	r = rawDial(t, s)
	o.authFailClose = false
	r.startHandshake(o)
	r.expectHangup(5 * time.Second)

	// An unknown user is refused the same way.
	r = rawDial(t, s)
	o.user, o.authFailClose = "nobody-"+uniq(t, ""), true
	r.startHandshake(o)
	r.expectConnectionClose(amqp.AccessRefused)
}

func TestMissingVHost(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	o := defaultHandshake()
	o.vhost = uniq(t, "no-such-vhost")
	r.startHandshake(o)
	r.expect(10, 30)
	r.method(0, 10, 31, tuneOk(2047, 131072, 0))
	r.method(0, 10, 40, connectionOpen(o.vhost))
	r.expectConnectionClose(amqp.NotAllowed)
	r.expectHangup(5 * time.Second)

	// amqp091-go reports it as ErrVhost, whose code it sets to 403.
	_, err := amqp.DialConfig(s.url, amqp.Config{Vhost: o.vhost})
	if !errors.Is(err, amqp.ErrVhost) {
		t.Fatalf("dial to a missing vhost: %v, expected ErrVhost", err)
	}
}

func TestServerProperties(t *testing.T) {
	s := start(t)
	c := dial(t, s)
	product, _ := c.Properties["product"].(string)
	if product == "" {
		t.Fatalf("no product in server properties: %v", c.Properties)
	}
	if s.b != nil && product != "Warren" {
		t.Fatalf("product %q, expected Warren", product)
	}
	if v, _ := c.Properties["version"].(string); v == "" {
		t.Fatalf("no version in server properties: %v", c.Properties)
	}
	caps, ok := c.Properties["capabilities"].(amqp.Table)
	if !ok {
		t.Fatalf("no capabilities table: %v", c.Properties)
	}
	// Each has its tests (consumer_priorities: TestConsumerPriorities;
	// direct_reply_to: TestDirectReplyTo).
	implemented := []string{
		"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
		"connection.blocked", "per_consumer_qos", "authentication_failure_close", "consumer_priorities",
		"direct_reply_to",
	}
	for _, name := range implemented {
		if v, _ := caps[name].(bool); !v {
			t.Errorf("capability %s = %v, expected true", name, caps[name])
		}
	}
	// Warren advertises nothing else: a client that sees a capability
	// relies on it.
	for name := range caps {
		if s.b != nil && !slices.Contains(implemented, name) {
			t.Errorf("Warren advertises capability %s, which it does not implement", name)
		}
	}
	if c.Major != 0 || c.Minor != 9 {
		t.Errorf("version %d-%d, expected 0-9", c.Major, c.Minor)
	}
}

// The client may lower channel_max and frame_max in tune-ok; the broker
// then splits bodies to fit the smaller frames.
func TestTuneFromClient(t *testing.T) {
	s := start(t)
	c, err := amqp.DialConfig(s.url, amqp.Config{ChannelMax: 10, FrameSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Config.ChannelMax != 10 || c.Config.FrameSize != 4096 {
		t.Fatalf("negotiated channel_max %d frame_max %d, expected 10 and 4096", c.Config.ChannelMax, c.Config.FrameSize)
	}
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := declareQueue(t, s, ch, "", nil)
	big := bytes.Repeat([]byte("0123456789abcdef"), 3000) // 48000 bytes: 12 body frames
	d := consume(t, ch, q, true)
	publish(t, ch, "", q, amqp.Publishing{Body: big})
	if m := receive(t, d); !bytes.Equal(m.Body, big) {
		t.Fatalf("got %d bytes back, expected %d", len(m.Body), len(big))
	}
}

// The broker offers its limits in connection.tune and holds the client to
// what was agreed: frames above frame_max are a frame error.
func TestFrameMaxEnforced(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	o := defaultHandshake()
	o.frameMax = 4096
	_, offered, _ := r.handshake(o)
	if offered < 4096 {
		t.Fatalf("broker offered frame_max %d", offered)
	}
	r.openChannel(1)
	r.method(1, 60, 40, publishArgs("", uniq(t, "")))
	r.send(frameHeader, 1, contentHeader(10000))
	r.send(frameBody, 1, bytes.Repeat([]byte("x"), 10000))
	r.expectConnectionClose(amqp.FrameError)
}

// channel_max limits how many channels are open at once: RabbitMQ counts
// open channels and does not compare channel ids with the limit (the spec
// calls channel-max the highest channel number; RabbitMQ 3.10 accepts
// channel 5 with channel_max 2 while fewer than two are open).
func TestChannelMaxEnforced(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	o := defaultHandshake()
	o.channelMax = 2
	offered, _, _ := r.handshake(o)
	if offered == 0 {
		t.Fatalf("broker offered channel_max 0")
	}
	r.openChannel(1)
	r.openChannel(2)
	r.method(3, 20, 10, appendShortStr(nil, ""))
	r.expectConnectionClose(amqp.NotAllowed)
}

func TestChannelMaxCountsOpenChannels(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	o := defaultHandshake()
	o.channelMax = 2
	r.handshake(o)
	r.openChannel(5)
	r.openChannel(1)
	r.method(2, 20, 10, appendShortStr(nil, ""))
	r.expectConnectionClose(amqp.NotAllowed)
}

// With heartbeats on, a connection nobody uses stays open: both sides send
// heartbeats while idle.
func TestHeartbeatsKeepIdleConnectionAlive(t *testing.T) {
	t.Parallel()
	s := start(t)
	c, err := amqp.DialConfig(s.url, amqp.Config{Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Config.Heartbeat != time.Second {
		t.Fatalf("negotiated heartbeat %v, expected 1s", c.Config.Heartbeat)
	}
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	select {
	case e := <-closed:
		t.Fatalf("idle connection closed: %v", e)
	case <-time.After(3500 * time.Millisecond): // more than three intervals
	}
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel after idling: %v", err)
	}
	q := declareQueue(t, s, ch, "", nil)
	d := consume(t, ch, q, true)
	publish(t, ch, "", q, body("still here"))
	receive(t, d)
}

// The raw client also sees the broker's heartbeats on an idle connection.
func TestBrokerSendsHeartbeats(t *testing.T) {
	t.Parallel()
	s := start(t)
	r := rawDial(t, s)
	o := defaultHandshake()
	o.heartbeat = 1
	r.handshake(o)
	for {
		f, err := r.read(5 * time.Second)
		if err != nil {
			t.Fatalf("no heartbeat from the broker: %v", err)
		}
		if f.typ == frameHeartbeat {
			if f.channel != 0 || len(f.payload) != 0 {
				t.Fatalf("heartbeat on channel %d with %d bytes", f.channel, len(f.payload))
			}
			return
		}
	}
}

// A peer that stops sending after negotiating heartbeat=1 is dropped after
// about two missed intervals, and the broker serves others meanwhile.
func TestSilentPeerDisconnected(t *testing.T) {
	t.Parallel()
	s := start(t)
	r := rawDial(t, s)
	o := defaultHandshake()
	o.heartbeat = 1
	r.handshake(o)

	done := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := r.read(time.Until(deadline)); err != nil {
				done <- err
				return
			}
		}
		done <- errors.New("still open")
	}()

	// Another client works while the silent one waits to be dropped.
	_, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	d := consume(t, ch, q, true)
	publish(t, ch, "", q, body("meanwhile"))
	receive(t, d)

	err := <-done
	if !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("silent peer: %v, expected the broker to hang up", err)
	}
	publish(t, ch, "", q, body("after"))
	receive(t, d)
}

func isReset(err error) bool {
	var ne interface{ Timeout() bool }
	return err != nil && errors.As(err, &ne) && !ne.Timeout()
}

// A wrong protocol header gets the broker's own header back, then the
// socket closes.
func TestWrongProtocolHeader(t *testing.T) {
	s := start(t)
	// (RabbitMQ still speaks 0-8 and 0-9, "AMQP\x01\x01\x00\x09": those
	// are not wrong headers to it, so they are not tried here.)
	for _, h := range []string{"AMQP\x00\x00\x09\x00", "AMQP\x00\x00\x0a\x00", "AMQP\x00\x01\x00\x00", "GET / HTTP/1.1\r\n\r\n"} {
		r := rawDial(t, s)
		r.write([]byte(h))
		_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := io.ReadAll(r.r)
		if err != nil && !isReset(err) {
			t.Fatalf("header %q: %v", h, err)
		}
		if !bytes.Equal(got, amqpHeader) {
			t.Fatalf("header %q: got %q back, expected %q", h, got, amqpHeader)
		}
	}
}

// A frame whose end octet is not 0xCE is a frame error.
func TestBadFrameEnd(t *testing.T) {
	t.Parallel()
	s := start(t)
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.write(encodeFrame(frameMethod, 1, methodPayload(20, 10, appendShortStr(nil, "")), 0x00))
	r.expectConnectionClose(amqp.FrameError)
	r.expectHangup(5 * time.Second)
}

// A method on a channel that was never opened is a channel error that
// closes the connection.
func TestMethodOnUnopenedChannel(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.method(5, 50, 10, queueDeclareArgs(uniq(t, "")))
	r.expectConnectionClose(amqp.ChannelError)
	r.expectHangup(5 * time.Second)
}

// Content frames need a publish before them.
func TestContentWithoutPublish(t *testing.T) {
	s := start(t)
	t.Run("body", func(t *testing.T) {
		r := rawDial(t, s)
		r.handshake(defaultHandshake())
		r.openChannel(1)
		r.send(frameBody, 1, []byte("stray body"))
		r.expectConnectionClose(amqp.UnexpectedFrame)
	})
	t.Run("header", func(t *testing.T) {
		r := rawDial(t, s)
		r.handshake(defaultHandshake())
		r.openChannel(1)
		r.send(frameHeader, 1, contentHeader(3))
		r.expectConnectionClose(amqp.UnexpectedFrame)
	})
	t.Run("method before body", func(t *testing.T) {
		// A publish whose header promised a body, interrupted by a method.
		r := rawDial(t, s)
		r.handshake(defaultHandshake())
		r.openChannel(1)
		r.method(1, 60, 40, publishArgs("", uniq(t, "")))
		r.send(frameHeader, 1, contentHeader(3))
		r.method(1, 50, 10, queueDeclareArgs(uniq(t, "")))
		r.expectConnectionClose(amqp.UnexpectedFrame)
	})
}

// A method id that no class defines ends the connection. RabbitMQ 3.10
// does not answer with connection.close: its reader crashes on the unknown
// id and the socket just closes. Warren tells the client why, with 503
// COMMAND_INVALID, before hanging up; either way nothing else is affected.
func TestUnknownMethod(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		name          string
		channel       uint16
		class, method uint16
	}{
		{"unknown class", 1, 99, 1},
		{"unknown basic method", 1, 60, 99},
		{"unknown connection method", 0, 10, 99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rawDial(t, s)
			r.handshake(defaultHandshake())
			r.openChannel(1)
			r.method(tc.channel, tc.class, tc.method, nil)
			if s.b != nil {
				r.expectConnectionClose(amqp.CommandInvalid)
			}
			r.expectHangup(5 * time.Second)
		})
	}
	// The broker still serves.
	_, ch := channel(t, s)
	declareQueue(t, s, ch, "", nil)
}

// A protocol error on one connection leaves every other connection alone.
func TestErrorSparesOtherConnections(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	d := consume(t, ch, q, true)

	// Hard errors of several kinds on other connections.
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.write(encodeFrame(frameMethod, 1, methodPayload(20, 10, appendShortStr(nil, "")), 0x00))
	r.expectConnectionClose(amqp.FrameError)

	r = rawDial(t, s)
	r.handshake(defaultHandshake())
	r.write([]byte{frameMethod, 0, 1, 0xff, 0xff, 0xff, 0xff}) // claims a 4 GiB frame
	r.expectConnectionClose(amqp.FrameError)

	c2, ch2 := channel(t, s)
	closed := c2.NotifyClose(make(chan *amqp.Error, 1))
	_, err := ch2.Consume(q, "tag", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch2.Consume(q, "tag", true, false, false, false, nil) // 530
	expectCode(t, err, amqp.NotAllowed)
	expectClose(t, closed, amqp.NotAllowed)

	publish(t, ch, "", q, body("unaffected"))
	if m := receive(t, d); string(m.Body) != "unaffected" {
		t.Fatalf("got %q", m.Body)
	}
}

// channel.flow(active=false) is not implemented, as in RabbitMQ.
func TestChannelFlowInactiveRefused(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	err := ch.Flow(false)
	expectCode(t, err, amqp.NotImplemented)
	expectClose(t, closed, amqp.NotImplemented)
}

// channel.flow(active=true) is accepted.
func TestChannelFlowActive(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	if err := ch.Flow(true); err != nil {
		t.Fatal(err)
	}
	declareQueue(t, s, ch, "", nil)
}

// After channel.close-ok the channel is gone: a method on it is a channel
// error for the connection.
func TestMethodOnClosedChannel(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.openChannel(1)
	args := binary.BigEndian.AppendUint16(nil, 200)
	args = appendShortStr(args, "bye")
	args = append(args, 0, 0, 0, 0)
	r.method(1, 20, 40, args)
	r.expect(20, 41)
	r.method(1, 50, 10, queueDeclareArgs(uniq(t, "")))
	r.expectConnectionClose(amqp.ChannelError)
}

// The channel id can be reused once closed.
func TestReopenClosedChannel(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.openChannel(1)
	args := binary.BigEndian.AppendUint16(nil, 200)
	args = appendShortStr(args, "bye")
	args = append(args, 0, 0, 0, 0)
	r.method(1, 20, 40, args)
	r.expect(20, 41)
	r.openChannel(1)
}

// Opening a channel that is already open is a channel error.
func TestDoubleChannelOpen(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.openChannel(1)
	r.method(1, 20, 10, appendShortStr(nil, ""))
	r.expectConnectionClose(amqp.ChannelError)
}

// A channel error closes that channel only; the connection and its other
// channels carry on.
func TestChannelErrorSparesOtherChannels(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	d := consume(t, ch, q, true)

	bad, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.QueueDeclarePassive(uniq(t, "missing"), false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)

	publish(t, ch, "", q, body("fine"))
	receive(t, d)
	if c.IsClosed() {
		t.Fatal("connection closed by a channel error")
	}
	again, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, again, q); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

// Frames that break the framing rules close the connection.
func TestBadFrames(t *testing.T) {
	s := start(t)
	t.Run("heartbeat on a channel", func(t *testing.T) {
		// RabbitMQ: 505 UNEXPECTED_FRAME, "type 8, all octets = <<>>".
		r := rawDial(t, s)
		r.handshake(defaultHandshake())
		r.openChannel(1)
		r.send(frameHeartbeat, 1, nil)
		r.expectConnectionClose(amqp.UnexpectedFrame)
	})
	t.Run("unknown frame type", func(t *testing.T) {
		r := rawDial(t, s)
		r.handshake(defaultHandshake())
		r.send(9, 0, []byte("??"))
		r.expectConnectionClose(amqp.FrameError)
	})
	t.Run("truncated method", func(t *testing.T) {
		r := rawDial(t, s)
		r.handshake(defaultHandshake())
		r.openChannel(1)
		// RabbitMQ: 501 FRAME_ERROR, "cannot decode <<0,0,200,97>>".
		r.send(frameMethod, 1, methodPayload(50, 10, []byte{0, 0, 200, 'a'})) // name claims 200 bytes
		r.expectConnectionClose(amqp.FrameError)
	})
}

// After the broker sends channel.close, the channel ignores everything but
// close and close-ok; once close-ok is in, the id can be opened again.
func TestMethodsIgnoredWhileChannelCloses(t *testing.T) {
	s := start(t)
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.openChannel(1)
	passive := []byte{0, 0}
	passive = appendShortStr(passive, uniq(t, "missing"))
	passive = append(passive, 1) // passive
	passive = appendTable(passive, nil)
	r.method(1, 50, 10, passive)
	f := r.next()
	if !f.is(20, 40) {
		c, m := f.classMethod()
		t.Fatalf("expected channel.close, got %d.%d", c, m)
	}
	if code, _ := closeReason(f); code != amqp.NotFound {
		t.Fatalf("channel.close %d, expected 404", code)
	}
	// Sent before close-ok: ignored, including content frames.
	r.method(1, 50, 10, queueDeclareArgs(uniq(t, "ignored")))
	r.method(1, 60, 40, publishArgs("", "x"))
	r.send(frameHeader, 1, contentHeader(1))
	r.send(frameBody, 1, []byte("x"))
	r.method(1, 20, 41, nil)
	r.openChannel(1)
	r.method(1, 50, 10, queueDeclareArgs(""))
	r.expect(50, 11)
}

// tune-ok values outside what the broker offered end the handshake: the
// connection is closed and never opened. RabbitMQ closes the socket after
// a few seconds without a connection.close; Warren may say why first.
func TestTuneOkOutOfRange(t *testing.T) {
	t.Parallel()
	s := start(t)
	for _, tc := range []struct {
		name       string
		channelMax uint16
		frameMax   uint32
	}{
		{"frame_max below 4096", 2047, 1024},
		{"frame_max above the offer", 2047, 1 << 30},
		{"channel_max above the offer", 65535, 131072},
		{"channel_max 0 (no limit) against a limit", 0, 131072},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rawDial(t, s)
			r.startHandshake(defaultHandshake())
			r.expect(10, 30)
			r.method(0, 10, 31, tuneOk(tc.channelMax, tc.frameMax, 0))
			r.method(0, 10, 40, connectionOpen("/"))
			for {
				f, err := r.read(10 * time.Second)
				if err != nil {
					if errors.Is(err, os.ErrDeadlineExceeded) {
						t.Fatal("connection neither opened nor closed")
					}
					return // hung up
				}
				if f.is(10, 41) {
					t.Fatal("connection opened")
				}
				if f.is(10, 50) {
					r.method(0, 10, 51, nil)
				}
			}
		})
	}
}
