package conn

import (
	"testing"
	"time"

	"github.com/warrenmq/warren/protocol"
)

// closeAll runs CloseAll on its own goroutine, so the test's clients can
// read what it sends them, and returns its result.
func closeAll(s *Server, polite time.Duration) <-chan bool {
	done := make(chan bool, 1)
	go func() {
		now := time.Now()
		done <- s.CloseAll("shutdown", now.Add(polite), now.Add(2*polite))
	}()
	return done
}

func finished(t *testing.T, done <-chan bool) {
	t.Helper()
	select {
	case all := <-done:
		if !all {
			t.Fatal("CloseAll gave up on a connection")
		}
	case <-time.After(ioTimeout):
		t.Fatal("CloseAll did not return")
	}
}

const forcedText = "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'"

// A publisher held by a resource alarm is let go when the broker closes
// connections: CloseAll does not wait for the alarm to clear, and the
// client hears 320.
func TestCloseAllReleasesPublisherHeldByAlarm(t *testing.T) {
	s := newTestServer(t, Limits{})
	c := connect(t, s)
	c.handshake()
	c.openChannel(1)
	s.Alarm.Set(true, "test alarm")
	c.publish(1, "nowhere", []byte("held"))
	if b := expect[*protocol.ConnectionBlocked](c); b.Reason != "test alarm" {
		t.Fatalf("blocked for %q", b.Reason)
	}

	done := closeAll(s, time.Minute)
	if cl := c.expectClose(protocol.ConnectionForced); cl.ReplyText != forcedText {
		t.Fatalf("got %q", cl.ReplyText)
	}
	finished(t, done)
	if raised, _, _ := s.Alarm.State(); !raised {
		t.Fatal("the alarm was cleared to let the publisher go")
	}
}

// A client that stops reading cannot hold CloseAll past its polite
// deadline: the socket's writes time out.
func TestCloseAllWithClientNotReading(t *testing.T) {
	s := newTestServer(t, Limits{})
	c := connect(t, s)
	c.handshake()
	c.send(1, &protocol.ChannelOpen{}) // its open-ok is never read: the writer blocks
	finished(t, closeAll(s, 50*time.Millisecond))
}

// Nor can one that stopped in the middle of a frame; it still hears 320.
func TestCloseAllWithClientMidFrame(t *testing.T) {
	s := newTestServer(t, Limits{})
	c := connect(t, s)
	c.handshake()
	c.openChannel(1)
	c.write(protocol.AppendMethodFrame(nil, 1, &protocol.QueueDeclare{Queue: "q"})[:5])
	done := closeAll(s, 50*time.Millisecond)
	if m, _, err := c.next(); err != nil {
		t.Fatalf("reading connection.close: %v", err)
	} else if cl, ok := m.(*protocol.ConnectionClose); !ok || cl.ReplyCode != protocol.ConnectionForced {
		t.Fatalf("got %s, want connection.close 320", m.Name())
	}
	finished(t, done)
}

// So can one still in the handshake, and no socket is served afterwards.
func TestCloseAllInHandshakeThenRefuses(t *testing.T) {
	s := newTestServer(t, Limits{})
	c := connect(t, s)
	c.hello()
	done := closeAll(s, time.Minute)
	c.expectClose(protocol.ConnectionForced)
	finished(t, done)
	late := connect(t, s)
	<-late.served
	late.expectHangup()
}
