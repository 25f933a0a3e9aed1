package storage

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// A data directory has a node id, a random non-zero number made in the
// same batch as the store itself (checkFormat), so that every data
// directory, and every node that starts on an empty one, is a new
// incarnation for the cluster (core/cluster's doc says why). A store
// made before node ids were stored has none: NodeID is 0 until the
// cluster records the id such a node had (SetNodeID).

// NodeID is the data directory's node id; 0 when the store was made
// before node ids were stored and none has been recorded since.
func (s *Store) NodeID() uint64 { return s.nodeID.Load() }

// SetNodeID records id as the data directory's node id, durably, before
// it returns.
func (s *Store) SetNodeID(id uint64) error {
	if id == 0 {
		return errors.New("storage: a node id is never 0")
	}
	t := s.Begin()
	t.b.Set(keyNodeID, binary.BigEndian.AppendUint64(nil, id), nil)
	ch := make(chan error, 1)
	t.commit(true, nil, ch)
	if err := <-ch; err != nil {
		return err
	}
	s.nodeID.Store(id)
	return nil
}

// RenewNodeID gives the data directory a new random node id, durably,
// and returns it: the node is a new incarnation from then on.
func (s *Store) RenewNodeID() (uint64, error) {
	id := randomNodeID()
	return id, s.SetNodeID(id)
}

// loadNodeID reads the stored node id at Open.
func (s *Store) loadNodeID() error {
	v, closer, err := s.db.Get(keyNodeID)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err == nil && len(v) != 8 {
		closer.Close()
		err = errBadValue
	}
	if err != nil {
		return fmt.Errorf("data directory %s: reading the node id: %w", s.dir, err)
	}
	s.nodeID.Store(binary.BigEndian.Uint64(v))
	closer.Close()
	return nil
}

// randomNodeID is a random non-zero id.
func randomNodeID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}
