package queue

import (
	"math"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// A wait too long for a Duration is served in steps, never as an
// overflowed negative Duration that fires at once.
func TestTimerWaitNeverOverflows(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{-5, 0},
		{0, 0},
		{1500, 1500 * time.Millisecond},
		{message.MaxTTL, maxTimerWait},
		{1e13, maxTimerWait},
		{math.MaxInt64, maxTimerWait},
	} {
		if got := timerWait(tc.ms); got != tc.want {
			t.Errorf("timerWait(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}

// An x-expires too large to add to a clock reading (a hand-built setting
// here; declare refuses such values and restore caps them) keeps the queue:
// it is not deleted when the idle timer fires.
func TestHugeExpiresDoesNotDeleteAtOnce(t *testing.T) {
	s := DefaultSettings()
	s.Expires = math.MaxInt64
	ev := &events{}
	q := New(Config{Name: "q", VHost: "/", Settings: s, Events: ev})
	defer q.Delete(false, false)
	q.onIdleTimer()
	if ev.unused {
		t.Fatal("a queue with x-expires MaxInt64 was reported unused at once")
	}
}

// TTLs above message.MaxTTL from a restored queue's arguments or from a
// policy count as MaxTTL, so a message's deadline never overflows and the
// message does not expire at once.
func TestHugeTTLsAreCapped(t *testing.T) {
	s, err := ParseArgs("q", "/", protocol.Table{"x-message-ttl": int64(math.MaxInt64), "x-expires": int64(1e13)})
	if err != nil {
		t.Fatal(err)
	}
	if s.MessageTTL != message.MaxTTL || s.Expires != message.MaxTTL {
		t.Fatalf("ttl %d expires %d, want both %d", s.MessageTTL, s.Expires, int64(message.MaxTTL))
	}
	p := DefaultSettings().WithPolicy(protocol.Table{"message-ttl": float64(9e18), "expires": float64(1e13)})
	if p.MessageTTL != message.MaxTTL || p.Expires != message.MaxTTL {
		t.Fatalf("policy: ttl %d expires %d, want both %d", p.MessageTTL, p.Expires, int64(message.MaxTTL))
	}

	q, ev := newQueue(t, protocol.Table{"x-message-ttl": int64(math.MaxInt64)}, nil)
	defer q.Delete(false, false)
	q.Enqueue(msg(t, "kept", 0, false))
	if st := q.Stats(); st.Ready != 1 || len(ev.dead) != 0 {
		t.Fatalf("ready %d, dead-lettered %d: the message expired at once", st.Ready, len(ev.dead))
	}
}

// Declaring refuses what RabbitMQ 3.10.8 refuses, in its words: anything
// above ten years.
func TestDeclareRefusesLongExpiries(t *testing.T) {
	for _, tc := range []struct {
		args protocol.Table
		text string // "" when accepted
	}{
		{protocol.Table{"x-message-ttl": int64(message.MaxTTL), "x-expires": int64(message.MaxTTL)}, ""},
		{protocol.Table{"x-message-ttl": int32(1000), "x-other": int64(1e13)}, ""},
		{protocol.Table{"x-message-ttl": int64(message.MaxTTL + 1)}, "PRECONDITION_FAILED - invalid arg 'x-message-ttl' for queue 'q' in vhost '/': {value_too_large,315360000001}"},
		{protocol.Table{"x-expires": int64(math.MaxInt64)}, "PRECONDITION_FAILED - invalid arg 'x-expires' for queue 'q' in vhost '/': {value_too_large,9223372036854775807}"},
	} {
		err := CheckDeclareArgs("q", "/", tc.args)
		if tc.text == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			continue
		}
		if e := reply.As(err); err == nil || e.Code != protocol.PreconditionFailed || e.Text != tc.text {
			t.Errorf("%v: got %v, want 406 %q", tc.args, err, tc.text)
		}
	}
}
