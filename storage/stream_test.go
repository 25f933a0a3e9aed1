package storage

import (
	"fmt"
	"testing"
)

// streamRecords are messages from to to-1, each with body m<offset> and
// timestamp 1000+offset.
func streamRecords(from, to uint64) []StreamRecord {
	var recs []StreamRecord
	for o := from; o < to; o++ {
		recs = append(recs, StreamRecord{Offset: o, Timestamp: int64(1000 + o), Msg: &Message{RoutingKey: "k", Body: []byte(fmt.Sprint("m", o))}})
	}
	return recs
}

// A stream's messages and segments: written in order, read from any
// offset, timestamps found by offset, whole segments dropped from the
// front, and the stream's data kept by Recover while its id is kept,
// dropped when it is not.
func TestStreamMessagesAndSegments(t *testing.T) {
	s, fs := openRecovered(t, nil)
	const sid, other = 41, 42
	put := func(id uint64, from, to uint64) {
		t.Helper()
		tx := s.Begin()
		tx.PutStreamChunk(id, true, streamRecords(from, to), nil)
		tx.PutStreamSegment(id, Segment{First: from, Last: to - 1, Timestamp: int64(1000 + from), Bytes: int64(to - from), Count: int64(to - from)})
		commit(t, tx)
	}
	put(sid, 0, 10)
	put(sid, 10, 20)
	put(other, 0, 5)

	var got []string
	if err := s.ScanStream(sid, 7, 2, func(o uint64, ts int64, m *Message) bool {
		got = append(got, fmt.Sprintf("%d@%d:%s", o, ts, m.Body))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	// Two asked for: the rest of the first chunk is read with them.
	if fmt.Sprint(got) != "[7@1007:m7 8@1008:m8 9@1009:m9]" {
		t.Fatalf("scan from 7, 2 of them: %v", got)
	}
	got = got[:0]
	if err := s.ScanStream(sid, 7, 5, func(o uint64, ts int64, m *Message) bool {
		got = append(got, fmt.Sprintf("%d@%d:%s", o, ts, m.Body))
		return len(got) < 5
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[7@1007:m7 8@1008:m8 9@1009:m9 10@1010:m10 11@1011:m11]" {
		t.Fatalf("scan from 7 until the reader stops at 5: %v", got)
	}
	if ts, ok, err := s.StreamTimestamp(sid, 15); err != nil || !ok || ts != 1015 {
		t.Fatalf("timestamp of 15: %d %v %v", ts, ok, err)
	}
	if _, ok, err := s.StreamTimestamp(sid, 20); err != nil || ok {
		t.Fatalf("timestamp past the end: %v %v", ok, err)
	}
	segs, err := s.StreamSegments(sid)
	if err != nil || len(segs) != 2 || segs[1] != (Segment{First: 10, Last: 19, Timestamp: 1010, Bytes: 10, Count: 10}) {
		t.Fatalf("segments %+v %v", segs, err)
	}

	tx := s.Begin()
	tx.DeleteStreamBefore(sid, 10)
	commit(t, tx)
	segs, _ = s.StreamSegments(sid)
	first := -1
	_ = s.ScanStream(sid, 0, 1, func(o uint64, _ int64, _ *Message) bool { first = int(o); return false })
	if len(segs) != 1 || segs[0].First != 10 || first != 10 {
		t.Fatalf("after dropping the first segment: %+v, first message %d", segs, first)
	}
	if segs, _ := s.StreamSegments(other); len(segs) != 1 {
		t.Fatalf("the other stream lost its segments: %+v", segs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted: sid is kept, other is not.
	s, _ = openMem(t, fs)
	defer s.Close()
	st, err := s.Recover(map[uint64]bool{sid: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.UnknownQueues != 1 {
		t.Fatalf("recovery deleted %d unknown queues or streams, want 1", st.UnknownQueues)
	}
	if segs, _ := s.StreamSegments(other); len(segs) != 0 {
		t.Fatalf("an unknown stream's segments stayed: %+v", segs)
	}
	n := 0
	_ = s.ScanStream(sid, 0, 100, func(uint64, int64, *Message) bool { n++; return true })
	if n != 10 {
		t.Fatalf("the kept stream has %d messages, want 10", n)
	}
	tx = s.Begin()
	tx.DeleteStream(sid)
	commit(t, tx)
	if segs, _ := s.StreamSegments(sid); len(segs) != 0 {
		t.Fatalf("a deleted stream's segments stayed: %+v", segs)
	}
}
