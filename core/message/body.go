package message

import (
	"math/bits"

	"github.com/warrenmq/warren/internal/lockorder"
)

// PooledMin is the smallest body read into a pooled buffer. Below it the
// GC's cost of a body is small next to the rest of a message's, and a pool
// would only keep memory.
const PooledMin = 64 << 10

// Bodies lends the buffers large message bodies are read into and takes
// each back once the last holder of its message lets go, so a broker
// moving large messages does not allocate, zero and sweep a body-sized
// buffer for each one.
//
// A message whose body came from Bodies counts its holders (Hold, Release):
// the publisher while it routes the message, each queue that keeps it in
// memory, each socket write that references the body. Anything else that
// keeps the message or its body beyond the call that handed it over (a
// stream, a quorum queue, another node, a delayed hold, a copy with other
// properties) pins it instead: a pinned body is never reused and is left
// to the GC, as every body was before. So a holder that forgets to release
// only costs the pool a buffer, while one that releases twice, or reads
// after releasing, would read another message's bytes: releases are few,
// and each is where a holder provably lets go.
//
// Free buffers are kept by size class, up to limit bytes in all; past it a
// returned buffer is left to the GC.
type Bodies struct {
	mu    lockorder.Mutex[lockorder.MessageBodies]
	free  [bodyClasses][][]byte
	bytes int // in free
	limit int
}

// Size classes: four per power of two (1, 1.25, 1.5 and 1.75 times it),
// from PooledMin up to 1 GiB, so a body wastes at most a fifth of its
// buffer.
const (
	bodyMinShift = 16 // PooledMin
	bodyMaxShift = 30
	bodySteps    = 4
	bodyClasses  = (bodyMaxShift - bodyMinShift) * bodySteps
)

// NewBodies returns a pool keeping at most limit bytes of free buffers.
func NewBodies(limit int) *Bodies { return &Bodies{limit: limit} }

// bodyClass is the class of the smallest buffer that holds n bytes, and
// that buffer's size; ok is false when n is past the largest class.
func bodyClass(n int) (class, size int, ok bool) {
	if n <= PooledMin {
		return 0, PooledMin, true
	}
	shift := bits.Len(uint(n-1)) - 1 // 2^shift < n <= 2^(shift+1)
	step := 1 << shift / bodySteps
	k := (n - 1<<shift + step - 1) / step // 1..bodySteps
	if k == bodySteps {
		shift, k = shift+1, 0
	}
	if shift >= bodyMaxShift {
		return 0, 0, false
	}
	return (shift-bodyMinShift)*bodySteps + k, 1<<shift + k*(1<<shift/bodySteps), true
}

// Get returns an empty buffer with room for n bytes, from the pool when it
// has one of n's class. It reports false, with a nil buffer, when n is too
// small or too large to pool.
func (p *Bodies) Get(n int) ([]byte, bool) {
	if p == nil || n < PooledMin {
		return nil, false
	}
	class, size, ok := bodyClass(n)
	if !ok {
		return nil, false
	}
	p.mu.Lock()
	if free := p.free[class]; len(free) > 0 {
		b := free[len(free)-1]
		free[len(free)-1] = nil
		p.free[class] = free[:len(free)-1]
		p.bytes -= cap(b)
		p.mu.Unlock()
		return b[:0], true
	}
	p.mu.Unlock()
	return make([]byte, 0, size), true
}

// put takes b back, unless the pool is full or b is not one of its sizes.
func (p *Bodies) put(b []byte) {
	class, size, ok := bodyClass(cap(b))
	if !ok || size != cap(b) {
		return
	}
	if checkBodies {
		poison(b[:cap(b)])
	}
	p.mu.Lock()
	if checkBodies {
		for _, f := range p.free[class] {
			if &f[:1][0] == &b[:1][0] {
				panic("message: a pooled body was given back twice")
			}
		}
	}
	if p.bytes+size <= p.limit {
		p.free[class] = append(p.free[class], b[:0])
		p.bytes += size
	}
	p.mu.Unlock()
}

// poisonByte fills a body given back in race builds (checkBodies).
const poisonByte = 0xDB

func poison(b []byte) {
	for i := range b {
		b[i] = poisonByte
	}
}

// Drop lets go of every free buffer, for the GC to take back when memory
// runs short, and returns how many bytes they held.
func (p *Bodies) Drop() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.bytes
	for i := range p.free {
		clear(p.free[i])
		p.free[i] = p.free[i][:0]
	}
	p.bytes = 0
	return n
}

// freeBytes is how many bytes of free buffers the pool keeps.
func (p *Bodies) freeBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

// pinned is the bit of Message.holds that keeps a body from the pool.
const pinned = 1 << 30

// Lend makes m's body, a buffer from Get, the pool's to take back: m
// counts one holder, the caller, who must Release it (or Pin it). Lend
// runs before m is shared.
func (m *Message) Lend(p *Bodies) {
	m.bodies = p
	m.holds.Store(1)
}

// Hold counts one more holder of a pooled body. The caller must be, or act
// for, a holder already: a body nobody holds may have been reused.
func (m *Message) Hold() {
	if m.bodies != nil {
		m.holds.Add(1)
	}
}

// Release ends a hold; the last one gives the body back to its pool,
// unless it was pinned. The caller must not read the body afterwards.
func (m *Message) Release() {
	if m.bodies != nil && m.holds.Add(-1) == 0 {
		m.bodies.put(m.Body)
	}
}

// Pin keeps the body from ever going back to the pool: for a holder that
// keeps it without counting (see Bodies). The caller must hold it.
func (m *Message) Pin() {
	if m.bodies != nil {
		m.holds.Or(pinned)
	}
}

// pooled reports whether m's body is a pooled buffer not pinned, for tests.
func (m *Message) pooled() bool {
	return m.bodies != nil && m.holds.Load()&pinned == 0
}
