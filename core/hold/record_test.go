package hold

import (
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/internal/tablerec"
	"github.com/warrenmq/warren/protocol"
)

func persistentMsg(t testing.TB, key, body string) *message.Message {
	t.Helper()
	p := protocol.Properties{Flags: protocol.FlagDeliveryMode | protocol.FlagHeaders, DeliveryMode: 2,
		Headers: protocol.Table{"x-delay": int32(10)}}
	props, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.New("later", key, p.Flags, props, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRecordRoundTrip(t *testing.T) {
	m := persistentMsg(t, "rk", "body")
	rec, err := encode(&Held{Msg: m, Via: "topic"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	if h.Via != "topic" || h.Msg.RoutingKey != "rk" || string(h.Msg.Body) != "body" || h.Msg.Exchange != "later" ||
		h.Msg.Flags != m.Flags || string(h.Msg.Props) != string(m.Props) || !h.Msg.Persistent {
		t.Fatalf("round trip: %+v %+v", h, h.Msg)
	}
}

// A record of a later version is refused by name and version; one of the
// delay store's first format (which named the vhost and exchange too) is
// read.
func TestRecordVersions(t *testing.T) {
	later, err := protocol.AppendTable(nil, protocol.Table{tablerec.VersionKey: int64(recordVersion + 1),
		"message_exchange": "x", "routing_key": "k", "flags": int32(0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(later); err == nil || !strings.Contains(err.Error(), "held message record of version 2") {
		t.Fatalf("a held message of a later version: %v", err)
	}
	first, err := protocol.AppendTable(nil, protocol.Table{"vhost": "/", "exchange": "later", "via": "x-delayed-message",
		"message_exchange": "later", "routing_key": "k", "flags": int32(0), "properties": []byte{}, "body": []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	h, err := decode(first)
	if err != nil || h.Via != "x-delayed-message" || string(h.Msg.Body) != "b" || h.Msg.RoutingKey != "k" {
		t.Fatalf("a held message of the first format: %+v, %v", h, err)
	}
	if vh, x, ok := LegacyNames(first); !ok || vh != "/" || x != "later" {
		t.Fatalf("first format's names: %q %q %v", vh, x, ok)
	}
	if _, _, ok := LegacyNames(later); ok {
		t.Fatal("a current record read as one of the first format")
	}
}

// The decoder takes any bytes without panicking, and what it accepts
// encodes to a record it reads back the same.
func FuzzDecode(f *testing.F) {
	rec, err := encode(&Held{Msg: persistentMsg(f, "k", "b"), Via: "direct"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rec)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decode(b)
		if err != nil {
			return
		}
		again, err := encode(h)
		if err != nil {
			t.Fatalf("encoding what was read: %v", err)
		}
		h2, err := decode(again)
		if err != nil || h2.Via != h.Via || h2.Msg.RoutingKey != h.Msg.RoutingKey || string(h2.Msg.Body) != string(h.Msg.Body) ||
			h2.Msg.Flags != h.Msg.Flags || string(h2.Msg.Props) != string(h.Msg.Props) || h2.Msg.Exchange != h.Msg.Exchange {
			t.Fatalf("read back %+v, %v; want %+v", h2, err, h)
		}
	})
}

// A due time is never before now plus the delay, whatever the clock's
// sub-millisecond part.
func TestDueAtRoundsUp(t *testing.T) {
	base := time.UnixMilli(1_700_000_000_000)
	for _, off := range []time.Duration{0, 1, 30 * time.Microsecond, 999 * time.Microsecond} {
		for _, d := range []time.Duration{time.Millisecond, 1500 * time.Microsecond, time.Second} {
			now := base.Add(off)
			if due := time.UnixMilli(dueAt(now, d)); due.Before(now.Add(d)) {
				t.Errorf("now %v + %v: due %v is early", now, d, due)
			}
		}
	}
}
