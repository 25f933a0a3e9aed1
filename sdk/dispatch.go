package sdk

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/warrenmq/warren/sdk/abi"
)

// dispatcher decodes the ABI's inputs, calls the plugin's types and
// exchanges, and encodes their answers. It is plain Go: the wasip1 exports
// are one-line shims over it, and tests drive it natively.
//
// Outputs are built in one reused buffer, valid until the next call, as the
// ABI allows.
type dispatcher struct {
	plugin    Plugin
	types     map[string]ExchangeType
	exchanges map[uint32]Exchange

	in  []byte // the exchange buffer the host writes into
	out []byte

	msg Message
	res Result
	ids []BindingID
	raw []uint32
}

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
		plugin:    p,
		types:     make(map[string]ExchangeType, len(p.Types)),
		exchanges: make(map[uint32]Exchange),
		in:        make([]byte, defaultBuffer),
		out:       make([]byte, 0, 1024),
	}
	for _, t := range p.Types {
		d.types[t.Name()] = t
	}
	return d
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
			out = abi.AppendFault(d.out[:0], fmt.Sprintf("panic: %v\n%s", r, debug.Stack()))
		}
	}()
	return method(d, input)
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
	return nil
}

func (d *dispatcher) create(in []byte) []byte {
	decl, t, id, out := d.declaration(in)
	if decl == nil {
		return out
	}
	if _, dup := d.exchanges[id]; dup {
		return d.fault("exchange id %d created twice", id)
	}
	x, err := t.Create(decl)
	if err != nil {
		return d.reply(err)
	}
	if x == nil {
		return d.fault("%s.Create returned no exchange", t.Name())
	}
	d.exchanges[id] = x
	return nil
}

func (d *dispatcher) delete(in []byte) []byte {
	r := abi.NewReader(in)
	id := r.U32()
	if r.Err() != nil {
		return d.fault("delete record: %v", r.Err())
	}
	if x, ok := d.exchanges[id].(Deleter); ok {
		x.Delete()
	}
	delete(d.exchanges, id)
	return nil
}

func (d *dispatcher) binding(in []byte) (Exchange, *Binding, []byte) {
	rec, err := abi.ReadBinding(in)
	if err != nil {
		return nil, nil, d.fault("binding record: %v", err)
	}
	x := d.exchanges[rec.Exchange]
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
	return nil
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
	x := d.exchanges[id]
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
	x := d.exchanges[id]
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

// route is the hot path: decode in place, route, encode the ids.
func (d *dispatcher) route(in []byte) []byte {
	rec, err := abi.ReadRoute(in)
	if err != nil {
		return d.fault("route record: %v", err)
	}
	x := d.exchanges[rec.Exchange]
	if x == nil {
		return d.fault("route on unknown exchange id %d", rec.Exchange)
	}
	d.msg.reset(view(rec.Key), rec.Flags, rec.Props, rec.Body)
	d.res.Reset()
	if err := x.Route(&d.msg, &d.res); err != nil {
		return d.reply(err)
	}
	if !d.res.hasVia {
		if len(d.res.ids) == 0 {
			return nil
		}
		return abi.AppendRouteIDs(d.out[:0], d.res.ids)
	}
	if len(d.res.ids) > 0 {
		return d.fault("Route added bindings and asked for via %q", d.res.via)
	}
	if d.res.hold < 0 {
		return d.fault("Route asked for a negative hold %v", d.res.hold)
	}
	out := abi.AppendRouteIDs(d.out[:0], nil)
	return abi.AppendVia(out, uint64(d.res.hold.Milliseconds()), d.res.via)
}

func (d *dispatcher) info(in []byte) []byte {
	r := abi.NewReader(in)
	id := r.U32()
	if r.Err() != nil {
		return d.fault("info record: %v", r.Err())
	}
	x, ok := d.exchanges[id].(Informer)
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

// idle is the host's call off the hot path: finish garbage collection and
// shrink a buffer grown for an outsized message.
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
	runtime.GC()
	return nil
}

// noPlugin answers every call of a module whose init never called Register.
func noPlugin([]byte) []byte {
	return abi.AppendFault(nil, "sdk.Register was never called (call it from an init function)")
}
