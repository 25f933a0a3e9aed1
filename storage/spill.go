package storage

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A Spill keeps the large bodies of one queue's paged-out transient
// messages in files of its own, in the data directory's spill folder,
// while the queue's index entries stay in Pebble and refer to them
// (Entry.Spill).
//
// Such a body is in the store only from the moment its queue outgrows its
// memory bound until the queue reads it back, and never across a restart.
// Written through Pebble it was copied into a batch, written to the WAL,
// copied into a memtable, compressed into a blob file at the flush, and
// decompressed and copied again when read back. A spill file takes one
// write and one read, into the buffer the body is delivered from.
//
// A Spill is written in segments: bodies are appended to the newest one,
// and one past spillSegmentSize is left for a new one. Each segment counts
// its live bodies, written and not yet released. A segment whose bodies
// are all released is kept as the spare, to be written over as the next
// new segment, while the Spill has live bodies elsewhere; any other is
// deleted, and the last release deletes every file. Writing over pages the
// kernel already caches is cheaper than having it find fresh ones: with
// the spare a steady backlog pages a 1 MiB body out and in for 40% less
// (BENCHMARKS.md, "Large transient messages past the memory bound"), and
// an idle queue keeps no file.
//
// A Spill has no lock: its owner (a queue, under its lock) serializes
// every call but SpillWrite.Write, the file write Reserve leaves for the
// owner to make once it has released its lock. Nothing of it survives a restart: Open deletes the spill
// folder, whose bodies belonged to transient entries Recover deletes.
type Spill struct {
	s       *Store
	id      uint64 // unique in the store's run: names the files
	segSize int64  // spillSegmentSize, smaller in tests
	next    uint32 // the next segment's number
	cur     *spillSegment
	segs    map[uint32]*spillSegment // by number: those with live bodies, and cur
	spare   *spillSegment            // no live body, kept to be written over
	live    int                      // live bodies in all segments
	// pending are the bodies Reserve placed whose SpillWrite is not
	// settled yet (settle).
	pending map[SpillRef]*SpillWrite
}

// SpillRef says where a spilled body is: segment, offset and length. A
// zero SpillRef is no body (Len is never zero for a spilled one).
type SpillRef struct {
	Seg uint32
	Off int64
	Len int
}

// Spilled reports whether r refers to a body.
func (r SpillRef) Spilled() bool { return r.Len > 0 }

type spillSegment struct {
	num  uint32
	f    vfs.File
	name string
	size int64 // bytes written since it became a segment (the next offset)
	disk int64 // the file's length
	live int   // bodies written and not released
}

// spillSegmentSize is the size past which a Spill starts a new segment:
// small enough that a few lingering bodies keep little disk, large enough
// that files are created once per several large bodies.
const spillSegmentSize = 64 << 20

// spillDirName is the spill folder, inside the data directory.
const spillDirName = "spill"

// ErrSpillGone is a body whose segment was released or reset.
var ErrSpillGone = errors.New("storage: spilled body gone")

// spillState is the store's part of every Spill: the folder and the totals.
type spillState struct {
	dir     string
	created atomic.Bool   // dir exists (made on the first segment)
	ids     atomic.Uint64 // Spills handed out
	bytes   atomic.Int64  // in spill files on disk
	bodies  atomic.Int64  // live spilled bodies
}

// clearSpills deletes what an earlier run left in the spill folder.
func (s *Store) clearSpills() error {
	s.spill.dir = s.opts.FS.PathJoin(s.dir, spillDirName)
	return s.opts.FS.RemoveAll(s.spill.dir)
}

// NewSpill returns an empty Spill. It creates no file until written.
func (s *Store) NewSpill() *Spill {
	return &Spill{s: s, id: s.spill.ids.Add(1), segSize: spillSegmentSize, segs: make(map[uint32]*spillSegment)}
}

// A SpillWrite is a body Reserve placed in a Spill and did not write yet:
// the Spill's owner calls Write once it has released its lock, so that a
// queue's consumers do not wait for the file. Until then the body stays
// in memory, held by keep: a Read of it meanwhile takes it from there and
// cancels the write; a Read while it is being written waits for it.
type SpillWrite struct {
	f     vfs.File
	name  string
	off   int64
	body  []byte
	keep  BodyHolder
	state atomic.Int32  // spillPending, then spillWriting and spillWritten or spillFailed, or spillCancelled
	done  chan struct{} // closed once written (or failed)
	err   error         // the write's, set before done closes
	log   *Store
}

const (
	spillPending int32 = iota
	spillWriting
	spillWritten
	spillFailed // the body is still held, for the read
	spillCancelled
)

// Reserve places body at the end of the spill, counts it live and
// returns where it is, with the write to make (SpillWrite.Write) outside
// the owner's lock. keep, when set, holds body until then. On an error
// nothing is kept, and the caller keeps the body elsewhere.
func (sp *Spill) Reserve(body []byte, keep BodyHolder) (SpillRef, *SpillWrite, error) {
	if len(body) == 0 {
		return SpillRef{}, nil, errors.New("storage: spilling an empty body")
	}
	if sp.cur == nil || (sp.cur.size > 0 && sp.cur.size+int64(len(body)) > sp.segSize) {
		if err := sp.startSegment(); err != nil {
			return SpillRef{}, nil, err
		}
	}
	seg := sp.cur
	ref := SpillRef{Seg: seg.num, Off: seg.size, Len: len(body)}
	seg.size += int64(len(body))
	if seg.size > seg.disk {
		sp.s.spill.bytes.Add(seg.size - seg.disk)
		seg.disk = seg.size
	}
	seg.live++
	sp.live++
	sp.s.spill.bodies.Add(1)
	w := &SpillWrite{f: seg.f, name: seg.name, off: ref.Off, body: body, keep: keep, done: make(chan struct{}), log: sp.s}
	if keep != nil {
		keep.Hold()
	}
	if sp.pending == nil {
		sp.pending = make(map[SpillRef]*SpillWrite)
	}
	sp.pending[ref] = w
	return ref, w, nil
}

// Write writes the body, unless a Read took it from memory first. It
// takes no lock; the Spill's owner need not hold its own.
func (w *SpillWrite) Write() {
	if !w.state.CompareAndSwap(spillPending, spillWriting) {
		return
	}
	if _, err := w.f.WriteAt(w.body, w.off); err != nil {
		// The body stays in memory, held, for the read to take: a
		// failed write loses nothing.
		w.err = err
		w.log.log.Error().Err(err).Str("file", w.name).Msg("writing a spilled body; it stays in memory")
		w.state.Store(spillFailed)
		close(w.done)
		return
	}
	w.state.Store(spillWritten)
	w.drop()
	close(w.done)
}

// drop lets go of the body.
func (w *SpillWrite) drop() {
	if w.keep != nil {
		w.keep.Release()
	}
	w.body, w.keep = nil, nil
}

// settle resolves the pending write of ref, if any, before its body is
// read or released: it cancels a write not begun, or waits for one begun,
// and when the body is still in memory (cancelled, or its write failed)
// copies it into dst when dst is not nil and reports that it did.
func (sp *Spill) settle(ref SpillRef, dst []byte) (fromMemory bool) {
	w := sp.pending[ref]
	if w == nil {
		return false
	}
	delete(sp.pending, ref)
	if !w.state.CompareAndSwap(spillPending, spillCancelled) {
		<-w.done
		if w.state.Load() != spillFailed {
			return false
		}
	}
	if dst != nil {
		copy(dst, w.body)
	}
	w.drop()
	return dst != nil
}

// startSegment makes a new segment the one written to: the spare, or a
// new file.
func (sp *Spill) startSegment() error {
	seg := sp.spare
	if seg != nil {
		sp.spare = nil
		seg.size, seg.live = 0, 0
	} else {
		fs := sp.s.opts.FS
		if !sp.s.spill.created.Load() {
			if err := fs.MkdirAll(sp.s.spill.dir, 0o755); err != nil {
				return fmt.Errorf("storage: spill folder: %w", err)
			}
			sp.s.spill.created.Store(true)
		}
		name := fs.PathJoin(sp.s.spill.dir, fmt.Sprintf("%d-%d.spill", sp.id, sp.next))
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			return fmt.Errorf("storage: spill: %w", err)
		}
		seg = &spillSegment{f: f, name: name}
	}
	// The segment left behind, full, still has live bodies (one whose
	// last body went was retired by Release). A new number, so that no
	// ref to a body of the spare's past reads what is written over it.
	seg.num = sp.next
	sp.next++
	sp.segs[seg.num] = seg
	sp.cur = seg
	return nil
}

// Read reads the body ref refers to into dst, which is ref.Len long. The
// body stays live until released.
func (sp *Spill) Read(ref SpillRef, dst []byte) error {
	seg := sp.segs[ref.Seg]
	if seg == nil || ref.Off+int64(ref.Len) > seg.size {
		return ErrSpillGone
	}
	if len(dst) != ref.Len {
		return fmt.Errorf("storage: spill read of %d bytes into %d", ref.Len, len(dst))
	}
	if sp.settle(ref, dst) {
		return nil
	}
	if _, err := seg.f.ReadAt(dst, ref.Off); err != nil {
		sp.s.log.Error().Err(err).Str("file", seg.name).Msg("reading a spilled body")
		return fmt.Errorf("storage: spill %s: %w", seg.name, err)
	}
	return nil
}

// Release says the body ref refers to is no longer needed.
func (sp *Spill) Release(ref SpillRef) {
	sp.settle(ref, nil)
	seg := sp.segs[ref.Seg]
	if seg == nil || seg.live == 0 || ref.Off+int64(ref.Len) > seg.size {
		return
	}
	seg.live--
	sp.live--
	sp.s.spill.bodies.Add(-1)
	if sp.live == 0 {
		sp.Reset() // nothing paged: keep no file
		return
	}
	if seg.live == 0 {
		if seg == sp.cur {
			sp.cur = nil
		}
		sp.retire(seg)
	}
}

// Reset releases every body and deletes every file: for a queue whose
// paged entries are all gone at once (a purge, a delete), or read back.
func (sp *Spill) Reset() {
	for ref := range sp.pending {
		sp.settle(ref, nil)
	}
	sp.s.spill.bodies.Add(-int64(sp.live))
	sp.live = 0
	sp.cur = nil
	for num, seg := range sp.segs {
		delete(sp.segs, num)
		sp.remove(seg)
	}
	if sp.spare != nil {
		sp.remove(sp.spare)
		sp.spare = nil
	}
}

// retire takes seg, with no live body and not being written, out of use:
// it becomes the spare if there is none and the Spill is in use, or is
// deleted.
func (sp *Spill) retire(seg *spillSegment) {
	delete(sp.segs, seg.num)
	if sp.spare == nil && sp.live > 0 {
		sp.spare = seg
		return
	}
	sp.remove(seg)
}

// remove closes and deletes seg's file. A failed delete leaves a file the
// next start clears.
func (sp *Spill) remove(seg *spillSegment) {
	sp.s.spill.bytes.Add(-seg.disk)
	if err := seg.f.Close(); err != nil {
		sp.s.log.Warn().Err(err).Str("file", seg.name).Msg("closing a spill file")
	}
	if err := sp.s.opts.FS.Remove(seg.name); err != nil {
		sp.s.log.Warn().Err(err).Str("file", seg.name).Msg("deleting a spill file")
	}
}
