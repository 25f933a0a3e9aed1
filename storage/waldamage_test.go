package storage

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// walImage writes n entries of about 1 KiB to queue 1 (about n/32 WAL
// blocks), one Txn each, durable or not, and returns what a process crash
// leaves of the store.
func walImage(t *testing.T, n int, durable bool) *vfs.MemFS {
	t.Helper()
	s, fs := openCrashable(t, Options{Sync: SyncAlways, SyncInterval: time.Hour})
	body := make([]byte, 1000)
	for seq := uint64(1); seq <= uint64(n); seq++ {
		txn := s.Begin()
		txn.PutEntry(1, 0, seq, &Entry{Persistent: true, Msg: &Message{Body: body}})
		txn.Commit(durable, nil)
		if durable {
			waitSynced(t, s)
		}
	}
	waitApplied(s)
	return processCrash(fs)
}

// newestWAL returns the path of the highest-numbered log in data.
func newestWAL(t *testing.T, fs vfs.FS) string {
	t.Helper()
	names, err := fs.List("data")
	must(t, err)
	newest := ""
	for _, n := range names {
		if strings.HasSuffix(n, ".log") && n > newest {
			newest = n
		}
	}
	if newest == "" {
		t.Fatal("no WAL")
	}
	return fs.PathJoin("data", newest)
}

// overwrite writes b at off in path.
func overwrite(t *testing.T, fs vfs.FS, path string, off int64, b []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, off)
	must(t, err)
}

func openImage(t *testing.T, fs vfs.FS, o Options) (*Store, string, error) {
	t.Helper()
	var log syncBuffer
	o.FS, o.Logger = fs, zerolog.New(&log)
	s, err := Open("data", o)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, log.String(), err
}

// recoveredSeqs recovers s keeping queue 1 and lists its seqs.
func recoveredSeqs(t *testing.T, s *Store) []uint64 {
	t.Helper()
	_, err := s.Recover(map[uint64]bool{1: true})
	must(t, err)
	var seqs []uint64
	must(t, s.ScanQueue(1, 0, 0, 0, func(seq uint64, e *Entry) bool {
		seqs = append(seqs, seq)
		return true
	}))
	return seqs
}

func TestWALDamage(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			// 200 KiB: one WAL (the first memtable is 256 KiB).
			image := walImage(t, 200, durable)
			path := newestWAL(t, image)
			// Damage three bytes in the middle of the log.
			st, err := image.Stat(path)
			must(t, err)
			if st.Size() < 4*walBlockSize {
				t.Fatalf("the newest WAL holds only %d bytes", st.Size())
			}
			overwrite(t, image, path, st.Size()/2, []byte{0xff, 0x00, 0xff})

			// The default refuses, saying where and what.
			refused := processCrash(image) // a copy
			_, log, err := openImage(t, refused, Options{})
			if !errors.Is(err, ErrWALDamaged) {
				t.Fatalf("Open of a damaged WAL: %v, want ErrWALDamaged", err)
			}
			for _, want := range []string{path, "offset", "records", "storage.wal_damage"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			if !strings.Contains(log, `"level":"error"`) {
				t.Errorf("nothing logged at error level: %s", log)
			}

			// Truncate starts without the records after the damage, logs
			// what it dropped at error level, and keeps the damaged file.
			s, log, err := openImage(t, image, Options{WALDamage: WALDamageTruncate})
			if err != nil {
				t.Fatalf("Open with WALDamageTruncate: %v", err)
			}
			if !strings.Contains(log, `"level":"error"`) || !strings.Contains(log, "records_dropped") || !strings.Contains(log, path) {
				t.Errorf("the dropped records are not logged at error level: %s", log)
			}
			seqs := recoveredSeqs(t, s)
			if len(seqs) >= 200 || len(seqs) > 0 && seqs[len(seqs)-1] != uint64(len(seqs)) {
				t.Errorf("after truncating, the queue holds %d entries, want a prefix of the 200", len(seqs))
			}
			if durable && len(seqs) < 50 {
				t.Errorf("after truncating, the queue holds %d entries, want those before the damage", len(seqs))
			}
			names, _ := image.List("data")
			kept := false
			for _, n := range names {
				kept = kept || strings.HasPrefix(n, "damaged-")
			}
			if !kept {
				t.Errorf("the damaged log was not kept: %v", names)
			}
		})
	}
}

// A torn tail, with nothing valid after it, is what a crash leaves: it is
// not damage.
func TestWALTornTailIsNotDamage(t *testing.T) {
	image := walImage(t, 200, true)
	path := newestWAL(t, image)
	st, err := image.Stat(path)
	must(t, err)
	zeros := make([]byte, st.Size()-st.Size()/2)
	overwrite(t, image, path, st.Size()/2, zeros)
	s, log, err := openImage(t, image, Options{})
	if err != nil {
		t.Fatalf("Open after a torn tail: %v", err)
	}
	if strings.Contains(log, `"level":"error"`) {
		t.Errorf("a torn tail logged an error: %s", log)
	}
	if seqs := recoveredSeqs(t, s); len(seqs) < 50 || len(seqs) >= 200 {
		t.Errorf("after a torn tail the queue holds %d entries, want those before the tear", len(seqs))
	}
}

// noFlushFS fails the creation of sstables and blob files, as a full disk
// does: memtables cannot be flushed, so their logs stay to be replayed.
type noFlushFS struct{ vfs.FS }

func (fs noFlushFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") {
		return nil, syscall.ENOSPC
	}
	return fs.FS.Create(name, c)
}

// twoWALImage writes 1 KiB entries to queue 1 on a store whose memtables
// cannot be flushed until a second log holds at least 64 KiB, and returns
// what a process crash leaves: two logs Pebble must replay, older first,
// and how many entries were written.
func twoWALImage(t *testing.T) (*vfs.MemFS, []string, uint64) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	s, err := Open("data", Options{FS: noFlushFS{mem}, Logger: zerolog.Nop(), MemTableSize: 1 << 20, SyncInterval: time.Hour})
	must(t, err)
	defer s.Close()
	_, err = s.Recover(map[uint64]bool{1: true})
	must(t, err)
	body := make([]byte, 1000)
	seq := uint64(0)
	// Two memtables of 1 MiB are as many as Pebble holds before it stops
	// writes: the loop ends well before.
	for seq < 1800 {
		for range 50 {
			seq++
			txn := s.Begin()
			txn.PutEntry(1, 0, seq, &Entry{Persistent: true, Msg: &Message{Body: body}})
			txn.Commit(false, nil)
		}
		waitSynced(t, s)
		if logs := walNames(t, mem); len(logs) == 2 {
			if st, err := mem.Stat(logs[1]); err == nil && st.Size() >= 64<<10 {
				return processCrash(mem), logs, seq
			}
		}
	}
	t.Fatalf("no second log of 64 KiB after %d entries: %v", seq, walNames(t, mem))
	return nil, nil, 0
}

// walNames lists the logs in data, oldest first.
func walNames(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List("data")
	must(t, err)
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			out = append(out, fs.PathJoin("data", n))
		}
	}
	slices.Sort(out)
	return out
}

// tearTail zeroes the last n bytes of path, as a write that failed
// halfway leaves them.
func tearTail(t *testing.T, fs vfs.FS, path string, n int64) {
	t.Helper()
	st, err := fs.Stat(path)
	must(t, err)
	overwrite(t, fs, path, st.Size()-n, make([]byte, n))
}

// A write that failed tore an older log, and the later one holds nothing
// (walFS writes nothing after a failed write): Pebble would refuse to
// replay it; Warren opens with the records before the tear, which were
// all that was ever acknowledged.
func TestOlderWALTornByAFailedWrite(t *testing.T) {
	image, logs, written := twoWALImage(t)
	tearTail(t, image, logs[0], 5000)
	f, err := image.Create(logs[1], vfs.WriteCategoryUnspecified) // empties it
	must(t, err)
	must(t, f.Close())
	s, log, err := openImage(t, image, Options{})
	if err != nil {
		t.Fatalf("Open after a torn older log and an empty newer one: %v", err)
	}
	if !strings.Contains(log, `"level":"warn"`) || !strings.Contains(log, logs[0]) {
		t.Errorf("the torn older log was not reported: %s", log)
	}
	seqs := recoveredSeqs(t, s)
	if len(seqs) == 0 || len(seqs) >= int(written) || seqs[len(seqs)-1] != uint64(len(seqs)) {
		t.Errorf("after the tear the queue holds %d of %d entries, want those the first log holds before the tear, in order", len(seqs), written)
	}
}

// Damage in an older log with records after it, in later logs, is a hole
// in the history: refused by default, naming the log, the offset and the
// records lost; with WALDamageTruncate the store opens on the prefix
// before the damage, the later logs set aside.
func TestOlderWALDamageWithRecordsAfter(t *testing.T) {
	image, logs, written := twoWALImage(t)
	tearTail(t, image, logs[0], 5000)

	refused := processCrash(image) // a copy
	_, log, err := openImage(t, refused, Options{})
	if !errors.Is(err, ErrWALDamaged) {
		t.Fatalf("Open with records after the damage: %v, want ErrWALDamaged", err)
	}
	for _, want := range []string{logs[0], "offset", "records", "storage.wal_damage"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if !strings.Contains(log, `"level":"error"`) {
		t.Errorf("nothing logged at error level: %s", log)
	}

	s, log, err := openImage(t, image, Options{WALDamage: WALDamageTruncate})
	if err != nil {
		t.Fatalf("Open with WALDamageTruncate: %v", err)
	}
	if !strings.Contains(log, "records_dropped") || !strings.Contains(log, "later_logs_set_aside") {
		t.Errorf("what was dropped is not logged: %s", log)
	}
	seqs := recoveredSeqs(t, s)
	if len(seqs) == 0 || len(seqs) >= int(written) || seqs[len(seqs)-1] != uint64(len(seqs)) {
		t.Errorf("after truncating, the queue holds %d of %d entries, want a prefix with no hole", len(seqs), written)
	}
	set := 0
	for _, n := range walNamesAll(t, image) {
		if strings.HasPrefix(image.PathBase(n), "damaged-") {
			set++
		}
	}
	if set != 2 {
		t.Errorf("%d logs kept aside, want the damaged one and the later one", set)
	}
}

// walNamesAll lists every file in data.
func walNamesAll(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List("data")
	must(t, err)
	return names
}
