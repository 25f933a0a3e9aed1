package quorum

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/message"
)

func someCommands(t testing.TB) []command {
	m, err := message.New("x", "k.1", 0, nil, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	return []command{
		enqueue{now: 1_700_000_000_000, expiresAt: 1_700_000_060_000, msg: m},
		checkout{consumer: "n.1.c3", credit: 250, noAck: true, priority: -1 << 40},
		get{consumer: "n.1.g", noAck: true},
		settleAny{how: Requeue, ids: []uint64{3, 9}},
		settleBy{consumer: "n.1.c3", how: Discard, ids: []uint64{}},
		cancelConsumer{consumer: "n.1.c3"},
		downConsumer{consumer: "n.2.c1"},
		expire{now: 42},
		purge{node: 7, nonce: 8, named: true},
		purge{},
		configure{cfg: Config{MaxLength: 2, MaxBytes: Unlimited, Overflow: RejectPublish, DeliveryLimit: 5, DeadLetter: true, AtLeastOnce: true}},
		deadLettered{ids: []uint64{1}},
		suspectNode{node: 0xabc},
		resumeConsumers{consumers: []ConsumerID{"a", "b"}},
	}
}

// Every command reads back as it was written.
func TestEntriesRoundTrip(t *testing.T) {
	for _, c := range someCommands(t) {
		got, err := decode(encode(c))
		if err != nil {
			t.Fatalf("%#v: %v", c, err)
		}
		if e, ok := c.(enqueue); ok {
			g := got.(enqueue)
			if g.now != e.now || g.expiresAt != e.expiresAt || g.msg.Exchange != e.msg.Exchange || g.msg.RoutingKey != e.msg.RoutingKey ||
				g.msg.Flags != e.msg.Flags || !bytes.Equal(g.msg.Props, e.msg.Props) || !bytes.Equal(g.msg.Body, e.msg.Body) {
				t.Fatalf("read back %#v, wrote %#v", g, e)
			}
			continue
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("read back %#v\nwrote %#v", got, c)
		}
	}
}

// Entries as earlier releases wrote them read as what they meant.
func TestEntriesOfEarlierReleases(t *testing.T) {
	for _, c := range []struct {
		name string
		old  []byte
		want command
	}{
		{"a purge that named nobody", []byte{opPurge}, purge{}},
		{"a checkout without a priority", []byte{opCheckout, 1, 'c', 0, 0, 0, 5, 1}, checkout{consumer: "c", credit: 5, noAck: true}},
		{"a checkout with a 32-bit priority", []byte{opCheckout, 1, 'c', 0, 0, 0, 5, 0, 0xff, 0xff, 0xff, 0xf9}, checkout{consumer: "c", credit: 5, priority: -7}},
		{"a cancel", []byte{opCancel, 2, 'a', 'b'}, cancelConsumer{consumer: "ab"}},
		{"a settle", []byte{opSettle, byte(Ack), 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9}, settleAny{how: Ack, ids: []uint64{9}}},
	} {
		got, err := decode(c.old)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%s: %#v (%v), want %#v", c.name, got, err, c.want)
		}
	}
}

// An entry this release cannot read is refused by name: a later version,
// an unknown op, a short one.
func TestEntriesRefuseWhatTheyCannotRead(t *testing.T) {
	later := encode(expire{now: 1})
	later[0] |= 1 << opBits
	if _, err := decode(later); err == nil || !strings.Contains(err.Error(), "version 1 (op 7)") {
		t.Fatalf("a later version: %v", err)
	}
	if _, err := decode([]byte{30}); err == nil || !strings.Contains(err.Error(), "op 30") {
		t.Fatalf("an unknown op: %v", err)
	}
	full := encode(someCommands(t)[0])
	if _, err := decode(full[:len(full)-1]); err == nil {
		t.Fatal("a short enqueue was read")
	}
	if _, err := decode(nil); err == nil {
		t.Fatal("an empty entry was read")
	}
}

// Any bytes decode without a panic, and what decodes encodes to what
// decodes the same.
func FuzzDecodeEntry(f *testing.F) {
	for _, c := range someCommands(f) {
		f.Add(encode(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decode(b)
		if err != nil {
			return
		}
		again, err := decode(encode(c))
		if err != nil {
			t.Fatalf("%#v encodes to what does not decode: %v", c, err)
		}
		if _, isEnqueue := c.(enqueue); !isEnqueue && !reflect.DeepEqual(again, c) {
			t.Fatalf("%#v read back as %#v", c, again)
		}
	})
}
