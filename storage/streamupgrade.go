package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Format 5 keeps streams' messages in chunks in the streams' files
// (streamlog.go); a store of format 4 or earlier holds them in Pebble, one
// key per message (0x01 in a stream's keys). Open rewrites them before it
// raises the format version, one stream at a time: the stream's chunks
// are written and synced, then one Pebble batch puts their index records
// and deletes the messages. A crash part way leaves the streams not yet
// rewritten as they were, and files no index record points into, which
// the next Open deletes before it rewrites them again.

// rewriteStreamMessages rewrites every stream's format-4 messages into
// chunks and returns how many streams it rewrote.
func (s *Store) rewriteStreamMessages() (int, error) {
	var sids []uint64
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixStream}, UpperBound: []byte{prefixStream + 1}})
	if err != nil {
		return 0, err
	}
	for ok := it.First(); ok; {
		sid, _, _, kok := parseStreamKey(it.Key())
		if !kok {
			it.Close()
			return 0, fmt.Errorf("storage: malformed stream key %q", it.Key())
		}
		if it.SeekGE(streamKey(sid, streamMessage, 0)) {
			if got, kind, _, _ := parseStreamKey(it.Key()); got == sid && kind == streamMessage {
				sids = append(sids, sid)
			}
		}
		_, hi := queueSpan(prefixStream, sid)
		ok = it.SeekGE(hi)
	}
	if err := it.Close(); err != nil {
		return 0, err
	}
	for _, sid := range sids {
		if err := s.rewriteStream(sid); err != nil {
			return 0, err
		}
	}
	// What rewriting placed is loaded again by streamLogs.open.
	s.streams.close()
	s.streams.init(s.opts.FS, s.dir)
	return len(sids), nil
}

func (s *Store) rewriteStream(sid uint64) error {
	// A rewrite a crash cut short left files nothing refers to.
	if err := s.opts.FS.RemoveAll(s.opts.FS.PathJoin(s.streams.dir, streamDirFor(sid))); err != nil {
		return fmt.Errorf("storage: stream %d: clearing its folder: %w", sid, err)
	}
	starts := map[uint64]bool{}
	if err := s.iterate(streamKey(sid, streamSegment, 0), prefixEnd(streamKey(sid, streamSegment, 0)[:10]), func(k, _ []byte) (bool, error) {
		_, _, first, _ := parseStreamKey(k)
		starts[first] = true
		return true, nil
	}); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	var recs []StreamRecord
	size := 0
	var werr error
	flush := func() {
		if len(recs) == 0 || werr != nil {
			return
		}
		s.streams.placeChunks(sid, starts[recs[0].Offset], recs, nil, FormedMessages, func(p *pendingChunk, first uint64, index []byte) {
			if err := s.streams.write([]*pendingChunk{p}); err != nil && werr == nil {
				werr = err
			}
			b.Set(streamKey(sid, streamChunk, first), index, nil)
		})
		recs, size = recs[:0], 0
	}
	lo := streamKey(sid, streamMessage, 0)
	hi := prefixEnd(lo[:10])
	if err := s.iterate(lo, hi, func(k, v []byte) (bool, error) {
		_, _, offset, ok := parseStreamKey(k)
		if !ok || len(v) < 8 {
			return false, fmt.Errorf("storage: malformed stream message %q", k)
		}
		m := new(Message)
		if err := decodeMessage(append([]byte(nil), v[8:]...), m); err != nil {
			return false, fmt.Errorf("storage: stream message %d of stream %d: %w", offset, sid, err)
		}
		if len(recs) > 0 && (starts[offset] || recs[len(recs)-1].Offset+1 != offset || size >= maxChunkBytes) {
			flush()
		}
		recs = append(recs, StreamRecord{Offset: offset, Timestamp: int64(binary.BigEndian.Uint64(v)), Msg: m})
		size += len(m.Body)
		return werr == nil, nil
	}); err != nil {
		return err
	}
	flush()
	if werr != nil {
		return werr
	}
	if err := s.streams.sync(); err != nil {
		return err
	}
	b.DeleteRange(lo, hi, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("storage: stream %d: rewriting its messages into chunks: %w", sid, err)
	}
	return nil
}
