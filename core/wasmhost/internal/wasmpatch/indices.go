package wasmpatch

import (
	"errors"
	"fmt"
)

// rewriter copies what its decoder reads into out, except what it
// re-encodes: bytes read since mark are copied by flush.
type rewriter struct {
	decoder
	out  []byte
	mark int
}

func (r *rewriter) flush() {
	r.out = append(r.out, r.b[r.mark:r.pos]...)
	r.mark = r.pos
}

// funcIndex reads a function index and writes it renumbered.
func (r *rewriter) funcIndex(fn renumber) {
	r.flush()
	idx := r.u32()
	if r.err != nil {
		return
	}
	r.out = appendU32(r.out, fn(idx))
	r.mark = r.pos
}

// constExpr reads a constant expression up to its end, renumbering the
// function a ref.func names.
func (r *rewriter) constExpr(fn renumber) {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b: // end
			return
		case 0x41: // i32.const
			r.leb(5)
		case 0x42: // i64.const
			r.leb(10)
		case 0x43: // f32.const
			r.bytes(4)
		case 0x44: // f64.const
			r.bytes(8)
		case 0x23: // global.get
			r.u32()
		case 0xd0: // ref.null
			r.valtype()
		case 0xd2: // ref.func
			r.funcIndex(fn)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constants: add, sub, mul
		case 0xfd: // v128.const
			if sub := r.u32(); sub != 12 && r.err == nil {
				r.err = fmt.Errorf("unsupported opcode 0xfd %d in a constant expression", sub)
			}
			r.bytes(16)
		default:
			if r.err == nil {
				r.err = fmt.Errorf("unsupported opcode 0x%02x in a constant expression", op)
			}
		}
	}
}

// renumberElements rewrites an element section. A segment's flags say
// (bit 0) passive or declarative rather than active, (bit 1) with an
// explicit table, or declarative, and (bit 2) expressions rather than
// function indices.
func renumberElements(body []byte, fn renumber) ([]byte, error) {
	r := rewriter{decoder: decoder{b: body}}
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		flags := r.u32()
		if flags > 7 {
			return nil, fmt.Errorf("unknown segment flags %d", flags)
		}
		if flags&3 == 2 {
			r.u32() // table index
		}
		if flags&1 == 0 {
			r.constExpr(fn) // offset
		}
		if flags&3 != 0 {
			if flags < 4 {
				r.byte() // element kind
			} else {
				r.valtype()
			}
		}
		for m := r.u32(); m > 0 && r.err == nil; m-- {
			if flags < 4 {
				r.funcIndex(fn)
			} else {
				r.constExpr(fn)
			}
		}
	}
	if r.err == nil && r.pos != len(r.b) {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	r.flush()
	return r.out, nil
}

// renumberNames rewrites the "name" custom section's function names
// (subsection 1) and local names (subsection 2); the other subsections name
// other index spaces and are copied.
func renumberNames(body []byte, fn renumber) ([]byte, error) {
	d := decoder{b: body}
	d.bytes(int(d.u32())) // the section's name
	out := append([]byte(nil), body[:d.pos]...)
	for d.pos < len(d.b) && d.err == nil {
		id := d.byte()
		sub := d.bytes(int(d.u32()))
		if d.err != nil {
			break
		}
		if id == 1 || id == 2 {
			r := rewriter{decoder: decoder{b: sub}}
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.funcIndex(fn)
				if id == 2 {
					for m := r.u32(); m > 0 && r.err == nil; m-- {
						r.u32()
						r.bytes(int(r.u32()))
					}
				} else {
					r.bytes(int(r.u32()))
				}
			}
			if r.err != nil {
				return nil, r.err
			}
			r.flush()
			sub = r.out
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(sub)))
		out = append(out, sub...)
	}
	if d.err != nil {
		return nil, d.err
	}
	return out, nil
}

// appendSigned appends v as a signed LEB128 number.
func appendSigned(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
