package storage

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/warrenmq/warren/protocol"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Dump writes every key of the store and its decoded value, one per line,
// in key order: what the package doc describes, made readable. It is meant
// for debugging and tests; values are abbreviated. It sees every Txn
// committed before the call.
func (s *Store) Dump(w io.Writer) error {
	done, err := s.read()
	if err != nil {
		return err
	}
	defer done()
	s.c.waitApplied()
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for ok := it.First(); ok; ok = it.Next() {
		v, verr := it.ValueAndErr()
		if verr != nil {
			err = verr
			break
		}
		bw.WriteString(describe(it.Key(), v))
		bw.WriteByte('\n')
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// describe renders one key and value.
func describe(k, v []byte) string {
	if len(k) == 0 {
		return fmt.Sprintf("? %q = %q", k, v)
	}
	switch k[0] {
	case prefixSystem:
		if len(v) == 4 {
			return fmt.Sprintf("system %s = %d", k[1:], binary.BigEndian.Uint32(v))
		}
		if len(v) == 8 {
			return fmt.Sprintf("system %s = %d", k[1:], binary.BigEndian.Uint64(v))
		}
	case prefixMeta:
		if len(k) < 2 {
			break
		}
		kind := Kind(k[1])
		vhost, name, seq, err := parseMetaKey(kind, k)
		if err != nil {
			break
		}
		t, _, err := protocol.DecodeTable(v)
		rec := formatTable(t)
		if err != nil {
			rec = fmt.Sprintf("(bad table: %v)", err)
		}
		switch {
		case kind == KindBinding:
			return fmt.Sprintf("meta %s vhost=%q seq=%d = %s", kind, vhost, seq, rec)
		case kind.global():
			return fmt.Sprintf("meta %s name=%q = %s", kind, name, rec)
		default:
			return fmt.Sprintf("meta %s vhost=%q name=%q = %s", kind, vhost, name, rec)
		}
	case prefixMessage:
		if len(k) == messageKeyLen {
			var m Message
			if err := decodeMessage(v, &m); err == nil {
				return fmt.Sprintf("message %d = %s", binary.BigEndian.Uint64(k[1:]), formatMessage(&m))
			}
		}
	case prefixLoggedMessage:
		if len(k) == messageKeyLen {
			var m Message
			if r, enc, err := decodeLoggedMessage(v); err == nil && decodeMessage(enc, &m) == nil {
				return fmt.Sprintf("message %d = logged=%s@%d+%d %s", binary.BigEndian.Uint64(k[1:]), segmentName(r.Seg), r.Off, r.Len, formatMessage(&m))
			}
		}
	case prefixEntry:
		if qid, prio, seq, ok := parseEntryKey(k); ok && isMarkKey(k) {
			if n, size := binary.Uvarint(v); size == len(v) && size > 0 {
				return fmt.Sprintf("mark q=%d p=%d s=%d = delivered %d", qid, prio, seq, n)
			}
		} else if ok {
			if e, err := decodeEntry(v, nil, nil); err == nil {
				return fmt.Sprintf("entry q=%d p=%d s=%d = %s", qid, prio, seq, formatEntry(e))
			}
		}
	case prefixRef:
		if qid, prio, seq, ok := parseEntryKey(k); ok && len(v) == 8 {
			return fmt.Sprintf("ref q=%d p=%d s=%d = message %d", qid, prio, seq, binary.BigEndian.Uint64(v))
		}
	case prefixHeld:
		if due, seq, ok := parseHeldKey(k); ok {
			return fmt.Sprintf("held due=%d seq=%d = %s", due, seq, abbrev(v))
		}
	case prefixDelayed:
		if sp, due, seq, ok := parseDelayedKey(k); ok {
			kind := "durable"
			if sp.Transient {
				kind = "transient"
			}
			return fmt.Sprintf("held vhost=%q exchange=%q %s due=%d seq=%d = %s", sp.VHost, sp.Exchange, kind, due, seq, abbrev(v))
		}
	case prefixRaft:
		if line := describeRaft(k, v); line != "" {
			return line
		}
	case prefixStream:
		if c, err := parseChunkIndex(k, v); err == nil {
			sid, _, _, _ := parseStreamKey(k)
			return fmt.Sprintf("stream %d chunk first=%d count=%d ts=%d file=%s pos=%d len=%d", sid, c.first, c.count, c.ts,
				streamFileName(c.file), c.pos, c.length)
		}
		if sid, kind, n, ok := parseStreamKey(k); ok && len(v) >= 8 {
			ts := int64(binary.BigEndian.Uint64(v))
			if kind == streamSegment && len(v) == segmentRecordLen {
				return fmt.Sprintf("stream %d segment first=%d ts=%d last=%d bytes=%d count=%d", sid, n, ts,
					binary.BigEndian.Uint64(v[8:]), binary.BigEndian.Uint64(v[16:]), binary.BigEndian.Uint64(v[24:]))
			}
			var m Message
			if kind == streamMessage && decodeMessage(v[8:], &m) == nil {
				return fmt.Sprintf("stream %d offset %d ts=%d = %s", sid, n, ts, formatMessage(&m))
			}
		}
	}
	return fmt.Sprintf("? %q = %q", k, v)
}

func formatEntry(e *Entry) string {
	var b strings.Builder
	if e.Persistent {
		b.WriteString("persistent ")
	} else {
		b.WriteString("transient ")
	}
	if e.Delivered {
		b.WriteString("delivered ")
	}
	if e.Deliveries != 0 {
		fmt.Fprintf(&b, "deliveries=%d ", e.Deliveries)
	}
	if e.ExpiresAt != 0 {
		fmt.Fprintf(&b, "expires=%d ", e.ExpiresAt)
	}
	if r := e.Spill; r.Spilled() {
		fmt.Fprintf(&b, "spilled=%d@%d+%d ", r.Seg, r.Off, r.Len)
	}
	if r := e.Logged; r.Logged() {
		fmt.Fprintf(&b, "logged=%s@%d+%d ", segmentName(r.Seg), r.Off, r.Len)
	}
	if e.MsgID != 0 {
		fmt.Fprintf(&b, "msg=%d", e.MsgID)
		if e.Msg != nil {
			fmt.Fprintf(&b, " %s", formatMessage(e.Msg))
		}
	} else if e.Msg != nil {
		b.WriteString(formatMessage(e.Msg))
	}
	return strings.TrimSpace(b.String())
}

func formatMessage(m *Message) string {
	return fmt.Sprintf("{exchange=%q rk=%q flags=%#04x props=%s body=%s}", m.Exchange, m.RoutingKey, m.Flags, abbrev(m.Props), abbrev(m.Body))
}

func abbrev(b []byte) string {
	if len(b) > 32 {
		return fmt.Sprintf("%q...(%d bytes)", b[:32], len(b))
	}
	return fmt.Sprintf("%q", b)
}

func formatTable(t protocol.Table) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(t)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%v", k, t[k])
	}
	b.WriteByte('}')
	return b.String()
}

// describeRaft renders a raft key and its value ("" if either is malformed).
func describeRaft(k, v []byte) string {
	group, kind, index, ok := parseRaftKey(k)
	if !ok {
		return ""
	}
	switch kind {
	case raftEntries:
		var e raftpb.Entry
		if proto.Unmarshal(v, &e) == nil {
			return fmt.Sprintf("raft g=%d entry i=%d = term=%d index=%d type=%s data=%s",
				group, index, e.GetTerm(), e.GetIndex(), e.GetType(), abbrev(e.GetData()))
		}
	case raftHardState:
		var hs raftpb.HardState
		if proto.Unmarshal(v, &hs) == nil {
			return fmt.Sprintf("raft g=%d hardstate = term=%d vote=%d commit=%d", group, hs.GetTerm(), hs.GetVote(), hs.GetCommit())
		}
	case raftSnapshot:
		var snap raftpb.Snapshot
		if proto.Unmarshal(v, &snap) == nil {
			md := snap.GetMetadata()
			return fmt.Sprintf("raft g=%d snapshot = index=%d term=%d conf=%s data=%s",
				group, md.GetIndex(), md.GetTerm(), formatConfState(md.GetConfState()), abbrev(snap.GetData()))
		}
	case raftApplied:
		if len(v) == 8 {
			return fmt.Sprintf("raft g=%d applied = %d", group, binary.BigEndian.Uint64(v))
		}
	}
	return ""
}

// formatConfState lists the non-empty parts of a conf state.
func formatConfState(cs *raftpb.ConfState) string {
	var b strings.Builder
	b.WriteByte('{')
	for _, part := range []struct {
		name string
		ids  []uint64
	}{{"voters", cs.GetVoters()}, {"learners", cs.GetLearners()}, {"voters_outgoing", cs.GetVotersOutgoing()}, {"learners_next", cs.GetLearnersNext()}} {
		if len(part.ids) > 0 {
			fmt.Fprintf(&b, "%s:%v ", part.name, part.ids)
		}
	}
	if cs.GetAutoLeave() {
		b.WriteString("auto_leave ")
	}
	return strings.TrimSuffix(b.String(), " ") + "}"
}
