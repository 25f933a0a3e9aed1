package storage

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// These tests take what a crash would leave of an in-memory filesystem
// (vfs.MemFS.CrashClone) while the store is still running, and open a store
// on that image. A process crash (kill -9) keeps everything written to the
// OS; a machine crash keeps only what was fsynced.

func processCrash(fs *vfs.MemFS) *vfs.MemFS {
	return fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 2))})
}

func machineCrash(fs *vfs.MemFS) *vfs.MemFS {
	return fs.CrashClone(vfs.CrashCloneCfg{})
}

func openCrashable(t *testing.T, o Options) (*Store, *vfs.MemFS) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	o.FS, o.Logger = fs, zerolog.Nop()
	s, err := Open("data", o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Recover(nil); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return s, fs
}

// queueSeqs reopens the image and lists queue 1's seqs at priority 0.
func queueSeqs(t *testing.T, image *vfs.MemFS) []uint64 {
	t.Helper()
	s, err := Open("data", Options{FS: image, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("Open after the crash: %v", err)
	}
	defer s.Close()
	if _, err := s.Recover(map[uint64]bool{1: true}); err != nil {
		t.Fatalf("Recover after the crash: %v", err)
	}
	var seqs []uint64
	must(t, s.ScanQueue(1, 0, 0, 0, func(seq uint64, e *Entry) bool {
		seqs = append(seqs, seq)
		return true
	}))
	return seqs
}

func putEntries(s *Store, from, to uint64, durable bool) {
	for seq := from; seq < to; seq++ {
		t := s.Begin()
		t.PutEntry(1, 0, seq, &Entry{Persistent: true, Msg: &Message{Body: []byte(fmt.Sprint("m", seq))}})
		t.Commit(durable, nil)
	}
}

// waitApplied returns once every Txn committed so far is applied.
func waitApplied(s *Store) { s.c.waitApplied() }

// waitSynced returns once every Txn committed so far is synced (per
// Options.Sync).
func waitSynced(t *testing.T, s *Store) {
	t.Helper()
	done := make(chan error, 1)
	s.Begin().Commit(true, func(err error) { done <- err })
	must(t, <-done)
}

// Acks and delivery marks are non-durable commits: once applied they are
// in the OS, so a kill -9 cannot undo them, however long ago they were.
func TestNonDurableCommitsSurviveAProcessCrash(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			s, fs := openCrashable(t, Options{Sync: mode, SyncInterval: time.Hour})
			putEntries(s, 1, 11, true)
			waitSynced(t, s)
			// Ack 1..5: small non-durable deletes, far less than a WAL block.
			for seq := uint64(1); seq <= 5; seq++ {
				txn := s.Begin()
				txn.DeleteEntry(1, 0, seq, Deleted{})
				txn.Commit(false, nil)
			}
			waitApplied(s)
			got := queueSeqs(t, processCrash(fs))
			if fmt.Sprint(got) != "[6 7 8 9 10]" {
				t.Fatalf("after a process crash the queue holds %v, want [6 7 8 9 10]: acknowledged deletes came back", got)
			}
		})
	}
}

// With SyncNever a durable commit's callback runs once the batch is
// written through: a process crash keeps it.
func TestSyncNeverSurvivesAProcessCrash(t *testing.T) {
	s, fs := openCrashable(t, Options{Sync: SyncNever})
	putEntries(s, 1, 4, false)
	waitSynced(t, s)
	if got := queueSeqs(t, processCrash(fs)); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("after a process crash the queue holds %v, want [1 2 3]", got)
	}
}

// With SyncAlways a durable commit is fsynced before its callback runs,
// and so is everything committed before it.
func TestDurableCommitSurvivesAMachineCrash(t *testing.T) {
	s, fs := openCrashable(t, Options{Sync: SyncAlways, SyncInterval: time.Hour})
	putEntries(s, 1, 4, false)
	waitApplied(s)
	if got := queueSeqs(t, machineCrash(fs)); len(got) != 0 {
		t.Fatalf("non-durable writes were fsynced before their interval: %v", got)
	}
	waitSynced(t, s)
	if got := queueSeqs(t, machineCrash(fs)); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("after a machine crash the queue holds %v, want [1 2 3]", got)
	}
}

// Non-durable writes are fsynced SyncInterval after the first of them even
// when nothing else is committed.
func TestSyncIntervalFsyncsWithoutFurtherCommits(t *testing.T) {
	synced := make(chan struct{}, 1)
	s, fs := openCrashable(t, Options{Sync: SyncAlways, SyncInterval: 20 * time.Millisecond,
		afterIntervalSync: func() {
			select {
			case synced <- struct{}{}:
			default:
			}
		}})
	putEntries(s, 1, 4, false)
	<-synced
	if got := queueSeqs(t, machineCrash(fs)); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("after the sync interval and a machine crash the queue holds %v, want [1 2 3]", got)
	}
}

// A WAL closed at rotation while it holds writes that were only written
// through is fsynced on close, so a later fsync of the next WAL never
// leaves a hole behind it.
func TestRotatedWALIsSyncedOnClose(t *testing.T) {
	s, fs := openCrashable(t, Options{Sync: SyncAlways, SyncInterval: time.Hour, MemTableSize: 1 << 20, MaxBatchBytes: 64 << 10})
	body := make([]byte, 4<<10)
	const n = 1000 // 4 MB through 1 MiB memtables: several rotations
	for seq := uint64(1); seq <= n; seq++ {
		t := s.Begin()
		t.PutEntry(1, 0, seq, &Entry{Persistent: true, Msg: &Message{Body: body}})
		t.Commit(false, nil)
	}
	waitSynced(t, s)
	if got := queueSeqs(t, machineCrash(fs)); len(got) != n {
		t.Fatalf("after a machine crash the queue holds %d entries, want %d", len(got), n)
	}
}
