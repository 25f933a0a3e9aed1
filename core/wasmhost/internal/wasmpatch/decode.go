package wasmpatch

import (
	"errors"
	"fmt"
)

type decoder struct {
	b   []byte
	pos int
	err error
}

var errShort = errors.New("unexpected end")

func (d *decoder) byte() byte {
	if d.err != nil || d.pos >= len(d.b) {
		d.err = errShort
		return 0
	}
	c := d.b[d.pos]
	d.pos++
	return c
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b)-d.pos {
		d.err = errShort
		return nil
	}
	p := d.b[d.pos : d.pos+n]
	d.pos += n
	return p
}

// leb skips a LEB128 number of at most max bytes and returns its low 64 bits
// (unsigned reading).
func (d *decoder) leb(max int) uint64 {
	var v uint64
	for i := 0; i < max; i++ {
		c := d.byte()
		if d.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v
		}
	}
	d.err = errors.New("LEB128 number too long")
	return 0
}

func (d *decoder) u32() uint32 { return uint32(d.leb(5)) }

func (d *decoder) valtype() {
	switch c := d.byte(); c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69: // i32 i64 f32 f64 v128 funcref externref exnref
	default:
		if d.err == nil {
			d.err = fmt.Errorf("unsupported value type 0x%02x", c)
		}
	}
}

func (d *decoder) blocktype() {
	if d.pos < len(d.b) {
		switch d.b[d.pos] {
		case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69:
			d.pos++
			return
		case 0x63, 0x64:
			d.err = errors.New("typed reference block types are not supported")
			return
		}
	}
	d.leb(5) // s33 type index
}

func (d *decoder) limits() {
	flags := d.byte()
	d.leb(10)
	if flags&1 != 0 {
		d.leb(10)
	}
}

func (d *decoder) memarg() {
	align := d.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		d.u32()
	}
	d.leb(10)
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
