package storage

import (
	"errors"
	"fmt"
	"strings"
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
