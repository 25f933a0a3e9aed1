package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/storage"
)

// A replicated stream (a stream in a cluster) is one Raft group, as a
// quorum queue is; this node's replica is the group's machine
// (cluster.GroupMachine) and the group its Log.
//
//   - Append proposes the message (with its timestamp, so every replica
//     stores the same), with whatever else was appended while the last
//     entries were in flight, and confirms it once the entry is
//     committed, that is on a majority's disk, and applied here. A
//     replica stores an entry's messages as the one-node writer stores
//     a write's, its formed chunks growing with the entries
//     (formedLimit); chunks are each replica's own, offsets the same.
//   - Every replica applies every entry the same way: the same offsets,
//     the same segments. What Apply stores is not synced: the entry stays
//     in the group's log, in the same store, until a snapshot (written
//     after it, and synced) lets the log go; a crash before that replays
//     it, and the state record (storage.StreamState, written with each
//     batch) says which entries are stored already.
//   - A snapshot is the stream's shape, not its messages: its next offset
//     and segment records. A replica that installs one it is behind (it
//     was down while the others moved on and let their logs go, or it has
//     just joined) has a hole, the offsets between what it has and the
//     snapshot's end: it copies them from another replica (Fetch), while
//     it goes on applying what comes after. Its consumers read up to the
//     hole's start, so no offset is ever skipped.
//
// A replica serves its own node's consumers from its own copy; every
// replica's offsets are the same, so a consumer may start on one node
// at an offset it read on another.

// Log is a replicated stream's Raft group as the stream proposes to it.
type Log interface {
	Propose(entry []byte, done func(index uint64, err error))
}

// Fetch copies a replica's messages from offset from: up to about
// maxBytes of them, in offset order, from another replica. It returns
// none when no replica can be asked now.
type Fetch func(from uint64, maxBytes int) ([]Fetched, error)

// Fetched is one message another replica copied.
type Fetched struct {
	Offset    uint64
	Timestamp int64
	Msg       *storage.Message
}

// fetchBytes is how much one Fetch asks for.
const fetchBytes = 4 << 20

// snapshotEvery and snapshotBytes bound how many entries, and how many
// bytes of them, a replica applies between snapshots. A snapshot is small
// (the segment records), so they only bound how long the log grows, and
// the messages it holds twice; the bytes keep the log's entries within
// the store's memtable (32 MiB at most), so that the log's compaction
// deletes them before a flush writes them out: under load an entry
// carries up to proposalBytes of appends.
const (
	snapshotEvery = 4096
	snapshotBytes = 8 << 20
)

// SetReplica makes the stream a replica of a replicated stream: appends
// go to log, and a hole is filled through fetch. Called before the group
// starts.
func (s *Stream) SetReplica(log Log, fetch Fetch) {
	s.mu.Lock()
	s.log, s.fetch = log, fetch
	start := s.holeFrom < s.holeTo && !s.filling
	s.filling = s.filling || start
	s.mu.Unlock()
	if start {
		go s.fill()
	}
}

// A replica's appends are proposed a batch at a time, as the one-node
// writer writes them: at most proposalsInFlight entries are in flight,
// and the next carries every append queued meanwhile, up to
// proposalBytes. A chunk is one entry's messages, so under load the
// replicas' chunks grow as the one-node writer's do, and a consumer
// reading a replica pays the per-chunk cost every few hundred messages,
// not every Publish frame. Appends are proposed in the order they were
// queued: one goroutine at a time proposes (proposing), so the group
// takes them, and applies them, in that order.
const (
	proposalsInFlight = 2
	proposalBytes     = 1 << 20 // the group's MaxSizePerMsg
)

// queueProposal queues appends for the group and proposes what the window
// allows. It is AppendBatchFrom and AppendAll for a replica: a resend is
// recognised where the entry is applied, by every replica alike.
func (s *Stream) queueProposal(as ...Append) {
	s.mu.Lock()
	s.proposals = append(s.proposals, as...)
	s.mu.Unlock()
	s.proposeQueued()
}

// proposeQueued proposes queued appends while fewer than
// proposalsInFlight entries are in flight; it returns at once if another
// goroutine is proposing, which then proposes these too.
func (s *Stream) proposeQueued() {
	s.mu.Lock()
	if s.proposing {
		s.mu.Unlock()
		return
	}
	s.proposing = true
	for {
		batch, size := s.nextProposal()
		if batch == nil {
			s.proposing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		// done may run before Propose returns (a stopped group): it
		// then finds proposing set and leaves the rest to this loop.
		s.log.Propose(encodeAppends(s.cfg.Now().UnixMilli(), batch, size), func(_ uint64, err error) {
			for _, a := range batch {
				a.Done(err)
			}
			clear(batch)
			s.mu.Lock()
			s.inFlight--
			if cap(batch) > cap(s.spareProposals) {
				s.spareProposals = batch[:0]
			}
			s.mu.Unlock()
			s.proposeQueued()
		})
		s.mu.Lock()
	}
}

// nextProposal takes the queued appends of the next entry, and counts it
// in flight, if the window allows one; it returns them with the sum of
// their partSize. mu is held.
func (s *Stream) nextProposal() ([]Append, int) {
	if len(s.proposals) == 0 || s.inFlight >= proposalsInFlight {
		return nil, 0
	}
	n, size := 1, partSize(s.proposals[0].Writer, s.proposals[0].Msgs)
	for ; n < len(s.proposals); n++ {
		next := partSize(s.proposals[n].Writer, s.proposals[n].Msgs)
		if size+next > proposalBytes {
			break
		}
		size += next
	}
	var batch []Append
	if n == len(s.proposals) {
		// All of them, the common case: the queue's array goes with
		// them, and the spare one an answered batch left takes its
		// place.
		batch, s.proposals, s.spareProposals = s.proposals, s.spareProposals, nil
	} else {
		batch = slices.Clone(s.proposals[:n])
		s.proposals = s.proposals[:copy(s.proposals, s.proposals[n:])]
		clear(s.proposals[len(s.proposals) : len(s.proposals)+n])
	}
	s.inFlight++
	return batch, size
}

// encodeAppends is the log entry of appends whose partSizes sum to
// partsSize: the smallest kind that carries them.
func encodeAppends(ts int64, as []Append, partsSize int) []byte {
	switch {
	case len(as) == 1 && as[0].Writer.Name == "" && len(as[0].Msgs) == 1:
		return encodeAppend(ts, as[0].Msgs[0])
	case len(as) == 1:
		return encodeAppendFrom(ts, as[0].Writer, as[0].Msgs)
	}
	return encodeAppendBatch(ts, as, partsSize)
}

// The kinds (and versions) of log entry, and the versions of a snapshot:
// a later one is refused by name, not misread. The encode and decode
// functions below, and Snapshot (encodeSnapshot), are the only places
// they are written and read.
const (
	entryAppend      = 1 // a message
	entryAppendFrom  = 2 // messages from a publisher, under one sequence
	entryTrackOffset = 3 // a consumer's stored offset
	entryAppendBatch = 4 // several publishers' appends, each under its sequence
	entryLatest      = entryAppendBatch

	snapshotVersion         = 1 // next offset and segments
	snapshotVersionTracking = 2 // and what is tracked by name
)

// encodeAppend is an append entry: kind, timestamp, then the message.
func encodeAppend(ts int64, m *message.Message) []byte {
	sm := storedForm(m)
	b := make([]byte, 9, 9+storage.MessageLen(sm))
	b[0] = entryAppend
	binary.BigEndian.PutUint64(b[1:], uint64(ts))
	return storage.AppendMessage(b, sm)
}

// encodeAppendFrom is an append entry of a publisher's messages under one
// sequence: kind, timestamp, the publisher's name (uvarint length, empty
// for none) and sequence, a count, then each message after its length
// (uvarint).
func encodeAppendFrom(ts int64, w Writer, ms []*message.Message) []byte {
	b := make([]byte, 9, 9+partSize(w, ms))
	b[0] = entryAppendFrom
	binary.BigEndian.PutUint64(b[1:], uint64(ts))
	return appendPart(b, w, ms)
}

// encodeAppendBatch is an entry of several appends: kind, timestamp, a
// count (uvarint), then each append as entryAppendFrom carries its one
// after the timestamp. partsSize is the sum of their partSize.
func encodeAppendBatch(ts int64, as []Append, partsSize int) []byte {
	b := make([]byte, 9, 9+storage.UvarintLen(uint64(len(as)))+partsSize)
	b[0] = entryAppendBatch
	binary.BigEndian.PutUint64(b[1:], uint64(ts))
	b = binary.AppendUvarint(b, uint64(len(as)))
	for _, a := range as {
		b = appendPart(b, a.Writer, a.Msgs)
	}
	return b
}

// partSize is appendPart's length.
func partSize(w Writer, ms []*message.Message) int {
	size := storage.UvarintLen(uint64(len(w.Name))) + len(w.Name) + 8 + storage.UvarintLen(uint64(len(ms)))
	for _, m := range ms {
		n := storage.MessageLen(storedForm(m))
		size += storage.UvarintLen(uint64(n)) + n
	}
	return size
}

// storedForm is m as a log entry carries it.
func storedForm(m *message.Message) *storage.Message {
	return &storage.Message{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Flags: m.Flags, Props: m.Props, Body: m.Body}
}

// appendPart appends a publisher's messages under one sequence: the
// publisher's name (uvarint length, empty for none) and sequence, a
// count, then each message after its length (uvarint).
func appendPart(b []byte, w Writer, ms []*message.Message) []byte {
	b = appendName(b, w.Name)
	b = binary.BigEndian.AppendUint64(b, w.Seq)
	b = binary.AppendUvarint(b, uint64(len(ms)))
	for _, m := range ms {
		sm := storedForm(m)
		b = binary.AppendUvarint(b, uint64(storage.MessageLen(sm)))
		b = storage.AppendMessage(b, sm)
	}
	return b
}

// encodeTrackOffset is a stored offset's entry: kind, the consumer's
// name, the offset.
func encodeTrackOffset(name string, offset uint64) []byte {
	b := appendName([]byte{entryTrackOffset}, name)
	return binary.BigEndian.AppendUint64(b, offset)
}

func appendName(b []byte, name string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(name))), name...)
}

// readName reads appendName's encoding from the front of b.
func readName(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

var errBadEntry = errors.New("stream: malformed log entry")

// logEntry is a decoded log entry: appends (one of one message for
// entryAppend, one for entryAppendFrom, several for entryAppendBatch), or
// a stored offset.
type logEntry struct {
	kind   byte
	ts     int64
	parts  []part
	writer Writer // entryTrackOffset: the consumer's name
	offset uint64 // entryTrackOffset: the offset stored under writer.Name
}

// part is one append of an entry: messages under a publisher's sequence.
type part struct {
	writer Writer
	ms     []storage.Message // their fields alias the entry
}

// decodeEntry reads any log entry.
func decodeEntry(b []byte) (logEntry, error) {
	if len(b) == 0 {
		return logEntry{}, errBadEntry
	}
	e := logEntry{kind: b[0]}
	switch e.kind {
	case entryAppend, entryAppendFrom, entryAppendBatch:
		if len(b) < 9 {
			return logEntry{}, errBadEntry
		}
		e.ts = int64(binary.BigEndian.Uint64(b[1:]))
		rest := b[9:]
		if e.kind == entryAppend {
			e.parts = []part{{ms: make([]storage.Message, 1)}}
			return e, storage.DecodeMessageInto(rest, &e.parts[0].ms[0])
		}
		parts := uint64(1)
		if e.kind == entryAppendBatch {
			var k int
			parts, k = binary.Uvarint(rest)
			if k <= 0 || parts > uint64(len(rest)) {
				return logEntry{}, errBadEntry
			}
			rest = rest[k:]
		}
		for range parts {
			var p part
			var err error
			if p, rest, err = readPart(rest); err != nil {
				return logEntry{}, err
			}
			e.parts = append(e.parts, p)
		}
		if len(rest) != 0 {
			return logEntry{}, errBadEntry
		}
		return e, nil
	case entryTrackOffset:
		name, after, ok := readName(b[1:])
		if !ok || len(after) != 8 {
			return logEntry{}, errBadEntry
		}
		e.writer, e.offset = Writer{Name: name}, binary.BigEndian.Uint64(after)
		return e, nil
	}
	return logEntry{}, fmt.Errorf("stream: a log entry of kind %d, this release knows up to %d (written by a later one?)", b[0], entryLatest)
}

// readPart reads appendPart's encoding from the front of b.
func readPart(b []byte) (part, []byte, error) {
	name, after, ok := readName(b)
	if !ok || len(after) < 8 {
		return part{}, nil, errBadEntry
	}
	p := part{writer: Writer{Name: name, Seq: binary.BigEndian.Uint64(after)}}
	count, k := binary.Uvarint(after[8:])
	rest := after[8+max(k, 0):]
	if k <= 0 || count > uint64(len(rest)) {
		return part{}, nil, errBadEntry
	}
	// One array of the part's messages; a message takes 6 bytes at
	// least, which bounds it whatever count says.
	p.ms = make([]storage.Message, min(count, uint64(len(rest)/6)))[:0]
	for range count {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return part{}, nil, errBadEntry
		}
		p.ms = append(p.ms, storage.Message{})
		if err := storage.DecodeMessageInto(rest[k:k+int(n)], &p.ms[len(p.ms)-1]); err != nil {
			return part{}, nil, err
		}
		rest = rest[k+int(n):]
	}
	return p, rest, nil
}

// decodeAppend reads an append entry: the message as it is stored, its
// fields aliasing b.
func decodeAppend(b []byte) (int64, *storage.Message, error) {
	e, err := decodeEntry(b)
	if err == nil && (e.kind != entryAppend || len(e.parts) != 1 || len(e.parts[0].ms) != 1) {
		err = errBadEntry
	}
	if err != nil {
		return 0, nil, err
	}
	return e.ts, &e.parts[0].ms[0], nil
}

// Apply stores the entry committed at index (cluster.GroupMachine).
func (s *Stream) Apply(index uint64, cmd []byte) error {
	s.mu.Lock()
	if index <= s.applied {
		s.mu.Unlock()
		return nil // stored before a restart
	}
	s.applied = index
	s.appliedBytes += len(cmd)
	if cmd == nil {
		s.mu.Unlock()
		return nil
	}
	e, err := decodeEntry(cmd)
	if err == nil {
		err = s.refusing()
	}
	if err != nil {
		s.mu.Unlock()
		return err
	}
	tx := s.cfg.Store.Begin()
	switch {
	case e.kind == entryTrackOffset:
		s.offsets[e.writer.Name] = e.offset
		tx.PutStreamOffset(s.cfg.ID, e.writer.Name, e.offset)
	default:
		// The entry's messages go to the store as one chunk. A resend
		// is dropped: every replica has taken the same sequences, so
		// each drops it alike.
		first := s.next
		c := chunk{form: s.cfg.Form, formed: s.formed}
		for _, p := range e.parts {
			if s.resend(p.writer) {
				continue
			}
			for i := range p.ms {
				s.place(tx, &c, s.next, e.ts, &p.ms[i])
				s.next++
			}
			if p.writer.Name != "" {
				s.track(p.writer)
				tx.PutStreamSequence(s.cfg.ID, p.writer.Name, p.writer.Seq)
			}
		}
		s.placed(tx, &c)
		s.formed = formedLimit(s.formed, int(s.next-first))
		if s.next > first {
			s.lastChunk = lastChunkOf(c.last, s.next)
			s.settle()
		}
	}
	tx.PutStreamState(s.cfg.ID, s.state())
	s.mu.Unlock()
	// Reads wait for what was committed before them (the store's
	// read-your-writes), so the offset is readable at once.
	tx.Commit(false, s.failIf)
	s.signal()
	return nil
}

// state is the replica's state record; mu is held.
func (s *Stream) state() storage.StreamState {
	return storage.StreamState{Applied: s.applied, HoleFrom: s.holeFrom, HoleTo: s.holeTo}
}

// settle moves stable to what is readable: up to the hole, or the end;
// mu is held.
func (s *Stream) settle() {
	first := s.first()
	if s.holeFrom < first {
		s.holeFrom = min(first, s.holeTo)
	}
	if s.holeFrom >= s.holeTo {
		s.holeFrom, s.holeTo = 0, 0
		s.stable = s.next
		return
	}
	s.stable = s.holeFrom
}

// failIf records a store error that refuses further work.
func (s *Stream) failIf(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
}

// Snapshot is the replica's shape: next offset and segment records
// (cluster.GroupMachine).
func (s *Stream) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appliedBytes = 0
	return encodeSnapshot(s.next, s.segments, storage.Tracking{Sequences: s.sequences, Offsets: s.offsets}), nil
}

// encodeSnapshot is a snapshot of next, the segments and what is tracked:
// version, next offset, a count, each segment's five numbers, then the
// sequences and the offsets, each a count and (name, value) pairs, names
// sorted so that replicas write the same bytes.
func encodeSnapshot(next uint64, segments []storage.Segment, tracked storage.Tracking) []byte {
	b := make([]byte, 0, 1+8+binary.MaxVarintLen64+len(segments)*40)
	b = append(b, snapshotVersionTracking)
	b = binary.BigEndian.AppendUint64(b, next)
	b = binary.AppendUvarint(b, uint64(len(segments)))
	for _, seg := range segments {
		b = binary.BigEndian.AppendUint64(b, seg.First)
		b = binary.BigEndian.AppendUint64(b, seg.Last)
		b = binary.BigEndian.AppendUint64(b, uint64(seg.Timestamp))
		b = binary.BigEndian.AppendUint64(b, uint64(seg.Bytes))
		b = binary.BigEndian.AppendUint64(b, uint64(seg.Count))
	}
	for _, m := range []map[string]uint64{tracked.Sequences, tracked.Offsets} {
		b = binary.AppendUvarint(b, uint64(len(m)))
		for _, name := range slices.Sorted(maps.Keys(m)) {
			b = binary.BigEndian.AppendUint64(appendName(b, name), m[name])
		}
	}
	return b
}

// decodeSnapshot reads either version; one of version 1 tracks nothing.
func decodeSnapshot(b []byte) (next uint64, segs []storage.Segment, tracked storage.Tracking, err error) {
	tracked = storage.Tracking{Sequences: map[string]uint64{}, Offsets: map[string]uint64{}}
	if len(b) > 0 && b[0] != snapshotVersion && b[0] != snapshotVersionTracking {
		return 0, nil, tracked, fmt.Errorf("stream: a snapshot of version %d, this release knows up to %d (written by a later one?)", b[0], snapshotVersionTracking)
	}
	if len(b) < 9 {
		return 0, nil, tracked, errBadEntry
	}
	version := b[0]
	next = binary.BigEndian.Uint64(b[1:])
	n, k := binary.Uvarint(b[9:])
	b = b[9+max(k, 0):]
	if k <= 0 || n > uint64(len(b))/40 || version == snapshotVersion && uint64(len(b)) != n*40 {
		return 0, nil, tracked, errBadEntry
	}
	for i := uint64(0); i < n; i, b = i+1, b[40:] {
		segs = append(segs, storage.Segment{First: binary.BigEndian.Uint64(b), Last: binary.BigEndian.Uint64(b[8:]),
			Timestamp: int64(binary.BigEndian.Uint64(b[16:])), Bytes: int64(binary.BigEndian.Uint64(b[24:])),
			Count: int64(binary.BigEndian.Uint64(b[32:]))})
	}
	if version == snapshotVersion {
		return next, segs, tracked, nil
	}
	for _, m := range []map[string]uint64{tracked.Sequences, tracked.Offsets} {
		count, k := binary.Uvarint(b)
		if k <= 0 || count > uint64(len(b)) {
			return 0, nil, tracked, errBadEntry
		}
		b = b[k:]
		for range count {
			name, after, ok := readName(b)
			if !ok || len(after) < 8 {
				return 0, nil, tracked, errBadEntry
			}
			m[name], b = binary.BigEndian.Uint64(after), after[8:]
		}
	}
	if len(b) != 0 {
		return 0, nil, tracked, errBadEntry
	}
	return next, segs, tracked, nil
}

// Restore takes a snapshot's shape (cluster.GroupMachine). At a start it
// is this replica's own last snapshot, which what it stored since is
// newer than: nothing changes. Otherwise the replica is behind: it takes
// the snapshot's segments, drops what the others dropped, and copies the
// offsets it lacks.
func (s *Stream) Restore(index uint64, data []byte) error {
	next, segs, tracked, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if index <= s.applied {
		s.mu.Unlock()
		return nil
	}
	from := s.next // the first offset this replica lacks
	if s.holeFrom < s.holeTo {
		from = s.holeFrom
	}
	oldFirst := s.first()
	s.applied, s.segments, s.next = index, segs, next
	newFirst := s.first()
	if from < newFirst {
		from = newFirst
	}
	s.holeFrom, s.holeTo = from, next
	tx := s.cfg.Store.Begin()
	tx.DeleteStreamSegments(s.cfg.ID)
	if oldFirst < newFirst {
		tx.DeleteStreamBefore(s.cfg.ID, newFirst)
	}
	for _, seg := range segs {
		tx.PutStreamSegment(s.cfg.ID, seg)
	}
	s.sequences, s.offsets = tracked.Sequences, tracked.Offsets
	tx.DeleteStreamTracking(s.cfg.ID)
	for name, seq := range s.sequences {
		tx.PutStreamSequence(s.cfg.ID, name, seq)
	}
	for name, offset := range s.offsets {
		tx.PutStreamOffset(s.cfg.ID, name, offset)
	}
	if next > 0 {
		s.lastChunk = next - 1
	}
	s.settle()
	tx.PutStreamState(s.cfg.ID, s.state())
	start := s.holeFrom < s.holeTo && !s.filling && s.fetch != nil
	s.filling = s.filling || start
	s.mu.Unlock()
	tx.Commit(false, s.failIf)
	if start {
		go s.fill()
	}
	return nil
}

// SnapshotDue: every snapshotEvery entries or snapshotBytes of them
// (cluster.GroupMachine).
func (s *Stream) SnapshotDue(entries uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return entries >= snapshotEvery || s.appliedBytes >= snapshotBytes
}

// LeaderChanged is nothing to a replica: every replica serves its own
// node's consumers (cluster.GroupMachine).
func (s *Stream) LeaderChanged(leader, term uint64, self bool) {}

// fillRetry is how long filling a hole waits after a Fetch found no
// replica to copy from.
const fillRetry = 500 * time.Millisecond

// fill copies the hole's offsets from other replicas until it is closed.
func (s *Stream) fill() {
	s.mu.Lock()
	s.cfg.Log.Info().Str("queue", s.Name).Uint64("from", s.holeFrom).Uint64("to", s.holeTo).
		Msg("stream replica copying the offsets it lacks from another")
	s.mu.Unlock()
	for {
		s.mu.Lock()
		from, fetch := s.holeFrom, s.fetch
		if s.holeFrom >= s.holeTo || s.deleted {
			if !s.deleted {
				s.cfg.Log.Info().Str("queue", s.Name).Uint64("next", s.next).Msg("stream replica caught up")
			}
			s.filling = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		got, err := fetch(from, fetchBytes)
		if err != nil || len(got) == 0 {
			s.cfg.Log.Debug().Err(err).Str("queue", s.Name).Uint64("from", from).
				Msg("stream replica could not copy from another; trying again")
			select {
			case <-s.stop:
				s.mu.Lock()
				s.filling = false
				s.mu.Unlock()
				return
			case <-time.After(fillRetry):
			}
			continue
		}
		s.mu.Lock()
		if s.holeFrom != from {
			s.mu.Unlock()
			continue // the hole moved meanwhile (retention, a new snapshot)
		}
		tx := s.cfg.Store.Begin()
		if at := got[0].Offset; at > from {
			// The others dropped what this replica lacks to their
			// retention: it goes here too.
			s.dropBefore(tx, at)
			s.settle()
		}
		start, to := s.holeFrom, s.holeFrom
		var recs []storage.StreamRecord
		for _, f := range got {
			if f.Offset != to || f.Offset >= s.holeTo {
				continue
			}
			recs = append(recs, storage.StreamRecord{Offset: f.Offset, Timestamp: f.Timestamp, Msg: f.Msg})
			to++
		}
		if len(recs) > 0 {
			tx.PutStreamChunk(s.cfg.ID, false, recs, s.cfg.Form)
		}
		st := s.state()
		st.HoleFrom = to
		tx.PutStreamState(s.cfg.ID, st)
		s.mu.Unlock()
		// The copies become readable (holeFrom, and stable with it, moves
		// past them) only once committed. A read waits for the Txns
		// committed before it, not for one still being built, and the
		// offsets after the hole are in the store already: a reader let in
		// early skipped to them.
		if s.beforeFillCommit != nil {
			s.beforeFillCommit(start, to)
		}
		tx.Commit(false, s.failIf)
		s.mu.Lock()
		if s.holeFrom == start {
			s.holeFrom = to
		}
		s.settle()
		s.mu.Unlock()
		s.signal()
	}
}

// dropBefore drops the segments wholly below offset, and the messages
// below it, making at the first offset; mu is held.
func (s *Stream) dropBefore(tx *storage.Txn, at uint64) {
	i := 0
	for i < len(s.segments) && s.segments[i].Last < at {
		i++
	}
	s.segments = append(s.segments[:0:0], s.segments[i:]...)
	tx.DeleteStreamBefore(s.cfg.ID, at)
	s.holeFrom = max(s.holeFrom, at)
}

// Copy reads this replica's messages from offset from, up to about
// maxBytes, for another replica's Fetch: only what is readable here, and
// from the oldest retained offset when from is older.
func (s *Stream) Copy(from uint64, maxBytes int) ([]Fetched, error) {
	s.mu.Lock()
	first, stable := s.first(), s.stable
	s.mu.Unlock()
	from = max(from, first)
	if from >= stable {
		return nil, nil
	}
	var out []Fetched
	size := 0
	err := s.cfg.Store.ScanStream(s.cfg.ID, from, int(min(stable-from, 1<<20)), func(offset uint64, ts int64, m *storage.Message) bool {
		if offset >= stable {
			return false
		}
		out = append(out, Fetched{Offset: offset, Timestamp: ts, Msg: m})
		size += len(m.Body) + len(m.Props) + 32
		return size < maxBytes
	})
	return out, err
}

// EncodeFetched is Copy's answer on the wire.
func EncodeFetched(list []Fetched) []byte {
	var b []byte
	for _, f := range list {
		b = binary.BigEndian.AppendUint64(b, f.Offset)
		b = binary.BigEndian.AppendUint64(b, uint64(f.Timestamp))
		enc := storage.AppendMessage(nil, f.Msg)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	return b
}

// DecodeFetched reads what EncodeFetched wrote.
func DecodeFetched(b []byte) ([]Fetched, error) {
	var out []Fetched
	for len(b) > 0 {
		if len(b) < 17 {
			return nil, errBadEntry
		}
		f := Fetched{Offset: binary.BigEndian.Uint64(b), Timestamp: int64(binary.BigEndian.Uint64(b[8:]))}
		n, k := binary.Uvarint(b[16:])
		if k <= 0 || n > uint64(len(b)-16-k) {
			return nil, errBadEntry
		}
		body := b[16+k : 16+k+int(n)]
		m, err := storage.DecodeMessage(body)
		if err != nil {
			return nil, err
		}
		f.Msg = m
		out = append(out, f)
		b = b[16+k+int(n):]
	}
	return out, nil
}
