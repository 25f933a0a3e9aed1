package stream

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/storage"
)

// An append entry and a snapshot read back as written; one of a later
// version is refused by name; any bytes decode without a panic.
func TestEntriesRoundTrip(t *testing.T) {
	m, err := message.New("x", "k", 0, nil, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	ts, got, err := decodeAppend(encodeAppend(1_700_000_000_123, m))
	if err != nil || ts != 1_700_000_000_123 || got.Exchange != "x" || got.RoutingKey != "k" || !bytes.Equal(got.Body, []byte("body")) {
		t.Fatalf("append read back %d %+v (%v)", ts, got, err)
	}
	segs := []storage.Segment{{First: 0, Last: 9, Timestamp: 5, Bytes: 100, Count: 10}, {First: 10, Last: 10, Timestamp: 6, Bytes: 1, Count: 1}}
	next, gotSegs, err := decodeSnapshot(encodeSnapshot(11, segs))
	if err != nil || next != 11 || !reflect.DeepEqual(gotSegs, segs) {
		t.Fatalf("snapshot read back %d %+v (%v)", next, gotSegs, err)
	}
	later := encodeAppend(1, m)
	later[0] = entryAppend + 1
	if _, _, err := decodeAppend(later); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("a later entry: %v", err)
	}
	laterSnap := encodeSnapshot(1, nil)
	laterSnap[0] = snapshotVersion + 1
	if _, _, err := decodeSnapshot(laterSnap); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("a later snapshot: %v", err)
	}
}

func FuzzDecodeEntries(f *testing.F) {
	m, err := message.New("x", "k", 0, nil, []byte("body"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(encodeAppend(7, m))
	f.Add(encodeSnapshot(3, []storage.Segment{{First: 1, Last: 2, Count: 2}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if next, segs, err := decodeSnapshot(b); err == nil {
			again, segs2, err := decodeSnapshot(encodeSnapshot(next, segs))
			if err != nil || again != next || !reflect.DeepEqual(segs, segs2) {
				t.Fatalf("snapshot %d %v read back as %d %v (%v)", next, segs, again, segs2, err)
			}
		}
		_, _, _ = decodeAppend(b)
	})
}
