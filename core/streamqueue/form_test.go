package streamqueue

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/warrenmq/warren/core/message"
	wire "github.com/warrenmq/warren/protocol/stream"
	"github.com/warrenmq/warren/storage"
)

// deliverForm makes the chunk a Deliver carries, which the stream
// protocol's own parser reads back (its CRC included), each body where it
// says; it declines AMQP 0-9-1 messages.
func TestDeliverForm(t *testing.T) {
	var recs []storage.StreamRecord
	for i := range 3 {
		m := message.NewAMQP10("s", "", []byte(fmt.Sprint("body-", i)))
		recs = append(recs, storage.StreamRecord{Offset: uint64(40 + i), Timestamp: 1700000000000,
			Msg: &storage.Message{RoutingKey: m.RoutingKey, Flags: m.Flags, Body: m.Body}})
	}
	bodies := make([]int, len(recs))
	out, ok := deliverForm([]byte("prefix"), recs, bodies)
	if !ok {
		t.Fatal("declined AMQP 1.0 messages")
	}
	form := out[len("prefix"):]
	h, data, err := wire.ParseChunk(form)
	if err != nil {
		t.Fatal(err)
	}
	if h.ChunkID != 40 || h.NumEntries != 3 || h.NumRecords != 3 || h.Timestamp != 1700000000000 || h.Type != wire.ChunkUser {
		t.Fatalf("header %+v", h)
	}
	for i := range recs {
		e, n, err := wire.ReadEntry(data)
		if err != nil || !bytes.Equal(e.Body, recs[i].Msg.Body) {
			t.Fatalf("entry %d: %q, %v", i, e.Body, err)
		}
		data = data[n:]
		if got := form[bodies[i] : bodies[i]+len(recs[i].Msg.Body)]; !bytes.Equal(got, recs[i].Msg.Body) {
			t.Fatalf("body %d at %d: %q", i, bodies[i], got)
		}
	}
	amqp := []storage.StreamRecord{{Offset: 1, Msg: &storage.Message{RoutingKey: "s", Body: []byte("x")}}}
	if _, ok := deliverForm(nil, amqp, make([]int, 1)); ok {
		t.Fatal("an AMQP 0-9-1 message given a form")
	}
}
