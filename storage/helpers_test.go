package storage

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// openMem opens a store on fs (a fresh in-memory filesystem if nil).
func openMem(t testing.TB, fs vfs.FS) (*Store, vfs.FS) {
	t.Helper()
	if fs == nil {
		fs = vfs.NewMem()
	}
	s, err := Open("data", Options{FS: fs, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, fs
}

// openRecovered opens a store on fs and recovers it keeping every queue.
func openRecovered(t testing.TB, fs vfs.FS) (*Store, vfs.FS) {
	t.Helper()
	s, fs := openMem(t, fs)
	if _, err := s.Recover(nil); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return s, fs
}

// commit commits t durably and fails the test on error.
func commit(tb testing.TB, t *Txn) {
	tb.Helper()
	if err := t.CommitWait(); err != nil {
		tb.Fatalf("commit: %v", err)
	}
}
