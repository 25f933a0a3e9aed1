package wasmhost

import (
	"errors"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/sdk/abi"
)

// exchangeType is one exchange type of a plugin, as core sees it. It
// reaches the plugin through ref, so a live upgrade (Host.Upgrade) swaps
// the module under every exchange of the type without core noticing.
type exchangeType struct {
	ref  *pluginRef
	name string
}

// plugin is the plugin serving the type now.
func (t *exchangeType) plugin() *Plugin { return t.ref.cur.Load() }

var (
	_ exchange.Type   = (*exchangeType)(nil)
	_ exchange.Router = (*router)(nil)
)

func (t *exchangeType) Name() string { return t.name }

func definitionFlags(def exchange.Definition) uint8 {
	var f uint8
	if def.Durable {
		f |= abi.FlagDurable
	}
	if def.AutoDelete {
		f |= abi.FlagAutoDelete
	}
	if def.Internal {
		f |= abi.FlagInternal
	}
	return f
}

func encodeTable(t protocol.Table) ([]byte, error) {
	if len(t) == 0 {
		return abi.EmptyTable, nil
	}
	b, err := protocol.AppendTable(nil, t)
	if err != nil {
		return nil, reply.PreconditionFailed("%v", err)
	}
	return b, nil
}

func (t *exchangeType) definition(id uint32, def exchange.Definition) ([]byte, error) {
	args, err := encodeTable(def.Args)
	if err != nil {
		return nil, err
	}
	return abi.AppendDefinition(nil, id, def.VHost, def.Name, t.name, definitionFlags(def), args), nil
}

// ValidateDeclare asks the plugin whether it accepts the declare's
// arguments, then validates the declare as each type the plugin asked for
// (ABI 1.1's validate-as checks).
func (t *exchangeType) ValidateDeclare(def exchange.Definition) error {
	return t.validateDeclare(def, 0)
}

// maxCheckDepth bounds a chain of validate-as checks (a type asking for
// another that asks for another...), which could otherwise loop.
const maxCheckDepth = 3

func (t *exchangeType) validateDeclare(def exchange.Definition, depth int) error {
	in, err := t.definition(abi.None, def)
	if err != nil {
		return err
	}
	p := t.plugin()
	as, err := p.validated(t.name, "validate a declare", fnValidateDeclare, in)
	if err != nil {
		return err
	}
	for _, name := range as {
		other, err := p.checkType(name, depth)
		if err != nil {
			return err
		}
		d := def
		d.Type = name
		if pt, ok := other.(*exchangeType); ok {
			err = pt.validateDeclare(d, depth+1)
		} else {
			err = other.ValidateDeclare(d)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// validated runs a validate call (fn: declare or binding) and returns the
// types the plugin asked the declare or binding to be checked as too.
func (p *Plugin) validated(typ, what string, fn int, in []byte) ([]string, error) {
	var as []string
	err := p.call(typ, what, fn, in, func(o abi.Output) (err error) {
		as, err = p.readChecks(fn, o.Payload)
		return err
	})
	return as, err
}

// readChecks decodes the validate-as checks of a validate answer. A 1.0
// module's payload is ignored, as a 1.0 host did; naming one of the
// plugin's own types is malformed (the plugin validates those itself).
func (p *Plugin) readChecks(fn int, payload []byte) ([]string, error) {
	if p.abiMinor < 1 || len(payload) == 0 {
		return nil, nil
	}
	as, err := abi.ReadChecks(payload)
	if err != nil {
		return nil, malformed(fnNames[fn], "%v", err)
	}
	for _, name := range as {
		if slices.Contains(p.desc.Types, name) {
			return nil, malformed(fnNames[fn], "asked to validate as its own exchange type '%s'", name)
		}
	}
	return as, nil
}

// checkType finds the type a validate-as check names.
func (p *Plugin) checkType(name string, depth int) (exchange.Type, error) {
	if depth >= maxCheckDepth {
		return nil, reply.PreconditionFailed("validation by exchange type '%s' is checked through more than %d other types", name, maxCheckDepth)
	}
	var t exchange.Type
	ok := false
	if p.h.cfg.LookupType != nil {
		t, ok = p.h.cfg.LookupType(name)
	}
	if !ok {
		return nil, reply.PreconditionFailed("exchange type '%s' does not exist", name)
	}
	return t, nil
}

// Create makes the exchange in the plugin (in one instance now, in the
// others when they next catch up) and returns its router.
func (t *exchangeType) Create(def exchange.Definition) (exchange.Router, error) {
	t.ref.mu.RLock()
	defer t.ref.mu.RUnlock()
	p := t.plugin()
	id := p.takeID()
	in, err := t.definition(id, def)
	if err != nil {
		p.giveID(id)
		return nil, err
	}
	err = p.mutate(t.name, "create an exchange", fnCreate, in, func() {
		p.exchanges[id] = &exchangeRecord{create: in, bindings: make(map[uint32]bindingRecord)}
	})
	if err != nil {
		p.giveID(id)
		return nil, err
	}
	return &router{t: t, id: id, def: def, ids: make(map[*exchange.Binding]uint32)}, nil
}

// router is one exchange of a plugin type. Its binding table maps the ids
// the plugin answers with to the broker's bindings; ids are slots, reused
// after removal, identical in every instance because the host assigns them.
//
// core guarantees Route never runs with a mutation of the same router, so
// the table needs no lock: Route only reads it. The table survives a live
// upgrade unchanged: the new module is given the same ids.
type router struct {
	t       *exchangeType
	id      uint32
	def     exchange.Definition
	slots   []*exchange.Binding
	free    []uint32
	ids     map[*exchange.Binding]uint32
	deleted bool
}

// plugin is the plugin serving the router now.
func (r *router) plugin() *Plugin { return r.t.plugin() }

func (r *router) binding(id uint32, b *exchange.Binding) ([]byte, error) {
	args, err := encodeTable(b.Args)
	if err != nil {
		return nil, err
	}
	kind := uint8(abi.DestQueue)
	if b.Destination.Kind == exchange.ToExchange {
		kind = abi.DestExchange
	}
	if len(b.Key) > math.MaxUint8 {
		return nil, reply.PreconditionFailed("routing key longer than 255 bytes")
	}
	return abi.AppendBinding(nil, r.id, id, kind, b.Destination.Name, b.Key, args), nil
}

// ValidateBinding asks the plugin whether it accepts the binding, then
// validates it as each type the plugin asked for (ABI 1.1): on a scratch
// exchange of that type with this exchange's definition, made and deleted
// for the check. Every type's binding checks (built in or shipped) look at
// the binding alone, so a scratch exchange answers as the one the message
// will be routed through would.
func (r *router) ValidateBinding(b *exchange.Binding) error { return r.validateBinding(b, 0) }

func (r *router) validateBinding(b *exchange.Binding, depth int) error {
	in, err := r.binding(abi.None, b)
	if err != nil {
		return err
	}
	p := r.plugin()
	as, err := p.validated(r.t.name, "validate a binding", fnValidateBinding, in)
	if err != nil {
		return err
	}
	for _, name := range as {
		other, err := p.checkType(name, depth)
		if err != nil {
			return err
		}
		def := r.def
		def.Type = name
		scratch, err := other.Create(def)
		if err != nil {
			return err
		}
		if pr, ok := scratch.(*router); ok {
			err = pr.validateBinding(b, depth+1)
		} else {
			err = scratch.ValidateBinding(b)
		}
		scratch.Delete()
		if err != nil {
			return err
		}
	}
	return nil
}

// AddBinding gives the binding a slot and the plugin its id.
func (r *router) AddBinding(b *exchange.Binding) error {
	r.t.ref.mu.RLock()
	defer r.t.ref.mu.RUnlock()
	p := r.plugin()
	if r.deleted {
		return p.unavailable(r.t.name)
	}
	id := uint32(len(r.slots))
	if n := len(r.free); n > 0 {
		id = r.free[n-1]
	}
	in, err := r.binding(id, b)
	if err != nil {
		return err
	}
	err = p.mutate(r.t.name, "add a binding", fnAddBinding, in, func() {
		if x := p.exchanges[r.id]; x != nil {
			p.bindOrder++
			x.bindings[id] = bindingRecord{order: p.bindOrder, in: in}
		}
	})
	if err != nil {
		return err
	}
	if n := len(r.free); n > 0 && r.free[n-1] == id {
		r.free = r.free[:n-1]
		r.slots[id] = b
	} else {
		r.slots = append(r.slots, b)
	}
	r.ids[b] = id
	return nil
}

// RemoveBindings removes the bindings in one call. A disabled plugin has
// nothing to remove them from, which is no error.
func (r *router) RemoveBindings(bs []*exchange.Binding) error {
	r.t.ref.mu.RLock()
	defer r.t.ref.mu.RUnlock()
	p := r.plugin()
	ids := make([]uint32, 0, len(bs))
	for _, b := range bs {
		if id, ok := r.ids[b]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	forget := func() {
		for _, b := range bs {
			if id, ok := r.ids[b]; ok {
				delete(r.ids, b)
				r.slots[id] = nil
				r.free = append(r.free, id)
			}
		}
	}
	if d, _ := p.disabled(); d || r.deleted {
		forget()
		return nil
	}
	in := abi.AppendRemove(nil, r.id, ids)
	err := p.mutate(r.t.name, "remove bindings", fnRemoveBindings, in, func() {
		if x := p.exchanges[r.id]; x != nil {
			for _, id := range ids {
				delete(x.bindings, id)
			}
		}
	})
	if err != nil {
		return err
	}
	forget()
	return nil
}

// PolicyChanged hands the plugin the policy now in force (nil: none).
func (r *router) PolicyChanged(policy protocol.Table) error {
	r.t.ref.mu.RLock()
	defer r.t.ref.mu.RUnlock()
	p := r.plugin()
	if r.deleted {
		return nil
	}
	var in []byte
	if policy == nil {
		in = abi.AppendPolicy(nil, r.id, nil, false)
	} else {
		table, err := encodeTable(policy)
		if err != nil {
			return err
		}
		in = abi.AppendPolicy(nil, r.id, table, true)
	}
	return p.mutate(r.t.name, "apply a policy", fnPolicyChanged, in, func() {
		if x := p.exchanges[r.id]; x != nil {
			if policy == nil {
				x.policy = nil
			} else {
				x.policy = in
			}
		}
	})
}

// Delete drops the exchange from the plugin. A failure is logged: Delete
// cannot fail, and the record is gone either way, so fresh instances will
// not know the exchange.
func (r *router) Delete() {
	r.t.ref.mu.RLock()
	defer r.t.ref.mu.RUnlock()
	if r.deleted {
		return
	}
	r.deleted = true
	p := r.plugin()
	forget := func() {
		delete(p.exchanges, r.id)
		p.freeIDs = append(p.freeIDs, r.id)
	}
	if d, _ := p.disabled(); d {
		p.stateMu.Lock()
		forget()
		p.stateMu.Unlock()
		return
	}
	if err := p.mutate(r.t.name, "delete an exchange", fnDelete, abi.AppendExchange(nil, r.id), forget); err != nil {
		p.stateMu.Lock()
		forget()
		p.stateMu.Unlock()
		p.log.Warn().Err(err).Str("exchange", r.def.Name).Str("vhost", r.def.VHost).Msg("deleting an exchange in the plugin failed")
	}
}

// Info returns the plugin's figures for this exchange; nil when it has none
// or fails.
func (r *router) Info() map[string]any {
	if r.deleted {
		return nil
	}
	var info map[string]any
	err := r.plugin().call(r.t.name, "report info", fnInfo, abi.AppendExchange(nil, r.id), func(o abi.Output) error {
		if len(o.Payload) == 0 {
			return nil
		}
		t, _, err := protocol.DecodeTable(o.Payload)
		if err != nil {
			return malformed(abi.ExportInfo, "info table: %v", err)
		}
		info = plainMap(t)
		return nil
	})
	if err != nil {
		return nil
	}
	return info
}

func plainMap(t protocol.Table) map[string]any {
	if t == nil {
		return nil
	}
	m := make(map[string]any, len(t))
	for k, v := range t {
		if sub, ok := v.(protocol.Table); ok {
			v = plainMap(sub)
		}
		m[k] = v
	}
	return m
}

// Route is the hot path: take an instance, write the route record straight
// into its exchange buffer, call warren_route, map the ids it answers to
// bindings, give the instance back. Nothing here allocates.
//
// Every call is counted; one in routeTimingEvery per instance is timed
// (reading the clock twice and updating a histogram every core shares
// cost a fifth of a route call, more than doubling it under contention).
func (r *router) Route(m *message.Message, res *exchange.Result) error {
	p := r.plugin()
	if r.deleted {
		return p.unavailable(r.t.name)
	}
	if len(m.RoutingKey) > math.MaxUint8 {
		return reply.PreconditionFailed("routing key longer than 255 bytes")
	}
	var flags uint16
	var props, body []byte
	if p.desc.Features&(abi.FeatureHeaders|abi.FeatureProperties) != 0 {
		flags, props = m.Flags, m.Props
	}
	if p.desc.Features&abi.FeatureBody != 0 {
		body = m.Body
	}
	size := abi.RouteSize(len(m.RoutingKey), len(props), len(body))
	if uint64(size) > p.h.cfg.MemoryLimitBytes/4 {
		// Asking the plugin to make room would run it out of memory, a
		// failure a publisher could repeat until the plugin is disabled.
		return reply.PreconditionFailed("message of %d bytes is too large for exchange type '%s' (plugin '%s' takes at most %d)",
			size, r.t.name, p.name, p.h.cfg.MemoryLimitBytes/4)
	}

	// res is the publisher's own scratch, the same on every publish: its
	// address makes the publisher prefer the instance it used last.
	in, err := p.pool.getNear(uint32(uint64(uintptr(unsafe.Pointer(res))>>4) * 0x9e3779b97f4a7c15 >> 32))
	if err != nil {
		if errors.Is(err, errClosed) && r.plugin() != p {
			// Upgraded since p was read: the old version retired
			// between the two reads. Route through the new one.
			return r.Route(m, res)
		}
		return p.callError(r.t.name, "route", err)
	}
	dst, err := in.input(uint32(size))
	if err != nil {
		if _, ok := err.(errTooLarge); ok {
			p.pool.put(in)
			return reply.PreconditionFailed("message of %d bytes is too large for exchange type '%s' (plugin '%s' has no room for it)",
				size, r.t.name, p.name)
		}
		p.pool.discard(in, err)
		p.routeFailures.Add(1)
		return p.callError(r.t.name, "route", err)
	}
	abi.PutRoute(dst, r.id, m.RoutingKey, flags, props, body)
	p.routeCalls.Add(1)
	in.routes++
	timed := in.routes%routeTimingEvery == 1
	var start time.Time
	if timed {
		start = time.Now()
	}
	out, err := in.call(fnRoute, uint32(size))
	if timed {
		p.routeLatency.Observe(time.Since(start).Seconds())
	}
	if err != nil {
		p.pool.discard(in, err)
		p.routeFailures.Add(1)
		return p.callError(r.t.name, "route", err)
	}
	if err := r.result(p, out, res); err != nil {
		if _, isFailure := err.(*failure); isFailure {
			p.pool.discard(in, err)
			p.routeFailures.Add(1)
			return p.callError(r.t.name, "route", err)
		}
		p.pool.put(in)
		return err
	}
	p.pool.put(in)
	return nil
}

// result reads a route output into res. A reply error is returned as is;
// anything breaking the ABI is a *failure, and res is left as it was.
func (r *router) result(p *Plugin, out []byte, res *exchange.Result) error {
	o, err := readOutput(fnRoute, out)
	if err != nil {
		return err
	}
	if o.Status == abi.StatusError {
		return p.replyOf(o)
	}
	ro, err := abi.ReadRouteOutput(o.Payload)
	if err != nil {
		return malformed(abi.ExportRoute, "%v", err)
	}
	mark := len(res.Bindings)
	for i, n := 0, ro.Count(); i < n; i++ {
		id := ro.ID(i)
		if uint64(id) >= uint64(len(r.slots)) || r.slots[id] == nil {
			clear(res.Bindings[mark:])
			res.Bindings = res.Bindings[:mark]
			return malformed(abi.ExportRoute, "answered binding id %d, which exchange '%s' does not have", id, r.def.Name)
		}
		res.Bindings = append(res.Bindings, r.slots[id])
	}
	if ro.HasVia {
		if len(ro.Via) == 0 {
			return malformed(abi.ExportRoute, "via action without an exchange type")
		}
		if ro.Hold > uint64(math.MaxInt64/int64(time.Millisecond)) {
			return malformed(abi.ExportRoute, "hold of %d ms is out of range", ro.Hold)
		}
		res.Via = p.intern(ro.Via)
		res.Hold = time.Duration(ro.Hold) * time.Millisecond
	}
	if ro.SetHeaders != nil {
		if p.abiMinor < 1 {
			return malformed(abi.ExportRoute, "set-headers action from a module that speaks routing ABI v1.0")
		}
		t, _, err := protocol.DecodeTable(ro.SetHeaders)
		if err != nil {
			return malformed(abi.ExportRoute, "set-headers table: %v", err)
		}
		res.SetHeaders = t
	}
	return nil
}
