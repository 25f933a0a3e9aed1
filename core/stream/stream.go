// Package stream holds a stream: RabbitMQ's append-only queue type, read
// over AMQP 0-9-1. Publishing appends a message at the next offset;
// consuming reads from an offset the consumer chose (x-stream-offset) and
// removes nothing, so any number of consumers read the same messages at
// their own pace; retention drops whole segments from the front.
//
// Invariants:
//   - Offsets are dense: the messages readable are exactly first..stable-1,
//     stored in chunks, a write's messages at consecutive offsets, that
//     never cross a segment's start (storage/stream.go, streamlog.go). A
//     replica filling a hole (replica.go) also holds the offsets after
//     the hole; stable stops at the hole until its copies are committed.
//   - What an offset holds never changes, so the delivering goroutine
//     keeps the chunks it read last and readers at the same place share
//     them (chunkAt), read only.
//   - A message is confirmed to its publisher, and readable by consumers,
//     only once the batch holding it is synced (stable moved past it): no
//     consumer ever sees an offset that a crash could take back. A
//     replica of a replicated stream (replica.go) has the same guarantee
//     from its group: an entry is applied once a majority synced it.
//   - One goroutine writes (write, or a replica's group applying) and
//     one delivers (run); segments are changed by the writer only (and a
//     replica's hole filling, which writes only below the entries
//     applied), under mu. A Pull delivers to one reader in its caller's
//     goroutine; a reader is served by one goroutine at a time (its busy
//     flag, set and cleared under mu).
//   - A replica proposes its appends in the order they were appended:
//     one goroutine at a time proposes (proposing, under mu), at most
//     proposalsInFlight entries are in flight, and Propose is called
//     with mu released (its answer may come before it returns).
//   - Deliveries are made under mu, as a queue makes them under its lock
//     (queue.Consumer's contract); the store is read with mu released.
package stream

import (
	"errors"
	"fmt"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/storage"
)

// DefaultSegmentBytes is x-stream-max-segment-size-bytes when not given
// (RabbitMQ's 500 MB).
const DefaultSegmentBytes = 500_000_000

// Config is what a Stream needs.
type Config struct {
	Name, VHost string
	ID          uint64 // its id in the store (storage.Store.NewID)
	Store       *storage.Store
	// Retention: MaxBytes (x-max-length-bytes) and MaxAge (x-max-age),
	// 0 for none; applied by dropping whole segments of SegmentBytes
	// (x-stream-max-segment-size-bytes).
	MaxBytes     int64
	MaxAge       time.Duration
	SegmentBytes int64
	// Now is the clock (tests set it); nil is time.Now.
	Now func() time.Time
	// Log hears what a replica does on its own (copying what it lacks).
	Log zerolog.Logger
	// Form, when set, is the form the stream's chunks are stored in, for
	// ChunkReaders to take whole (storage.StreamForm); nil stores every
	// chunk as messages only.
	Form storage.StreamForm
}

// Stream is one stream queue.
type Stream struct {
	Name, VHost string
	cfg         Config
	wake        chan struct{}
	stop        chan struct{}
	done        chan struct{}

	mu        lockorder.Mutex[lockorder.StreamStream]
	segments  []storage.Segment // retained, oldest first; the last is being filled
	next      uint64            // the offset the next append gets
	stable    uint64            // offsets below it are synced, and readable
	lastChunk uint64            // the first offset of the last batch written
	pending   []pending         // appended, not written yet
	writing   bool
	formed    int   // the most messages of the next write's formed chunks (formedLimit); the writer's (a replica's: the applier's)
	failed    error // the store refused a write: nothing more is taken
	readers   map[queue.Consumer]*reader
	deleted   bool
	// What the stream protocol tracks by name (tracking.go): the last
	// sequence taken from each deduplicating publisher (pending ones
	// included), and each consumer's stored offset.
	sequences map[string]uint64
	offsets   map[string]uint64
	// onDelete are told when the stream is deleted (OnDelete).
	onDelete map[*func()]struct{}

	// A replica of a replicated stream (replica.go): appends go to log;
	// applied is the last log index stored, appliedBytes the bytes of
	// the entries applied since the last snapshot; holeFrom..holeTo-1
	// are offsets a snapshot told of that fill is copying from another
	// replica (none when equal).
	log              Log
	fetch            Fetch
	applied          uint64
	appliedBytes     int
	holeFrom, holeTo uint64
	filling          bool
	// proposals are appends queued for the group, inFlight the entries
	// proposed and not yet answered, proposing whether a goroutine is
	// proposing (queueProposal); spareProposals is an answered batch's
	// array, empty, for the queue to take next.
	proposals      []Append
	spareProposals []Append
	inFlight       int
	proposing      bool
	// cache is the chunks run's goroutine read last, shared by the readers
	// at the same place (chunkAt); cacheNext the one replaced next.
	cache     [chunkCache][]entry
	cacheNext int

	// beforeFillCommit, for tests, runs when a hole's copies from from to
	// to are written into a Txn and not yet committed.
	beforeFillCommit func(from, to uint64)
}

type pending struct {
	m      *message.Message // nil: a publisher's resend, stored as nothing
	offset uint64
	ts     int64
	writer Writer      // set on the first message of a publisher's batch
	done   func(error) // nil on all but the last message of a batch
}

// reader is a consumer's place in the stream.
type reader struct {
	c      queue.Consumer
	filter *Filter // nil: every message; else the others are passed over
	pos    uint64  // the next offset to deliver
	buf    []entry // read ahead from pos; the run goroutine's; shared, read only
	// failedAt is 1 + the offset a read last failed at (logged once).
	failedAt uint64
	blocked  bool // its last delivery was refused: waits for a Kick
	// busy: a goroutine is handing it what it can take (run's deliver,
	// or a Pull); no other does meanwhile.
	busy bool
}

type entry struct {
	offset uint64
	ts     int64 // unix ms it was appended at
	m      *message.Message
}

// A Reader is a consumer that reads the stream as the stream protocol
// does: each message with its offset and the time it was appended, as
// stored (an AMQP 1.0 message the stream protocol published stays one,
// message.FlagAMQP10), in rounds it sends as one chunk. Consume, Cancel
// and Kick serve it as any consumer; Deliver is not called.
type Reader interface {
	queue.Consumer
	// Read takes the message at offset. It runs with the stream's lock
	// held and returns false, having taken nothing, when the reader can
	// take no more now; the stream then waits for a Kick.
	Read(offset uint64, ts int64, m *message.Message) bool
	// RoundDone ends a round of Reads; it runs without the stream's lock.
	RoundDone()
}

// A ChunkReader is a Reader that can take a chunk whole, in the form it
// is stored in (Config.Form), rather than message by message.
type ChunkReader interface {
	Reader
	// ReadFormed offers the chunk fc, in its form, as it lies in its file
	// (unread), from offset from (its first, or later for a reader that
	// starts inside it). It runs with the stream's lock held, as Read, and
	// ends the reader's round when it takes the chunk. A chunk taken is
	// the reader's to Release once sent; the stream releases one not
	// taken.
	ReadFormed(fc *Formed, from uint64) ChunkRead
}

// ChunkRead is what a ChunkReader does with a chunk.
type ChunkRead int

const (
	ChunkTaken    ChunkRead = iota // taken whole: its RoundDone sends it
	ChunkRefused                   // nothing taken: no room now, wait for a Kick
	ChunkDeclined                  // not this way: offer the messages one by one
)

// ErrDeleted answers what is asked of a deleted stream.
var ErrDeleted = errors.New("stream: deleted")

// Open opens a stream, new or stored: what the store holds of it (its
// segments) is read back.
func Open(cfg Config) (*Stream, error) {
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = DefaultSegmentBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	segs, err := cfg.Store.StreamSegments(cfg.ID)
	if err != nil {
		return nil, fmt.Errorf("stream %q in vhost %q: %w", cfg.Name, cfg.VHost, err)
	}
	s := &Stream{Name: cfg.Name, VHost: cfg.VHost, cfg: cfg, segments: segs, readers: map[queue.Consumer]*reader{},
		formed: storage.FormedMessages, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if n := len(segs); n > 0 {
		s.next = segs[n-1].Last + 1
		s.stable, s.lastChunk = s.next, segs[n-1].Last
		if first, ok, err := cfg.Store.StreamChunkStart(cfg.ID, segs[n-1].Last); err == nil && ok {
			s.lastChunk = lastChunkOf(first, s.next) // as before the restart
		}
	}
	st, err := cfg.Store.ReadStreamState(cfg.ID)
	if err != nil {
		return nil, fmt.Errorf("stream %q in vhost %q: %w", cfg.Name, cfg.VHost, err)
	}
	tracked, err := cfg.Store.ReadStreamTracking(cfg.ID)
	if err != nil {
		return nil, fmt.Errorf("stream %q in vhost %q: %w", cfg.Name, cfg.VHost, err)
	}
	s.sequences, s.offsets = tracked.Sequences, tracked.Offsets
	if st != (storage.StreamState{}) {
		s.applied, s.holeFrom, s.holeTo = st.Applied, st.HoleFrom, st.HoleTo
		s.settle()
	}
	go s.run()
	return s, nil
}

// ---- appending

// Append adds m at the next offset; done runs once it is synced (a
// publisher's confirm), with an error if the store refused it.
func (s *Stream) Append(m *message.Message, done func(error)) { s.AppendFrom(m, Writer{}, done) }

// AppendFrom is Append for a message a deduplicating publisher sent
// (tracking.go): one whose sequence is at or below the last the stream
// took from that publisher is a resend, stored as nothing; its done runs
// once what came before it is synced.
func (s *Stream) AppendFrom(m *message.Message, w Writer, done func(error)) {
	s.AppendBatchFrom([]*message.Message{m}, w, done)
}

// AppendBatchFrom is AppendFrom for several messages under one sequence
// (a stream-protocol sub-batch): all are stored, at consecutive offsets,
// or, for a resend, none. done runs once.
func (s *Stream) AppendBatchFrom(ms []*message.Message, w Writer, done func(error)) {
	s.mu.Lock()
	if err := s.refusing(); err != nil {
		s.mu.Unlock()
		done(err)
		return
	}
	if s.log != nil {
		s.mu.Unlock()
		s.queueProposal(Append{Msgs: ms, Writer: w, Done: done})
		return
	}
	ts := s.cfg.Now().UnixMilli()
	if s.resend(w) || len(ms) == 0 {
		s.pending = append(s.pending, pending{ts: ts, done: done})
	} else {
		for i, m := range ms {
			p := pending{m: m, offset: s.next, ts: ts}
			if i == 0 {
				p.writer = w
			}
			if i == len(ms)-1 {
				p.done = done
			}
			s.pending = append(s.pending, p)
			s.next++
		}
		s.track(w)
	}
	start := !s.writing
	s.writing = true
	s.mu.Unlock()
	if start {
		go s.write()
	}
}

// Append is a publisher's messages under one sequence, for AppendAll;
// Done hears what AppendBatchFrom's done would.
type Append struct {
	Msgs   []*message.Message
	Writer Writer
	Done   func(error)
}

// AppendAll is AppendBatchFrom for several appends at once (a
// stream-protocol Publish frame's): each is stored, or dropped as a
// resend, in order. A replica proposes them in one log entry, with any
// others queued meanwhile (queueProposal).
func (s *Stream) AppendAll(as []Append) {
	s.mu.Lock()
	err, replicated := s.refusing(), s.log != nil
	s.mu.Unlock()
	switch {
	case err != nil:
		for _, a := range as {
			a.Done(err)
		}
	case replicated:
		s.queueProposal(as...)
	default:
		for _, a := range as {
			s.AppendBatchFrom(a.Msgs, a.Writer, a.Done)
		}
	}
}

// refusing is why the stream takes no more messages; mu is held.
func (s *Stream) refusing() error {
	switch {
	case s.deleted:
		return ErrDeleted
	case s.failed != nil:
		return reply.Internal("stream '%s' in vhost '%s' cannot store messages: %v", s.Name, s.VHost, s.failed)
	}
	return nil
}

// write stores what was appended, a batch at a time: one synced write per
// batch, so publishers' messages that arrive while one is written share
// the next one's sync.
func (s *Stream) write() {
	for {
		s.mu.Lock()
		batch := s.pending
		s.pending = nil
		if len(batch) == 0 || s.deleted {
			s.writing = false
			s.mu.Unlock()
			for _, p := range batch {
				if p.done != nil {
					p.done(ErrDeleted)
				}
			}
			return
		}
		tx := s.cfg.Store.Begin()
		first, placed := uint64(0), 0
		c := chunk{form: s.cfg.Form, formed: s.formed}
		for _, p := range batch {
			if p.m == nil {
				continue
			}
			if placed == 0 {
				first = p.offset
			}
			placed++
			s.place(tx, &c, p.offset, p.ts, storageMessage(p.m))
			if p.writer.Name != "" {
				tx.PutStreamSequence(s.cfg.ID, p.writer.Name, p.writer.Seq)
			}
		}
		s.placed(tx, &c)
		s.formed = formedLimit(s.formed, placed)
		s.mu.Unlock()

		err := tx.CommitWait()
		s.mu.Lock()
		if err != nil {
			s.failed = err
		} else if placed > 0 {
			s.stable = first + uint64(placed)
			s.lastChunk = lastChunkOf(c.last, s.stable)
		}
		s.mu.Unlock()
		for _, p := range batch {
			if p.done != nil {
				p.done(err)
			}
		}
		s.signal()
	}
}

// chunk is the messages of a write not yet put: they go to the store as
// one chunk (or more, storage.Txn.PutStreamChunk), a new one at each
// segment's start.
type chunk struct {
	recs       []storage.StreamRecord
	newSegment bool               // recs[0] starts a segment
	last       uint64             // the first offset of the chunk put last
	form       storage.StreamForm // Config.Form
	formed     int                // the most messages of a formed chunk (0: storage's default)
}

// chunkRecords is the most records of a chunk as the offset
// specification last and the stream stats' last_chunk_id count them:
// they name the start of the last such chunk, near the end however large
// the write that made it. A stored chunk is as large as its write (a
// formed chunk as formedLimit allows), since a reader takes a chunk's
// records from any offset in it: what they name is the stored chunk cut
// every chunkRecords from its start (lastChunkOf). A reader sent a
// formed chunk whole from inside it skips the records before its
// offset, as clients do with RabbitMQ's chunks.
const chunkRecords = 256

// formedLimit is the most messages of a formed chunk a stream's next
// write makes, given the last limit and how many messages that write
// held. As RabbitMQ's stream writer (a gen_batch_server) grows its
// batches while ingress is high and shrinks them as it falls, the limit
// doubles after a write that had to be cut at it, up to
// storage.MaxFormedMessages, and halves after one of less than half of
// it, down to storage.FormedMessages: under sustained load a credit
// brings larger chunks, fewer of them (one Deliver, one sendfile, one
// credit each), while a quiet stream's first large batch is still cut at
// storage.FormedMessages (the Go client's Manual Credit Strategy spec
// drains one credit's chunk of a 500-message batch, at 10 ms a message,
// within 3 s).
func formedLimit(limit, wrote int) int {
	switch {
	case wrote > limit:
		return min(2*limit, storage.MaxFormedMessages)
	case 2*wrote < limit:
		return max(limit/2, storage.FormedMessages)
	}
	return limit
}

// lastChunkOf is the start of the last chunk clients see of a stored
// chunk that starts at start and ends before end.
func lastChunkOf(start, end uint64) uint64 {
	if end <= start {
		return start
	}
	return start + (end-1-start)/chunkRecords*chunkRecords
}

// put puts c's messages into tx and empties it.
func (c *chunk) put(tx *storage.Txn, sid uint64) {
	if len(c.recs) > 0 {
		tx.PutStreamChunkOf(sid, c.newSegment, c.recs, c.form, c.formed)
		c.last = c.recs[0].Offset
	}
	c.recs, c.newSegment = c.recs[:0], false
}

// storageMessage is m as the store keeps it.
func storageMessage(m *message.Message) *storage.Message {
	return &storage.Message{Exchange: m.Exchange, RoutingKey: m.RoutingKey, Flags: m.Flags, Props: m.Props, Body: m.Body}
}

// place adds the message at offset to c, growing the last segment or
// starting a new one (the one it leaves is written as it is, and c put, so
// that no chunk crosses a segment's start); placed ends the batch. mu is
// held.
func (s *Stream) place(tx *storage.Txn, c *chunk, offset uint64, ts int64, m *storage.Message) {
	n := len(s.segments)
	if n == 0 || s.segments[n-1].Bytes >= s.cfg.SegmentBytes {
		if n > 0 {
			tx.PutStreamSegment(s.cfg.ID, s.segments[n-1])
		}
		s.segments = append(s.segments, storage.Segment{First: offset, Timestamp: ts})
		n++
		c.put(tx, s.cfg.ID)
		c.newSegment = true
	}
	seg := &s.segments[n-1]
	seg.Last = offset
	seg.Bytes += int64(len(m.Body))
	seg.Count++
	c.recs = append(c.recs, storage.StreamRecord{Offset: offset, Timestamp: ts, Msg: m})
}

// placed ends a batch of place calls: the chunk is put, the last
// segment's record written, and retention applied. mu is held.
func (s *Stream) placed(tx *storage.Txn, c *chunk) {
	c.put(tx, s.cfg.ID)
	if n := len(s.segments); n > 0 {
		tx.PutStreamSegment(s.cfg.ID, s.segments[n-1])
	}
	if cut, ok := s.retain(); ok {
		tx.DeleteStreamBefore(s.cfg.ID, cut)
	}
}

// retain drops the oldest segments while the stream is over
// x-max-length-bytes or they are older than x-max-age (a segment's age
// is its newest message's, which the next segment's first timestamp
// bounds); never the last one, which is being filled. It returns the new
// first offset when it dropped any; mu is held.
func (s *Stream) retain() (uint64, bool) {
	var total int64
	for _, seg := range s.segments {
		total += seg.Bytes
	}
	cutoff := int64(0)
	if s.cfg.MaxAge > 0 {
		cutoff = s.cfg.Now().Add(-s.cfg.MaxAge).UnixMilli()
	}
	dropped := 0
	for len(s.segments)-dropped > 1 {
		seg := s.segments[dropped]
		overSize := s.cfg.MaxBytes > 0 && total > s.cfg.MaxBytes
		tooOld := cutoff != 0 && s.segments[dropped+1].Timestamp < cutoff
		if !overSize && !tooOld {
			break
		}
		total -= seg.Bytes
		dropped++
	}
	if dropped == 0 {
		return 0, false
	}
	s.segments = append(s.segments[:0:0], s.segments[dropped:]...)
	return s.segments[0].First, true
}

// agingEvery is how often a stream checks for segments that aged out of
// x-max-age while nothing was appended.
const agingEvery = 5 * time.Second

// SetRetention changes the stream's retention (a policy changed):
// applied from the next write or age check; a segment size applies to
// the segments started from now on.
func (s *Stream) SetRetention(maxBytes int64, maxAge time.Duration, segmentBytes int64) {
	if segmentBytes <= 0 {
		segmentBytes = DefaultSegmentBytes
	}
	s.mu.Lock()
	s.cfg.MaxBytes, s.cfg.MaxAge, s.cfg.SegmentBytes = maxBytes, maxAge, segmentBytes
	s.mu.Unlock()
}

// expire applies retention when nothing is being written: segments age
// out of x-max-age with no append to trigger it. It holds the writer's
// place (writing) while it deletes, so that the two never race on the
// segment records; appends made meanwhile are written after.
func (s *Stream) expire() {
	s.mu.Lock()
	if s.writing || s.deleted {
		s.mu.Unlock()
		return
	}
	cut, ok := s.retain()
	if !ok {
		s.mu.Unlock()
		return
	}
	if s.log != nil {
		s.settle() // the hole may start below what is retained now
	}
	s.writing = true
	s.mu.Unlock()
	tx := s.cfg.Store.Begin()
	tx.DeleteStreamBefore(s.cfg.ID, cut)
	err := tx.CommitWait()
	s.mu.Lock()
	if err != nil {
		s.failed = err
	}
	s.writing = len(s.pending) > 0
	restart := s.writing
	s.mu.Unlock()
	if restart {
		go s.write()
	}
}

// ID is the stream's id in the store.
func (s *Stream) ID() uint64 { return s.cfg.ID }

// ---- reading

// Offset is where a consumer starts (x-stream-offset).
type Offset struct {
	Kind OffsetKind
	N    uint64    // OffsetAt
	Time time.Time // OffsetTime: the first message appended at or after it
}

// OffsetKind names an Offset's kind.
type OffsetKind uint8

const (
	Next  OffsetKind = iota // what is appended from now on (the default)
	First                   // the oldest message retained
	Last                    // the last batch written (RabbitMQ: the last chunk)
	At                      // an offset: the oldest retained if it is gone, the end if past it
	Time                    // a time: the first message appended at or after it
)

// ParseOffset reads x-stream-offset as RabbitMQ takes it: "first",
// "last", "next", a number, a timestamp, or an interval before now such
// as "1h" or "7D" (units Y, M, D, h, m, s; queue.ParseInterval). A
// negative number is before every message, so the oldest retained, as
// RabbitMQ's streams take it. A refusal is RabbitMQ's reason
// ({invalid_stream_offset_arg,...}).
func ParseOffset(x any, now time.Time) (Offset, error) {
	switch v := x.(type) {
	case nil:
		return Offset{Kind: Next}, nil
	case string:
		switch v {
		case "first":
			return Offset{Kind: First}, nil
		case "last":
			return Offset{Kind: Last}, nil
		case "next":
			return Offset{Kind: Next}, nil
		}
		if d, ok := queue.ParseInterval(v); ok && d > 0 {
			return Offset{Kind: Time, Time: now.Add(-d)}, nil
		}
	case time.Time:
		return Offset{Kind: Time, Time: v}, nil
	case float32, float64:
		// Not an integer however whole; queue.Integer would take it.
	default:
		if n, ok := queue.Integer(x); ok {
			return Offset{Kind: At, N: uint64(max(n, 0))}, nil
		}
	}
	return Offset{}, errors.New(queue.InvalidOffset(x))
}

// Consume attaches a consumer at from; deliveries start after added
// (basic.consume-ok).
func (s *Stream) Consume(c queue.Consumer, from Offset, added func()) error {
	return s.ConsumeFiltered(c, from, nil, added)
}

// ConsumeFiltered is Consume for a consumer that is delivered only the
// messages f wants (an AMQP 0-9-1 consumer's x-stream-filter); the others
// are passed over, spending none of its credit. A nil f wants every one.
func (s *Stream) ConsumeFiltered(c queue.Consumer, from Offset, f *Filter, added func()) error {
	start, err := s.position(from)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted {
		return reply.NotFound("no queue '%s' in vhost '%s'", s.Name, s.VHost)
	}
	if from.Kind == Next {
		start = s.stable
	}
	s.readers[c] = &reader{c: c, pos: start, filter: f}
	if added != nil {
		added()
	}
	s.signal()
	return nil
}

// Position is the offset a consumer starting from would start at now.
func (s *Stream) Position(from Offset) (uint64, error) {
	at, err := s.position(from)
	if err != nil || from.Kind != Next {
		return at, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stable, nil
}

// Bounds are the oldest offset retained, the offset after the last
// readable one, and the first offset of the last batch written (RabbitMQ's
// last chunk); first == end for an empty stream.
func (s *Stream) Bounds() (first, end, lastChunk uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first(), s.stable, max(s.lastChunk, s.first())
}

// position is the offset from names now.
func (s *Stream) position(from Offset) (uint64, error) {
	s.mu.Lock()
	first, end, last := s.first(), s.stable, s.lastChunk
	s.mu.Unlock()
	switch from.Kind {
	case First:
		return first, nil
	case Last:
		return max(last, first), nil
	case At:
		return min(max(from.N, first), end), nil
	case Time:
		return s.search(first, end, from.Time.UnixMilli())
	}
	return end, nil
}

// first is the oldest offset retained; mu is held.
func (s *Stream) first() uint64 {
	if len(s.segments) == 0 {
		return s.next
	}
	return s.segments[0].First
}

// search finds the first offset in [lo, hi) appended at or after ts (hi
// when none was): timestamps grow with offsets, so a binary search over
// offsets reads O(log n) of them.
func (s *Stream) search(lo, hi uint64, ts int64) (uint64, error) {
	for lo < hi {
		mid := lo + (hi-lo)/2
		at, ok, err := s.cfg.Store.StreamTimestamp(s.cfg.ID, mid)
		if err != nil {
			return 0, err
		}
		if !ok || at < ts { // gone to retention, or older
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// Cancel detaches a consumer.
func (s *Stream) Cancel(c queue.Consumer) {
	s.mu.Lock()
	delete(s.readers, c)
	s.mu.Unlock()
}

// Kick resumes deliveries to consumers that were refused one (their
// channel had no credit) and may have room now.
func (s *Stream) Kick() {
	s.mu.Lock()
	for _, r := range s.readers {
		r.blocked = false
	}
	s.mu.Unlock()
	s.signal()
}

// Pull resumes deliveries to c, whose reader made room (a stream-protocol
// credit), as Kick does, and hands it the formed chunks it can take in
// the caller's goroutine: a credit then costs no wake-up of the stream's
// goroutine and no hand-over between threads, as RabbitMQ's connection
// process sends the chunks a credit asks for itself. What it cannot take
// that way (a chunk stored as messages, a filter, records read ahead) is
// left to the stream's goroutine, as is a reader that goroutine is
// serving at the time.
func (s *Stream) Pull(c queue.Consumer) {
	cr, isChunkReader := c.(ChunkReader)
	s.mu.Lock()
	r := s.readers[c]
	if r == nil {
		s.mu.Unlock()
		return
	}
	r.blocked = false
	if !isChunkReader || r.busy || len(r.buf) > 0 || r.filter != nil {
		s.mu.Unlock()
		s.signal()
		return
	}
	r.busy = true
	s.mu.Unlock()
	handOver := false
	for range pullChunks {
		s.mu.Lock()
		stable := s.stable
		due := !r.blocked && r.pos < stable && s.readers[c] == r
		s.mu.Unlock()
		if !due {
			break
		}
		if s.readFormed(r, cr, stable) == ChunkDeclined {
			handOver = true
			break
		}
		cr.RoundDone()
	}
	s.mu.Lock()
	r.busy = false
	// An append or a Kick that came while r was busy left it to this.
	more := handOver || !r.blocked && r.pos < s.stable
	s.mu.Unlock()
	if more {
		s.signal()
	}
}

// pullChunks bounds the chunks one Pull hands over before leaving the
// rest to the stream's goroutine: the caller is a connection's reader.
const pullChunks = 16

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run delivers, woken by appends, new consumers and kicks; with
// x-max-age it also drops what aged out while nothing was appended.
func (s *Stream) run() {
	defer close(s.done)
	aging := time.NewTicker(agingEvery)
	defer aging.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-aging.C:
			s.expire()
			continue
		case <-s.wake:
		}
		if s.deliver() {
			s.signal() // more to read: go round again, letting a stop in
		}
	}
}

// deliver hands each reader what it can take and says whether any has
// more waiting. A reader a Pull is serving is left to it.
func (s *Stream) deliver() (more bool) {
	s.mu.Lock()
	var due []*reader
	for _, r := range s.readers {
		if !r.blocked && !r.busy && r.pos < s.stable {
			r.busy = true
			due = append(due, r)
		}
	}
	stable := s.stable
	s.mu.Unlock()
	if len(due) == 0 {
		clear(s.cache[:]) // the readers are at the end: what they read goes
	}
	for _, r := range due {
		ok := s.serve(r, stable)
		s.mu.Lock()
		r.busy = false
		more = more || ok && !r.blocked && r.pos < s.stable
		s.mu.Unlock()
	}
	return more
}

// serve hands r what it can take up to stable; r is busy. It returns
// false when the store refused the read: r waits for the next append or
// Kick rather than have run go round at once.
func (s *Stream) serve(r *reader, stable uint64) bool {
	if cr, ok := r.c.(ChunkReader); ok && len(r.buf) == 0 && r.filter == nil {
		// A formed chunk goes from its file as it is, unread.
		if read := s.readFormed(r, cr, stable); read != ChunkDeclined {
			cr.RoundDone()
			return true
		}
	}
	if len(r.buf) == 0 {
		if err := s.readAt(r, stable); err != nil {
			if r.failedAt != r.pos+1 {
				r.failedAt = r.pos + 1
				s.cfg.Log.Error().Err(err).Str("queue", s.Name).Str("vhost", s.VHost).Uint64("offset", r.pos).
					Msg("a stream reader cannot read on: the store refused")
			}
			return false // it waits; a write to the store would fail too
		}
	}
	rd, isReader := r.c.(Reader)
	s.mu.Lock()
	if s.readers[r.c] == r {
		for len(r.buf) > 0 {
			e := r.buf[0]
			var took bool
			if r.filter != nil && !r.filter.Wants(e.m) {
				took = true // passed over
			} else if isReader {
				took = rd.Read(e.offset, e.ts, e.m)
			} else {
				took = r.c.Deliver(queue.Delivery{Entry: queue.Entry{Msg: withOffset(forAMQP091(e.m), e.offset), Seq: e.offset}})
			}
			if !took {
				r.blocked = true
				break
			}
			r.buf = r.buf[1:] // shared with other readers (readAt): left as it is
			r.pos = e.offset + 1
		}
	}
	s.mu.Unlock()
	if isReader {
		rd.RoundDone()
	}
	return true
}

// readFormed offers cr the chunk holding r.pos (or the first after it)
// as it lies in its file, when it is formed and readable whole.
func (s *Stream) readFormed(r *reader, cr ChunkReader, stable uint64) ChunkRead {
	fc, ok, err := s.cfg.Store.StreamFormed(s.cfg.ID, r.pos)
	if err != nil || !ok {
		return ChunkDeclined // the messages' read reports an error
	}
	end := fc.First + uint64(fc.Count)
	if end > stable || end <= r.pos {
		fc.Release()
		return ChunkDeclined
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	read := ChunkDeclined
	if s.readers[r.c] == r {
		read = cr.ReadFormed(fc, max(r.pos, fc.First))
	}
	switch read {
	case ChunkTaken:
		r.pos = end
	case ChunkRefused:
		r.blocked = true
		fc.Release()
	default:
		fc.Release()
	}
	return read
}

// readAt fills r.buf from r.pos, up to stable, with the chunk holding
// r.pos; a reader whose offset retention dropped moves on to the oldest
// retained. Readers at the same place share the chunk, read once
// (s.cache): r.buf is read only.
func (s *Stream) readAt(r *reader, stable uint64) error {
	c, err := s.chunkAt(r.pos)
	if err != nil || len(c) == 0 || c[0].offset >= stable {
		return err
	}
	i, j := 0, len(c)
	if r.pos > c[0].offset {
		i = int(r.pos - c[0].offset)
	}
	if c[j-1].offset >= stable {
		j = int(stable - c[0].offset)
	}
	r.buf = c[i:j:j]
	return nil
}

// chunkCache is how many chunks the delivering goroutine keeps for the
// readers that follow.
const chunkCache = 4

// chunkAt is the chunk holding offset (or the first after it): from
// s.cache, or read from the store into it. run's goroutine only.
func (s *Stream) chunkAt(offset uint64) ([]entry, error) {
	for _, c := range s.cache {
		if len(c) > 0 && c[0].offset <= offset && offset <= c[len(c)-1].offset {
			return c, nil
		}
	}
	recs, err := s.cfg.Store.StreamChunk(s.cfg.ID, offset)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	c := make([]entry, 0, len(recs))
	for _, rec := range recs {
		m := rec.Msg
		msg, err := message.New(m.Exchange, m.RoutingKey, m.Flags, m.Props, m.Body)
		if err != nil {
			return nil, fmt.Errorf("stream %q in vhost %q, offset %d: %w", s.Name, s.VHost, rec.Offset, err)
		}
		c = append(c, entry{offset: rec.Offset, ts: rec.Timestamp, m: msg})
	}
	s.cache[s.cacheNext] = c
	s.cacheNext = (s.cacheNext + 1) % chunkCache
	return c, nil
}

// withOffset is m with the x-stream-offset header a stream's deliveries
// carry.
func withOffset(m *message.Message, offset uint64) *message.Message {
	return m.WithHeader("x-stream-offset", int64(offset))
}

// Settling a delivery only frees the channel's credit: a stream keeps
// every message until retention drops it.
func (s *Stream) Ack([]queue.Entry)     {}
func (s *Stream) Requeue([]queue.Entry) {}
func (s *Stream) Reject([]queue.Entry)  {}

// ---- the stream as a whole

// Stats are the stream's figures: the messages retained and their bytes,
// and its consumers.
func (s *Stream) Stats() queue.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var bytes int64
	for _, seg := range s.segments {
		bytes += seg.Bytes
	}
	return queue.Stats{Ready: int(s.stable - s.first()), ReadyBytes: bytes, Consumers: len(s.readers)}
}

// OnDelete has fn called, without the stream's lock, when the stream is
// deleted (a stream-protocol publisher is told so, as a consumer is by
// Cancelled); the function it returns stops that.
func (s *Stream) OnDelete(fn func()) (stop func()) {
	key := &fn
	s.mu.Lock()
	if s.onDelete == nil {
		s.onDelete = map[*func()]struct{}{}
	}
	s.onDelete[key] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.onDelete, key)
		s.mu.Unlock()
	}
}

// Segments is a copy of the stream's segment records.
func (s *Stream) Segments() []storage.Segment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]storage.Segment(nil), s.segments...)
}

// Close stops the stream's goroutines (the broker stopping); what was
// appended and not synced is answered with an error.
func (s *Stream) Close() {
	s.mu.Lock()
	if s.deleted {
		s.mu.Unlock()
		return
	}
	s.deleted = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
}

// Delete closes the stream, tells its consumers, and deletes what the
// store holds of it.
func (s *Stream) Delete() error {
	s.mu.Lock()
	readers := s.readers
	s.readers = map[queue.Consumer]*reader{}
	watchers := s.onDelete
	s.onDelete = nil
	s.mu.Unlock()
	s.Close()
	for c := range readers {
		c.Cancelled()
	}
	for fn := range watchers {
		(*fn)()
	}
	tx := s.cfg.Store.Begin()
	tx.DeleteStream(s.cfg.ID)
	return tx.CommitWait()
}

// Formed is a formed chunk in its file, as a ChunkReader takes it.
type Formed = storage.FormedChunk
