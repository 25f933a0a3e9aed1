package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// FormatVersion is the version of the key schema and value encodings this
// package reads and writes. It is stored under keyFormatVersion when a store
// is created; Open upgrades a store of an earlier version it knows (see
// upgrades) and refuses any other.
//
// Version 2 added delivery marks (MarkDelivered). A version 1 store needs
// no rewrite: its entries carry their delivery state, which version 2
// still reads; the version is raised so that a Warren that knows only
// version 1 refuses the store rather than overlook its marks.
//
// Version 3 added spilled entries (entry flag 0x10; spill.go), whose
// bodies are in spill files. Version 2 entries read as they are; the
// version is raised so that a Warren that knows only version 2 refuses the
// store with this message rather than with a malformed entry.
//
// Version 4 added logged entries (entry flag 0x20; bodylog.go), whose
// bodies are in the body log, for the same reason.
//
// Version 5 keeps streams' messages in chunks in the streams' files
// (streamlog.go); Open rewrites an earlier store's (streamupgrade.go).
//
// Version 6 adds formed chunks (streamlog.go), stored in the form their
// readers take. Version 5 chunks read as they are; the version is raised
// so that a Warren that knows only version 5 refuses the store rather
// than report its formed chunks damaged.
const FormatVersion = 6

// upgrades says, for each earlier version Open upgrades, what the upgrade
// does, for the log.
var upgrades = map[uint64]string{
	1: "delivery marks, spill files and the body log are written from now on; the entries stay as they are",
	2: "spill files and the body log are written from now on; the entries stay as they are",
	3: "large persistent bodies go to the body log from now on; the entries stay as they are",
	4: "streams' messages are rewritten into chunks in the streams' files",
	5: "stream chunks published over the stream protocol are stored as it delivers them from now on; the chunks stay as they are",
}

// SyncMode says whether durable commits wait for an fsync.
type SyncMode int

const (
	// SyncAlways: a durable commit fsyncs the WAL before its callback runs;
	// other commits are written through to the OS within CommitInterval and
	// fsynced within SyncInterval.
	SyncAlways SyncMode = iota
	// SyncNever: every commit is written through to the OS (within
	// CommitInterval; a durable one before its callback runs) and never
	// fsynced. A crash of the process loses nothing committed; a crash of
	// the machine loses what the OS had not written yet.
	SyncNever
)

func (m SyncMode) String() string {
	switch m {
	case SyncAlways:
		return "always"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// Options configure a Store. The zero value is usable.
type Options struct {
	Sync   SyncMode
	Logger zerolog.Logger
	// CacheSize is Pebble's block cache in bytes; 0 = 64 MiB.
	CacheSize int64
	// MemTableSize is the size of one Pebble memtable; 0 = a 64th of the
	// disk, between 4 and 32 MiB (see space.go). Up to two are in memory at
	// once (one being written, one being flushed).
	MemTableSize uint64
	// CommitInterval is how long writes committed with durable == false may
	// wait for a commit; 0 = 5ms. Durable writes never wait for it.
	CommitInterval time.Duration
	// SyncInterval bounds how long, under SyncAlways, a non-durable write
	// stays written through but not fsynced: the committer fsyncs the WAL
	// this long after the first such write at the latest; 0 = 1s.
	SyncInterval time.Duration
	// MaxBatchBytes commits the pending batch as soon as it is this large;
	// 0 = 4 MiB.
	MaxBatchBytes int
	// BodyLogMin is the smallest body of a persistent entry that goes to
	// the body log instead of Pebble (bodylog.go); 0 = DefaultBodyLogMin,
	// negative = none does.
	BodyLogMin int
	// WALDamage says what Open does when the newest write-ahead log holds
	// valid records after a damaged one (see waldamage.go); the zero value
	// refuses to open.
	WALDamage WALDamage
	// FS is the filesystem; nil = the operating system's. Tests use
	// vfs.NewMem().
	FS vfs.FS

	// afterIntervalSync, for tests, runs on the committer after each fsync
	// SyncInterval called for; afterHold when it starts holding writes for
	// disk space.
	afterIntervalSync func()
	afterHold         func()
	// skipStreamSync, for the crash tests' self-check, leaves stream files
	// unsynced when the WAL is synced.
	skipStreamSync bool
	// blobRewriteAge and nudgeInterval, for tests, replace
	// defaultBlobRewriteAge and defaultNudgeInterval (reclaim.go); a
	// negative nudgeInterval turns the nudges off.
	blobRewriteAge time.Duration
	nudgeInterval  time.Duration
}

const (
	defaultCacheSize      = 64 << 20
	defaultMemTableSize   = 32 << 20
	defaultCommitInterval = 5 * time.Millisecond
	defaultSyncInterval   = time.Second
	defaultMaxBatchBytes  = 4 << 20

	// idBlock is how many ids are reserved on disk at a time.
	idBlock = 1 << 20
)

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.CacheSize <= 0 {
		o.CacheSize = defaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = defaultMemTableSize
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = defaultCommitInterval
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = defaultSyncInterval
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = defaultMaxBatchBytes
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.BodyLogMin == 0 {
		o.BodyLogMin = DefaultBodyLogMin
	}
	if o.blobRewriteAge <= 0 {
		o.blobRewriteAge = defaultBlobRewriteAge
	}
	if o.nudgeInterval == 0 {
		o.nudgeInterval = defaultNudgeInterval
	}
}

// Errors. Open's errors say what is wrong with the data directory in words
// an operator understands, and match these with errors.Is.
var (
	ErrClosed        = errors.New("storage: store is closed")
	ErrInUse         = errors.New("data directory in use")
	ErrAccess        = errors.New("data directory not accessible")
	ErrFormatVersion = errors.New("data directory format version mismatch")
	// ErrNotRecovered is a commit of queue entries or messages before
	// Recover has run: reference counts are not known yet.
	ErrNotRecovered = errors.New("storage: Recover must run before writing queue entries or messages")
)

// dirError is an error about the data directory: its text is msg, and it
// matches both its kind (one of the sentinels above) and its cause.
type dirError struct {
	msg   string
	kind  error
	cause error
}

func (e *dirError) Error() string   { return e.msg }
func (e *dirError) Unwrap() []error { return []error{e.kind, e.cause} }

// Store is Warren's persistent state: one Pebble DB. All methods are safe
// for concurrent use.
type Store struct {
	dir  string
	opts Options
	log  zerolog.Logger
	db   *pebble.DB
	lock *pebble.Lock
	wal  *walFS // the filesystem Pebble writes through (decides WAL fsyncs)

	nodeID atomic.Uint64 // the data directory's node id; 0: none recorded (nodeid.go)

	ids struct {
		next      atomic.Uint64 // the last id handed out
		limit     atomic.Uint64 // ids below limit are reserved on disk
		extending atomic.Bool
		mu        lockorder.Mutex[lockorder.StorageIDs]
		cond      sync.Cond
	}

	c committer

	// failed is the sticky error of a failed commit (nil while healthy).
	failed atomic.Pointer[error]

	space spaceState
	spill spillState // the Spills' folder and totals (spill.go)
	// bodies is the body log: large persistent bodies (bodylog.go).
	bodies bodyLog
	// streams are the streams' files (streamlog.go).
	streams streamLogs

	raftLogs raftLogs // the RaftLogs handed out, one per group (raftlog.go)

	recovered atomic.Bool
	stop      chan struct{} // closed by Close: background loops return
	closeOnce sync.Once
	closeErr  error
	// closeMu keeps Close from closing the DB under a reader: readers hold
	// it shared; closed is set under it exclusively.
	closeMu lockorder.RWMutex[lockorder.StorageClose]
	closed  bool
}

// read starts a read of the DB: it fails once the store is closed, and
// otherwise keeps it open until done is called.
func (s *Store) read() (done func(), err error) {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return nil, ErrClosed
	}
	return s.closeMu.RUnlock, nil
}

// Open opens or creates the store in dir. It never panics on a bad
// directory: a directory locked by another process, one that cannot be
// read or written, or a store written with another FormatVersion give an
// error that says so.
func Open(dir string, o Options) (*Store, error) {
	autoMemTable := o.MemTableSize == 0
	o.EnsureDefaults()
	if err := checkDir(o.FS, dir); err != nil {
		return nil, err
	}
	if autoMemTable {
		o.MemTableSize = memTableSizeFor(o.FS, dir) // smaller on a small disk (space.go)
	}
	s := &Store{dir: dir, opts: o, log: o.Logger.With().Str("component", "storage").Logger(), wal: newWALFS(o.FS), stop: make(chan struct{})}
	s.ids.cond.L = &s.ids.mu

	lock, err := pebble.LockDirectory(dir, o.FS)
	if err != nil {
		return nil, lockError(dir, err)
	}
	if err := s.checkWAL(dir); err != nil {
		lock.Close()
		return nil, err
	}
	if err := s.clearSpills(); err != nil {
		lock.Close()
		return nil, err
	}
	s.bodies.init(o.FS, dir, max(o.BodyLogMin, 0))
	s.streams.init(o.FS, dir)
	if err := s.bodies.open(); err != nil {
		s.bodies.close()
		lock.Close()
		return nil, err
	}
	po := &pebble.Options{
		FS:                 s.wal,
		Lock:               lock,
		CacheSize:          o.CacheSize,
		MemTableSize:       o.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{s.log},
		EventListener:      s.eventListener(),
	}
	// Queues are read by scans, and the values are message bodies: 32 KiB
	// blocks (Pebble's default is 4 KiB) scan 1.5-2x faster.
	for i := range po.Levels {
		po.Levels[i].BlockSize = 32 << 10
	}
	// L0 sstables of half a memtable (16 MiB), each level below twice the
	// one above, instead of Pebble's 2 MiB doubling. Pebble counts the
	// blob bytes a table refers to in its size, so at 2 MiB a compaction
	// of 1 MiB bodies wrote a table per two bodies, and creating and
	// deleting files cost as much as the copies value separation saves.
	// Small messages pay a little for it: a backlog's drain spends more in
	// compactions (BENCHMARKS.md, "bodies in blob files").
	po.TargetFileSizes[0] = int64(max(o.MemTableSize/2, 2<<20))
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy { return valueSeparation(o.blobRewriteAge) }
	db, err := pebble.Open(dir, po)
	if err != nil && isStrictReplayError(err) {
		// An older log that does not end cleanly (waldamage.go).
		repaired, rerr := s.repairOlderWALs(dir)
		switch {
		case rerr != nil:
			lock.Close()
			return nil, rerr
		case repaired:
			db, err = pebble.Open(dir, po)
		}
	}
	if err != nil {
		s.bodies.close()
		lock.Close()
		if errors.Is(err, os.ErrPermission) {
			return nil, &dirError{fmt.Sprintf("data directory %s is not accessible: %v", dir, err), ErrAccess, err}
		}
		if errors.Is(err, pebble.ErrCorruption) {
			return nil, fmt.Errorf("data directory %s is damaged, Warren did not start: %w", dir, err)
		}
		return nil, fmt.Errorf("data directory %s: opening the store: %w", dir, err)
	}
	s.db, s.lock = db, lock
	err = s.checkFormat()
	if err == nil {
		err = s.wal.failure() // the format and id writes went to the WAL
	}
	if err == nil {
		err = s.streams.open(s.db)
	}
	if err != nil {
		s.db.Close()
		s.bodies.close()
		s.streams.close()
		s.lock.Close()
		return nil, err
	}
	s.c.init(s)
	go s.commitLoop()
	go s.c.callbackLoop()
	if o.nudgeInterval > 0 {
		go s.nudgeLoop(o.nudgeInterval)
	}
	return s, nil
}

// separateValuesFrom is the smallest value Pebble keeps in a blob file.
const separateValuesFrom = 8 << 10

// valueSeparation keeps values of separateValuesFrom bytes and more (message
// bodies, in practice) in blob files that a flush writes once and
// compactions do not rewrite: a queue's entries are written, read once and
// deleted, and without it every compaction copied the bodies again. A blob
// file is deleted when no sstable refers to it. Blob files kept alive by a
// few old messages are rewritten, one at a time, while more than
// blobGarbageRatio of all blob bytes are garbage, once they are rewriteAge
// old (five minutes; nudgeCompactions sees to it that an idle store does
// this too).
func valueSeparation(rewriteAge time.Duration) pebble.ValueSeparationPolicy {
	return pebble.ValueSeparationPolicy{
		Enabled:     true,
		MinimumSize: separateValuesFrom,
		// Flushes of a queue's head and tail overlap in key range, so L0
		// stacks many sublevels; at 10 (what Pebble's own benchmark tool
		// uses) compactions copied the bodies into new blob files after
		// all (TestCompactionsDoNotCopyBodies).
		MaxBlobReferenceDepth: 100,
		RewriteMinimumAge:     rewriteAge,
		TargetGarbageRatio:    blobGarbageRatio,
	}
}

// checkDir creates dir if needed and checks that it is a readable directory.
func checkDir(fsys vfs.FS, dir string) error {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
			return &dirError{fmt.Sprintf("data directory %s is not a directory: %v", dir, err), ErrAccess, err}
		}
		return &dirError{fmt.Sprintf("data directory %s cannot be created: %v", dir, err), ErrAccess, err}
	}
	if fi, err := fsys.Stat(dir); err != nil {
		return &dirError{fmt.Sprintf("data directory %s is not accessible: %v", dir, err), ErrAccess, err}
	} else if !fi.IsDir() {
		return &dirError{fmt.Sprintf("data directory %s is not a directory", dir), ErrAccess, syscall.ENOTDIR}
	}
	if _, err := fsys.List(dir); err != nil {
		return &dirError{fmt.Sprintf("data directory %s is not readable: %v", dir, err), ErrAccess, err}
	}
	return nil
}

// lockError explains a failure to take the directory lock. fcntl reports a
// lock held by another process as EAGAIN or EACCES; Pebble reports one held
// by this process by its message. Failing to create the lock file is a
// permission problem, not a held lock.
func lockError(dir string, err error) error {
	var pe *fs.PathError
	held := errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "lock held by current process")
	if !held && errors.Is(err, syscall.EACCES) && !errors.As(err, &pe) {
		held = true
	}
	if held {
		return &dirError{fmt.Sprintf("data directory %s is in use by another Warren (lock held)", dir), ErrInUse, err}
	}
	return &dirError{fmt.Sprintf("data directory %s is not writable: %v", dir, err), ErrAccess, err}
}

// checkFormat stamps a new store with FormatVersion, refuses a store of
// another version, and loads the id high-water mark.
func (s *Store) checkFormat() error {
	v, closer, err := s.db.Get(keyFormatVersion)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		empty, err := s.isEmpty()
		if err != nil {
			return err
		}
		if !empty {
			return &dirError{fmt.Sprintf("data directory %s holds a store without a Warren format version (not a Warren data directory?)", s.dir), ErrFormatVersion, errBadKey}
		}
		b := s.db.NewBatch()
		b.Set(keyFormatVersion, binary.BigEndian.AppendUint32(nil, FormatVersion), nil)
		b.Set(keyNextID, binary.BigEndian.AppendUint64(nil, 1), nil)
		b.Set(keyNodeID, binary.BigEndian.AppendUint64(nil, randomNodeID()), nil)
		if err := b.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("data directory %s: creating the store: %w", s.dir, err)
		}
		b.Close()
	case err != nil:
		return fmt.Errorf("data directory %s: reading the format version: %w", s.dir, err)
	default:
		var got uint64 = math.MaxUint64
		if len(v) == 4 {
			got = uint64(binary.BigEndian.Uint32(v))
		}
		closer.Close()
		if what, ok := upgrades[got]; ok {
			if got < 5 {
				n, err := s.rewriteStreamMessages()
				if err != nil {
					return fmt.Errorf("data directory %s: upgrading its streams to format %d: %w", s.dir, FormatVersion, err)
				}
				s.log.Info().Int("streams", n).Msg("streams' messages rewritten into stream files")
			}
			if err := s.db.Set(keyFormatVersion, binary.BigEndian.AppendUint32(nil, FormatVersion), pebble.Sync); err != nil {
				return fmt.Errorf("data directory %s: upgrading the format version: %w", s.dir, err)
			}
			s.log.Info().Uint64("from", got).Int("to", FormatVersion).Msg("store format upgraded: " + what)
		} else if got != FormatVersion {
			return &dirError{fmt.Sprintf("data directory %s has format version %d; this Warren reads version %d", s.dir, got, FormatVersion), ErrFormatVersion, nil}
		}
	}

	if err := s.loadNodeID(); err != nil {
		return err
	}
	// Ids: every id below next-id may have been handed out. Reserve a block
	// above it before handing any out.
	v, closer, err = s.db.Get(keyNextID)
	if err != nil || len(v) != 8 {
		if err == nil {
			closer.Close()
			err = errBadValue
		}
		return fmt.Errorf("data directory %s: reading the id high-water mark: %w", s.dir, err)
	}
	next := binary.BigEndian.Uint64(v)
	closer.Close()
	limit := next + idBlock
	if err := s.db.Set(keyNextID, binary.BigEndian.AppendUint64(nil, limit), pebble.Sync); err != nil {
		return fmt.Errorf("data directory %s: reserving ids: %w", s.dir, err)
	}
	s.ids.next.Store(next - 1)
	s.ids.limit.Store(limit)
	return nil
}

func (s *Store) isEmpty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	empty := !it.First()
	return empty, it.Close()
}

// Close commits what is pending, syncs, and closes the store. Commits after
// Close fail with ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.c.close()
		s.closeMu.Lock()
		s.closed = true
		s.closeMu.Unlock()
		err := s.db.Close()
		s.bodies.close()
		s.streams.close()
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
		s.closeErr = err
	})
	return s.closeErr
}

// NewID returns an id (for a queue or a shared message) that was never
// returned before in this data directory, and never will be. Ids are
// reserved on disk idBlock at a time; the next block is reserved in the
// background when half of the current one is used, so NewID is an atomic add
// and only waits if ids are handed out faster than one commit.
func (s *Store) NewID() uint64 {
	id := s.ids.next.Add(1)
	limit := s.ids.limit.Load()
	if id+idBlock/2 >= limit {
		s.extendIDs()
	}
	if id < limit {
		return id
	}
	s.ids.mu.Lock()
	for id >= s.ids.limit.Load() {
		s.extendIDs()
		s.ids.cond.Wait()
	}
	s.ids.mu.Unlock()
	return id
}

// extendIDs durably raises the id limit by a block unless that is already
// under way.
func (s *Store) extendIDs() {
	if !s.ids.extending.CompareAndSwap(false, true) {
		return
	}
	limit := max(s.ids.limit.Load(), s.ids.next.Load()+1) + idBlock
	t := s.Begin()
	t.b.Set(keyNextID, binary.BigEndian.AppendUint64(nil, limit), nil)
	// The committer answers on ch directly: a callback calling NewID must
	// not wait for a callback queued behind it.
	ch := make(chan error, 1)
	t.commit(true, nil, ch)
	go func() {
		if err := <-ch; err != nil {
			// Nothing written after a failed commit becomes durable, so no id
			// handed out now can collide with a stored one: stop waiting.
			limit = math.MaxUint64
		}
		s.ids.mu.Lock()
		s.ids.limit.Store(limit)
		s.ids.extending.Store(false)
		s.ids.cond.Broadcast()
		s.ids.mu.Unlock()
	}()
}

// Stats reports the commit pipeline's counters and the Pebble metrics worth
// watching.
func (s *Store) Stats() map[string]any {
	done, err := s.read()
	if err != nil {
		return map[string]any{"closed": true}
	}
	defer done()
	c := &s.c
	c.mu.Lock()
	pendingBytes := c.open.b.Len()
	pendingTxns := c.open.txns
	sealed := len(c.sealed)
	c.mu.Unlock()
	commits := c.stats.commits.Load()
	txns := c.stats.txns.Load()
	bytes := c.stats.bytes.Load()
	m := s.db.Metrics()
	st := map[string]any{
		"pending_bytes":             pendingBytes,
		"pending_txns":              pendingTxns,
		"sealed_batches":            sealed,
		"commits":                   commits,
		"syncs":                     c.stats.syncs.Load(),
		"interval_syncs":            c.stats.intervalSyncs.Load(),
		"txns":                      txns,
		"committed_bytes":           bytes,
		"commit_errors":             c.stats.errors.Load(),
		"shared_messages":           c.refCount(),
		"spill_bytes":               s.spill.bytes.Load(),
		"spilled_bodies":            s.spill.bodies.Load(),
		"body_log_bytes":            s.bodies.bytes.Load(),
		"body_log_bodies":           s.bodies.bodies.Load(),
		"body_log_writes":           s.bodies.writes.Load(),
		"body_log_skipped":          s.bodies.skipped.Load(),
		"stream_file_bytes":         s.streams.bytes.Load(),
		"stream_chunk_writes":       s.streams.writes.Load(),
		"pebble_disk_bytes":         m.DiskSpaceUsage(),
		"pebble_read_amp":           m.ReadAmp(),
		"pebble_memtable_size":      m.MemTable.Size,
		"pebble_memtables":          m.MemTable.Count,
		"pebble_wal_bytes":          m.WAL.BytesWritten,
		"pebble_flushes":            m.Flush.Count,
		"pebble_compactions":        m.Compact.Count,
		"pebble_blob_files":         m.BlobFiles.LiveCount,
		"pebble_blob_bytes":         m.BlobFiles.LiveSize,
		"pebble_blob_garbage_bytes": blobGarbage(m),
		"pebble_compact_debt":       m.Compact.EstimatedDebt,
		"pebble_tombstones":         m.Keys.TombstoneCount,
		"pebble_cache_bytes":        m.BlockCache.Size,
		"pebble_cache_hits":         m.BlockCache.Hits,
		"pebble_cache_misses":       m.BlockCache.Misses,
	}
	if commits > 0 {
		st["avg_batch_txns"] = float64(txns) / float64(commits)
		st["avg_batch_bytes"] = float64(bytes) / float64(commits)
	}
	if err := s.failed.Load(); err != nil {
		st["failed"] = (*err).Error()
	}
	return st
}

// pebbleLogger sends Pebble's log lines to zerolog. Pebble's info lines are
// routine (flushes, compactions), so they go out at debug level.
type pebbleLogger struct{ log zerolog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) { l.log.Debug().Msgf(format, args...) }
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error().Msgf(format, args...)
}

// Fatalf is called for invariant violations Pebble cannot continue from; as
// Pebble's own default logger does, it exits.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.WithLevel(zerolog.FatalLevel).Msgf(format, args...)
	os.Exit(1)
}

func (s *Store) eventListener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			if isNoSpace(err) {
				s.backgroundNoSpace(err)
				return
			}
			s.log.Error().Err(err).Msg("pebble background error")
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			s.log.Warn().Str("path", info.Path).Dur("duration", info.Duration).Msg("disk slow")
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			s.log.Warn().Str("reason", info.Reason).Msg("pebble write stall")
		},
		WriteStallEnd: func() {
			s.log.Info().Msg("pebble write stall ended")
		},
	}
}

// Figures are the store's figures worth a dashboard: the commit pipeline's
// counters and Pebble's own.
type Figures struct {
	Commits, Syncs, CommitErrors uint64 // commit batches, fsyncs, failed commits
	CommittedBytes               uint64
	WALBytesWritten              uint64 // Pebble's WAL, since start
	DiskBytes                    uint64 // every file of the store, spill files too
	CompactionDebt               uint64 // bytes compaction estimates it still has to rewrite
	ReadAmp                      int    // sublevels a read may consult
	Flushes, Compactions         int64
	CacheBytes                   int64
	CacheHits, CacheMisses       int64
}

// Figures returns the store's figures; ok is false once it is closed.
func (s *Store) Figures() (f Figures, ok bool) {
	done, err := s.read()
	if err != nil {
		return Figures{}, false
	}
	defer done()
	c := &s.c
	m := s.db.Metrics()
	return Figures{
		Commits: c.stats.commits.Load(), Syncs: c.stats.syncs.Load() + c.stats.intervalSyncs.Load(),
		CommitErrors: c.stats.errors.Load(), CommittedBytes: c.stats.bytes.Load(),
		WALBytesWritten: m.WAL.BytesWritten, DiskBytes: m.DiskSpaceUsage() + uint64(max(0, s.spill.bytes.Load())) + uint64(max(0, s.bodies.bytes.Load())) + uint64(max(0, s.streams.bytes.Load())),
		CompactionDebt: m.Compact.EstimatedDebt, ReadAmp: m.ReadAmp(),
		Flushes: m.Flush.Count, Compactions: m.Compact.Count,
		CacheBytes: m.BlockCache.Size, CacheHits: m.BlockCache.Hits, CacheMisses: m.BlockCache.Misses,
	}, true
}
