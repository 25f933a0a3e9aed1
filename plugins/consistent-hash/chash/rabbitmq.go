package chash

// RabbitMQ's placement (hash-algorithm: rabbitmq), as
// rabbitmq_consistent_hash_exchange 3.10.8 does it
// (rabbit_exchange_type_consistent_hash.erl, read from the 3.10.8 package):
//
//  1. Buckets. Each binding added takes the next W bucket numbers, W its
//     weight: the first binding 0..W1-1, the next W1..W1+W2-1, and so on.
//     A binding to a destination that already has buckets takes none.
//     Removing a binding drops its destination's buckets and renumbers
//     those after them down, so the buckets are always those the
//     surviving first bindings to each destination, in the order they
//     were added, would take: the active bindings here, laid end to end.
//  2. The value. The routing key as a binary; with hash-header the typed
//     value rabbit_misc:table_lookup returns, {Type, Value} (Type the atom
//     rabbit_binary_parser names the AMQP field type by, Value decoded the
//     same way: tables as lists of {Name, Type, Value}, arrays as lists of
//     {Type, Value}, decimals as {Scale, Unscaled}), or the atom undefined
//     when there is no such header; with hash-property the message_id or
//     correlation_id as a binary, the timestamp as the binary of its
//     decimal digits, or undefined when absent.
//  3. K = erlang:phash2(value), 27 bits (phash2.go).
//  4. Jump consistent hashing (Lamport and Veach) over N buckets, with
//     Erlang's rand module as its random source: the state is seeded with
//     rand:seed_s(exs1024, {K, K, K}), and while J < N: B = J, draw R with
//     rand:uniform_s (a float in [0, 1)), J = trunc((B + 1) / R). The
//     bucket is the last B. With one bucket it is 0 without drawing.
//  5. The message goes to the destination owning that bucket.
//
// rand's exs1024 is xorshift1024* (Vigna). Its seed from {A1, A2, A3}: each
// Ai is masked to 21 bits, plus 1, times a constant (2097131, 2097133,
// 2097143) masked to 21 bits again; the three are packed as
// B1<<43 | B2<<22 | B3<<1 | 1 into one 64-bit xorshift64* state, whose 16
// outputs, last first, fill the 1024-bit state. uniform_s divides the
// 64-bit output by 2^64. (So only the low 21 bits of K count: keys whose
// phash2 agrees there land alike.)

import (
	"encoding/binary"
	"strconv"

	"github.com/warrenmq/warren/sdk"
)

// The atoms RabbitMQ's terms use, by their atom-table hash.
var (
	atomUndefined = atomHash("undefined")
	atomTrue      = atomHash("true")
	atomFalse     = atomHash("false")
)

// typeAtoms names each AMQP field type as rabbit_binary_parser does.
var typeAtoms = func() (t [256]uint32) {
	for kind, name := range map[byte]string{
		'S': "longstr", 'T': "timestamp", 'b': "byte", 'B': "unsignedbyte", 's': "short", 'u': "unsignedshort",
		'I': "signedint", 'i': "unsignedint", 'd': "double", 'f': "float", 'l': "long", 't': "bool",
		'D': "decimal", 'F': "table", 'A': "array", 'x': "binary", 'V': "void",
	} {
		t[kind] = atomHash(name)
	}
	return t
}()

// typedValue streams {Type, Value}: a header as RabbitMQ looks it up, and
// an array's element.
func (p *phash) typedValue(v sdk.Value) {
	p.tuple(2)
	p.atom(typeAtoms[v.Kind()])
	p.fieldValue(v)
}

// fieldValue streams a field value as rabbit_binary_parser decodes it.
func (p *phash) fieldValue(v sdk.Value) {
	d := v.Raw()
	switch v.Kind() {
	case 'S', 'x':
		hashBinary(p, d)
	case 'b', 'B', 's', 'u', 'I', 'i', 'l':
		n, _ := v.AsInt()
		p.int64(n)
	case 'T':
		p.integer(false, binary.BigEndian.Uint64(d))
	case 't':
		if d[0] != 0 {
			p.atom(atomTrue)
		} else {
			p.atom(atomFalse)
		}
	case 'f', 'd':
		f, _ := v.AsFloat()
		p.float(f)
	case 'D': // {Scale, Unscaled}, the unscaled value read as unsigned
		p.tuple(2)
		p.integer(false, uint64(d[0]))
		p.integer(false, uint64(binary.BigEndian.Uint32(d[1:])))
	case 'V':
		p.atom(atomUndefined)
	case 'F':
		t, _ := v.AsTable()
		for name, e := range t.All() {
			p.tuple(3)
			hashBinary(p, name)
			p.atom(typeAtoms[e.Kind()])
			p.fieldValue(e)
		}
		p.nil()
	case 'A':
		a, _ := v.AsArray()
		for e := range a.All() {
			p.typedValue(e)
		}
		p.nil()
	}
}

// rabbitKey is phash2 of the value RabbitMQ hashes for m.
func (x *Exchange) rabbitKey(m *sdk.Message) uint32 {
	var p phash
	switch x.src.kind {
	case hashHeader:
		if v, ok := m.Header(x.src.header); ok {
			p.typedValue(v)
		} else {
			p.atom(atomUndefined)
		}
	case hashProperty:
		v, ok := m.Property(x.src.property)
		switch {
		case !ok:
			p.atom(atomUndefined)
		case v.Kind() == 'T':
			var buf [20]byte
			hashBinary(&p, strconv.AppendUint(buf[:0], binary.BigEndian.Uint64(v.Raw()), 10))
		default:
			hashBinary(&p, v.Raw())
		}
	default:
		hashBinary(&p, m.RoutingKey())
	}
	return p.phash2()
}

// rabbitPick returns the index of the active binding that owns the
// message's bucket.
func (x *Exchange) rabbitPick(m *sdk.Message) int {
	b := jumpBucket(x.rabbitKey(m), x.total)
	lo, hi := 0, len(x.ends)-1 // the first binding whose buckets end after b
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if x.ends[mid] > b {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// jumpBucket is RabbitMQ's jump_consistent_hash(K, N) for N >= 1.
func jumpBucket(k uint32, n uint64) uint64 {
	if n <= 1 {
		return 0
	}
	var g exs1024
	g.seed(k)
	b, j := int64(-1), int64(0)
	for uint64(j) < n {
		b = j
		r := float64(g.next()) / (1 << 64)
		// trunc(q) >= n exactly when q >= n, and n < 2^53 is exact. R = 0
		// (one draw in 2^64) gives +Inf here, a badarith in RabbitMQ.
		q := float64(b+1) / r
		if q >= float64(n) {
			break
		}
		j = int64(q)
	}
	return uint64(b)
}

// exs1024 is Erlang's rand exs1024 state: xorshift1024*.
type exs1024 struct {
	s [16]uint64
	p int
}

// seed is rand:seed_s(exs1024, {K, K, K}).
func (g *exs1024) seed(k uint32) {
	const m = 1<<21 - 1
	a := uint64(k)&m + 1
	b1, b2, b3 := a*2097131&m, a*2097133&m, a*2097143&m
	r := b1<<43 | b2<<22 | b3<<1 | 1
	// xorshift64*; rand conses each output onto a list, so the last is
	// first.
	for i := 15; i >= 0; i-- {
		r ^= r >> 12
		r ^= r << 25
		r ^= r >> 27
		g.s[i] = r * 2685821657736338717
	}
	g.p = 0
}

// next is one exs1024 output.
func (g *exs1024) next() uint64 {
	s0 := g.s[g.p]
	g.p = (g.p + 1) & 15
	s1 := g.s[g.p]
	s1 ^= s1 << 31
	s1 ^= s1 >> 11
	s0 ^= s0 >> 30
	g.s[g.p] = s0 ^ s1
	return g.s[g.p] * 1181783497276652981
}
