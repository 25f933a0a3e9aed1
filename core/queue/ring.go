package queue

// ring is a FIFO of entries in a circular buffer: push at the tail, pop at
// the head, both O(1) and without allocation once grown. It shrinks when it
// drains, so a queue that once held a burst does not keep its memory.
type ring struct {
	buf  []Entry
	head int
	n    int
}

const minRing = 16

func (r *ring) len() int { return r.n }

func (r *ring) push(e Entry) {
	if r.n == len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf)))
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
}

// front returns the head entry; the ring must not be empty.
func (r *ring) front() *Entry { return &r.buf[r.head] }

// at returns the i-th entry from the head.
func (r *ring) at(i int) *Entry { return &r.buf[(r.head+i)%len(r.buf)] }

func (r *ring) pop() Entry {
	e := r.buf[r.head]
	r.buf[r.head] = Entry{}
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 {
		r.head = 0
	}
	if len(r.buf) > 4*minRing && r.n < len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
	return e
}

func (r *ring) resize(size int) {
	buf := make([]Entry, size)
	if r.n > 0 {
		if r.head+r.n <= len(r.buf) {
			copy(buf, r.buf[r.head:r.head+r.n])
		} else {
			k := copy(buf, r.buf[r.head:])
			copy(buf[k:], r.buf[:r.n-k])
		}
	}
	r.buf, r.head = buf, 0
}

// clear drops every entry and returns them, head first.
func (r *ring) drain() []Entry {
	out := make([]Entry, 0, r.n)
	for r.n > 0 {
		out = append(out, r.pop())
	}
	r.buf, r.head = nil, 0
	return out
}
