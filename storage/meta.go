package storage

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/warrenmq/warren/protocol"
)

// MetaRecord is one metadata record as listed by Meta. VHost is empty for
// users and plugins; a vhost record has its name in both VHost and Name.
// Seq is set for bindings only.
type MetaRecord struct {
	VHost, Name string
	Seq         uint64
	Rec         protocol.Table
}

// The metadata writes go through the commit pipeline like any Txn (so they
// are ordered with the Txns committed before them) and return once the
// change is durable: the broker may send its -ok after they return.

// PutMeta creates or replaces a metadata record. For the global kinds
// (KindVHost, KindUser, KindPlugin, KindParameter) vhost must be empty, except that a
// vhost's name may be passed as either vhost or name.
func (s *Store) PutMeta(kind Kind, vhost, name string, rec protocol.Table) error {
	key, err := metaKey(kind, vhost, name)
	if err != nil {
		return err
	}
	return s.putMeta(key, rec)
}

// DeleteMeta deletes a metadata record (deleting a missing one is no error).
// Deleting a vhost record alone leaves what is under it: use DeleteVHost.
func (s *Store) DeleteMeta(kind Kind, vhost, name string) error {
	key, err := metaKey(kind, vhost, name)
	if err != nil {
		return err
	}
	t := s.Begin()
	t.b.Delete(key, nil)
	return t.CommitWait()
}

// PutBinding creates or replaces the binding with sequence number seq in
// vhost. Bindings list in seq order, so replaying them in creation order is
// a matter of giving them increasing seqs.
func (s *Store) PutBinding(vhost string, seq uint64, rec protocol.Table) error {
	return s.putMeta(bindingKey(vhost, seq), rec)
}

// DeleteBinding deletes the binding with sequence number seq in vhost.
func (s *Store) DeleteBinding(vhost string, seq uint64) error {
	t := s.Begin()
	t.b.Delete(bindingKey(vhost, seq), nil)
	return t.CommitWait()
}

func (s *Store) putMeta(key []byte, rec protocol.Table) error {
	val, err := protocol.AppendTable(nil, rec)
	if err != nil {
		return fmt.Errorf("storage: encoding the record of %q: %w", key, err)
	}
	t := s.Begin()
	t.b.Set(key, val, nil)
	return t.CommitWait()
}

// DeleteVHost deletes a vhost's record and, in the same batch, everything
// stored under it: its exchanges, queues, bindings, policies,
// permissions and parameters (range deletions), and the entries of the queues in queueIDs
// (as DeleteQueue does, dropping their references to shared messages) or
// the messages of the streams among them.
func (s *Store) DeleteVHost(vhost string, queueIDs []uint64) error {
	key, err := metaKey(KindVHost, vhost, "")
	if err != nil {
		return err
	}
	t := s.Begin()
	t.b.Delete(key, nil)
	for _, kind := range perVHostKinds {
		p := metaVHostPrefix(kind, vhost)
		t.b.DeleteRange(p, prefixEnd(p), nil)
	}
	hp := heldVHostPrefix(vhost)
	t.b.DeleteRange(hp, prefixEnd(hp), nil)
	for _, qid := range queueIDs {
		t.DeleteQueue(qid)
		t.DeleteStream(qid) // ids are never shared: nothing else is there
	}
	if len(queueIDs) > 0 && !s.recovered.Load() {
		t.Abort()
		return ErrNotRecovered
	}
	return t.CommitWait()
}

// Meta lists the records of a kind in key order: names in byte order within
// a vhost, vhosts in byte order, bindings in seq order. vhost selects one
// vhost for the per-vhost kinds ("" = all); it is ignored for the global
// kinds.
func (s *Store) Meta(kind Kind, vhost string) ([]MetaRecord, error) {
	if !kind.valid() {
		return nil, fmt.Errorf("storage: unknown metadata kind %d", uint8(kind))
	}
	done, err := s.read()
	if err != nil {
		return nil, err
	}
	defer done()
	s.c.waitApplied()
	lo := metaPrefix(kind)
	if vhost != "" && !kind.global() {
		lo = metaVHostPrefix(kind, vhost)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, err
	}
	var out []MetaRecord
	for ok := it.First(); ok; ok = it.Next() {
		r := MetaRecord{}
		r.VHost, r.Name, r.Seq, err = parseMetaKey(kind, it.Key())
		if err != nil {
			err = fmt.Errorf("storage: %s record %q: %w", kind, it.Key(), err)
			break
		}
		v, verr := it.ValueAndErr()
		if verr != nil {
			err = verr
			break
		}
		if r.Rec, _, err = protocol.DecodeTable(v); err != nil {
			err = fmt.Errorf("storage: %s record %q: %w", kind, it.Key(), err)
			break
		}
		out = append(out, r)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
