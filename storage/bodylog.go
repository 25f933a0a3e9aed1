package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The body log keeps the large bodies of persistent inline entries outside
// Pebble: written once, to append-only segment files in the data
// directory's bodies folder, while the entry in the queue index (flag
// entryLogged) says where. Through Pebble a 1 MiB body was written twice
// (the WAL, then a blob file at the flush) and copied about six times; a
// body of half a memtable or more was flushed on its own at once even when
// its ack followed a millisecond later. Here a body costs one write, or
// none when its entry is deleted before its batch is applied (a persistent
// message consumed and acked on its queue before its write: RabbitMQ's
// "confirmed when persisted or when consumed on every queue").
//
// How a body travels:
//
//  1. PutEntry reserves its record's place at the end of the active segment
//     (bodyLog.mu, a moment) and encodes the entry with that place; the
//     Txn keeps the body, and a hold on it (Message.Keep), as a pending
//     write.
//  2. Commit hangs the pending write on the open commit batch and records
//     the entry in the committer's index of logged entries (c.logged).
//     A DeleteEntry or DeleteQueue committed into that same open batch
//     cancels the write: the entry's put and its delete land in one Pebble
//     batch, so no crash can leave the entry without its body.
//  3. The committer, before applying a batch to Pebble, writes its pending
//     bodies that were not cancelled and lets go of their holds; when it
//     fsyncs the WAL it first fsyncs the segments written since the last
//     fsync (and the folder, after a new segment). So an entry is never
//     durable before its body, and is never visible to a read before it.
//
// A record is an 8-byte header, the body's CRC-32C and its length (both
// big-endian uint32), then the body. Reads check both; a record that does
// not match is reported with its file and offset (ErrBodyDamaged), never
// delivered.
//
// Each segment counts its live bodies: reserved, and not yet deleted by a
// committed Txn. A segment other than the active one with none left is
// deleted once the batch holding its last delete has been fsynced (under
// SyncNever: applied), so a crash cannot bring back an entry whose body is
// gone. A new run never appends to an old segment: its tail may hold
// reservations whose bodies were never written.
//
// Recover checks each logged entry's record header (its file exists, is
// long enough, and the header's length matches), deletes the entries that
// fail with an error naming the segment, counts the rest, and deletes the
// segments nothing refers to.
type bodyLog struct {
	fs  vfs.FS
	dir string
	min int // the smallest body logged; 0: none is

	mu      lockorder.Mutex[lockorder.StorageBodyLog]
	segSize int64
	next    uint32 // the next segment's number
	active  *logSegment
	segs    map[uint32]*logSegment
	madeDir bool // the folder exists
	// counted says Recover has counted the live bodies of the segments an
	// earlier run left: until then none may be deleted.
	counted bool
	// dirUnsynced says a segment was created since the folder was last
	// fsynced.
	dirUnsynced bool

	// floor is the smallest body a logged entry may have: min, or less
	// when Recover found smaller ones; 0: none can be.
	floor atomic.Int64

	bytes  atomic.Int64 // in segment files (reserved)
	bodies atomic.Int64 // live bodies
	writes atomic.Uint64
	// skipped counts bodies whose write was cancelled by their delete.
	skipped atomic.Uint64
}

type logSegment struct {
	num  uint32
	name string
	f    vfs.File
	size int64 // reserved up to here: the next record's offset
	live int
	// lastDel is the commit seq of the last Txn that deleted one of its
	// bodies: the segment may be deleted once that Txn is synced.
	lastDel  uint64
	unsynced bool // written since its last fsync
}

// BodyRef says where a logged body's record is: segment, offset of the
// record, and the body's length (the record is bodyHeaderLen longer).
type BodyRef struct {
	Seg uint32
	Off int64
	Len int
}

// Logged reports whether r refers to a record.
func (r BodyRef) Logged() bool { return r.Len > 0 }

// BodyHolder is what keeps a pooled body from being reused while the
// store still has to write it (core/message's Message: Hold and Release).
type BodyHolder interface {
	Hold()
	Release()
}

// pendingBody is a logged body not yet written: the Txn that put its entry
// made it, the committer writes it before applying its batch.
type pendingBody struct {
	ref   BodyRef
	qid   uint64   // the entry's queue and place,
	pos   entryPos //
	msgID uint64   // or the shared message's id
	body  []byte
	keep  BodyHolder
	// Under c.mu once committed: the batch it is in, whether the
	// committer took that batch, and whether a delete in the same open
	// batch cancelled it.
	batch     *commitBatch
	taken     bool
	cancelled bool
}

// entryPos is an entry's place within its queue.
type entryPos struct {
	prio uint8
	seq  uint64
}

// loggedEntry is the committer's record of a logged entry: where its body
// is, and its pending write until the committer takes it.
type loggedEntry struct {
	ref  BodyRef
	pend *pendingBody
}

const (
	bodyHeaderLen = 8
	// bodyLogSegmentSize is the size past which the body log starts a new
	// segment: a few lingering bodies keep at most this much disk each.
	bodyLogSegmentSize = 64 << 20
	// DefaultBodyLogMin is the smallest body logged when Options leave it
	// at 0 (BENCHMARKS.md, "Large persistent bodies written once").
	DefaultBodyLogMin = 256 << 10
	bodyLogDirName    = "bodies"
	bodyLogSuffix     = ".body"
)

// ErrBodyDamaged is a logged body whose record does not match its entry:
// missing, short, or failing its checksum.
var ErrBodyDamaged = errors.New("storage: body log damaged")

var crc32c = crc32.MakeTable(crc32.Castagnoli)

func (l *bodyLog) init(fs vfs.FS, dataDir string, min int) {
	l.fs, l.dir, l.min = fs, fs.PathJoin(dataDir, bodyLogDirName), min
	l.segSize = bodyLogSegmentSize
	l.floor.Store(int64(min))
	l.segs = make(map[uint32]*logSegment)
	l.next = 1
}

func segmentName(num uint32) string { return fmt.Sprintf("%08d%s", num, bodyLogSuffix) }

// open finds the segments an earlier run left, for Recover to check, and
// numbers new ones after them.
func (l *bodyLog) open() error {
	names, err := l.fs.List(l.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("storage: body log folder %s: %w", l.dir, err)
	}
	l.madeDir = true
	slices.Sort(names)
	for _, n := range names {
		num, ok := parseSegmentName(n)
		if !ok {
			continue
		}
		name := l.fs.PathJoin(l.dir, n)
		f, err := l.fs.Open(name)
		if err != nil {
			return fmt.Errorf("storage: body log segment %s: %w", name, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("storage: body log segment %s: %w", name, err)
		}
		l.segs[num] = &logSegment{num: num, name: name, f: f, size: fi.Size()}
		l.bytes.Add(fi.Size())
		l.next = max(l.next, num+1)
	}
	return nil
}

func parseSegmentName(n string) (uint32, bool) {
	s, ok := strings.CutSuffix(n, bodyLogSuffix)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err == nil && v > 0
}

// logs reports whether a body of n bytes goes to the log.
func (l *bodyLog) logs(n int) bool { return l.min > 0 && n >= l.min }

// mayBeLogged reports whether an entry with a body of n bytes may be a
// logged one: one this run logs, or one an earlier run with a smaller
// BodyLogMin did.
func (l *bodyLog) mayBeLogged(n int) bool {
	f := l.floor.Load()
	return f > 0 && int64(n) >= f
}

// reserve places a record for a body of n bytes at the end of the active
// segment, starting a new one when it is full, and counts it live.
func (l *bodyLog) reserve(n int) (BodyRef, error) {
	rec := int64(bodyHeaderLen + n)
	l.mu.Lock()
	defer l.mu.Unlock()
	if a := l.active; a == nil || (a.size > 0 && a.size+rec > l.segSize) {
		if err := l.startSegmentLocked(); err != nil {
			return BodyRef{}, err
		}
	}
	a := l.active
	ref := BodyRef{Seg: a.num, Off: a.size, Len: n}
	a.size += rec
	a.live++
	l.bytes.Add(rec)
	l.bodies.Add(1)
	return ref, nil
}

func (l *bodyLog) startSegmentLocked() error {
	if !l.madeDir {
		if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
			return fmt.Errorf("storage: body log folder %s: %w", l.dir, err)
		}
		l.madeDir = true
	}
	name := l.fs.PathJoin(l.dir, segmentName(l.next))
	f, err := l.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("storage: body log: %w", err)
	}
	seg := &logSegment{num: l.next, name: name, f: f}
	l.next++
	l.segs[seg.num] = seg
	l.active = seg
	l.dirUnsynced = true
	return nil
}

// unreserve gives back a reservation whose entry was never committed (an
// aborted Txn, a commit refused before Recover).
func (l *bodyLog) unreserve(ref BodyRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seg := l.segs[ref.Seg]; seg != nil && seg.live > 0 {
		seg.live--
		l.bodies.Add(-1)
	}
}

// released counts a logged entry deleted by the Txn of commit seq seq.
func (l *bodyLog) released(ref BodyRef, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seg := l.segs[ref.Seg]; seg != nil && seg.live > 0 {
		seg.live--
		seg.lastDel = max(seg.lastDel, seq)
		l.bodies.Add(-1)
	}
}

// write writes p's record. The committer calls it, before applying the
// batch that holds p's entry.
func (l *bodyLog) write(p *pendingBody) error {
	l.mu.Lock()
	seg := l.segs[p.ref.Seg]
	if seg != nil {
		seg.unsynced = true
	}
	l.mu.Unlock()
	if seg == nil {
		return fmt.Errorf("storage: body log segment %d of a pending body is gone", p.ref.Seg)
	}
	var h [bodyHeaderLen]byte
	binary.BigEndian.PutUint32(h[:4], crc32.Checksum(p.body, crc32c))
	binary.BigEndian.PutUint32(h[4:], uint32(len(p.body)))
	if _, err := seg.f.WriteAt(h[:], p.ref.Off); err != nil {
		return fmt.Errorf("storage: body log %s: %w", seg.name, err)
	}
	if _, err := seg.f.WriteAt(p.body, p.ref.Off+bodyHeaderLen); err != nil {
		return fmt.Errorf("storage: body log %s: %w", seg.name, err)
	}
	l.writes.Add(1)
	return nil
}

// sync fsyncs the segments written since their last fsync, and the folder
// if a segment was created since. The committer calls it before an fsync
// of the WAL.
func (l *bodyLog) sync() error {
	l.mu.Lock()
	var files []*logSegment
	for _, seg := range l.segs {
		if seg.unsynced {
			seg.unsynced = false
			files = append(files, seg)
		}
	}
	dir := l.dirUnsynced
	l.dirUnsynced = false
	l.mu.Unlock()
	for _, seg := range files {
		if err := seg.f.SyncData(); err != nil {
			return fmt.Errorf("storage: body log %s: %w", seg.name, err)
		}
	}
	if dir {
		d, err := l.fs.OpenDir(l.dir)
		if err == nil {
			err = d.Sync()
			d.Close()
		}
		if err != nil {
			return fmt.Errorf("storage: body log folder %s: %w", l.dir, err)
		}
	}
	return nil
}

// deleteSynced deletes the segments, other than the active one, with no
// live body whose last delete is in a Txn at or before seq, which the
// committer has applied and synced.
func (l *bodyLog) deleteSynced(seq uint64) []error {
	l.mu.Lock()
	var gone []*logSegment
	for num, seg := range l.segs {
		if l.counted && seg != l.active && seg.live == 0 && seg.lastDel <= seq {
			delete(l.segs, num)
			gone = append(gone, seg)
		}
	}
	l.mu.Unlock()
	return l.removeAll(gone)
}

// removeAll removes the segments gone, already out of segs.
func (l *bodyLog) removeAll(gone []*logSegment) []error {
	var errs []error
	for _, seg := range gone {
		if err := l.remove(seg); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// remove closes and deletes seg's file; seg is out of segs already. A
// failed delete leaves a file the next Recover deletes.
func (l *bodyLog) remove(seg *logSegment) error {
	l.bytes.Add(-seg.size)
	cerr := seg.f.Close()
	if err := l.fs.Remove(seg.name); err != nil {
		return fmt.Errorf("storage: deleting body log segment %s: %w", seg.name, err)
	}
	if cerr != nil {
		return fmt.Errorf("storage: closing body log segment %s: %w", seg.name, cerr)
	}
	return nil
}

// read reads the body ref refers to into dst (ref.Len long) and checks it
// against its record's header.
func (l *bodyLog) read(ref BodyRef, dst []byte) error {
	seg, err := l.segment(ref)
	if err != nil {
		return err
	}
	crc, err := l.header(seg, ref)
	if err != nil {
		return err
	}
	if err := readFull(seg.f, dst[:ref.Len], ref.Off+bodyHeaderLen); err != nil {
		return l.damaged(seg, ref, err.Error())
	}
	if crc32.Checksum(dst[:ref.Len], crc32c) != crc {
		return l.damaged(seg, ref, "checksum mismatch")
	}
	return nil
}

// check reports whether ref's record is in place: its segment exists, is
// long enough, and its header records ref's length. Recover calls it for
// every logged entry; it reads 8 bytes, not the body.
func (l *bodyLog) check(ref BodyRef) error {
	seg, err := l.segment(ref)
	if err != nil {
		return err
	}
	if ref.Off+bodyHeaderLen+int64(ref.Len) > seg.size {
		return l.damaged(seg, ref, fmt.Sprintf("the file ends at %d", seg.size))
	}
	_, err = l.header(seg, ref)
	return err
}

// segment returns the segment of ref's record.
func (l *bodyLog) segment(ref BodyRef) (*logSegment, error) {
	l.mu.Lock()
	seg := l.segs[ref.Seg]
	l.mu.Unlock()
	if seg == nil {
		return nil, fmt.Errorf("%w: segment %s is missing (a body at offset %d)", ErrBodyDamaged, l.fs.PathJoin(l.dir, segmentName(ref.Seg)), ref.Off)
	}
	return seg, nil
}

// header reads the header of ref's record, checks the length it records,
// and returns the body's CRC.
func (l *bodyLog) header(seg *logSegment, ref BodyRef) (uint32, error) {
	var h [bodyHeaderLen]byte
	if err := readFull(seg.f, h[:], ref.Off); err != nil {
		return 0, l.damaged(seg, ref, err.Error())
	}
	if n := binary.BigEndian.Uint32(h[4:]); int(n) != ref.Len {
		return 0, l.damaged(seg, ref, fmt.Sprintf("its header says %d bytes, its entry %d", n, ref.Len))
	}
	return binary.BigEndian.Uint32(h[:4]), nil
}

func readFull(f vfs.File, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (l *bodyLog) damaged(seg *logSegment, ref BodyRef, why string) error {
	return fmt.Errorf("%w: segment %s, the body at offset %d (%d bytes): %s", ErrBodyDamaged, seg.name, ref.Off, ref.Len, why)
}

// recovered takes Recover's count of the live bodies per segment and the
// smallest one, deletes the segments nothing refers to, and returns how
// many it deleted.
func (l *bodyLog) recovered(live map[uint32]int, smallest int) (int, []error) {
	if smallest > 0 && (l.min == 0 || smallest < l.min) {
		l.floor.Store(int64(smallest))
	}
	l.mu.Lock()
	l.counted = true
	var gone []*logSegment
	for num, seg := range l.segs {
		seg.live = live[num]
		l.bodies.Add(int64(seg.live))
		if seg.live == 0 {
			delete(l.segs, num)
			gone = append(gone, seg)
		}
	}
	l.mu.Unlock()
	return len(gone), l.removeAll(gone)
}

// close closes every segment file.
func (l *bodyLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, seg := range l.segs {
		seg.f.Close()
	}
}

// segments lists the segment numbers in use, for tests and Dump.
func (l *bodyLog) segments() []uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	nums := make([]uint32, 0, len(l.segs))
	for n := range l.segs {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums
}
