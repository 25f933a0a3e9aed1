// Package denseset is a set kept as a dense slice. Its members are a []T
// that callers range over, or append to a result, without copying, and
// each member's place in it is known, so that removing one member costs
// the same whatever the set's size.
//
// The exchanges keep their bindings in such sets: routing reads a whole
// set per message, while a queue's delete removes its bindings one by one
// from sets that may hold a million others (issue 29 found a linear search
// per binding making one queue.delete take seconds).
//
// Removal moves the last member into the gap, so the members' order is
// not kept: callers that need an order (bindings replayed by Seq) sort a
// copy. A small set, the common case, is searched linearly and carries no
// index; one that grows past indexFrom members gets a map from member to
// place, dropped again when it shrinks well below that. A set gives back
// the memory it grew to only once it is small again (copyMax), so that no
// one removal costs more than copying a small set.
//
// A Set is not safe for concurrent mutation; Items may be read
// concurrently when no Add or Remove is in progress.
package denseset

// indexFrom is the size past which a set indexes its members: below it a
// linear search of a few cache lines beats a map lookup.
const indexFrom = 16

// copyMax is the most members a removal copies to give memory back.
const copyMax = 4096

// Set is a set of comparable values. The zero value is an empty set.
type Set[T comparable] struct {
	items []T
	index map[T]int // member -> its place in items; nil while the set is small
}

// Items returns the members, in no particular order. The slice is the
// set's own: it is valid until the next Add or Remove and must not be
// changed.
func (s *Set[T]) Items() []T { return s.items }

// Len reports the number of members.
func (s *Set[T]) Len() int { return len(s.items) }

// Has reports whether v is a member.
func (s *Set[T]) Has(v T) bool { return s.find(v) >= 0 }

func (s *Set[T]) find(v T) int {
	if s.index != nil {
		if i, ok := s.index[v]; ok {
			return i
		}
		return -1
	}
	for i, x := range s.items {
		if x == v {
			return i
		}
	}
	return -1
}

// Add makes v a member and reports whether it was not one already.
func (s *Set[T]) Add(v T) bool {
	if s.find(v) >= 0 {
		return false
	}
	s.items = append(s.items, v)
	if s.index != nil {
		s.index[v] = len(s.items) - 1
	} else if len(s.items) > indexFrom {
		s.reindex()
	}
	return true
}

// Remove takes v out of the set and reports whether it was a member. The
// last member takes its place.
func (s *Set[T]) Remove(v T) bool {
	i := s.find(v)
	if i < 0 {
		return false
	}
	last := len(s.items) - 1
	moved := s.items[last]
	s.items[i] = moved
	var zero T
	s.items[last] = zero // the set no longer holds on to it
	s.items = s.items[:last]
	if s.index != nil {
		delete(s.index, v)
		if i != last {
			s.index[moved] = i
		}
	}
	// A set that lost most of its members gives the memory back (neither
	// a slice nor a map shrinks by itself), once it is small enough to be
	// copied at once: a copy of a large one would make this one removal
	// cost milliseconds (a quarter of a million members: 0.2 s), under
	// the lock of the exchange the set belongs to. Copying len members
	// after at least 3·len removals keeps a removal's cost constant on
	// average; a large set keeps its memory, as a Go map does.
	if cap(s.items) > 4*indexFrom && len(s.items) < cap(s.items)/4 && len(s.items) <= copyMax {
		s.items = append(make([]T, 0, 2*len(s.items)), s.items...)
		s.reindex()
	} else if s.index != nil && len(s.items) < indexFrom/2 {
		s.index = nil
	}
	return true
}

// reindex builds the index afresh, or drops it when the set is small.
func (s *Set[T]) reindex() {
	if len(s.items) <= indexFrom/2 {
		s.index = nil
		return
	}
	s.index = make(map[T]int, len(s.items))
	for i, x := range s.items {
		s.index[x] = i
	}
}
