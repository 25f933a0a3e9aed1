package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Stream files keep streams' messages outside Pebble, as RabbitMQ's
// streams keep theirs in segment files: a chunk (the messages of one
// write, at consecutive offsets) is written once, to an append-only file
// of its stream, and Pebble holds only its index record (stream.go: where
// the chunk is, its first offset, count and timestamp). Through Pebble
// every message was written twice (the WAL, then a blob file at the
// flush) and compacted, and a key per message cost as much as the bytes.
//
// Each stream has a folder, streams/<sid in hex>, of files named by the
// first offset they may hold: a file holds chunks whose offsets lie in
// [its name, the next file's name), so the files partition the stream's
// offsets and a chunk never crosses from one into the next. A new file is
// started at the end of the stream when its writer starts a segment (so
// retention, which drops whole segments, frees whole files) or the last
// file passed maxStreamFileBytes.
//
// How a chunk travels, as a logged body does (bodylog.go):
//
//  1. Txn.PutStreamChunk reserves its record's place at the end of the
//     file that covers its offsets (streamLogs.mu, a moment) and puts the
//     index record; the Txn keeps the encoded record as a pending write.
//  2. The committer writes the pending chunks of a batch before applying
//     it to Pebble, creating a file on its first write; before it fsyncs
//     the WAL it fsyncs the files written since their last fsync, and the
//     folders that gained a file. So an index record is never durable
//     before its chunk, and never visible to a read before it.
//  3. DeleteStreamBefore and DeleteStream doom the files wholly below the
//     cut (or all of the stream's): they are deleted once the Txn that
//     dropped their index records is synced, and closed once no reader
//     or pending write uses them.
//
// A chunk record is a header (the payload's CRC-32C and its length, both
// big-endian uint32, then the chunk's first offset, uint64) and the
// payload: for each message its timestamp as a zig-zag varint difference
// from the chunk's first, the length of its encoding as a uvarint, and
// the encoding (putMessage). Reads check the header against the index
// and the CRC; a chunk that does not match is reported with its file and
// position (ErrChunkDamaged), never delivered.
//
// A formed chunk (format 6) is stored in the form its readers take whole,
// which the writer makes (StreamForm: core/stream makes the stream
// protocol's chunk, header and entries, so that a Deliver is that form as
// it is, not rebuilt message by message). Its payload starts with
// formedMarker (a classic payload starts with its first timestamp's
// difference, 0), then the form's length (uint32) and the form, then what
// the form does not hold: the messages' exchange, routing key (uvarint
// length and bytes each) and flags (uint16), which a formed chunk's
// messages share, and for each message its timestamp's difference from
// the first (zig-zag varint), its properties (uvarint length and bytes),
// and where its body is in the form (uvarint position and length).
//
// Open loads every stream's files: a file that no index record points
// into (its chunks' writes outlived their Txn in a crash, or it was
// doomed and not yet deleted) is deleted, as is a folder left with none.
// A file's tail past its last indexed chunk is left as it is: new chunks
// are written after it.
type streamLogs struct {
	fs  vfs.FS
	dir string

	mu      lockorder.Mutex[lockorder.StorageStreamLogs]
	streams map[uint64]*streamLog
	// deleted are the streams deleted in this run: a read that finds no
	// files of a stream not among them finds damage.
	deleted map[uint64]bool
	madeDir bool
	// unsynced are the files written since their last fsync.
	unsynced []*streamFile
	// dirsUnsynced are the folders that gained an entry since their last
	// fsync.
	dirsUnsynced map[string]struct{}
	// doomed are files, and streams, whose index records a committed Txn
	// dropped: deleted once that Txn is synced.
	doomed []doomedFiles

	bytes  atomic.Int64 // reserved in stream files
	writes atomic.Uint64

	// buffers recycles chunk records once written (*[]byte): a record
	// is up to maxChunkBytes, and a fresh one is zeroed and collected
	// later, which cost a publishing broker a tenth of its CPU.
	buffers sync.Pool
}

// buffer is an empty slice of at least n bytes' capacity, recycled when
// one is at hand.
func (l *streamLogs) buffer(n int) []byte {
	if p, ok := l.buffers.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// recycle hands b back for a later record; nothing may use it after.
func (l *streamLogs) recycle(b []byte) {
	if cap(b) > 2*maxChunkBytes {
		return
	}
	b = b[:0]
	l.buffers.Put(&b)
}

type streamLog struct {
	sid   uint64
	dir   string
	files []*streamFile // by first offset
	// goneBelow: every offset below it was dropped by retention, so a read
	// that finds its file deleted has raced retention, not damage.
	goneBelow uint64
}

type streamFile struct {
	first uint64
	name  string
	f     vfs.File // nil until the committer writes the file's first chunk
	size  int64    // reserved up to here: the next record's position
	last  uint64   // the highest offset placed in it; valid when used
	used  bool
	// refs counts the readers and pending writes using f: a doomed file
	// is closed when the last one lets go.
	refs     int
	doomed   bool
	removed  bool
	unsynced bool
}

type doomedFiles struct {
	seq   uint64
	log   *streamLog
	files []*streamFile
	whole bool // the stream is deleted: its folder goes too
}

const (
	streamDirName      = "streams"
	streamFileSuffix   = ".chunks"
	chunkHeaderLen     = 16
	maxStreamFileBytes = 1 << 30
)

// ErrChunkDamaged is a stream chunk whose record does not match its index
// record: missing, short, or failing its checksum.
var ErrChunkDamaged = errors.New("storage: stream file damaged")

func (l *streamLogs) init(fs vfs.FS, dataDir string) {
	l.fs, l.dir = fs, fs.PathJoin(dataDir, streamDirName)
	l.streams = make(map[uint64]*streamLog)
	l.deleted = make(map[uint64]bool)
	l.dirsUnsynced = make(map[string]struct{})
}

func streamDirFor(sid uint64) string { return fmt.Sprintf("%016x", sid) }

func streamFileName(first uint64) string { return fmt.Sprintf("%020d%s", first, streamFileSuffix) }

// open loads the streams' files an earlier run left, deleting those no
// index record points into; db holds the index (Open calls it before the
// committer starts).
func (l *streamLogs) open(db *pebble.DB) error {
	dirs, err := l.fs.List(l.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("storage: stream folder %s: %w", l.dir, err)
	}
	l.madeDir = true
	slices.Sort(dirs)
	for _, d := range dirs {
		sid, err := strconv.ParseUint(d, 16, 64)
		if err != nil || len(d) != 16 {
			continue
		}
		if err := l.openStream(db, sid); err != nil {
			return err
		}
	}
	return nil
}

func (l *streamLogs) openStream(db *pebble.DB, sid uint64) error {
	sl := &streamLog{sid: sid, dir: l.fs.PathJoin(l.dir, streamDirFor(sid))}
	names, err := l.fs.List(sl.dir)
	if err != nil {
		return fmt.Errorf("storage: stream folder %s: %w", sl.dir, err)
	}
	var firsts []uint64
	for _, n := range names {
		s, ok := strings.CutSuffix(n, streamFileSuffix)
		if !ok {
			continue
		}
		first, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			continue
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	for i, first := range firsts {
		end := uint64(math.MaxUint64)
		if i+1 < len(firsts) {
			end = firsts[i+1]
		}
		name := l.fs.PathJoin(sl.dir, streamFileName(first))
		c, ok, err := lastChunkBelow(db, sid, end)
		if err != nil {
			return err
		}
		if !ok || c.first < first || c.file != first {
			// No index record points into it: its chunks' Txn never
			// committed, or retention dropped them before a crash.
			if err := l.fs.Remove(name); err != nil {
				return fmt.Errorf("storage: deleting stream file %s nothing refers to: %w", name, err)
			}
			continue
		}
		f, err := l.fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("storage: stream file %s: %w", name, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("storage: stream file %s: %w", name, err)
		}
		sf := &streamFile{first: first, name: name, f: f, size: fi.Size(), last: c.first + uint64(c.count) - 1, used: true}
		if end := c.pos + chunkHeaderLen + int64(c.length); sf.size < end {
			// Reads of the chunks past the end say so by name; new chunks
			// go after the indexed ones.
			sf.size = end
		}
		sl.files = append(sl.files, sf)
		l.bytes.Add(sf.size)
	}
	if len(sl.files) == 0 {
		if err := l.fs.RemoveAll(sl.dir); err != nil {
			return fmt.Errorf("storage: deleting stream folder %s nothing refers to: %w", sl.dir, err)
		}
		return nil
	}
	l.streams[sid] = sl
	return nil
}

// lastChunkBelow reads the index record of the last chunk of sid whose
// first offset is below end.
func lastChunkBelow(db *pebble.DB, sid, end uint64) (chunkIndex, bool, error) {
	lo := streamKey(sid, streamChunk, 0)
	hi := streamKey(sid, streamChunk, end)
	if end == math.MaxUint64 {
		hi = prefixEnd(lo[:10])
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return chunkIndex{}, false, err
	}
	defer it.Close()
	if !it.Last() {
		return chunkIndex{}, false, it.Error()
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return chunkIndex{}, false, err
	}
	c, err := parseChunkIndex(it.Key(), v)
	return c, err == nil, err
}

// fileEnd is where the file a chunk starting at first goes to ends: the
// next file's first offset (math.MaxUint64: there is none). A chunk
// reaching it is split there. One goroutine writes a stream's chunks at a
// time (its writer, or its replica's apply), so it holds until place.
func (l *streamLogs) fileEnd(sid, first uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.streams[sid]
	if sl == nil {
		return math.MaxUint64
	}
	if i := sl.cover(first) + 1; i < len(sl.files) {
		return sl.files[i].first
	}
	return math.MaxUint64
}

// place reserves room for a chunk record of n bytes holding offsets
// first..last in sid's file that covers them, starting a new file at
// first when none covers it, or when the stream's last file is left
// behind (newSegment, or it is full). It returns the file, with a
// reference the write lets go of, and the record's position.
func (l *streamLogs) place(sid, first, last uint64, newSegment bool, n int) (*streamFile, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.streams[sid]
	if sl == nil {
		sl = &streamLog{sid: sid, dir: l.fs.PathJoin(l.dir, streamDirFor(sid))}
		l.streams[sid] = sl
	}
	i := sl.cover(first)
	start := i < 0
	if !start && i == len(sl.files)-1 {
		f := sl.files[i]
		start = f.first < first && (!f.used || f.last < first) && (newSegment || f.size >= maxStreamFileBytes)
	}
	if start {
		i++
		sl.files = slices.Insert(sl.files, i, &streamFile{first: first, name: l.fs.PathJoin(sl.dir, streamFileName(first))})
	}
	sf := sl.files[i]
	pos := sf.size
	sf.size += int64(n)
	sf.refs++
	if !sf.used || last > sf.last {
		sf.last = last
	}
	sf.used = true
	l.bytes.Add(int64(n))
	return sf, pos
}

// cover is the index of the file covering offset (the last whose first is
// at or below it), -1 when none is; l.mu is held.
func (sl *streamLog) cover(offset uint64) int {
	i, found := slices.BinarySearchFunc(sl.files, offset, func(f *streamFile, o uint64) int {
		switch {
		case f.first < o:
			return -1
		case f.first > o:
			return 1
		}
		return 0
	})
	if found {
		return i
	}
	return i - 1
}

// pendingChunk is a chunk record not written yet: the Txn that put its
// index record made it; the committer writes it before applying its batch.
type pendingChunk struct {
	file *streamFile
	pos  int64
	rec  []byte
}

// write writes the records of run, pending chunks of one file placed one
// after the other, with one write (a replica applies a chunk per Raft
// entry: over AMQP, one message each), creating the file (and folders)
// first when it is new; then lets go of their references.
func (l *streamLogs) write(run []*pendingChunk) error {
	sf := run[0].file
	defer func() {
		for _, p := range run {
			l.release(p.file)
		}
	}()
	l.mu.Lock()
	f, err := l.createLocked(sf)
	if err == nil {
		if !sf.unsynced {
			sf.unsynced = true
			l.unsynced = append(l.unsynced, sf)
		}
	}
	l.mu.Unlock()
	if err != nil {
		return err
	}
	b := run[0].rec
	if len(run) > 1 {
		n := 0
		for _, p := range run {
			n += len(p.rec)
		}
		b = l.buffer(n)
		for _, p := range run {
			b = append(b, p.rec...)
		}
		defer l.recycle(b)
	}
	defer func() {
		for _, p := range run {
			l.recycle(p.rec)
			p.rec = nil
		}
	}()
	if _, err := f.WriteAt(b, run[0].pos); err != nil {
		return fmt.Errorf("storage: stream file %s: %w", sf.name, err)
	}
	l.writes.Add(uint64(len(run)))
	return nil
}

// contiguous reports whether q's record comes right after p's in the same
// file.
func contiguous(p, q *pendingChunk) bool {
	return p.file == q.file && p.pos+int64(len(p.rec)) == q.pos
}

// createLocked returns sf's file, creating it (and its folders) when it
// has none yet; l.mu is held.
func (l *streamLogs) createLocked(sf *streamFile) (vfs.File, error) {
	if sf.f != nil {
		return sf.f, nil
	}
	if sf.removed {
		return nil, fmt.Errorf("storage: stream file %s was deleted before its first write", sf.name)
	}
	dir := l.fs.PathDir(sf.name)
	if !l.madeDir {
		if _, err := l.fs.Stat(l.dir); err != nil {
			if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
				return nil, fmt.Errorf("storage: stream folder %s: %w", l.dir, err)
			}
			l.dirsUnsynced[l.fs.PathDir(l.dir)] = struct{}{}
		}
		l.madeDir = true
	}
	if _, err := l.fs.Stat(dir); err != nil {
		if err := l.fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("storage: stream folder %s: %w", dir, err)
		}
		l.dirsUnsynced[l.dir] = struct{}{}
	}
	f, err := l.fs.Create(sf.name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("storage: stream file %s: %w", sf.name, err)
	}
	sf.f = f
	l.dirsUnsynced[dir] = struct{}{}
	return f, nil
}

// release lets go of a reference to sf, closing it if it was removed and
// this was the last.
func (l *streamLogs) release(sf *streamFile) {
	l.mu.Lock()
	sf.refs--
	closeIt := sf.removed && sf.refs == 0 && sf.f != nil
	f := sf.f
	if closeIt {
		sf.f = nil
	}
	l.mu.Unlock()
	if closeIt {
		f.Close()
	}
}

// sync fsyncs the files written since their last fsync, then the folders
// that gained one. The committer calls it before an fsync of the WAL.
func (l *streamLogs) sync() error {
	l.mu.Lock()
	var files []*streamFile
	for _, sf := range l.unsynced {
		sf.unsynced = false
		if sf.f != nil {
			sf.refs++
			files = append(files, sf)
		}
	}
	clear(l.unsynced)
	l.unsynced = l.unsynced[:0]
	var dirs []string
	for d := range l.dirsUnsynced {
		dirs = append(dirs, d)
	}
	clear(l.dirsUnsynced)
	l.mu.Unlock()
	var err error
	for _, sf := range files {
		if serr := sf.f.SyncData(); serr != nil && err == nil {
			err = fmt.Errorf("storage: stream file %s: %w", sf.name, serr)
		}
		l.release(sf)
	}
	if err != nil {
		return err
	}
	// Longer paths first: a stream's folder before the one holding it.
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, dir := range dirs {
		d, err := l.fs.OpenDir(dir)
		if err == nil {
			err = d.Sync()
			d.Close()
		}
		if err != nil {
			return fmt.Errorf("storage: stream folder %s: %w", dir, err)
		}
	}
	return nil
}

// doom marks for deletion, once the Txn of commit seq seq is synced, the
// files of sid wholly below cut, or all of them (whole: the stream is
// deleted). The committer calls it as it takes the Txn.
func (l *streamLogs) doom(sid, cut uint64, whole bool, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.streams[sid]
	if sl == nil {
		return
	}
	d := doomedFiles{seq: seq, log: sl, whole: whole}
	for i, sf := range sl.files {
		below := i+1 < len(sl.files) && sl.files[i+1].first <= cut
		if (whole || below) && !sf.doomed {
			sf.doomed = true
			d.files = append(d.files, sf)
		}
	}
	if whole {
		sl.goneBelow = math.MaxUint64
		delete(l.streams, sid) // a new stream never has its id
		l.deleted[sid] = true
	} else {
		sl.goneBelow = max(sl.goneBelow, cut)
	}
	if len(d.files) > 0 || whole {
		l.doomed = append(l.doomed, d)
	}
}

// deleteSynced deletes the doomed files whose Txn is at or before seq,
// which the committer has applied and synced.
func (l *streamLogs) deleteSynced(seq uint64) []error {
	l.mu.Lock()
	if len(l.doomed) == 0 || l.doomed[0].seq > seq {
		l.mu.Unlock()
		return nil
	}
	var due []doomedFiles
	for len(l.doomed) > 0 && l.doomed[0].seq <= seq {
		d := l.doomed[0]
		l.doomed = l.doomed[1:]
		due = append(due, d)
		for _, sf := range d.files {
			sf.removed = true
			if i := slices.Index(d.log.files, sf); i >= 0 {
				d.log.files = slices.Delete(d.log.files, i, i+1)
			}
			l.bytes.Add(-sf.size)
		}
	}
	var closing []vfs.File
	for _, d := range due {
		for _, sf := range d.files {
			if sf.refs == 0 && sf.f != nil {
				closing = append(closing, sf.f)
				sf.f = nil
			}
		}
	}
	l.mu.Unlock()
	for _, f := range closing {
		f.Close()
	}
	var errs []error
	for _, d := range due {
		for _, sf := range d.files {
			if err := l.fs.Remove(sf.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("storage: deleting stream file %s: %w", sf.name, err))
			}
		}
		if d.whole {
			if err := l.fs.RemoveAll(d.log.dir); err != nil {
				errs = append(errs, fmt.Errorf("storage: deleting stream folder %s: %w", d.log.dir, err))
			}
		}
	}
	return errs
}

// remove deletes sid's files at once: Recover, for a stream whose queue
// is gone, after its records' deletion is synced.
func (l *streamLogs) remove(sid uint64) error {
	l.mu.Lock()
	sl := l.streams[sid]
	delete(l.streams, sid)
	l.deleted[sid] = true
	if sl != nil {
		for _, sf := range sl.files {
			sf.removed = true
			l.bytes.Add(-sf.size)
			if sf.f != nil && sf.refs == 0 {
				sf.f.Close()
				sf.f = nil
			}
		}
	}
	l.mu.Unlock()
	if err := l.fs.RemoveAll(l.fs.PathJoin(l.dir, streamDirFor(sid))); err != nil {
		return fmt.Errorf("storage: deleting stream folder %s: %w", l.fs.PathJoin(l.dir, streamDirFor(sid)), err)
	}
	return nil
}

// acquire returns sid's file named first with a reference for a read
// (release lets go of it); gone says it was deleted by retention or the
// stream's deletion after the reader found its chunk.
func (l *streamLogs) acquire(sid, first, chunkFirst uint64) (sf *streamFile, gone bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sl := l.streams[sid]; sl != nil {
		if i := sl.cover(first); i >= 0 && sl.files[i].first == first && sl.files[i].f != nil {
			sf = sl.files[i]
			sf.refs++
			return sf, false, nil
		}
		if chunkFirst < sl.goneBelow {
			return nil, true, nil
		}
	} else if l.deleted[sid] {
		return nil, true, nil
	}
	return nil, false, fmt.Errorf("%w: stream file %s is missing (the chunk at offset %d)", ErrChunkDamaged,
		l.fs.PathJoin(l.dir, streamDirFor(sid), streamFileName(first)), chunkFirst)
}

// readChunk reads the chunk c of sid: its payload, checked against its
// header and CRC. gone says retention deleted it meanwhile.
func (l *streamLogs) readChunk(sid uint64, c chunkIndex) (payload []byte, gone bool, err error) {
	sf, gone, err := l.acquire(sid, c.file, c.first)
	if err != nil || gone {
		return nil, gone, err
	}
	defer l.release(sf)
	rec := make([]byte, chunkHeaderLen+int(c.length))
	if err := readFull(sf.f, rec, c.pos); err != nil {
		return nil, false, chunkDamaged(sf, c, err.Error())
	}
	if n := binary.BigEndian.Uint32(rec[4:]); n != c.length {
		return nil, false, chunkDamaged(sf, c, fmt.Sprintf("its header says %d bytes, its index %d", n, c.length))
	}
	if o := binary.BigEndian.Uint64(rec[8:]); o != c.first {
		return nil, false, chunkDamaged(sf, c, fmt.Sprintf("its header says offset %d", o))
	}
	payload = rec[chunkHeaderLen:]
	if crc32.Checksum(payload, crc32c) != binary.BigEndian.Uint32(rec) {
		return nil, false, chunkDamaged(sf, c, "checksum mismatch")
	}
	return payload, false, nil
}

func chunkDamaged(sf *streamFile, c chunkIndex, why string) error {
	return fmt.Errorf("%w: %s, the chunk of offsets %d..%d at byte %d: %s", ErrChunkDamaged, sf.name,
		c.first, c.first+uint64(c.count)-1, c.pos, why)
}

// close closes every file.
func (l *streamLogs) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sl := range l.streams {
		for _, sf := range sl.files {
			if sf.f != nil {
				sf.f.Close()
				sf.f = nil
			}
		}
	}
	for _, d := range l.doomed {
		for _, sf := range d.files {
			if sf.f != nil {
				sf.f.Close()
				sf.f = nil
			}
		}
	}
}

// files lists sid's file names in offset order, for tests and Dump.
func (l *streamLogs) files(sid uint64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	if sl := l.streams[sid]; sl != nil {
		for _, sf := range sl.files {
			out = append(out, sf.name)
		}
	}
	return out
}

// ---- chunk encoding

// StreamRecord is a stream's message with its offset and timestamp (unix
// ms).
type StreamRecord struct {
	Offset    uint64
	Timestamp int64
	Msg       *Message
}

// StreamForm appends to dst the form recs are stored in (a formed chunk:
// see the package doc), setting bodies[i] to where recs[i]'s body starts
// in what it appended, each body as it is; ok false: recs have no form,
// and the chunk is stored as any other.
type StreamForm func(dst []byte, recs []StreamRecord, bodies []int) (out []byte, ok bool)

// formedMarker is a formed chunk payload's first byte; formedPrefixLen
// is the payload before its form (the marker and the form's length), and
// formedAt where the form starts in its record.
const (
	formedMarker    = 0xfe
	formedPrefixLen = 1 + 4
	formedAt        = chunkHeaderLen + formedPrefixLen
)

// uniform says whether recs share their exchange, routing key and flags,
// as a formed chunk's messages must.
func uniform(recs []StreamRecord) bool {
	m0 := recs[0].Msg
	for _, r := range recs[1:] {
		if m := r.Msg; m.Exchange != m0.Exchange || m.RoutingKey != m0.RoutingKey || m.Flags != m0.Flags {
			return false
		}
	}
	return true
}

// encodeFormedChunk is the record of recs in the form form makes of
// them; nil when form declines.
func (l *streamLogs) encodeFormedChunk(recs []StreamRecord, form StreamForm) []byte {
	m0 := recs[0].Msg
	n := chunkHeaderLen + 1 + 4 + 2*binary.MaxVarintLen64 + len(m0.Exchange) + len(m0.RoutingKey) + 2
	for i := range recs {
		m := recs[i].Msg
		n += 5*binary.MaxVarintLen64 + 64 + len(m.Props) + len(m.Body)
	}
	b := append(l.buffer(n)[:chunkHeaderLen], formedMarker, 0, 0, 0, 0)
	start := len(b)
	bodies := make([]int, len(recs))
	b, ok := form(b, recs, bodies)
	if !ok {
		l.recycle(b)
		return nil
	}
	binary.BigEndian.PutUint32(b[start-4:], uint32(len(b)-start))
	b = appendBytes(b, m0.Exchange)
	b = appendBytes(b, m0.RoutingKey)
	b = binary.BigEndian.AppendUint16(b, m0.Flags)
	base := recs[0].Timestamp
	for i := range recs {
		m := recs[i].Msg
		b = binary.AppendVarint(b, recs[i].Timestamp-base)
		b = appendBytes(b, m.Props)
		b = binary.AppendUvarint(b, uint64(bodies[i]))
		b = binary.AppendUvarint(b, uint64(len(m.Body)))
	}
	payload := b[chunkHeaderLen:]
	binary.BigEndian.PutUint32(b, crc32.Checksum(payload, crc32c))
	binary.BigEndian.PutUint32(b[4:], uint32(len(payload)))
	binary.BigEndian.PutUint64(b[8:], recs[0].Offset)
	return b
}

func appendBytes[T string | []byte](b []byte, s T) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// formOf is a formed chunk payload's form, nil for any other (or one too
// short to hold its form: decodeChunk reports it).
func formOf(payload []byte) []byte {
	if len(payload) < formedPrefixLen || payload[0] != formedMarker {
		return nil
	}
	n := uint64(binary.BigEndian.Uint32(payload[1:]))
	if n > uint64(len(payload)-formedPrefixLen) {
		return nil
	}
	return payload[formedPrefixLen : formedPrefixLen+n : formedPrefixLen+n]
}

// encodeChunk is the record of recs (consecutive offsets): header, then
// payload, in a recycled buffer when one is at hand (buffer).
func (l *streamLogs) encodeChunk(recs []StreamRecord) []byte {
	n := chunkHeaderLen
	for i := range recs {
		n += 2*binary.MaxVarintLen64 + messageLen(recs[i].Msg)
	}
	b := l.buffer(n)[:chunkHeaderLen]
	base := recs[0].Timestamp
	for i := range recs {
		m := recs[i].Msg
		b = binary.AppendVarint(b, recs[i].Timestamp-base)
		ml := messageLen(m)
		b = binary.AppendUvarint(b, uint64(ml))
		at := len(b)
		b = b[:at+ml]
		putMessage(b[at:], m)
	}
	payload := b[chunkHeaderLen:]
	binary.BigEndian.PutUint32(b, crc32.Checksum(payload, crc32c))
	binary.BigEndian.PutUint32(b[4:], uint32(len(payload)))
	binary.BigEndian.PutUint64(b[8:], recs[0].Offset)
	return b
}

// decodeChunk calls fn with each message of c's payload from offset from
// on, until fn returns false; the messages alias payload.
func decodeChunk(c chunkIndex, payload []byte, from uint64, fn func(offset uint64, ts int64, m *Message) bool) error {
	if len(payload) > 0 && payload[0] == formedMarker {
		return decodeFormedChunk(c, payload, from, fn)
	}
	b := payload
	for i := uint32(0); i < c.count; i++ {
		d, k := binary.Varint(b)
		if k <= 0 {
			return fmt.Errorf("%w: the chunk at offset %d: a bad timestamp", ErrChunkDamaged, c.first)
		}
		b = b[k:]
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return fmt.Errorf("%w: the chunk at offset %d: a bad length", ErrChunkDamaged, c.first)
		}
		enc := b[k : k+int(n)]
		b = b[k+int(n):]
		offset := c.first + uint64(i)
		if offset < from {
			continue
		}
		m := new(Message)
		if err := decodeMessage(enc, m); err != nil {
			return fmt.Errorf("storage: stream message %d: %w", offset, err)
		}
		if !fn(offset, c.ts+d, m) {
			return nil
		}
	}
	return nil
}

// decodeFormedChunk is decodeChunk for a formed chunk: each message's
// body aliases the form, the rest the payload.
func decodeFormedChunk(c chunkIndex, payload []byte, from uint64, fn func(offset uint64, ts int64, m *Message) bool) error {
	bad := func(what string) error {
		return fmt.Errorf("%w: the formed chunk at offset %d: %s", ErrChunkDamaged, c.first, what)
	}
	form := formOf(payload)
	if form == nil {
		return bad("its form's length")
	}
	b := payload[formedPrefixLen+len(form):]
	exchange, b, ok1 := readBytes(b)
	routingKey, b, ok2 := readBytes(b)
	if !ok1 || !ok2 || len(b) < 2 {
		return bad("its exchange, routing key or flags")
	}
	flags := binary.BigEndian.Uint16(b)
	b = b[2:]
	ex, rk := string(exchange), string(routingKey)
	msgs := make([]Message, c.count)
	for i := uint32(0); i < c.count; i++ {
		d, k := binary.Varint(b)
		if k <= 0 {
			return bad("a timestamp")
		}
		props, rest, ok := readBytes(b[k:])
		if !ok {
			return bad("a message's properties")
		}
		at, k1 := binary.Uvarint(rest)
		n, k2 := binary.Uvarint(rest[max(k1, 0):])
		if k1 <= 0 || k2 <= 0 || at > uint64(len(form)) || n > uint64(len(form))-at {
			return bad("a body's place")
		}
		b = rest[k1+k2:]
		offset := c.first + uint64(i)
		if offset < from {
			continue
		}
		m := &msgs[i]
		*m = Message{Exchange: ex, RoutingKey: rk, Flags: flags, Body: form[at : at+n : at+n]}
		if len(props) > 0 {
			m.Props = props
		}
		if !fn(offset, c.ts+d, m) {
			return nil
		}
	}
	return nil
}

// readBytes reads appendBytes's encoding from the front of b.
func readBytes(b []byte) (v, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n) : k+int(n)], b[k+int(n):], true
}
