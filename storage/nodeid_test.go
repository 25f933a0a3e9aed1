package storage

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// A store is made with a random node id, which it keeps across reopens;
// another store gets another; a store from before node ids has none until
// one is recorded; a renewed id lasts.
func TestNodeID(t *testing.T) {
	s, fs := openMem(t, nil)
	first := s.NodeID()
	if first == 0 {
		t.Fatal("a new store has no node id")
	}
	s.Close()
	s, _ = openMem(t, fs)
	if got := s.NodeID(); got != first {
		t.Fatalf("reopened, the node id is %x, was %x", got, first)
	}
	other, _ := openMem(t, nil)
	if other.NodeID() == first || other.NodeID() == 0 {
		t.Fatalf("two new stores have node ids %x and %x", first, other.NodeID())
	}
	other.Close()

	// As a store written before node ids were stored.
	must(t, s.db.Delete(keyNodeID, pebble.Sync))
	s.Close()
	s, _ = openMem(t, fs)
	if got := s.NodeID(); got != 0 {
		t.Fatalf("a store without a node id reads %x", got)
	}
	must(t, s.SetNodeID(42))
	renewed, err := s.RenewNodeID()
	must(t, err)
	if renewed == 42 || renewed == 0 || s.NodeID() != renewed {
		t.Fatalf("renewed to %x, reads %x", renewed, s.NodeID())
	}
	if s.SetNodeID(0) == nil {
		t.Fatal("a node id of 0 was taken")
	}
	s.Close()
	s, _ = openMem(t, fs)
	defer s.Close()
	if got := s.NodeID(); got != renewed {
		t.Fatalf("reopened after a renewal, the node id is %x, want %x", got, renewed)
	}
}
