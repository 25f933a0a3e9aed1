package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Streams: append-only logs of messages (RabbitMQ's stream queues). A
// stream's messages are dense from its first retained offset to its last,
// written in chunks (the messages of one write, at consecutive offsets) to
// the stream's files outside Pebble (streamlog.go); Pebble holds an index
// record per chunk. They are grouped in segments, the unit retention drops,
// each with a record of its first offset and timestamp, its last offset,
// bytes and count:
//
//	0x08 sid(8) 0x01 offset(8)         a message of format 4 (timestamp(8)
//	                                   then the message): read only to be
//	                                   rewritten into chunks (Open)
//	0x08 sid(8) 0x02 first(8)          a segment: timestamp(8) last(8)
//	                                   bytes(8) count(8)
//	0x08 sid(8) 0x03 0(8)              a replicated stream's state:
//	                                   applied(8) holeFrom(8) holeTo(8)
//	0x08 sid(8) 0x04 kind(1) name      what the stream tracks for a name:
//	                                   value(8); kind 1 a publisher's last
//	                                   sequence, 2 a consumer's offset
//	0x08 sid(8) 0x05 first(8)          a chunk: file(8) position(8)
//	                                   length(4) count(4) timestamp(8):
//	                                   its record is in the stream's file
//	                                   named file, at position, with a
//	                                   payload of length bytes; it holds
//	                                   offsets first..first+count-1, the
//	                                   first appended at timestamp
//
// sid comes from NewID, as a queue id. A stream's data goes with
// DeleteStream; retention deletes whole segments (DeleteStreamBefore).

const (
	prefixStream  byte = 0x08
	streamMessage byte = 0x01
	streamSegment byte = 0x02
	streamState   byte = 0x03
	streamTracked byte = 0x04
	streamChunk   byte = 0x05

	streamKeyLen     = 1 + 8 + 1 + 8
	segmentRecordLen = 8 * 4
	stateRecordLen   = 8 * 3
	chunkIndexLen    = 8 + 8 + 4 + 4 + 8
	formedIndexLen   = chunkIndexLen + 4 // and the form's length: a formed chunk's

	// maxChunkBytes and maxChunkMessages bound a chunk: a larger write is
	// split, so that a reader never reads more than this at once.
	maxChunkBytes    = 1 << 20
	maxChunkMessages = 4096
)

// FormedMessages is the most messages of a chunk stored with its form
// (StreamForm), which its readers take whole, unless the writer asks for
// more (PutStreamChunkOf); MaxFormedMessages is the most it can ask for.
const (
	FormedMessages    = 256
	MaxFormedMessages = maxChunkMessages
)

// chunkIndex is a chunk's index record (0x05).
type chunkIndex struct {
	first  uint64
	file   uint64 // the first offset of its file: the file's name
	pos    int64
	length uint32 // of its payload
	count  uint32
	ts     int64
	// formLen is a formed chunk's form's length (0 for any other chunk):
	// the form lies in the file at pos+formedAt (streamlog.go).
	formLen uint32
}

func parseChunkIndex(k, v []byte) (chunkIndex, error) {
	_, kind, first, ok := parseStreamKey(k)
	if !ok || kind != streamChunk || len(v) != chunkIndexLen && len(v) != formedIndexLen {
		return chunkIndex{}, fmt.Errorf("storage: malformed stream chunk record %q", k)
	}
	c := chunkIndex{first: first, file: binary.BigEndian.Uint64(v), pos: int64(binary.BigEndian.Uint64(v[8:])),
		length: binary.BigEndian.Uint32(v[16:]), count: binary.BigEndian.Uint32(v[20:]), ts: int64(binary.BigEndian.Uint64(v[24:]))}
	if len(v) == formedIndexLen {
		c.formLen = binary.BigEndian.Uint32(v[32:])
		if uint64(c.formLen)+formedPrefixLen > uint64(c.length) {
			return chunkIndex{}, fmt.Errorf("storage: stream chunk record %q: a form past its chunk", k)
		}
	}
	if c.count == 0 {
		return chunkIndex{}, fmt.Errorf("storage: stream chunk record %q of no message", k)
	}
	return c, nil
}

func (c chunkIndex) end() uint64 { return c.first + uint64(c.count) }

func putStreamKey(k []byte, sid uint64, kind byte, n uint64) {
	k[0] = prefixStream
	binary.BigEndian.PutUint64(k[1:], sid)
	k[9] = kind
	binary.BigEndian.PutUint64(k[10:], n)
}

func streamKey(sid uint64, kind byte, n uint64) []byte {
	k := make([]byte, streamKeyLen)
	putStreamKey(k, sid, kind, n)
	return k
}

func parseStreamKey(k []byte) (sid uint64, kind byte, n uint64, ok bool) {
	if len(k) != streamKeyLen || k[0] != prefixStream {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), k[9], binary.BigEndian.Uint64(k[10:]), true
}

// Segment is a stream's segment record.
type Segment struct {
	First, Last uint64 // offsets, inclusive
	Timestamp   int64  // of its first message, unix ms
	Bytes       int64  // of its messages' bodies
	Count       int64
}

// PutStreamChunk writes recs, messages at consecutive offsets, as one
// chunk (or more: a chunk is split at maxChunkBytes, maxChunkMessages and
// where a file of the stream ends). newSegment says recs[0] starts a
// segment: a new file starts there (streamlog.go). The chunk's record is
// written by the committer before the Txn is applied; the messages' fields
// are read until then, and must not change.
//
// With form, when recs share their exchange, routing key and flags, each
// chunk of at most FormedMessages is stored in the form form makes of
// it, which StreamChunk returns with its messages (streamlog.go).
func (t *Txn) PutStreamChunk(sid uint64, newSegment bool, recs []StreamRecord, form StreamForm) {
	t.PutStreamChunkOf(sid, newSegment, recs, form, 0)
}

// PutStreamChunkOf is PutStreamChunk with formed chunks of at most
// formed messages (up to MaxFormedMessages; maxChunkBytes still bounds
// them); 0 or less is FormedMessages.
func (t *Txn) PutStreamChunkOf(sid uint64, newSegment bool, recs []StreamRecord, form StreamForm, formed int) {
	if formed <= 0 {
		formed = FormedMessages
	}
	t.s.streams.placeChunks(sid, newSegment, recs, form, min(formed, MaxFormedMessages), func(p *pendingChunk, first uint64, index []byte) {
		t.chunks = append(t.chunks, p)
		op := t.b.SetDeferred(streamKeyLen, len(index))
		putStreamKey(op.Key, sid, streamChunk, first)
		copy(op.Value, index)
		op.Finish()
	})
}

// placeChunks splits recs into chunks (PutStreamChunk), places each in its
// file and hands it to put with its first offset and index record.
func (l *streamLogs) placeChunks(sid uint64, newSegment bool, recs []StreamRecord, form StreamForm, formed int, put func(p *pendingChunk, first uint64, index []byte)) {
	var index [formedIndexLen]byte
	if form != nil && !uniform(recs) {
		form = nil
	}
	most := maxChunkMessages
	if form != nil {
		most = formed
	}
	for len(recs) > 0 {
		first := recs[0].Offset
		end := l.fileEnd(sid, first)
		n, size := 0, 0
		for n < len(recs) && n < most && recs[n].Offset < end && (n == 0 || size < maxChunkBytes) {
			size += messageLen(recs[n].Msg)
			n++
		}
		if n == 0 {
			panic(fmt.Sprintf("storage: stream %d: a chunk at offset %d crosses its file's end %d", sid, first, end))
		}
		var rec []byte
		if form != nil {
			rec = l.encodeFormedChunk(recs[:n], form)
		}
		if rec == nil {
			rec = l.encodeChunk(recs[:n])
		}
		sf, pos := l.place(sid, first, recs[n-1].Offset, newSegment, len(rec))
		binary.BigEndian.PutUint64(index[:], sf.first)
		binary.BigEndian.PutUint64(index[8:], uint64(pos))
		binary.BigEndian.PutUint32(index[16:], uint32(len(rec)-chunkHeaderLen))
		binary.BigEndian.PutUint32(index[20:], uint32(n))
		binary.BigEndian.PutUint64(index[24:], uint64(recs[0].Timestamp))
		indexLen := chunkIndexLen
		if form := formOf(rec[chunkHeaderLen:]); form != nil {
			binary.BigEndian.PutUint32(index[32:], uint32(len(form)))
			indexLen = formedIndexLen
		}
		put(&pendingChunk{file: sf, pos: pos, rec: rec}, first, index[:indexLen])
		recs, newSegment = recs[n:], false
	}
}

// PutStreamSegment writes (or rewrites, as it grows) a segment's record.
func (t *Txn) PutStreamSegment(sid uint64, s Segment) {
	op := t.b.SetDeferred(streamKeyLen, segmentRecordLen)
	putStreamKey(op.Key, sid, streamSegment, s.First)
	binary.BigEndian.PutUint64(op.Value, uint64(s.Timestamp))
	binary.BigEndian.PutUint64(op.Value[8:], s.Last)
	binary.BigEndian.PutUint64(op.Value[16:], uint64(s.Bytes))
	binary.BigEndian.PutUint64(op.Value[24:], uint64(s.Count))
	op.Finish()
}

// DeleteStreamBefore deletes a stream's messages and segment records
// below offset: the segments retention dropped.
// A chunk holding offset and some below it stays whole (a replica whose
// segments were cut elsewhere than its chunks: reads start at the first
// segment's offset). The stream files wholly below what is deleted go once
// the Txn is synced.
func (t *Txn) DeleteStreamBefore(sid, offset uint64) {
	cut := offset
	if first, ok, err := t.s.StreamChunkStart(sid, offset); err == nil && ok {
		cut = first
	}
	t.b.DeleteRange(streamKey(sid, streamChunk, 0), streamKey(sid, streamChunk, cut), nil)
	t.b.DeleteRange(streamKey(sid, streamSegment, 0), streamKey(sid, streamSegment, offset), nil)
	t.streamDrops = append(t.streamDrops, streamDrop{sid: sid, cut: cut})
}

// DeleteStreamSegments deletes every segment record of a stream (a
// replica taking its segments from a snapshot); its messages stay.
func (t *Txn) DeleteStreamSegments(sid uint64) {
	t.b.DeleteRange(streamKey(sid, streamSegment, 0), prefixEnd(streamKey(sid, streamSegment, 0)[:10]), nil)
}

// StreamState is what a replica of a replicated stream records besides
// its messages: the last log index it applied, and the offsets it lacks
// (HoleFrom..HoleTo-1, none when equal) that a snapshot told it of.
type StreamState struct {
	Applied, HoleFrom, HoleTo uint64
}

// PutStreamState writes a replicated stream's state record.
func (t *Txn) PutStreamState(sid uint64, st StreamState) {
	op := t.b.SetDeferred(streamKeyLen, stateRecordLen)
	putStreamKey(op.Key, sid, streamState, 0)
	binary.BigEndian.PutUint64(op.Value, st.Applied)
	binary.BigEndian.PutUint64(op.Value[8:], st.HoleFrom)
	binary.BigEndian.PutUint64(op.Value[16:], st.HoleTo)
	op.Finish()
}

// ReadStreamState reads a stream's state record; the zero state when it
// has none (a stream of one node, or a replica that applied nothing).
func (s *Store) ReadStreamState(sid uint64) (StreamState, error) {
	done, err := s.read()
	if err != nil {
		return StreamState{}, err
	}
	defer done()
	s.c.waitApplied()
	v, closer, err := s.db.Get(streamKey(sid, streamState, 0))
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			return StreamState{}, nil
		}
		return StreamState{}, err
	}
	defer closer.Close()
	if len(v) != stateRecordLen {
		return StreamState{}, fmt.Errorf("storage: malformed state of stream %d", sid)
	}
	return StreamState{Applied: binary.BigEndian.Uint64(v), HoleFrom: binary.BigEndian.Uint64(v[8:]),
		HoleTo: binary.BigEndian.Uint64(v[16:])}, nil
}

// Tracking is what a stream tracks by name for the stream protocol (each
// name at most 256 bytes): deduplicating publishers' last sequences and
// consumers' stored offsets.
type Tracking struct {
	Sequences map[string]uint64
	Offsets   map[string]uint64
}

// The kinds of tracking record.
const (
	trackedSequence byte = 1
	trackedOffset   byte = 2
)

func trackedKey(sid uint64, kind byte, name string) []byte {
	k := make([]byte, 11, 11+len(name))
	k[0] = prefixStream
	binary.BigEndian.PutUint64(k[1:], sid)
	k[9], k[10] = streamTracked, kind
	return append(k, name...)
}

func putTracked(t *Txn, sid uint64, kind byte, name string, v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	t.b.Set(trackedKey(sid, kind, name), b[:], nil)
}

// PutStreamSequence records a publisher's last sequence.
func (t *Txn) PutStreamSequence(sid uint64, name string, seq uint64) {
	putTracked(t, sid, trackedSequence, name, seq)
}

// PutStreamOffset records a consumer's stored offset.
func (t *Txn) PutStreamOffset(sid uint64, name string, offset uint64) {
	putTracked(t, sid, trackedOffset, name, offset)
}

// DeleteStreamTracking deletes every tracking record of a stream (a
// replica taking them from a snapshot).
func (t *Txn) DeleteStreamTracking(sid uint64) {
	lo := trackedKey(sid, 0, "")[:10]
	t.b.DeleteRange(lo, prefixEnd(lo), nil)
}

// ReadStreamTracking reads what a stream tracks.
func (s *Store) ReadStreamTracking(sid uint64) (Tracking, error) {
	out := Tracking{Sequences: map[string]uint64{}, Offsets: map[string]uint64{}}
	done, err := s.read()
	if err != nil {
		return out, err
	}
	defer done()
	s.c.waitApplied()
	lo := trackedKey(sid, 0, "")[:10]
	err = s.iterate(lo, prefixEnd(lo), func(k, v []byte) (bool, error) {
		if len(k) < 11 || len(v) != 8 {
			return false, fmt.Errorf("storage: malformed stream tracking record %q", k)
		}
		name, n := string(k[11:]), binary.BigEndian.Uint64(v)
		switch k[10] {
		case trackedSequence:
			out.Sequences[name] = n
		case trackedOffset:
			out.Offsets[name] = n
		default:
			return false, fmt.Errorf("storage: stream tracking record of unknown kind %d", k[10])
		}
		return true, nil
	})
	return out, err
}

// AppendMessage appends m's encoding to b: the form stream messages are
// stored in, and a replicated stream's log entries and replicas' copies
// carry them in.
func AppendMessage(b []byte, m *Message) []byte {
	n := len(b)
	b = append(b, make([]byte, messageLen(m))...)
	putMessage(b[n:], m)
	return b
}

// MessageLen is the length of m's encoding, as AppendMessage writes it.
func MessageLen(m *Message) int { return messageLen(m) }

// DecodeMessage decodes what AppendMessage wrote, all of b; m's fields
// alias b.
func DecodeMessage(b []byte) (*Message, error) {
	m := new(Message)
	if err := DecodeMessageInto(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeMessageInto is DecodeMessage into m.
func DecodeMessageInto(b []byte, m *Message) error { return decodeMessage(b, m) }

// DeleteStream deletes everything a stream stored; its files go once the
// Txn is synced.
func (t *Txn) DeleteStream(sid uint64) {
	lo, hi := queueSpan(prefixStream, sid)
	t.b.DeleteRange(lo, hi, nil)
	t.streamDrops = append(t.streamDrops, streamDrop{sid: sid, whole: true})
}

// streamDrop is a Txn's deletion of a stream's chunks below cut, or of the
// whole stream: their files are doomed as the committer takes it.
type streamDrop struct {
	sid, cut uint64
	whole    bool
}

// StreamSegments returns a stream's segment records, oldest first.
func (s *Store) StreamSegments(sid uint64) ([]Segment, error) {
	done, err := s.read()
	if err != nil {
		return nil, err
	}
	defer done()
	s.c.waitApplied()
	var out []Segment
	err = s.iterate(streamKey(sid, streamSegment, 0), prefixEnd(streamKey(sid, streamSegment, 0)[:10]), func(k, v []byte) (bool, error) {
		_, _, first, ok := parseStreamKey(k)
		if !ok || len(v) != segmentRecordLen {
			return false, fmt.Errorf("storage: malformed stream segment %q", k)
		}
		out = append(out, Segment{First: first, Timestamp: int64(binary.BigEndian.Uint64(v)), Last: binary.BigEndian.Uint64(v[8:]),
			Bytes: int64(binary.BigEndian.Uint64(v[16:])), Count: int64(binary.BigEndian.Uint64(v[24:]))})
		return true, nil
	})
	return out, err
}

// ScanStream calls fn with a stream's messages from offset from (or, when
// from is gone to retention, from the oldest retained), in order, until fn
// returns false, or limit were read and a chunk ended: a chunk is read
// whole, so it is decoded once however the reader's limit falls. m is a
// private copy fn may keep.
func (s *Store) ScanStream(sid, from uint64, limit int, fn func(offset uint64, timestamp int64, m *Message) bool) error {
	n := 0
	return s.streamChunks(sid, from, func(c chunkIndex, payload []byte) (bool, error) {
		more := true
		err := decodeChunk(c, payload, from, func(offset uint64, ts int64, m *Message) bool {
			n++
			more = fn(offset, ts, m)
			return more
		})
		return more && n < limit, err
	})
}

// StreamChunk returns the messages of the chunk holding offset from, all
// of them, or of the first chunk after it (from is gone to retention);
// none past the end. Readers that read the same chunk can share what it
// returns: the messages are private copies no one changes. (A formed
// chunk's form is StreamFormed's.)
func (s *Store) StreamChunk(sid, from uint64) ([]StreamRecord, error) {
	var recs []StreamRecord
	err := s.streamChunks(sid, from, func(c chunkIndex, payload []byte) (bool, error) {
		recs = make([]StreamRecord, 0, c.count)
		return false, decodeChunk(c, payload, 0, func(offset uint64, ts int64, m *Message) bool {
			recs = append(recs, StreamRecord{Offset: offset, Timestamp: ts, Msg: m})
			return true
		})
	})
	return recs, err
}

// FormedChunk is a formed chunk's form where it lies in its stream file,
// held open (retention waits to delete the file) until Release: a reader
// sends it from the file as it is, without reading it into memory. Its
// bytes are not checked here: the form carries its own checksum for its
// reader to check (the stream protocol's chunk CRC, which its clients
// check, as they do RabbitMQ's chunks, which RabbitMQ sends unread).
type FormedChunk struct {
	First uint64 // its first offset
	Count int    // its messages
	Len   int    // its form's length
	l     *streamLogs
	sf    *streamFile
	off   int64
	once  sync.Once
}

// StreamFormed finds the chunk holding offset from (or the first after
// it, from being gone to retention): ok is false when there is none, or
// it is not formed. A chunk it returns is held until Release.
func (s *Store) StreamFormed(sid, from uint64) (fc *FormedChunk, ok bool, err error) {
	done, err := s.read()
	if err != nil {
		return nil, false, err
	}
	defer done()
	s.c.waitApplied()
	c, found, err := lastChunkBelow(s.db, sid, from+1)
	if err != nil || !found || c.end() <= from || c.formLen == 0 {
		return nil, false, err
	}
	sf, gone, err := s.streams.acquire(sid, c.file, c.first)
	if err != nil || gone {
		return nil, false, err
	}
	return &FormedChunk{First: c.first, Count: int(c.count), Len: int(c.formLen), l: &s.streams, sf: sf, off: c.pos + formedAt}, true, nil
}

// Fd is the open file the form lies in, and where: for sendfile. ok is
// false when the file has no descriptor (an in-memory filesystem): read
// it with ReadAt instead.
func (fc *FormedChunk) Fd() (fd uintptr, off int64, ok bool) {
	fd = fc.sf.f.Fd()
	return fd, fc.off, fd != vfs.InvalidFd
}

// ReadAt reads the form into p, len(p) == fc.Len.
func (fc *FormedChunk) ReadAt(p []byte) error {
	if err := readFull(fc.sf.f, p[:fc.Len], fc.off); err != nil {
		return fmt.Errorf("%w: %s, the chunk at offset %d: %v", ErrChunkDamaged, fc.sf.name, fc.First, err)
	}
	return nil
}

// Release lets go of the file; more calls do nothing.
func (fc *FormedChunk) Release() { fc.once.Do(func() { fc.l.release(fc.sf) }) }

// streamChunks calls fn with sid's chunks, read and checked, from the one
// holding offset from (or the first after it), until fn returns false or
// an error; it stops, with no error, at a chunk retention deleted since
// the index was read (the next read starts after it).
func (s *Store) streamChunks(sid, from uint64, fn func(c chunkIndex, payload []byte) (bool, error)) error {
	done, err := s.read()
	if err != nil {
		return err
	}
	defer done()
	s.c.waitApplied()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: streamKey(sid, streamChunk, 0), UpperBound: prefixEnd(streamKey(sid, streamChunk, 0)[:10])})
	if err != nil {
		return err
	}
	defer it.Close()
	ok := it.SeekLT(streamKey(sid, streamChunk, from+1))
	if !ok {
		ok = it.First()
	}
	for ; ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		c, err := parseChunkIndex(it.Key(), v)
		if err != nil {
			return err
		}
		if c.end() <= from {
			continue
		}
		payload, gone, err := s.streams.readChunk(sid, c)
		if err != nil || gone {
			return err
		}
		if more, err := fn(c, payload); err != nil || !more {
			return err
		}
	}
	return it.Error()
}

// StreamTimestamp is the timestamp of the message at offset (ok false:
// there is none).
func (s *Store) StreamTimestamp(sid, offset uint64) (ts int64, ok bool, err error) {
	err = s.ScanStream(sid, offset, 1, func(o uint64, t int64, _ *Message) bool {
		ts, ok = t, o == offset
		return false
	})
	return ts, ok, err
}

// StreamChunkStart is the first offset of the chunk holding offset (ok
// false: none holds it).
func (s *Store) StreamChunkStart(sid, offset uint64) (first uint64, ok bool, err error) {
	done, err := s.read()
	if err != nil {
		return 0, false, err
	}
	defer done()
	s.c.waitApplied()
	c, found, err := lastChunkBelow(s.db, sid, offset+1)
	if err != nil || !found || c.end() <= offset {
		return 0, false, err
	}
	return c.first, true, nil
}
