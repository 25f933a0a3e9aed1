package lockorder

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// holds is what each goroutine holds, by goroutine. It is in every build,
// so that its tests run in every build; only a checked one feeds it.
type holds struct {
	shards [64]holdShard
}

type holdShard struct {
	mu   sync.Mutex
	byG  map[uintptr][]hold
	_pad [40]byte // one shard a cache line
}

type hold struct {
	id   rankID
	lock unsafe.Pointer
}

func newHolds() *holds {
	h := &holds{}
	for i := range h.shards {
		h.shards[i].byG = make(map[uintptr][]hold)
	}
	return h
}

func (h *holds) shard(g uintptr) *holdShard {
	return &h.shards[(g>>6)%uintptr(len(h.shards))]
}

// InversionError is a lock taken out of LOCKS.md's order.
type InversionError struct {
	Taking string   // the lock being taken
	Held   []string // what the goroutine held, oldest first
	Under  string   // the held lock it may not be taken under
}

func (e *InversionError) Error() string {
	return fmt.Sprintf("lock order: %s taken while holding %s (held: %s); LOCKS.md puts %s first",
		e.Taking, e.Under, strings.Join(e.Held, ", "), e.Taking)
}

// acquire checks that goroutine g may take lock at rank id, and records
// it as held; it records nothing when it may not.
func (h *holds) acquire(g uintptr, id rankID, lock unsafe.Pointer) error {
	s := h.shard(g)
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.byG[g]
	for _, held := range list {
		if held.id > id || held.id == id && !ranks[id].nests {
			e := &InversionError{Taking: ranks[id].name, Under: ranks[held.id].name}
			for _, x := range list {
				e.Held = append(e.Held, ranks[x.id].name)
			}
			return e
		}
	}
	s.byG[g] = append(list, hold{id, lock})
	return nil
}

// took records a hold without checking it.
func (h *holds) took(g uintptr, id rankID, lock unsafe.Pointer) {
	s := h.shard(g)
	s.mu.Lock()
	s.byG[g] = append(s.byG[g], hold{id, lock})
	s.mu.Unlock()
}

// release forgets g's latest hold of lock. A mutex may be unlocked by
// another goroutine than the one that locked it; then the hold is found
// where it was recorded.
func (h *holds) release(g uintptr, id rankID, lock unsafe.Pointer) {
	if h.shard(g).forget(g, lock) {
		return
	}
	for i := range h.shards {
		s := &h.shards[i]
		s.mu.Lock()
		var owner uintptr
		found := false
		for og, list := range s.byG {
			for _, x := range list {
				if x.lock == lock {
					owner, found = og, true
					break
				}
			}
			if found {
				break
			}
		}
		s.mu.Unlock()
		if found && s.forget(owner, lock) {
			return
		}
	}
}

func (s *holdShard) forget(g uintptr, lock unsafe.Pointer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.byG[g]
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].lock == lock {
			// The emptied list stays, to be reused without allocating:
			// the runtime reuses a g, so there are at most as many as the
			// most goroutines alive at once.
			s.byG[g] = append(list[:i], list[i+1:]...)
			return true
		}
	}
	return false
}
