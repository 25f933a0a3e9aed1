package storage

import (
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS is the filesystem Pebble writes through. It passes everything on
// unchanged except the sync of a write-ahead log file, which the committer
// turns into a plain write-through when the batch it applies needs no
// fsync. See "Durability" in the package doc for why.
//
// Pebble's WAL writer only writes its current 32 KiB block to the file when
// a sync is requested or the block fills; a batch applied with NoSync can
// stay in process memory indefinitely. So the committer applies every batch
// with pebble.Sync, which makes the writer write the block, and sets fsync
// for the duration of that Apply: false means the WAL file's Sync returns
// once the data is written (it is in the OS's page cache), true means it
// fsyncs. Only the committer applies batches after Open, one at a time, so
// the flag always belongs to the Apply in progress; outside an Apply it is
// true, so a sync Pebble asks for on its own is a real one.
//
// walFS also keeps WAL write errors from Pebble. Pebble v2.1.7 cannot
// survive one: a failed synced commit is a Fatalf ("fatal commit error"), a
// failed unsynced one makes a later write panic, and a WAL that cannot be
// closed at rotation panics with its mutex unlocked, which is fatal. So a
// failed write or fsync of a WAL file is recorded here and reported to
// Pebble as a success, and from then on nothing more is written to any WAL
// file (a later write that succeeded would leave a hole before it). The
// committer checks failure after every Apply and fails that batch and the
// store (see Store.fail): no confirm is sent for data that may not be on
// disk, and a restart replays the log up to the failed write.
type walFS struct {
	vfs.FS
	fsync atomic.Bool
	err   atomic.Pointer[error] // the first WAL write or sync error
}

// failure is the first WAL write or sync error, or nil.
func (fs *walFS) failure() error {
	if p := fs.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (fs *walFS) setFailure(err error) {
	fs.err.CompareAndSwap(nil, &err)
}

func newWALFS(fs vfs.FS) *walFS {
	w := &walFS{FS: fs}
	w.fsync.Store(true)
	return w
}

// isWAL reports whether name is a Pebble write-ahead log ("000123.log").
func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs *walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !isWAL(name) {
		return f, err
	}
	return &walFile{File: f, fs: fs}, nil
}

// ReuseForWrite is how Pebble recycles an old log as a new one.
func (fs *walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil || !isWAL(newname) {
		return f, err
	}
	return &walFile{File: f, fs: fs}, nil
}

// walFile is an open write-ahead log. unsynced is set while data written
// through has not been fsynced.
type walFile struct {
	vfs.File
	fs       *walFS
	unsynced atomic.Bool
}

// Write writes p, or after any WAL failure nothing; either way it tells
// Pebble it wrote p (see walFS).
func (f *walFile) Write(p []byte) (int, error) {
	if f.fs.failure() != nil {
		return len(p), nil
	}
	if _, err := f.File.Write(p); err != nil {
		f.fs.setFailure(err)
	}
	return len(p), nil
}

// Sync and SyncData fsync, or with fs.fsync false only note that the file
// now holds unsynced data (Pebble has just written it). Pebble's syncing
// wrapper calls SyncData for a WAL sync.
func (f *walFile) Sync() error     { return f.sync(f.File.Sync) }
func (f *walFile) SyncData() error { return f.sync(f.File.SyncData) }

func (f *walFile) sync(fsync func() error) error {
	if !f.fs.fsync.Load() {
		f.unsynced.Store(true)
		return nil
	}
	f.unsynced.Store(false)
	if err := fsync(); err != nil {
		f.fs.setFailure(err)
	}
	return nil
}

// Close fsyncs a log that still holds unsynced data. Pebble closes the old
// log before it creates the next one (rotateWAL), so this keeps every log
// behind the current one fully synced: a later fsync of the new log can
// never leave a hole in an older one after a machine crash.
func (f *walFile) Close() error {
	if f.unsynced.Load() {
		if err := f.File.SyncData(); err != nil {
			f.fs.setFailure(err)
		}
		f.unsynced.Store(false)
	}
	if err := f.File.Close(); err != nil {
		f.fs.setFailure(err)
	}
	return nil
}
