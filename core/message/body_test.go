package message

import (
	"testing"
	"unsafe"

	"github.com/warrenmq/warren/protocol"
)

func TestBodyClasses(t *testing.T) {
	for _, c := range []struct{ n, size int }{
		{PooledMin, 64 << 10},
		{PooledMin + 1, 80 << 10},
		{80 << 10, 80 << 10},
		{96<<10 + 1, 112 << 10},
		{112<<10 + 1, 128 << 10},
		{1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 256<<10},
		{16 << 20, 16 << 20},
		{1<<30 - 1, 0},
		{1 << 30, 0},
	} {
		_, size, ok := bodyClass(c.n)
		if c.size == 0 {
			if ok {
				t.Errorf("bodyClass(%d) = %d, want none", c.n, size)
			}
			continue
		}
		if !ok || size != c.size {
			t.Errorf("bodyClass(%d) = %d, %v; want %d", c.n, size, ok, c.size)
		}
	}
	// Every class is one size, and sizes grow with the class.
	last := -1
	for n := PooledMin; n < 1<<29; n += n / 7 {
		class, size, _ := bodyClass(n)
		if size < n || size > n+n/4+1 {
			t.Fatalf("bodyClass(%d): size %d", n, size)
		}
		if c2, s2, _ := bodyClass(size); c2 != class || s2 != size {
			t.Fatalf("bodyClass(%d) = class %d size %d, but bodyClass(%d) = class %d size %d", n, class, size, size, c2, s2)
		}
		if class < last {
			t.Fatalf("class %d after %d", class, last)
		}
		last = class
	}
}

func TestBodiesReuseUpToTheLimit(t *testing.T) {
	p := NewBodies(2 << 20)
	if _, ok := p.Get(PooledMin - 1); ok {
		t.Fatal("a small body was pooled")
	}
	a, _ := p.Get(1 << 20)
	b, _ := p.Get(1 << 20)
	c, _ := p.Get(1 << 20)
	if len(a) != 0 || cap(a) != 1<<20 {
		t.Fatalf("Get(1 MiB): len %d cap %d", len(a), cap(a))
	}
	p.put(a[:10])
	p.put(b)
	p.put(c) // past the limit: left to the GC
	if got := p.freeBytes(); got != 2<<20 {
		t.Fatalf("freeBytes() = %d, want 2 MiB", got)
	}
	if got := p.Drop(); got != 2<<20 || p.freeBytes() != 0 {
		t.Fatalf("Drop() = %d, then freeBytes() = %d", got, p.freeBytes())
	}
	p.put(c)
	p.put(b)
	d, _ := p.Get(1<<20 - 5) // same class
	if &d[:1][0] != &b[:1][0] {
		t.Fatal("Get did not reuse the last buffer returned")
	}
	p.put(make([]byte, 100<<10)) // not a class size: not kept
	if got := p.freeBytes(); got != 1<<20 {
		t.Fatalf("freeBytes() = %d, want 1 MiB", got)
	}
}

func pooledMessage(t *testing.T, p *Bodies) *Message {
	t.Helper()
	body, _ := p.Get(1 << 20)
	m, err := NewFromClient("x", "k", 0, nil, body[:1<<20])
	if err != nil {
		t.Fatal(err)
	}
	m.Lend(p)
	return m
}

func TestTheLastReleaseReturnsTheBody(t *testing.T) {
	p := NewBodies(64 << 20)
	m := pooledMessage(t, p)
	m.Hold() // a queue
	m.Hold() // a socket write
	m.Release()
	m.Release()
	if p.freeBytes() != 0 {
		t.Fatal("the body went back while the publisher held it")
	}
	m.Release()
	if p.freeBytes() != 1<<20 {
		t.Fatalf("freeBytes() = %d after the last release", p.freeBytes())
	}
}

func TestPinnedBodiesStayOut(t *testing.T) {
	p := NewBodies(64 << 20)
	m := pooledMessage(t, p)
	m.Pin()
	m.Release()
	if p.freeBytes() != 0 || m.pooled() {
		t.Fatal("a pinned body went back to the pool")
	}

	// A copy with other properties shares the body, so it pins it.
	m = pooledMessage(t, p)
	props := protocol.Properties{Flags: protocol.FlagHeaders, Headers: protocol.Table{"x-death": "yes"}}
	if _, err := m.WithProperties("dlx", "k", &props); err != nil {
		t.Fatal(err)
	}
	m.Release()
	if p.freeBytes() != 0 {
		t.Fatal("a body shared with a copy went back to the pool")
	}

	// Hold, Release and Pin do nothing to a body that is not pooled.
	n, _ := New("x", "k", 0, nil, make([]byte, 1<<20))
	n.Hold()
	n.Release()
	n.Release()
	n.Pin()
	if n.pooled() || p.freeBytes() != 0 {
		t.Fatal("a message that was not lent a body touched the pool")
	}
}

func TestReleasedBodiesArePoisonedInRaceBuilds(t *testing.T) {
	if !checkBodies {
		t.Skip("only race builds check bodies")
	}
	p := NewBodies(64 << 20)
	m := pooledMessage(t, p)
	body := m.Body
	m.Release()
	if body[0] != poisonByte || body[len(body)-1] != poisonByte {
		t.Fatal("a released body was not overwritten")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a body given back twice did not panic")
		}
	}()
	p.put(body)
}

// A Message stays within the 128-byte size class: the pool's count sits
// in the padding after Flags.
func TestMessageSize(t *testing.T) {
	if size := unsafe.Sizeof(Message{}); size > 128 {
		t.Fatalf("a Message is %d bytes, more than 128", size)
	}
}
