package sdk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"
	"unsafe"

	"github.com/warrenmq/warren/sdk/abi"
)

// dispatcher decodes the ABI's inputs, calls the plugin's types and
// exchanges, and encodes their answers. It is plain Go: the wasip1 exports
// are one-line shims over it, and tests drive it natively.
//
// Outputs are built in one reused buffer, valid until the next call, as the
// ABI allows.
type dispatcher struct {
	plugin Plugin
	types  map[string]ExchangeType
	// exch holds the exchanges by id. The host assigns small ids and
	// reuses them, so a slice serves (a map lookup costs ~50 ns in wasm).
	exch []Exchange

	in  []byte // the exchange buffer the host writes into
	out []byte

	msg Message
	res Result
	ids []BindingID
	raw []uint32
}

var le = binary.LittleEndian

// registered is the plugin Register set; nil until then.
var registered *dispatcher

const (
	defaultBuffer = 64 << 10
	// keepBuffer is the most buffer idle keeps; a larger one was grown
	// for an outsized message and goes back to the default.
	keepBuffer = 1 << 20
)

func newDispatcher(p Plugin) *dispatcher {
	d := &dispatcher{
		plugin: p,
		types:  make(map[string]ExchangeType, len(p.Types)),
		in:     make([]byte, defaultBuffer),
		out:    make([]byte, 0, 1024),
	}
	for _, t := range p.Types {
		d.types[t.Name()] = t
	}
	return d
}

// maxExchanges bounds exchange ids (the host's are dense).
const maxExchanges = 1 << 24

func (d *dispatcher) exchange(id uint32) Exchange {
	if uint64(id) < uint64(len(d.exch)) {
		return d.exch[id]
	}
	return nil
}

// buffer returns an exchange buffer of at least size bytes.
func (d *dispatcher) buffer(size int) []byte {
	if size > len(d.in) {
		d.in = make([]byte, size)
	}
	return d.in
}

// call runs export fn on input, turning a panic into a FAULT output so the
// host sees the plugin's message rather than a bare trap. The host then
// discards the instance: state after a panic is not to be trusted.
func (d *dispatcher) call(method func(*dispatcher, []byte) []byte, input []byte) (out []byte) {
	defer func() {
		if r := recover(); r != nil {
			out = d.panicked(r)
		}
	}()
	return method(d, input)
}

// panicked reports a recovered panic as a FAULT.
func (d *dispatcher) panicked(r any) []byte {
	return abi.AppendFault(d.out[:0], fmt.Sprintf("panic: %v\n%s", r, debug.Stack()))
}

func (d *dispatcher) fault(format string, args ...any) []byte {
	return abi.AppendFault(d.out[:0], fmt.Sprintf(format, args...))
}

// reply encodes an error as an ERROR output.
func (d *dispatcher) reply(err error) []byte {
	var e *Error
	if errors.As(err, &e) {
		return abi.AppendError(d.out[:0], e.Code, e.Text)
	}
	return abi.AppendError(d.out[:0], PreconditionFailed, err.Error())
}

func (d *dispatcher) describe([]byte) []byte {
	p := &d.plugin
	desc := abi.Description{Name: p.Name, Version: p.Version, Features: uint32(p.Features)}
	for _, t := range p.Types {
		desc.Types = append(desc.Types, t.Name())
	}
	for _, s := range p.Settings {
		desc.Settings = append(desc.Settings, abi.Setting{Kind: uint8(s.Kind), Name: s.Name, Doc: s.Doc})
	}
	return abi.AppendDescription(append(d.out[:0], abi.StatusOK), &desc)
}

func (d *dispatcher) declaration(in []byte) (*Declaration, ExchangeType, uint32, []byte) {
	rec, err := abi.ReadDefinition(in)
	if err != nil {
		return nil, nil, 0, d.fault("definition record: %v", err)
	}
	t := d.types[string(rec.Type)]
	if t == nil {
		return nil, nil, 0, abi.AppendError(d.out[:0], PreconditionFailed, fmt.Sprintf("plugin %s has no exchange type '%s'", d.plugin.Name, rec.Type))
	}
	return &Declaration{
		VHost:      string(rec.VHost),
		Name:       string(rec.Name),
		Type:       string(rec.Type),
		Durable:    rec.Flags&abi.FlagDurable != 0,
		AutoDelete: rec.Flags&abi.FlagAutoDelete != 0,
		Internal:   rec.Flags&abi.FlagInternal != 0,
		Args:       ownedTable(rec.Args),
	}, t, rec.Exchange, nil
}

func (d *dispatcher) validateDeclare(in []byte) []byte {
	decl, t, _, out := d.declaration(in)
	if decl == nil {
		return out
	}
	if err := t.ValidateDeclare(decl); err != nil {
		return d.reply(err)
	}
	return d.checks(decl.validateAs)
}

// checks answers a validation that asked for validate-as checks.
func (d *dispatcher) checks(types []string) []byte {
	if len(types) == 0 {
		return nil
	}
	out := append(d.out[:0], abi.StatusOK)
	for _, t := range types {
		out = abi.AppendValidateAs(out, t)
	}
	return out
}

func (d *dispatcher) create(in []byte) []byte {
	decl, t, id, out := d.declaration(in)
	if decl == nil {
		return out
	}
	if id >= maxExchanges {
		return d.fault("exchange id %d out of range", id)
	}
	if d.exchange(id) != nil {
		return d.fault("exchange id %d created twice", id)
	}
	x, err := t.Create(decl)
	if err != nil {
		return d.reply(err)
	}
	if x == nil {
		return d.fault("%s.Create returned no exchange", t.Name())
	}
	for uint32(len(d.exch)) <= id {
		d.exch = append(d.exch, nil)
	}
	d.exch[id] = x
	return nil
}

func (d *dispatcher) delete(in []byte) []byte {
	r := abi.NewReader(in)
	id := r.U32()
	if r.Err() != nil {
		return d.fault("delete record: %v", r.Err())
	}
	if x, ok := d.exchange(id).(Deleter); ok {
		x.Delete()
	}
	if id < uint32(len(d.exch)) {
		d.exch[id] = nil
	}
	return nil
}

func (d *dispatcher) binding(in []byte) (Exchange, *Binding, []byte) {
	rec, err := abi.ReadBinding(in)
	if err != nil {
		return nil, nil, d.fault("binding record: %v", err)
	}
	x := d.exchange(rec.Exchange)
	if x == nil {
		return nil, nil, d.fault("binding on unknown exchange id %d", rec.Exchange)
	}
	return x, &Binding{
		ID:          BindingID(rec.Binding),
		Kind:        DestKind(rec.DestKind),
		Destination: string(rec.DestName),
		Key:         string(rec.Key),
		Args:        ownedTable(rec.Args),
	}, nil
}

func (d *dispatcher) validateBinding(in []byte) []byte {
	x, b, out := d.binding(in)
	if x == nil {
		return out
	}
	if err := x.ValidateBinding(b); err != nil {
		return d.reply(err)
	}
	return d.checks(b.validateAs)
}

func (d *dispatcher) addBinding(in []byte) []byte {
	x, b, out := d.binding(in)
	if x == nil {
		return out
	}
	if err := x.AddBinding(b); err != nil {
		return d.reply(err)
	}
	return nil
}

func (d *dispatcher) removeBindings(in []byte) []byte {
	id, raw, err := abi.ReadRemove(in, d.raw[:0])
	d.raw = raw
	if err != nil {
		return d.fault("remove record: %v", err)
	}
	x := d.exchange(id)
	if x == nil {
		return d.fault("remove on unknown exchange id %d", id)
	}
	d.ids = d.ids[:0]
	for _, b := range raw {
		d.ids = append(d.ids, BindingID(b))
	}
	if err := x.RemoveBindings(d.ids); err != nil {
		return d.reply(err)
	}
	return nil
}

func (d *dispatcher) policyChanged(in []byte) []byte {
	id, table, err := abi.ReadPolicy(in)
	if err != nil {
		return d.fault("policy record: %v", err)
	}
	x := d.exchange(id)
	if x == nil {
		return d.fault("policy on unknown exchange id %d", id)
	}
	if pc, ok := x.(PolicyChanger); ok {
		if err := pc.PolicyChanged(ownedTable(table)); err != nil {
			return d.reply(err)
		}
	}
	return nil
}

// route is the hot path. It decodes the record by hand, without the abi
// package's Reader: in Go compiled to WebAssembly every function call costs
// tens of nanoseconds (arguments and results go through the Go stack in
// linear memory), and the Reader's small methods made decoding alone cost
// 300 ns. Here the whole path is a handful of calls.
func (d *dispatcher) route(in []byte) []byte {
	n := len(in)
	if n < 5 {
		return d.fault("route record of %d bytes", n)
	}
	id := le.Uint32(in)
	p := 5 + int(in[4])
	if n < p+10 {
		return d.fault("route record of %d bytes", n)
	}
	key := in[5:p]
	flags := le.Uint16(in[p:])
	pl := int(le.Uint32(in[p+2:]))
	p += 6
	if pl > n-p-4 {
		return d.fault("route record: property list overruns the record")
	}
	props := in[p : p+pl]
	p += pl
	bl := int(le.Uint32(in[p:]))
	p += 4
	if bl > n-p {
		return d.fault("route record: body overruns the record")
	}
	body := in[p : p+bl]
	if uint64(id) >= uint64(len(d.exch)) || d.exch[id] == nil {
		return d.fault("route on unknown exchange id %d", id)
	}

	m := &d.msg
	m.key, m.flags, m.props, m.body, m.scanned, m.indexed = "", flags, props, body, false, false
	if len(key) > 0 {
		m.key = unsafe.String(&key[0], len(key))
	}
	r := &d.res
	r.ids, r.hasVia = r.ids[:0], false
	if len(r.headers) > 0 || r.headerErr != nil {
		r.headers, r.headerErr = r.headers[:0], nil
	}
	if err := d.exch[id].Route(m, r); err != nil {
		return d.reply(err)
	}
	if r.hasVia {
		return d.via()
	}
	if len(r.headers) > 0 || r.headerErr != nil {
		return d.fault("Route set headers without asking for Via with a hold")
	}
	ids := r.ids
	if len(ids) == 0 {
		return nil
	}
	size := 5 + 4*len(ids)
	if cap(d.out) < size {
		d.out = make([]byte, 0, 2*size)
	}
	out := d.out[:size]
	out[0] = abi.StatusOK
	le.PutUint32(out[1:], uint32(len(ids)))
	for i, b := range ids {
		le.PutUint32(out[5+4*i:], b)
	}
	return out
}

// via encodes a Result that asked for another type.
func (d *dispatcher) via() []byte {
	r := &d.res
	if len(r.ids) > 0 {
		return d.fault("Route added bindings and asked for via %q", r.via)
	}
	if r.hold < 0 {
		return d.fault("Route asked for a negative hold %v", r.hold)
	}
	out := abi.AppendRouteIDs(d.out[:0], nil)
	out = abi.AppendVia(out, uint64(r.hold.Milliseconds()), r.via)
	if r.headerErr != nil {
		return d.fault("SetHeader: %v", r.headerErr)
	}
	if len(r.headers) > 0 {
		if r.hold < time.Millisecond {
			return d.fault("Route set headers with Via without a hold")
		}
		out = binary.BigEndian.AppendUint32(append(out, abi.ActionSetHeaders), uint32(len(r.headers)))
		out = append(out, r.headers...)
	}
	return out
}

// settingsChanged hands the plugin its new settings.
func (d *dispatcher) settingsChanged(in []byte) []byte {
	t := ownedTable(in)
	if !t.Valid() {
		return d.fault("settings record of %d bytes is not a table", len(in))
	}
	if f := d.plugin.OnSettingsChanged; f != nil {
		if err := f(t); err != nil {
			return d.reply(err)
		}
	}
	settings, settingsRead = t, true
	return nil
}

func (d *dispatcher) info(in []byte) []byte {
	r := abi.NewReader(in)
	id := r.U32()
	if r.Err() != nil {
		return d.fault("info record: %v", r.Err())
	}
	x, ok := d.exchange(id).(Informer)
	if !ok {
		return nil
	}
	m := x.Info()
	if m == nil {
		return nil
	}
	out, err := appendTable(append(d.out[:0], abi.StatusOK), m)
	if err != nil {
		return d.fault("Info: %v", err)
	}
	return out
}

// idle is the host's call off the hot path. It shrinks a buffer grown for
// an outsized message and yields to the Go runtime, whose background work
// (mark workers of a collection in progress, the sweeper) otherwise only
// runs when an export call happens to block. It does not force a
// collection: runtime.GC here cost about a millisecond per call, during
// which a publisher may wait for the instance, and Go 1.26 guests keep
// their heap bounded by collecting within export calls anyway (4000 calls
// making 256 KiB of garbage each stayed at 8 MiB of memory without idle).
func (d *dispatcher) idle([]byte) []byte {
	if d.plugin.OnIdle != nil {
		d.plugin.OnIdle()
	}
	if len(d.in) > keepBuffer {
		d.in = make([]byte, defaultBuffer)
	}
	if cap(d.out) > keepBuffer {
		d.out = make([]byte, 0, 1024)
	}
	runtime.Gosched()
	return nil
}

// noPlugin answers every call of a module whose init never called Register.
func noPlugin([]byte) []byte {
	return abi.AppendFault(nil, "sdk.Register was never called (call it from an init function)")
}
