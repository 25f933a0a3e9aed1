package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The delay store keeps each exchange's held messages apart, in two spans
// per exchange, each in due order:
//
//	0x09 esc(vhost) esc(exchange) kind(1) due(8) seq(8)
//
// kind is heldDurable (a persistent message held by a durable exchange: it
// survives a restart) or heldTransient (any other: written without a sync
// so that the broker need not keep it in memory, and dropped at start).
// Keeping an exchange's messages contiguous makes what operators do with
// them one range: deleting the exchange or purging its held messages is a
// range deletion, listing them is one iterator. The broker reads the
// earliest messages of a vhost by merging its exchanges' spans.
//
// The first format (0x06 due seq, one span for every vhost; PutHeld,
// DeleteHeld, ScanHeld) is read only to move its records here.
const (
	prefixDelayed byte = 0x09

	heldDurable   byte = 0x01
	heldTransient byte = 0x02
)

// HeldSpan names one exchange's held messages of one kind.
type HeldSpan struct {
	VHost, Exchange string
	Transient       bool
}

func (sp HeldSpan) kind() byte {
	if sp.Transient {
		return heldTransient
	}
	return heldDurable
}

// prefix is 0x09 esc(vhost) esc(exchange) kind.
func (sp HeldSpan) prefix() []byte {
	p := heldExchangePrefix(sp.VHost, sp.Exchange)
	return append(p, sp.kind())
}

func heldVHostPrefix(vhost string) []byte {
	return appendEscaped([]byte{prefixDelayed}, vhost)
}

func heldExchangePrefix(vhost, exchange string) []byte {
	return appendEscaped(heldVHostPrefix(vhost), exchange)
}

func (sp HeldSpan) key(due int64, seq uint64) []byte {
	k := sp.prefix()
	k = binary.BigEndian.AppendUint64(k, uint64(due)^(1<<63))
	return binary.BigEndian.AppendUint64(k, seq)
}

// parseDelayedKey reads a key of the delay store.
func parseDelayedKey(k []byte) (sp HeldSpan, due int64, seq uint64, ok bool) {
	if len(k) == 0 || k[0] != prefixDelayed {
		return sp, 0, 0, false
	}
	var err error
	rest := k[1:]
	if sp.VHost, rest, err = readEscaped(rest); err != nil {
		return sp, 0, 0, false
	}
	if sp.Exchange, rest, err = readEscaped(rest); err != nil {
		return sp, 0, 0, false
	}
	if len(rest) != 1+8+8 || (rest[0] != heldDurable && rest[0] != heldTransient) {
		return sp, 0, 0, false
	}
	sp.Transient = rest[0] == heldTransient
	return sp, int64(binary.BigEndian.Uint64(rest[1:]) ^ (1 << 63)), binary.BigEndian.Uint64(rest[9:]), true
}

// PutHeldAt stores rec, a held message, in span sp at (due, seq): due is
// unix ms, seq makes the key unique.
func (t *Txn) PutHeldAt(sp HeldSpan, due int64, seq uint64, rec []byte) {
	t.b.Set(sp.key(due, seq), rec, nil)
}

// DeleteHeldAt deletes the held message at (due, seq) of span sp.
func (t *Txn) DeleteHeldAt(sp HeldSpan, due int64, seq uint64) {
	t.b.Delete(sp.key(due, seq), nil)
}

// DeleteHeldOf deletes every held message of an exchange, of both kinds:
// one range deletion.
func (t *Txn) DeleteHeldOf(vhost, exchange string) {
	p := heldExchangePrefix(vhost, exchange)
	t.b.DeleteRange(p, prefixEnd(p), nil)
}

// DeleteHeldSpan deletes every held message of one span.
func (t *Txn) DeleteHeldSpan(sp HeldSpan) {
	p := sp.prefix()
	t.b.DeleteRange(p, prefixEnd(p), nil)
}

// HeldAfter is where ScanHeldAt starts: nil is the span's start, else just
// after the message at (Due, Seq).
type HeldAfter struct {
	Due int64
	Seq uint64
}

// ScanHeldAt calls fn for the held messages of span sp after from, in
// (due, seq) order, up to limit of them (0 = all), until fn returns false.
// rec is a copy fn may keep.
func (s *Store) ScanHeldAt(sp HeldSpan, from *HeldAfter, limit int, fn func(due int64, seq uint64, rec []byte) bool) error {
	done, err := s.read()
	if err != nil {
		return err
	}
	defer done()
	s.c.waitApplied()
	p := sp.prefix()
	lo := p
	if from != nil {
		lo = append(sp.key(from.Due, from.Seq), 0) // the key right after
	}
	n := 0
	return s.iterate(lo, prefixEnd(p), func(k, v []byte) (bool, error) {
		if len(k) != len(p)+16 {
			return false, fmt.Errorf("storage: malformed held key %q", k)
		}
		due := int64(binary.BigEndian.Uint64(k[len(p):]) ^ (1 << 63))
		seq := binary.BigEndian.Uint64(k[len(p)+8:])
		n++
		return fn(due, seq, append([]byte(nil), v...)) && (limit == 0 || n < limit), nil
	})
}

// HeldSpans calls fn with every non-empty span of the delay store and the
// messages in it, in key order (vhost, exchange, kind), reading keys only.
func (s *Store) HeldSpans(fn func(sp HeldSpan, count int64)) error {
	done, err := s.read()
	if err != nil {
		return err
	}
	defer done()
	s.c.waitApplied()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixDelayed}, UpperBound: []byte{prefixDelayed + 1}})
	if err != nil {
		return err
	}
	var cur []byte // the current span's prefix
	var sp HeldSpan
	var n int64
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if cur != nil && len(k) == len(cur)+16 && string(k[:len(cur)]) == string(cur) {
			n++
			continue
		}
		if cur != nil {
			fn(sp, n)
		}
		var ok bool
		if sp, _, _, ok = parseDelayedKey(k); !ok {
			err = fmt.Errorf("storage: malformed held key %q", k)
			break
		}
		cur, n = append(cur[:0], k[:len(k)-16]...), 1
	}
	if err == nil && cur != nil {
		fn(sp, n)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}
