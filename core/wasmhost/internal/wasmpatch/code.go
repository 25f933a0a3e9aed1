package wasmpatch

import (
	"errors"
	"fmt"
	"slices"
)

// counts are what patchCode did: function bodies, entry checks, loops.
type counts struct{ functions, entries, loops int }

// patchCode rewrites every function body of the code section: the checks
// inserted, function indices renumbered.
func patchCode(code []byte, check []byte, fn renumber) ([]byte, counts, error) {
	d := decoder{b: code}
	n := d.u32()
	out := make([]byte, 0, len(code)+int(n)*len(check)*2)
	out = appendU32(out, n)
	c := counts{functions: int(n)}
	var body []byte
	for f := uint32(0); f < n; f++ {
		size := d.u32()
		fb := d.bytes(int(size))
		if d.err != nil {
			return nil, c, fmt.Errorf("code section, function %d: %w", f, d.err)
		}
		var err error
		body, err = patchBody(body[:0], fb, check, fn, &c)
		if err != nil {
			return nil, c, fmt.Errorf("code section, function body %d: %w", f, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if d.err != nil || d.pos != len(d.b) {
		return nil, c, errors.New("code section: trailing bytes")
	}
	return out, c, nil
}

// patchBody copies one function body into out with the checks inserted and
// the function indices of call, return_call and ref.func renumbered.
//
// The entry check exists to catch recursion, so a function gets one only
// when it calls something, and not when every entry reaches a loop head
// (which has its own check) before it can call or leave: Go's compiler
// starts every function with a loop, so its modules would otherwise pay
// two checks per call.
func patchBody(out, fb []byte, check []byte, fn renumber, c *counts) ([]byte, error) {
	d := decoder{b: fb}
	for groups := d.u32(); groups > 0 && d.err == nil; groups-- {
		d.u32()
		d.valtype()
	}
	if d.err != nil {
		return nil, fmt.Errorf("locals: %w", d.err)
	}
	out = append(out, fb[:d.pos]...)
	entry := len(out)
	calls := false
	straight := true // no instruction so far can call, branch or leave
	loopFirst := false
	depth := 1 // the function's own block
	for depth > 0 {
		if d.pos >= len(d.b) {
			return nil, errors.New("body ends before its end instruction")
		}
		start := d.pos
		op := d.byte()
		if straight && !straightLine(op) {
			straight = false
			loopFirst = op == 0x03
		}
		switch op {
		case 0x02, 0x04, 0x06: // block, if, try (legacy)
			d.blocktype()
			depth++
		case 0x03: // loop
			d.blocktype()
			depth++
			out = append(out, fb[start:d.pos]...)
			out = append(out, check...)
			c.loops++
			continue
		case 0x10, 0x12, 0xd2: // call return_call ref.func
			idx := d.u32()
			if d.err != nil {
				return nil, fmt.Errorf("at offset %d: %w", start, d.err)
			}
			calls = calls || op != 0xd2
			out = append(out, op)
			out = appendU32(out, fn(idx))
			continue
		case 0x11, 0x13: // call_indirect return_call_indirect
			calls = true
			d.u32()
			d.u32()
		case 0x1f: // try_table
			d.blocktype()
			for n := d.u32(); n > 0 && d.err == nil; n-- {
				if kind := d.byte(); kind <= 1 {
					d.u32() // tag
				}
				d.u32() // label
			}
			depth++
		case 0x0b: // end
			depth--
		case 0x18: // delegate (legacy exceptions) ends its try block
			d.u32()
			depth--
		default:
			if err := d.skipImmediates(op); err != nil {
				return nil, fmt.Errorf("at offset %d: %w", start, err)
			}
		}
		if d.err != nil {
			return nil, fmt.Errorf("at offset %d: %w", start, d.err)
		}
		out = append(out, fb[start:d.pos]...)
	}
	if d.pos != len(d.b) {
		return nil, errors.New("bytes after the body's end instruction")
	}
	if calls && !loopFirst {
		out = slices.Insert(out, entry, check...)
		c.entries++
	}
	return out, nil
}

// straightLine reports whether op, met before a function's first loop,
// leaves that loop head certain to be reached (or the call to trap): it
// neither calls, branches, nor ends a block. Blocks may open (nothing
// branches out of them before the loop).
func straightLine(op byte) bool {
	switch {
	case op == 0x01, op == 0x02, op == 0x1a: // nop block drop
	case op >= 0x20 && op <= 0x24: // local.* global.get/set
	case op >= 0x28 && op <= 0x3e: // loads and stores
	case op >= 0x41 && op <= 0xc4: // constants, numeric
	default:
		return false
	}
	return true
}

// skipImmediates reads the immediates of op (already read) that open no block.
func (d *decoder) skipImmediates(op byte) error {
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0f, op == 0x0a, op == 0x19, // unreachable nop else return throw_ref catch_all
		op == 0x1a, op == 0x1b, // drop select
		op >= 0x45 && op <= 0xc4, // numeric, sign extension
		op == 0xd1:               // ref.is_null
	case op == 0x0c, op == 0x0d, // br br_if
		op == 0x08, op == 0x07, op == 0x09, // throw catch rethrow
		op >= 0x20 && op <= 0x26: // local.* global.* table.get/set
		d.u32()
	case op == 0x0e: // br_table
		for n := d.u32(); n > 0 && d.err == nil; n-- {
			d.u32()
		}
		d.u32()
	case op == 0x1c: // select t*
		for n := d.u32(); n > 0 && d.err == nil; n-- {
			d.valtype()
		}
	case op >= 0x28 && op <= 0x3e: // loads and stores
		d.memarg()
	case op == 0x3f, op == 0x40: // memory.size memory.grow
		d.u32()
	case op == 0x41:
		d.leb(5)
	case op == 0x42:
		d.leb(10)
	case op == 0x43:
		d.bytes(4)
	case op == 0x44:
		d.bytes(8)
	case op == 0xd0: // ref.null
		d.valtype()
	case op == 0xfc:
		return d.skipFC()
	case op == 0xfd:
		return d.skipFD()
	case op == 0xfe:
		return d.skipFE()
	default:
		return fmt.Errorf("unsupported opcode 0x%02x", op)
	}
	return nil
}

func (d *decoder) skipFC() error {
	switch sub := d.u32(); {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init
		d.u32()
		d.u32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17: // data.drop memory.fill elem.drop table.grow/size/fill
		d.u32()
	case sub == 10, sub == 12, sub == 14: // memory.copy table.init table.copy
		d.u32()
		d.u32()
	default:
		return fmt.Errorf("unsupported opcode 0xfc %d", sub)
	}
	return nil
}

func (d *decoder) skipFD() error {
	switch sub := d.u32(); {
	case sub <= 11, sub == 92, sub == 93: // loads, store, load_zero
		d.memarg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		d.bytes(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		d.byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		d.memarg()
		d.byte()
	case sub <= 0x113: // no immediates (including relaxed SIMD)
	default:
		return fmt.Errorf("unsupported opcode 0xfd %d", sub)
	}
	return nil
}

func (d *decoder) skipFE() error {
	switch sub := d.u32(); {
	case sub == 0x03: // atomic.fence
		d.byte()
	case sub <= 0x02, sub >= 0x10 && sub <= 0x4e:
		d.memarg()
	default:
		return fmt.Errorf("unsupported opcode 0xfe %d", sub)
	}
	return nil
}
