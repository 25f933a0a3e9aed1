// Package wasmpatch rewrites a WebAssembly module so that the host can stop
// it cheaply: it adds a mutable i32 global, exports it, and puts a check of
// that global at the entry of every function and at the head of every loop:
//
//	global.get $interrupt
//	if
//	  unreachable
//	end
//
// The host sets the global to 1 from another goroutine when a call runs past
// its deadline; the next function entry or loop iteration traps, and the
// host discards the instance.
//
// Why not wazero's WithCloseOnContextDone? With it, wazero compiles the same
// kind of check into loops but also starts a goroutine and allocates a
// channel on every call, whatever the context: about 1 µs and 3 allocations
// per call on this project's machines, more than the whole budget of a
// route. The check added here costs a load and a not-taken branch per loop
// iteration, and nothing per call. wazero's compiler reloads a global at
// every loop header (it only forwards a global's value along a straight
// path), so a store made by another goroutine is seen on the next iteration.
//
// A function without loops ends or recurses; recursion passes a function
// entry, and wazero traps a stack that grows too deep, so the two check
// sites are enough to interrupt any run.
//
// The rewrite decodes every instruction, so it knows the immediates of the
// instruction sets wazero runs (MVP, sign extension, saturating conversions,
// bulk memory, reference types, multi-value, SIMD, tail calls, threads'
// atomics, try_table exceptions); a module using anything else is refused
// with an error naming the opcode. Custom sections other than "name" are
// dropped: code offsets move, so debug info would lie.
package wasmpatch

import (
	"errors"
	"fmt"
)

// Result of Patch: the new module, the index of the interrupt global and the
// counts of check sites.
type Result struct {
	Wasm      []byte
	Global    uint32
	Functions int
	Loops     int
}

var magic = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// Section ids.
const (
	secCustom    = 0
	secImport    = 2
	secGlobal    = 6
	secExport    = 7
	secCode      = 10
	exportGlobal = 0x03
)

// order ranks section ids in the order the binary format requires.
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// ErrNotWasm reports bytes that are not a WebAssembly 1.0 binary module.
var ErrNotWasm = errors.New("not a WebAssembly binary module (bad magic or version)")

type section struct {
	id   byte
	name string // custom sections
	body []byte
}

// Patch adds the interrupt global, exported as exportName, and the checks.
func Patch(wasm []byte, exportName string) (*Result, error) {
	if len(wasm) < 8 || string(wasm[:8]) != string(magic) {
		return nil, ErrNotWasm
	}
	var secs []section
	d := decoder{b: wasm, pos: 8}
	for d.pos < len(d.b) {
		id := d.byte()
		size := d.u32()
		body := d.bytes(int(size))
		if d.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, d.err)
		}
		s := section{id: id, body: body}
		if id == secCustom {
			sd := decoder{b: body}
			s.name = string(sd.bytes(int(sd.u32())))
			if sd.err != nil || s.name != "name" {
				continue // drop: see the package doc
			}
		} else if _, ok := order[id]; !ok {
			return nil, fmt.Errorf("unknown section id %d", id)
		}
		secs = append(secs, s)
	}

	importedGlobals, err := countImportedGlobals(secs)
	if err != nil {
		return nil, err
	}

	res := &Result{}
	// Globals: append ours, creating the section if there is none.
	gi := find(secs, secGlobal)
	newGlobal := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b} // i32, mutable, i32.const 0, end
	if gi < 0 {
		secs = insert(secs, section{id: secGlobal, body: append([]byte{1}, newGlobal...)})
		res.Global = importedGlobals
	} else {
		gd := decoder{b: secs[gi].body}
		n := gd.u32()
		if gd.err != nil {
			return nil, fmt.Errorf("global section: %w", gd.err)
		}
		body := appendU32(nil, n+1)
		body = append(body, gd.b[gd.pos:]...)
		secs[gi].body = append(body, newGlobal...)
		res.Global = importedGlobals + n
	}

	// Exports: append ours, refusing a module that already has the name.
	ei := find(secs, secExport)
	if ei < 0 {
		secs = insert(secs, section{id: secExport, body: []byte{0}})
		ei = find(secs, secExport)
	}
	ed := decoder{b: secs[ei].body}
	n := ed.u32()
	for i := uint32(0); i < n && ed.err == nil; i++ {
		name := ed.bytes(int(ed.u32()))
		ed.byte()
		ed.u32()
		if string(name) == exportName {
			return nil, fmt.Errorf("module already exports %q", exportName)
		}
	}
	if ed.err != nil {
		return nil, fmt.Errorf("export section: %w", ed.err)
	}
	exp := appendU32(nil, n+1)
	exp = append(exp, ed.b[lebLen(ed.b):]...) // the existing entries
	exp = appendU32(exp, uint32(len(exportName)))
	exp = append(exp, exportName...)
	exp = append(exp, exportGlobal)
	exp = appendU32(exp, res.Global)
	secs[ei].body = exp

	check := []byte{0x23}
	check = appendU32(check, res.Global)
	check = append(check, 0x04, 0x40, 0x00, 0x0b)

	if ci := find(secs, secCode); ci >= 0 {
		body, funcs, loops, err := patchCode(secs[ci].body, check)
		if err != nil {
			return nil, err
		}
		secs[ci].body = body
		res.Functions, res.Loops = funcs, loops
	}

	out := make([]byte, 0, len(wasm)+res.Functions*len(check)+res.Loops*len(check)+64)
	out = append(out, magic...)
	for _, s := range secs {
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	res.Wasm = out
	return res, nil
}

// lebLen is the length of the LEB128 number at the start of b.
func lebLen(b []byte) int {
	for i, c := range b {
		if c&0x80 == 0 {
			return i + 1
		}
	}
	return len(b)
}

func find(secs []section, id byte) int {
	for i, s := range secs {
		if s.id == id {
			return i
		}
	}
	return -1
}

// insert places s before the first non-custom section that must follow it.
func insert(secs []section, s section) []section {
	at := len(secs)
	for i, x := range secs {
		if x.id != secCustom && order[x.id] > order[s.id] {
			at = i
			break
		}
	}
	secs = append(secs, section{})
	copy(secs[at+1:], secs[at:])
	secs[at] = s
	return secs
}

func countImportedGlobals(secs []section) (uint32, error) {
	i := find(secs, secImport)
	if i < 0 {
		return 0, nil
	}
	d := decoder{b: secs[i].body}
	var globals uint32
	for n := d.u32(); n > 0 && d.err == nil; n-- {
		d.bytes(int(d.u32())) // module
		d.bytes(int(d.u32())) // name
		switch kind := d.byte(); kind {
		case 0x00: // func
			d.u32()
		case 0x01: // table
			d.valtype()
			d.limits()
		case 0x02: // memory
			d.limits()
		case 0x03: // global
			d.valtype()
			d.byte()
			globals++
		case 0x04: // tag
			d.byte()
			d.u32()
		default:
			return 0, fmt.Errorf("import section: unknown import kind %d", kind)
		}
	}
	if d.err != nil {
		return 0, fmt.Errorf("import section: %w", d.err)
	}
	return globals, nil
}

// patchCode rewrites every function body of the code section.
func patchCode(code []byte, check []byte) ([]byte, int, int, error) {
	d := decoder{b: code}
	n := d.u32()
	out := make([]byte, 0, len(code)+int(n)*len(check)*2)
	out = appendU32(out, n)
	loops := 0
	var body []byte
	for f := uint32(0); f < n; f++ {
		size := d.u32()
		fb := d.bytes(int(size))
		if d.err != nil {
			return nil, 0, 0, fmt.Errorf("code section, function %d: %w", f, d.err)
		}
		var l int
		var err error
		body, l, err = patchBody(body[:0], fb, check)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("code section, function body %d: %w", f, err)
		}
		loops += l
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if d.err != nil || d.pos != len(d.b) {
		return nil, 0, 0, errors.New("code section: trailing bytes")
	}
	return out, int(n), loops, nil
}

// patchBody copies one function body into out with the checks inserted.
func patchBody(out, fb []byte, check []byte) ([]byte, int, error) {
	d := decoder{b: fb}
	for groups := d.u32(); groups > 0 && d.err == nil; groups-- {
		d.u32()
		d.valtype()
	}
	if d.err != nil {
		return nil, 0, fmt.Errorf("locals: %w", d.err)
	}
	out = append(out, fb[:d.pos]...)
	out = append(out, check...)
	loops := 0
	depth := 1 // the function's own block
	for depth > 0 {
		if d.pos >= len(d.b) {
			return nil, 0, errors.New("body ends before its end instruction")
		}
		start := d.pos
		op := d.byte()
		switch op {
		case 0x02, 0x04, 0x06: // block, if, try (legacy)
			d.blocktype()
			depth++
		case 0x03: // loop
			d.blocktype()
			depth++
			out = append(out, fb[start:d.pos]...)
			out = append(out, check...)
			loops++
			continue
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
				return nil, 0, fmt.Errorf("at offset %d: %w", start, err)
			}
		}
		if d.err != nil {
			return nil, 0, fmt.Errorf("at offset %d: %w", start, d.err)
		}
		out = append(out, fb[start:d.pos]...)
	}
	if d.pos != len(d.b) {
		return nil, 0, errors.New("bytes after the body's end instruction")
	}
	return out, loops, nil
}

// skipImmediates reads the immediates of op (already read) that open no block.
func (d *decoder) skipImmediates(op byte) error {
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0f, op == 0x0a, op == 0x19, // unreachable nop else return throw_ref catch_all
		op == 0x1a, op == 0x1b, // drop select
		op >= 0x45 && op <= 0xc4, // numeric, sign extension
		op == 0xd1:               // ref.is_null
	case op == 0x0c, op == 0x0d, // br br_if
		op == 0x10, op == 0x12, // call return_call
		op == 0x08, op == 0x07, op == 0x09, // throw catch rethrow
		op >= 0x20 && op <= 0x26, // local.* global.* table.get/set
		op == 0xd2:               // ref.func
		d.u32()
	case op == 0x0e: // br_table
		for n := d.u32(); n > 0 && d.err == nil; n-- {
			d.u32()
		}
		d.u32()
	case op == 0x11, op == 0x13: // call_indirect return_call_indirect
		d.u32()
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
