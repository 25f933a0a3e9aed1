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
type walFS struct {
	vfs.FS
	fsync atomic.Bool
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
	return fsync()
}

// Close fsyncs a log that still holds unsynced data. Pebble closes the old
// log before it creates the next one (rotateWAL), so this keeps every log
// behind the current one fully synced: a later fsync of the new log can
// never leave a hole in an older one after a machine crash.
func (f *walFile) Close() error {
	if f.unsynced.Load() {
		if err := f.File.SyncData(); err != nil {
			_ = f.File.Close()
			return err
		}
		f.unsynced.Store(false)
	}
	return f.File.Close()
}
