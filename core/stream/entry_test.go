package stream

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/storage"
)

// Every kind of log entry and both snapshot versions read back as
// written; a later kind or version is refused by name; any bytes decode
// without a panic.
func TestEntriesRoundTrip(t *testing.T) {
	m, err := message.New("x", "k", 0, nil, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	ts, got, err := decodeAppend(encodeAppend(1_700_000_000_123, m))
	if err != nil || ts != 1_700_000_000_123 || got.Exchange != "x" || got.RoutingKey != "k" || !bytes.Equal(got.Body, []byte("body")) {
		t.Fatalf("append read back %d %+v (%v)", ts, got, err)
	}
	m2, _ := message.New("y", "k2", 0, nil, []byte("second"))
	e, err := decodeEntry(encodeAppendFrom(5, Writer{Name: "pub-1", Seq: 77}, []*message.Message{m, m2}))
	if err != nil || e.kind != entryAppendFrom || e.ts != 5 || len(e.parts) != 1 || e.parts[0].writer != (Writer{Name: "pub-1", Seq: 77}) ||
		len(e.parts[0].ms) != 2 || string(e.parts[0].ms[0].Body) != "body" || string(e.parts[0].ms[1].Body) != "second" || e.parts[0].ms[1].Exchange != "y" {
		t.Fatalf("append from a publisher read back %+v (%v)", e, err)
	}
	batch := batchEntry(6, []Append{
		{Msgs: []*message.Message{m}, Writer: Writer{Name: "pub-1", Seq: 78}},
		{Msgs: []*message.Message{m2, m}, Writer: Writer{}},
		{Msgs: []*message.Message{m2}, Writer: Writer{Name: "pub-2", Seq: 1}},
	})
	if len(batch) != cap(batch) {
		t.Fatalf("a batch of appends sized %d, encoded in %d", cap(batch), len(batch))
	}
	e, err = decodeEntry(batch)
	if err != nil || e.kind != entryAppendBatch || e.ts != 6 || len(e.parts) != 3 ||
		e.parts[0].writer != (Writer{Name: "pub-1", Seq: 78}) || len(e.parts[0].ms) != 1 || string(e.parts[0].ms[0].Body) != "body" ||
		e.parts[1].writer != (Writer{}) || len(e.parts[1].ms) != 2 || string(e.parts[1].ms[0].Body) != "second" ||
		e.parts[2].writer != (Writer{Name: "pub-2", Seq: 1}) || e.parts[2].ms[0].RoutingKey != "k2" {
		t.Fatalf("a batch of appends read back %+v (%v)", e, err)
	}
	e, err = decodeEntry(encodeTrackOffset("reader", 1234))
	if err != nil || e.kind != entryTrackOffset || e.writer.Name != "reader" || e.offset != 1234 {
		t.Fatalf("a stored offset read back %+v (%v)", e, err)
	}
	if _, _, err := decodeAppend(encodeTrackOffset("reader", 1)); err == nil {
		t.Fatal("a stored offset read as an append")
	}

	segs := []storage.Segment{{First: 0, Last: 9, Timestamp: 5, Bytes: 100, Count: 10}, {First: 10, Last: 10, Timestamp: 6, Bytes: 1, Count: 1}}
	tracked := storage.Tracking{Sequences: map[string]uint64{"p": 3, "q": 9}, Offsets: map[string]uint64{"c": 4}}
	next, gotSegs, gotTracked, err := decodeSnapshot(encodeSnapshot(11, segs, tracked))
	if err != nil || next != 11 || !reflect.DeepEqual(gotSegs, segs) || !reflect.DeepEqual(gotTracked, tracked) {
		t.Fatalf("snapshot read back %d %+v %+v (%v)", next, gotSegs, gotTracked, err)
	}
	// A snapshot an earlier release wrote (version 1: no tracking).
	v1 := []byte{snapshotVersion}
	v1 = binary.BigEndian.AppendUint64(v1, 11)
	v1 = binary.AppendUvarint(v1, 1)
	for _, n := range []uint64{0, 9, 5, 100, 10} {
		v1 = binary.BigEndian.AppendUint64(v1, n)
	}
	next, gotSegs, gotTracked, err = decodeSnapshot(v1)
	if err != nil || next != 11 || !reflect.DeepEqual(gotSegs, segs[:1]) || len(gotTracked.Sequences)+len(gotTracked.Offsets) != 0 {
		t.Fatalf("a version 1 snapshot read back %d %+v %+v (%v)", next, gotSegs, gotTracked, err)
	}

	later := encodeAppend(1, m)
	later[0] = entryLatest + 1
	if _, err := decodeEntry(later); err == nil || !strings.Contains(err.Error(), "kind 5") {
		t.Fatalf("a later entry: %v", err)
	}
	laterSnap := encodeSnapshot(1, nil, storage.Tracking{})
	laterSnap[0] = snapshotVersionTracking + 1
	if _, _, _, err := decodeSnapshot(laterSnap); err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("a later snapshot: %v", err)
	}
}

func FuzzDecodeEntries(f *testing.F) {
	m, err := message.New("x", "k", 0, nil, []byte("body"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(encodeAppend(7, m))
	f.Add(encodeAppendFrom(7, Writer{Name: "p", Seq: 1}, []*message.Message{m, m}))
	f.Add(encodeTrackOffset("c", 3))
	f.Add(batchEntry(7, []Append{{Msgs: []*message.Message{m}, Writer: Writer{Name: "p", Seq: 2}}, {Msgs: []*message.Message{m, m}}}))
	f.Add(encodeSnapshot(3, []storage.Segment{{First: 1, Last: 2, Count: 2}}, storage.Tracking{Sequences: map[string]uint64{"p": 1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if next, segs, tracked, err := decodeSnapshot(b); err == nil {
			again, segs2, tracked2, err := decodeSnapshot(encodeSnapshot(next, segs, tracked))
			if err != nil || again != next || !reflect.DeepEqual(segs, segs2) || !reflect.DeepEqual(tracked, tracked2) {
				t.Fatalf("snapshot %d %v %v read back as %d %v %v (%v)", next, segs, tracked, again, segs2, tracked2, err)
			}
		}
		_, _ = decodeEntry(b)
	})
}

// batchEntry is encodeAppendBatch of as, sized as nextProposal sizes it.
func batchEntry(ts int64, as []Append) []byte {
	size := 0
	for _, a := range as {
		size += partSize(a.Writer, a.Msgs)
	}
	return encodeAppendBatch(ts, as, size)
}
