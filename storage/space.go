package storage

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Disk space. Pebble claims space in large steps the caller never sees:
// every new WAL file is preallocated to 110% of the memtable size (about
// 35 MiB with 32 MiB memtables) and a store keeps up to seven of them (the
// live ones, up to three, and up to three old ones kept for recycling,
// plus one in passing), a memtable flush writes an sstable about the size
// of the WAL data it holds, and compactions write their output before
// deleting their input. When a write finally fails, Pebble v2.1.7 panics in
// some paths (a WAL that cannot be closed or created at rotation, with its
// mutex already unlocked, which is fatal) and retries a failed flush at
// once, forever. So the store keeps out of that corner:
//
//   - On a small disk the memtables are smaller (memTableSizeFor: a 64th of
//     the disk, between 4 and 32 MiB), so the steps are too: seven 35 MiB
//     WAL files would fill most of a 300 MB disk on their own.
//   - DiskReserve is what the store may still claim with no new messages:
//     the WAL data not yet flushed (its sstables), the WAL files it may
//     still create (up to seven in all), and spaceMargin for the MANIFEST,
//     OPTIONS and sstable overheads. The broker's disk alarm blocks
//     publishers when the disk's free space falls below disk_free_limit
//     plus this, so it fires before a write can fail.
//   - Before applying a batch, the committer checks that the disk still has
//     the room the next steps need (writeFloor: the unflushed WAL data, one
//     new WAL unless a recycled one waits, the margin). If not, it holds
//     the batch (and with it every later one) and logs once at error
//     level; Health reports why, and the broker's alarm keeps publishers
//     blocked. It looks again each spaceRecheck or when a new Commit
//     arrives, and carries on when there is room: nothing is lost or
//     reordered. Meanwhile reads that must see the held writes wait too.
//     Close fails the batches still held.
//   - A flush or compaction that fails for lack of space is logged at most
//     once a minute, and the listener pauses Pebble's retry a second, so a
//     full disk does not spin a core writing error lines.
//   - Open refuses with ErrNoSpace when the disk has less free than
//     replaying the newest WAL needs (its data is flushed to an sstable at
//     open) plus a new WAL and the margin; the broker's start-up waits for
//     space rather than letting Pebble spin.
//
// A filesystem that cannot report its usage (vfs.NewMem) is never judged
// full.

// ErrNoSpace is Open's error when the data directory's disk has too little
// free space to open the store, and Health's while writes wait for space.
var ErrNoSpace = errors.New("not enough disk space")

const (
	// spaceMargin is kept free beyond the WAL and flush sizes.
	spaceMargin = 8 << 20
	// maxWALFiles is how many WAL files Pebble keeps at most with its
	// default MemTableStopWritesThreshold (2): three live, three recycled,
	// one being replaced.
	maxWALFiles = 7
	// Memtable sizes memTableSizeFor picks between.
	minAutoMemTable = 4 << 20
	maxAutoMemTable = defaultMemTableSize
	// spaceRecheck is how often held writes look at the disk again.
	spaceRecheck = time.Second
	// reserveMaxAge is how long a computed DiskReserve is reused.
	reserveMaxAge = 100 * time.Millisecond
)

// memTableSizeFor is the memtable size for a store in dir when none is
// configured: a 64th of the disk, between 4 and 32 MiB.
func memTableSizeFor(fs vfs.FS, dir string) uint64 {
	u, err := fs.GetDiskUsage(dir)
	if err != nil || u.TotalBytes == 0 {
		return maxAutoMemTable
	}
	return min(max(u.TotalBytes/64, minAutoMemTable), maxAutoMemTable)
}

// walPreallocSize is the size Pebble preallocates for a WAL file
// (DB.walPreallocateSize in pebble/v2 v2.1.7).
func walPreallocSize(memTableSize uint64) uint64 { return memTableSize + memTableSize/10 }

// spaceState is the store's view of its disk.
type spaceState struct {
	figuresAt atomic.Int64          // unix nanoseconds of the last figures
	reserve   atomic.Uint64         // DiskReserve's last figure
	floor     atomic.Uint64         // writeFloor's last figure
	offHeap   atomic.Uint64         // OffHeapMemory's last figure
	held      atomic.Pointer[error] // why writes are held (nil: they are not)
	lastLog   atomic.Int64          // when a background ENOSPC was last logged
	suppress  atomic.Int64          // background ENOSPC errors not logged since
}

// DiskReserve is the disk space the store may still claim without any new
// message being written (see "Disk space" above). Like OffHeapMemory it
// comes from Pebble's metrics, read at most every 100 ms.
func (s *Store) DiskReserve() uint64 {
	s.pebbleFigures()
	return s.space.reserve.Load()
}

// writeFloor is the free space the next batch needs: the unflushed WAL
// data and one new WAL unless a recycled one waits, and the margin.
func (s *Store) writeFloor() uint64 {
	s.pebbleFigures()
	return s.space.floor.Load()
}

// PebbleMemory is what Pebble holds in memory now: its block cache and its
// memtables (those still being flushed too), and whether they are outside
// the Go heap (a cgo build; see OffHeapMemory). ok is false once the store
// is closed.
func (s *Store) PebbleMemory() (cache, memtables uint64, offHeap, ok bool) {
	done, err := s.read()
	if err != nil {
		return 0, 0, pebbleOffHeap, false
	}
	defer done()
	m := s.db.Metrics()
	return uint64(max(0, m.BlockCache.Size)), m.MemTable.Size + m.MemTable.ZombieSize, pebbleOffHeap, true
}

// OffHeapMemory is the memory Pebble holds outside the Go heap: its block
// cache and memtables when Warren is built with cgo (Pebble then allocates
// them with C's malloc), 0 otherwise (they are in the Go heap and the
// runtime's figures count them).
func (s *Store) OffHeapMemory() uint64 {
	if !pebbleOffHeap {
		return 0
	}
	s.pebbleFigures()
	return s.space.offHeap.Load()
}

// pebbleFigures refreshes DiskReserve's and OffHeapMemory's figures from
// Pebble's metrics when they are older than reserveMaxAge.
func (s *Store) pebbleFigures() {
	now := time.Now().UnixNano()
	if now-s.space.figuresAt.Load() < int64(reserveMaxAge) {
		return
	}
	done, err := s.read()
	if err != nil {
		return
	}
	defer done()
	m := s.db.Metrics()
	prealloc := walPreallocSize(s.opts.MemTableSize)
	floor := m.WAL.Size + spaceMargin
	if m.WAL.ObsoleteFiles == 0 {
		floor += prealloc
	}
	reserve := m.WAL.Size + spaceMargin
	if files := m.WAL.Files + m.WAL.ObsoleteFiles; files < maxWALFiles {
		reserve += uint64(maxWALFiles-files) * prealloc
	}
	s.space.floor.Store(floor)
	s.space.reserve.Store(reserve)
	s.space.offHeap.Store(uint64(m.BlockCache.Size) + m.MemTable.Size + m.MemTable.ZombieSize)
	s.space.figuresAt.Store(now)
}

// diskFree reports the bytes free for the store on its disk; ok is false
// when the filesystem cannot tell.
func (s *Store) diskFree() (free uint64, ok bool) {
	u, err := s.opts.FS.GetDiskUsage(s.dir)
	if err != nil {
		return 0, false
	}
	return u.AvailBytes, true
}

// Health is nil while the store writes normally. Otherwise it says why
// not: writes are held for disk space (ErrNoSpace), or a commit failed and
// the store takes no more writes until it is reopened.
func (s *Store) Health() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	if p := s.space.held.Load(); p != nil {
		return *p
	}
	return nil
}

// waitForSpace returns once the disk has DiskReserve free, and room for
// the batch's logged bodies (bodies bytes, written before it), holding the
// committer meanwhile (see "Disk space"). It returns an error only when the
// store closes while writes are held.
func (s *Store) waitForSpace(bodies int) error {
	c := &s.c
	var timer *time.Timer
	for {
		free, ok := s.diskFree()
		need := s.writeFloor() + uint64(bodies)
		if !ok || free >= need {
			if s.space.held.Swap(nil) != nil {
				s.log.Info().Uint64("free", free).Uint64("needed", need).Msg("disk space available again: writes resume")
			}
			return nil
		}
		if s.space.held.Load() == nil {
			err := fmt.Errorf("storage: writes held: the disk of %s has %d bytes free, the store needs %d to write safely: %w", s.dir, free, need, ErrNoSpace)
			s.space.held.Store(&err)
			s.log.Error().Uint64("free", free).Uint64("needed", need).Str("dir", s.dir).
				Msg("disk nearly full: writes held until there is space (nothing is lost)")
			if f := s.opts.afterHold; f != nil {
				f()
			}
		}
		c.mu.Lock()
		closing := c.closing
		c.mu.Unlock()
		if closing {
			return *s.space.held.Load()
		}
		if timer == nil {
			timer = time.NewTimer(spaceRecheck)
			defer timer.Stop()
		} else {
			timer.Reset(spaceRecheck)
		}
		select {
		case <-c.kick:
		case <-timer.C:
		}
		// The reserve may have changed (a flush finished): recompute.
		s.space.figuresAt.Store(0)
	}
}

// backgroundNoSpace handles a flush or compaction that failed for lack of
// space: the first is logged, then at most one line a minute with the
// count; and it pauses the caller, Pebble's flush or compaction goroutine,
// which otherwise retries at once and forever.
func (s *Store) backgroundNoSpace(err error) {
	now := time.Now().UnixNano()
	if last := s.space.lastLog.Load(); now-last >= int64(time.Minute) && s.space.lastLog.CompareAndSwap(last, now) {
		s.log.Error().Err(err).Int64("similar_errors_since_last", s.space.suppress.Swap(0)).Str("dir", s.dir).
			Msg("disk full: Pebble cannot write a flush or compaction; retrying every second")
	} else {
		s.space.suppress.Add(1)
	}
	time.Sleep(time.Second) // a back-off Pebble v2.1.7 lacks, not a synchronization
}

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// checkStartSpace refuses to open when the disk cannot take what opening
// writes: the newest WAL's data flushed to an sstable, a new WAL, and the
// margin. (Older unflushed WALs, rare, are not counted.)
func (s *Store) checkStartSpace(dir string, walBytes int64) error {
	free, ok := s.diskFree()
	need := uint64(walBytes) + walPreallocSize(s.opts.MemTableSize) + spaceMargin
	if !ok || free >= need {
		return nil
	}
	return &dirError{fmt.Sprintf("data directory %s: its disk has %d bytes free; opening the store needs about %d (to write out %d bytes of write-ahead log and start a new one)",
		dir, free, need, walBytes), ErrNoSpace, syscall.ENOSPC}
}
