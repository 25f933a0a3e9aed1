package storage

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/internal/poll"
)

// A disk short of space holds the writes, in order, until there is room:
// the callbacks run late, never with an error, and Health says why
// meanwhile.
func TestWritesWaitForDiskSpace(t *testing.T) {
	held := make(chan struct{}, 1)
	s, fs := openCrashable(t, Options{afterHold: func() { held <- struct{}{} }})
	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 20, TotalBytes: 1 << 30})
	s.space.figuresAt.Store(0)

	done := make(chan error, 3)
	putEntries(s, 1, 3, false)
	s.Begin().Commit(true, func(err error) { done <- err })
	<-held
	if err := s.Health(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Health while writes are held: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("a commit completed (%v) while the disk had no room", err)
	default:
	}

	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30})
	s.Begin().Commit(true, func(err error) { done <- err }) // wakes the committer
	for i := 0; i < 2; i++ {
		must(t, <-done)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("Health once there is room: %v", err)
	}
	if got := queueSeqs(t, processCrash(fs)); len(got) != 2 {
		t.Fatalf("after the wait the queue holds %v, want [1 2]", got)
	}
}

// Close while writes are held fails them instead of waiting forever.
func TestCloseFailsHeldWrites(t *testing.T) {
	held := make(chan struct{}, 1)
	fs := vfs.NewCrashableMem()
	s, err := Open("data", Options{FS: fs, Logger: zerolog.Nop(), afterHold: func() { held <- struct{}{} }})
	must(t, err)
	_, err = s.Recover(nil)
	must(t, err)
	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 20, TotalBytes: 1 << 30})
	s.space.figuresAt.Store(0)
	done := make(chan error, 1)
	s.Begin().Commit(true, func(err error) { done <- err })
	<-held
	must(t, s.Close())
	if err := <-done; !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a write held at Close got %v, want ErrNoSpace", err)
	}
}

// logFilesFS wraps the WAL files (".log") fs creates.
type logFilesFS struct {
	vfs.FS
	wrap func(vfs.File) vfs.File
}

func (fs logFilesFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err == nil && strings.HasSuffix(name, ".log") {
		f = fs.wrap(f)
	}
	return f, err
}

// noSpaceFile fails writes with ENOSPC once full is set, as a disk that
// filled up behind the alarm's back.
type noSpaceFile struct {
	vfs.File
	full *atomic.Bool
}

func (f noSpaceFile) Write(p []byte) (int, error) {
	if f.full.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.Write(p)
}

// A write that fails anyway (the disk filled behind the floor check's back)
// stops the store's writes with an error that says why; nothing panics or
// exits, even when the failed write is Pebble closing the WAL at rotation,
// and what was confirmed before stays.
func TestFailedWALWriteStopsWrites(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes int // written after the disk fills, before a durable commit
	}{
		{"ack", 100},
		{"rotation", 1 << 20}, // past the first 256 KiB memtable
	} {
		t.Run(c.name, func(t *testing.T) {
			var full atomic.Bool
			mem := vfs.NewCrashableMem()
			s, err := Open("data", Options{FS: logFilesFS{mem, func(f vfs.File) vfs.File { return noSpaceFile{f, &full} }}, Logger: zerolog.Nop(), SyncInterval: time.Hour})
			must(t, err)
			defer s.Close()
			_, err = s.Recover(map[uint64]bool{1: true})
			must(t, err)
			putEntries(s, 1, 3, true)
			waitSynced(t, s)

			full.Store(true)
			body := make([]byte, c.bytes)
			txn := s.Begin()
			txn.PutEntry(1, 0, 3, &Entry{Persistent: true, Msg: &Message{Body: body}})
			txn.Commit(false, nil)
			done := make(chan error, 1)
			s.Begin().Commit(true, func(err error) { done <- err })
			if err := <-done; err == nil {
				t.Fatal("a commit succeeded after the WAL could not be written")
			}
			if err := s.Health(); err == nil || !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("Health after a failed write: %v", err)
			}
			putEntries(s, 4, 5, false)
			s.Begin().Commit(true, func(err error) { done <- err })
			if err := <-done; err == nil {
				t.Fatal("the store took a write after a failed one")
			}
			if got := queueSeqs(t, processCrash(mem)); len(got) < 2 || got[0] != 1 || got[1] != 2 {
				t.Fatalf("after the failure the confirmed entries are not all there: %v", got)
			}
		})
	}
}

// gatedFile holds writes while the gate is shut (the test holds it), as
// a disk that cannot keep up.
type gatedFile struct {
	vfs.File
	gate *sync.RWMutex
}

func (f gatedFile) Write(p []byte) (int, error) {
	f.gate.RLock()
	defer f.gate.RUnlock()
	return f.File.Write(p)
}

// While the store cannot write, large Txns (each a commit batch of its
// own) wait in Commit once maxPending bytes are queued, rather than
// queueing in memory without bound.
func TestLargeTxnsWaitForTheStore(t *testing.T) {
	var gate sync.RWMutex
	// maxPending is then 1 MiB, room for four Txns.
	s, err := Open("data", Options{FS: logFilesFS{vfs.NewMem(), func(f vfs.File) vfs.File { return gatedFile{f, &gate} }}, Logger: zerolog.Nop(), MaxBatchBytes: 256 << 10})
	must(t, err)
	_, err = s.Recover(nil)
	must(t, err)

	c := &s.c
	pending := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.open.b.Len() + c.sealedBytes
	}
	limit := c.maxPending + 2*(handOverBytes+64)
	gate.Lock()
	const n = 40
	var returned atomic.Int32
	var overshoot atomic.Int64 // the first queue past the limit a Commit returned to
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := make([]byte, handOverBytes+1)
		for i := range n {
			txn := s.Begin()
			txn.PutEntry(1, 0, uint64(i), &Entry{Msg: &Message{Body: body}})
			txn.Commit(false, nil)
			if p := pending(); p > limit {
				overshoot.CompareAndSwap(0, int64(p))
			}
			returned.Add(1)
		}
	}()
	// The queue fills until the next Commit must wait: the store cannot
	// write, so from then on no Commit may return.
	poll.Until(t, 10*time.Second, "the queue to fill to its bound", func() bool {
		return pending()+handOverBytes+1 > c.maxPending || overshoot.Load() != 0
	})
	if p := overshoot.Load(); p != 0 {
		t.Errorf("%d bytes queued for a store that cannot write, want at most %d", p, limit)
	}
	if got := returned.Load(); got == n {
		t.Errorf("all %d commits returned while the store could not write", n)
	}
	gate.Unlock()
	<-done
	must(t, s.Close())
}
