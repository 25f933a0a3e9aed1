// Package wasmpatch rewrites a WebAssembly module so that the host can stop
// it cheaply and so that it never keeps the Go scheduler from running
// anything else. It adds a mutable i32 global, the budget, exported under
// a name the host chooses; a function import, ImportModule.ImportYield;
// and a check at the head of every loop and at the entry of every function
// that calls another (unless a loop head comes first):
//
//	global.get $budget
//	i32.const 1
//	i32.sub
//	global.set $budget
//	global.get $budget
//	i32.const 0
//	i32.le_s
//	if
//	  call $yield
//	  global.set $budget
//	end
//
// The host's yield lets other goroutines run (runtime.Gosched) and returns
// the new budget, Budget, or, when the call has run past its deadline,
// fails the call. (Returning the budget rather than setting the global
// leaves the module the only writer of it.) To interrupt a call, the host
// marks it; the yield its checks call within Budget of them fails it. A
// host that also wrote the global from another goroutine, to be quicker,
// would race the module's own writes.
//
// Why a yield at all: Go cannot preempt a goroutine while it runs code
// that wazero compiled (the preemption signal finds no Go function at the
// interrupted PC), so a loop that never leaves compiled code keeps its P
// for ever. With as many looping calls as there are Ps (one is enough
// with GOMAXPROCS=1) nothing else runs, not even the watchdog that would
// stop them. Calling yield every Budget checks hands the P back to the
// scheduler often enough (tens of microseconds of a tight loop) to cost
// well under 1% of a loop's time.
//
// Why not wazero's WithCloseOnContextDone? With it, wazero compiles a call
// into Go at every loop iteration and starts a goroutine and allocates a
// channel on every call, whatever the context: about 1 µs and 3
// allocations per call on this project's machines, more than the whole
// budget of a route. The check added here costs a load, a subtraction, a
// store and a not-taken branch per loop iteration, and nothing per call;
// an interrupt waits at most Budget checks.
//
// A function without loops ends or calls; every cycle of calls passes the
// entry check of a function that calls, or the loop head such a function
// starts with, and wazero traps a stack that grows too deep, so the two
// kinds of check site are enough to reach any run.
//
// The import comes after the module's own imports, so every function the
// module defines moves up by one index: calls, ref.func, exports, the
// start function, element segments, constant expressions and the "name"
// section are renumbered.
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

// The function the patched module imports. The host must provide it: a
// function without parameters that returns the new budget, an i32.
const (
	ImportModule = "warren_wasmpatch"
	ImportYield  = "yield"
)

// Budget is the budget global's initial value and the value the host's
// yield resets it to: how many checks pass between two yields.
const Budget = 1 << 14

// Result of Patch: the new module, the indices of the budget global and of
// the yield import, the number of function bodies and the counts of check
// sites.
type Result struct {
	Wasm      []byte
	Global    uint32
	Yield     uint32
	Functions int
	Entries   int
	Loops     int
}

var magic = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// Section ids.
const (
	secCustom = 0
	secType   = 1
	secImport = 2
	secGlobal = 6
	secExport = 7
	secStart  = 8
	secElem   = 9
	secCode   = 10
)

// Kinds of imports and exports.
const (
	kindFunc   = 0x00
	kindGlobal = 0x03
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

// renumber maps a function index of the original module to the patched one.
type renumber func(uint32) uint32

// Patch adds the budget global, exported as exportName, the yield import
// and the checks.
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

	// Types and imports first: the yield import's index is the number of
	// functions imported before it.
	yieldType, err := addYieldType(&secs)
	if err != nil {
		return nil, err
	}
	funcs, globals, err := addYieldImport(&secs, yieldType)
	if err != nil {
		return nil, err
	}
	res := &Result{Yield: funcs}
	fn := func(idx uint32) uint32 {
		if idx >= funcs {
			return idx + 1
		}
		return idx
	}

	if res.Global, err = addBudgetGlobal(&secs, globals, fn); err != nil {
		return nil, err
	}
	if err := addExport(&secs, exportName, res.Global, fn); err != nil {
		return nil, err
	}
	for i := 0; i < len(secs); i++ {
		s := &secs[i]
		switch s.id {
		case secStart:
			sd := decoder{b: s.body}
			idx := sd.u32()
			if sd.err != nil {
				return nil, fmt.Errorf("start section: %w", sd.err)
			}
			s.body = appendU32(nil, fn(idx))
		case secElem:
			if s.body, err = renumberElements(s.body, fn); err != nil {
				return nil, fmt.Errorf("element section: %w", err)
			}
		case secCustom:
			// Names only help debugging: a name section this cannot
			// read is dropped rather than refusing the module.
			if body, err := renumberNames(s.body, fn); err == nil {
				s.body = body
			} else {
				secs = append(secs[:i], secs[i+1:]...)
				i--
			}
		}
	}

	check := []byte{0x23}
	check = appendU32(check, res.Global)
	check = append(check, 0x41, 0x01, 0x6b, 0x24) // i32.const 1, i32.sub, global.set
	check = appendU32(check, res.Global)
	check = append(check, 0x23)
	check = appendU32(check, res.Global)
	check = append(check, 0x41, 0x00, 0x4c, 0x04, 0x40, 0x10) // i32.const 0, i32.le_s, if, call
	check = appendU32(check, res.Yield)
	check = append(check, 0x24) // global.set
	check = appendU32(check, res.Global)
	check = append(check, 0x0b) // end

	if ci := find(secs, secCode); ci >= 0 {
		body, c, err := patchCode(secs[ci].body, check, fn)
		if err != nil {
			return nil, err
		}
		secs[ci].body = body
		res.Functions, res.Entries, res.Loops = c.functions, c.entries, c.loops
	}

	out := make([]byte, 0, len(wasm)+(res.Entries+res.Loops)*len(check)+64)
	out = append(out, magic...)
	for _, s := range secs {
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	res.Wasm = out
	return res, nil
}

// addYieldType appends the type of yield, [] -> [i32], and returns its index.
func addYieldType(secs *[]section) (uint32, error) {
	ti := find(*secs, secType)
	if ti < 0 {
		*secs = insert(*secs, section{id: secType, body: []byte{1, 0x60, 0, 1, 0x7f}})
		return 0, nil
	}
	d := decoder{b: (*secs)[ti].body}
	n := d.u32()
	for i := uint32(0); i < n && d.err == nil; i++ {
		if form := d.byte(); form != 0x60 && d.err == nil {
			return 0, fmt.Errorf("type section: unsupported type form 0x%02x", form)
		}
		for k := d.u32(); k > 0 && d.err == nil; k-- {
			d.valtype()
		}
		for k := d.u32(); k > 0 && d.err == nil; k-- {
			d.valtype()
		}
	}
	if d.err == nil && d.pos != len(d.b) {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return 0, fmt.Errorf("type section: %w", d.err)
	}
	body := appendU32(nil, n+1)
	body = append(body, d.b[lebLen(d.b):]...)
	(*secs)[ti].body = append(body, 0x60, 0, 1, 0x7f)
	return n, nil
}

// addYieldImport appends the yield import and returns how many functions
// and globals the module imported before it.
func addYieldImport(secs *[]section, yieldType uint32) (funcs, globals uint32, err error) {
	entry := appendU32(nil, uint32(len(ImportModule)))
	entry = append(entry, ImportModule...)
	entry = appendU32(entry, uint32(len(ImportYield)))
	entry = append(entry, ImportYield...)
	entry = append(entry, kindFunc)
	entry = appendU32(entry, yieldType)

	ii := find(*secs, secImport)
	if ii < 0 {
		*secs = insert(*secs, section{id: secImport, body: append([]byte{1}, entry...)})
		return 0, 0, nil
	}
	d := decoder{b: (*secs)[ii].body}
	n := d.u32()
	for i := uint32(0); i < n && d.err == nil; i++ {
		module := d.bytes(int(d.u32()))
		d.bytes(int(d.u32())) // name
		if string(module) == ImportModule {
			return 0, 0, fmt.Errorf("module already imports from %q", ImportModule)
		}
		switch kind := d.byte(); kind {
		case kindFunc:
			d.u32()
			funcs++
		case 0x01: // table
			d.valtype()
			d.limits()
		case 0x02: // memory
			d.limits()
		case kindGlobal:
			d.valtype()
			d.byte()
			globals++
		case 0x04: // tag
			d.byte()
			d.u32()
		default:
			if d.err == nil {
				return 0, 0, fmt.Errorf("import section: unknown import kind %d", kind)
			}
		}
	}
	if d.err != nil {
		return 0, 0, fmt.Errorf("import section: %w", d.err)
	}
	body := appendU32(nil, n+1)
	body = append(body, d.b[lebLen(d.b):]...)
	(*secs)[ii].body = append(body, entry...)
	return funcs, globals, nil
}

// addBudgetGlobal appends the budget global, renumbering the functions
// the other globals' initializers name, and returns its index.
func addBudgetGlobal(secs *[]section, imported uint32, fn renumber) (uint32, error) {
	budget := []byte{0x7f, 0x01, 0x41} // i32, mutable, i32.const
	budget = appendSigned(budget, Budget)
	budget = append(budget, 0x0b)

	gi := find(*secs, secGlobal)
	if gi < 0 {
		*secs = insert(*secs, section{id: secGlobal, body: append([]byte{1}, budget...)})
		return imported, nil
	}
	r := rewriter{decoder: decoder{b: (*secs)[gi].body}}
	n := r.u32()
	r.out = appendU32(r.out, n+1)
	r.mark = r.pos
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.valtype()
		r.byte() // mutability
		r.constExpr(fn)
	}
	if r.err != nil {
		return 0, fmt.Errorf("global section: %w", r.err)
	}
	r.flush()
	(*secs)[gi].body = append(r.out, budget...)
	return imported + n, nil
}

// addExport exports the budget global, refusing a module that already has
// the name, and renumbers the exported functions.
func addExport(secs *[]section, name string, global uint32, fn renumber) error {
	ei := find(*secs, secExport)
	if ei < 0 {
		*secs = insert(*secs, section{id: secExport, body: []byte{0}})
		ei = find(*secs, secExport)
	}
	r := rewriter{decoder: decoder{b: (*secs)[ei].body}}
	n := r.u32()
	r.out = appendU32(r.out, n+1)
	r.mark = r.pos
	for i := uint32(0); i < n && r.err == nil; i++ {
		if string(r.bytes(int(r.u32()))) == name {
			return fmt.Errorf("module already exports %q", name)
		}
		if r.byte() == kindFunc {
			r.funcIndex(fn)
		} else {
			r.u32()
		}
	}
	if r.err != nil {
		return fmt.Errorf("export section: %w", r.err)
	}
	r.flush()
	r.out = appendU32(r.out, uint32(len(name)))
	r.out = append(r.out, name...)
	r.out = append(r.out, kindGlobal)
	(*secs)[ei].body = appendU32(r.out, global)
	return nil
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
