package chash

// Erlang's erlang:phash2/1, for the terms RabbitMQ's consistent-hash
// exchange hashes: binaries, atoms, integers, floats, tuples and proper
// lists of those.
//
// phash2 is make_hash2 in the Erlang runtime (erts/emulator/beam/utils.c,
// erl_term_hashing.c from OTP 26), masked to 27 bits. Its value is
// documented as independent of the machine and of the runtime's version.
// make_hash2 walks the term depth first, left to right, and folds each
// part into one 32-bit state with Bob Jenkins' 96-bit mix; nothing looks
// ahead, so a term can be hashed as a stream of its parts, in that order,
// straight from the AMQP encoding, without building it:
//
//   - tuple of arity n: mix (n, 0) with the constant HCONST·9, then each
//     element in order;
//   - atom: its atom-table hash (hashpjw over the name) becomes the state
//     when the state is still 0, else mix (atom hash, 0) with HCONST·3;
//   - [] : 3468870702 when the state is 0, else mix (NIL_DEF = 2, 0)
//     with HCONST·2; a proper list hashes its elements in order, then [];
//   - binary: the state becomes Jenkins' lookup2 block hash of the bytes,
//     seeded with HCONST·13 + the state (for <<>> the seed itself);
//   - integer in [-2^27, 2^27): as a signed 32-bit value: mix (|v|, 0)
//     with HCONST when negative, then mix (v as uint32, 0) with HCONST;
//   - any other integer (up to 64 bits of magnitude here): mix
//     (low 32 bits of |v|, high 32 bits) with HCONST·11, or HCONST·10 when
//     negative;
//   - float: -0.0 as 0.0, then mix (high 32 bits, low 32 bits) of its IEEE
//     double with HCONST·12.
//
// Lists whose elements are bytes (Erlang strings) have a shortcut in
// make_hash2 that none of these terms needs; it is not implemented.
// TestPhash2 checks the values against erlang:phash2 of OTP 25.

import "math"

// HCONST·k mod 2^32: the golden ratio times k.
const (
	hconst   = 0x9e3779b9
	hconst2  = 0x3c6ef372
	hconst3  = 0xdaa66d2b
	hconst9  = 0x8ff34781
	hconst10 = 0x2e2ac13a
	hconst11 = 0xcc623af3
	hconst12 = 0x6a99b4ac
	hconst13 = 0x08d12e65
)

// nilDef is the runtime's tag for [] that make_hash2 mixes in.
const nilDef = 2

// nilTop is phash2's value for [] alone.
const nilTop = 3468870702

// phash is make_hash2's state while a term streams through it.
type phash struct{ h uint32 }

// mix2 is make_hash2's UINT32_HASH_2.
func (p *phash) mix2(x, y, k uint32) { _, _, p.h = jenkins(k+x, k+y, p.h) }

func (p *phash) tuple(arity int) { p.mix2(uint32(arity), 0, hconst9) }

// atom takes the atom's table hash (see atomHash).
func (p *phash) atom(a uint32) {
	if p.h == 0 {
		p.h = a
		return
	}
	p.mix2(a, 0, hconst3)
}

func (p *phash) nil() {
	if p.h == 0 {
		p.h = nilTop
		return
	}
	p.mix2(nilDef, 0, hconst2)
}

// integer hashes the integer of sign neg and magnitude mag.
func (p *phash) integer(neg bool, mag uint64) {
	if mag < 1<<27 || neg && mag == 1<<27 {
		y := int32(mag)
		if neg {
			y = -y
			p.mix2(uint32(-y), 0, hconst)
		}
		p.mix2(uint32(y), 0, hconst)
		return
	}
	k := uint32(hconst11)
	if neg {
		k = hconst10
	}
	p.mix2(uint32(mag), uint32(mag>>32), k)
}

func (p *phash) int64(v int64) {
	if v < 0 {
		p.integer(true, uint64(-v)) // -MinInt64 wraps to its magnitude, 2^63
		return
	}
	p.integer(false, uint64(v))
}

func (p *phash) float(f float64) {
	if f == 0 {
		f = 0 // -0.0 hashes as 0.0
	}
	bits := math.Float64bits(f)
	p.mix2(uint32(bits>>32), uint32(bits), hconst12)
}

// hashBinary hashes a binary: lookup2's block hash of its bytes, seeded with
// the state so far.
func hashBinary[T string | []byte](p *phash, b T) {
	c := hconst13 + p.h
	if len(b) == 0 {
		p.h = c
		return
	}
	a, bb := uint32(hconst), uint32(hconst)
	n := len(b)
	i := 0
	for ; n-i >= 12; i += 12 {
		a += le32(b[i], b[i+1], b[i+2], b[i+3])
		bb += le32(b[i+4], b[i+5], b[i+6], b[i+7])
		c += le32(b[i+8], b[i+9], b[i+10], b[i+11])
		a, bb, c = jenkins(a, bb, c)
	}
	c += uint32(n) // the length, truncated to 32 bits as the runtime does
	rest := b[i:]
	// The bytes left fill a, then b, then c from its second byte.
	for j := len(rest) - 1; j >= 0; j-- {
		v := uint32(rest[j])
		switch {
		case j < 4:
			a += v << (8 * j)
		case j < 8:
			bb += v << (8 * (j - 4))
		default:
			c += v << (8 * (j - 7))
		}
	}
	_, _, p.h = jenkins(a, bb, c)
}

func le32(b0, b1, b2, b3 byte) uint32 {
	return uint32(b0) | uint32(b1)<<8 | uint32(b2)<<16 | uint32(b3)<<24
}

// jenkins is Bob Jenkins' mix of three 32-bit words (lookup2's mix).
func jenkins(a, b, c uint32) (uint32, uint32, uint32) {
	a -= b
	a -= c
	a ^= c >> 13
	b -= c
	b -= a
	b ^= a << 8
	c -= a
	c -= b
	c ^= b >> 13
	a -= b
	a -= c
	a ^= c >> 12
	b -= c
	b -= a
	b ^= a << 16
	c -= a
	c -= b
	c ^= b >> 5
	a -= b
	a -= c
	a ^= c >> 3
	b -= c
	b -= a
	b ^= a << 10
	c -= a
	c -= b
	c ^= b >> 15
	return a, b, c
}

// phash2 is erlang:phash2/1 of what streamed in: 27 bits.
func (p *phash) phash2() uint32 { return p.h & (1<<27 - 1) }

// atomHash is the hash the Erlang atom table keeps for an atom: hashpjw
// over its name (Latin-1; every atom here is ASCII).
func atomHash(name string) uint32 {
	var h uint32
	for i := 0; i < len(name); i++ {
		h = h<<4 + uint32(name[i])
		if g := h & 0xf0000000; g != 0 {
			h ^= g >> 24
			h ^= g
		}
	}
	return h
}
