package streamproto

import "github.com/warrenmq/warren/internal/lockorder"

// tracking holds what the stream protocol tracks per stream: each
// deduplicating publisher's highest confirmed publishing id, and each
// consumer reference's stored offset. A stream is known by its
// incarnation (its id in the store), so a stream deleted and declared
// again starts with nothing tracked.
//
// It is kept in memory: it survives a client's reconnection, not a
// broker restart.
type tracking struct {
	mu      lockorder.Mutex[lockorder.StreamprotoTracking]
	streams map[uint64]*tracked
}

type tracked struct {
	sequences map[string]uint64
	offsets   map[string]uint64
}

func (t *tracking) of(incarnation uint64) *tracked {
	if t.streams == nil {
		t.streams = map[uint64]*tracked{}
	}
	s := t.streams[incarnation]
	if s == nil {
		s = &tracked{sequences: map[string]uint64{}, offsets: map[string]uint64{}}
		t.streams[incarnation] = s
	}
	return s
}

// sequence is the highest publishing id confirmed for a publisher
// reference; ok is false when there is none.
func (t *tracking) sequence(incarnation uint64, ref string) (seq uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seq, ok = t.of(incarnation).sequences[ref]
	return seq, ok
}

// confirmed records a publisher reference's confirmed publishing id.
func (t *tracking) confirmed(incarnation uint64, ref string, id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.of(incarnation)
	if old, ok := s.sequences[ref]; !ok || id > old {
		s.sequences[ref] = id
	}
}

// storeOffset records a consumer reference's offset.
func (t *tracking) storeOffset(incarnation uint64, ref string, offset uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.of(incarnation).offsets[ref] = offset
}

// offset is a consumer reference's stored offset; ok is false when none
// was stored.
func (t *tracking) offset(incarnation uint64, ref string) (offset uint64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	offset, ok = t.of(incarnation).offsets[ref]
	return offset, ok
}

// forget drops what is tracked for a deleted stream.
func (t *tracking) forget(incarnation uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.streams, incarnation)
}
