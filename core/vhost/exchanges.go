package vhost

import (
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/denseset"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/hold"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/names"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Exchange is a declared exchange: its definition, its type's router and
// the bindings it is the source of.
type Exchange struct {
	exchange.Definition // fixed at declare

	// mu guards the fields below. Route holds it shared; changes hold it
	// exclusively, and defMu too (see the package doc).
	mu       lockorder.RWMutex[lockorder.VHostExchange]
	typ      exchange.Type
	router   exchange.Router
	bindings denseset.Set[*exchange.Binding] // in no order: bySeq sorts them
	policy   *policy.Policy
	// alternate is the alternate exchange in force: the argument, else the
	// policy's.
	alternate string
	deleted   bool

	viaMu lockorder.Mutex[lockorder.VHostExchangeVia]
	via   map[string]exchange.Router // routers of other types over the same bindings

	// Counters are the exchange's message statistics: publish_in (messages
	// published to it by clients) and publish_out (those of them routed or
	// held).
	Counters stats.Meter
}

// Policy returns the name of the policy applied, "" when none.
func (x *Exchange) Policy() string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.policyName()
}

func (x *Exchange) policyName() string {
	if x.policy == nil {
		return ""
	}
	return x.policy.Name
}

// Alternate returns the alternate exchange in force.
func (x *Exchange) Alternate() string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.alternate
}

// missingType stands in for the router of an exchange whose type is gone
// (its plugin was disabled): the exchange keeps its bindings but refuses to
// route, as RabbitMQ does for an exchange of an unknown type.
type missingType struct{ name string }

func (m missingType) ValidateBinding(*exchange.Binding) error  { return nil }
func (m missingType) AddBinding(*exchange.Binding) error       { return nil }
func (m missingType) RemoveBindings([]*exchange.Binding) error { return nil }
func (m missingType) PolicyChanged(protocol.Table) error       { return nil }
func (m missingType) Delete()                                  {}
func (m missingType) Info() map[string]any                     { return nil }
func (m missingType) Route(*message.Message, *exchange.Result) error {
	return reply.PreconditionFailed("exchange type '%s' is not available (its plugin is disabled)", m.name)
}

// Exchange returns the named exchange, or 404.
func (v *VHost) Exchange(name string) (*Exchange, error) {
	v.mu.RLock()
	x := v.exchanges[name]
	v.mu.RUnlock()
	if x == nil {
		return nil, v.noExchange(name)
	}
	return x, nil
}

// FindExchange is Exchange as a client asks for it: in a cluster a miss
// looks again once this node has caught up, so that an exchange declared
// through another node a moment ago is found.
func (v *VHost) FindExchange(name string) (*Exchange, error) {
	x, err := v.Exchange(name)
	if err != nil && v.caughtUp() {
		return v.Exchange(name)
	}
	return x, err
}

func (v *VHost) noExchange(name string) error {
	return reply.NotFound("no exchange '%s' in vhost '%s'", name, v.Name)
}

// DeclareExchange creates an exchange or checks an existing one. passive
// only checks existence. Redeclaring with another type, flags or alternate
// exchange is 406, naming the difference as RabbitMQ does. The default
// exchange cannot be declared at all, not even passively (403), and new
// names may not start with "amq." (403); existing amq.* exchanges may be
// redeclared as they are.
//
// The type's checks and the router's creation (plugin calls) and the
// durable record's synced write happen under defMu alone: publishers route
// on while they run, and see the exchange once it is complete.
func (v *VHost) DeclareExchange(def exchange.Definition, passive bool) (*Exchange, error) {
	def.VHost = v.Name
	if def.Name == "" {
		return nil, reply.AccessRefused("operation not permitted on the default exchange")
	}
	if passive {
		return v.FindExchange(def.Name)
	}
	if v.cluster != nil {
		return v.proposeExchange(def)
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.exchanges[def.Name] == nil {
		if err := v.checkExchangeName(def); err != nil {
			return nil, err
		}
	}
	return v.declareExchange(def)
}

// checkExchangeName checks a new exchange's name (names.Check). It is
// asked where a client's declare is taken, not in declareExchange, which
// also applies the declares of the metadata log as they were accepted.
func (v *VHost) checkExchangeName(def exchange.Definition) error {
	if err := names.Check("exchange", def.Name); err != nil {
		return reply.PreconditionFailed("in vhost '%s', %v", v.Name, err)
	}
	return nil
}

// declareExchange is DeclareExchange's change; defMu is held.
func (v *VHost) declareExchange(def exchange.Definition) (*Exchange, error) {
	if x := v.exchanges[def.Name]; x != nil {
		return x, topology.EquivalentExchange(x.Definition, def)
	}
	t, err := v.checkNewExchange(def)
	if err != nil {
		return nil, err
	}
	router, err := t.Create(def)
	if err != nil {
		return nil, reply.As(err)
	}
	if v.keeps(def.Durable) {
		if err := v.store.PutMeta(storage.KindExchange, v.Name, def.Name, topology.ExchangeRecordOf(def).Table()); err != nil {
			router.Delete()
			return nil, queuetype.Stored(err)
		}
	}
	x := &Exchange{Definition: def, typ: t, router: router}
	v.applyExchangePolicy(x)
	v.mu.Lock()
	v.exchanges[def.Name] = x
	v.mu.Unlock()
	v.touch()
	return x, nil
}

// checkNewExchange makes the checks a new exchange must pass and returns
// its type.
func (v *VHost) checkNewExchange(def exchange.Definition) (exchange.Type, error) {
	if topology.ReservedName(def.Name) {
		return nil, reply.AccessRefused("exchange name '%s' contains reserved prefix 'amq.*'", def.Name)
	}
	t, ok := v.types.Lookup(def.Type)
	if !ok {
		return nil, reply.CommandInvalid("invalid exchange type '%s'", def.Type)
	}
	if err := topology.CheckExchangeArgs(def); err != nil {
		return nil, err
	}
	if err := t.ValidateDeclare(def); err != nil {
		return nil, reply.As(err)
	}
	return t, nil
}

// DeleteExchange removes an exchange and every binding to or from it.
// ifUnused refuses (406) while it is the source of a binding. Deleting an
// exchange that does not exist succeeds, as in RabbitMQ.
func (v *VHost) DeleteExchange(name string, ifUnused bool) error {
	if name == "" {
		return reply.AccessRefused("operation not permitted on the default exchange")
	}
	if topology.ReservedName(name) {
		return reply.AccessRefused("operation not permitted on exchange '%s' in vhost '%s'", name, v.Name)
	}
	if v.cluster != nil {
		return v.proposeExchangeDelete(name, ifUnused)
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	return v.deleteExchangeNamed(name, ifUnused)
}

// deleteExchangeNamed is DeleteExchange's change; defMu is held.
func (v *VHost) deleteExchangeNamed(name string, ifUnused bool) error {
	x := v.exchanges[name]
	if x == nil {
		return nil
	}
	if ifUnused && x.bindings.Len() > 0 {
		return reply.PreconditionFailed("exchange '%s' in vhost '%s' in use", name, v.Name)
	}
	v.deleteExchange(x)
	return nil
}

// deleteExchange drops x and its bindings; defMu is held. Once x is marked
// deleted under its lock no route is inside its router, so the router is
// released without the lock.
func (v *VHost) deleteExchange(x *Exchange) {
	v.mu.Lock()
	delete(v.exchanges, x.Name)
	v.mu.Unlock()
	x.mu.Lock()
	x.deleted = true
	x.mu.Unlock()
	v.touch()
	// Its held messages go with it, as with RabbitMQ's plugin: before the
	// stored exchange, so that a crash in between leaves no held message
	// of an exchange that is gone.
	if n := v.holds.DropExchange(x.Name, hold.DropExchangeDeleted); n > 0 {
		v.log.Info().Str("exchange", x.Name).Int("messages", n).Msg("deleted exchange's held messages dropped")
	}
	if v.keeps(x.Durable) {
		if err := v.store.DeleteMeta(storage.KindExchange, v.Name, x.Name); err != nil {
			v.log.Error().Err(err).Str("exchange", x.Name).Msg("could not delete the stored exchange; it will come back after a restart")
		}
	}
	v.removeBindings(bySeq(x.bindings.Items()))
	v.removeBindings(v.boundTo(exchange.Destination{Kind: exchange.ToExchange, Name: x.Name}))
	x.router.Delete()
	x.viaMu.Lock()
	via := x.via
	x.via = nil
	x.viaMu.Unlock()
	for _, r := range via {
		r.Delete()
	}
}

// viaRouter returns x's router of another type, built on first use from x's
// bindings (the delayed-message type routes through one once a message is
// due). It runs with x.mu held shared, so creation has its own mutex. A
// binding the other type refuses is left out of it, with a warning: the
// messages the other bindings match still go there.
func (x *Exchange) viaRouter(v *VHost, name string) (exchange.Router, error) {
	types := v.types
	x.viaMu.Lock()
	defer x.viaMu.Unlock()
	if r := x.via[name]; r != nil {
		return r, nil
	}
	t, ok := types.Lookup(name)
	if !ok || name == x.Type {
		return nil, reply.PreconditionFailed("exchange '%s' cannot route through type '%s'", x.Name, name)
	}
	r, err := t.Create(x.Definition)
	if err != nil {
		return nil, reply.As(err)
	}
	for _, b := range bySeq(x.bindings.Items()) {
		if err := r.AddBinding(b); err != nil {
			v.refusedViaBinding(x, name, b, err)
		}
	}
	if x.via == nil {
		x.via = make(map[string]exchange.Router)
	}
	x.via[name] = r
	return r, nil
}

// refusedViaBinding warns that x's router of type via left out binding b.
func (v *VHost) refusedViaBinding(x *Exchange, via string, b *exchange.Binding, err error) {
	v.log.Warn().Err(err).Str("exchange", x.Name).Str("via", via).Str("destination", b.Destination.Name).
		Str("destination_kind", b.Destination.Kind.String()).Str("routing_key", b.Key).
		Msg("the exchange's type to route through refuses this binding; due messages do not take it")
}

// exchangeList returns the exchanges, for work done without mu.
func (v *VHost) exchangeList() []*Exchange {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]*Exchange, 0, len(v.exchanges))
	for _, x := range v.exchanges {
		out = append(out, x)
	}
	return out
}

// TypeGone replaces the routers of every exchange of type name with one that
// refuses to route; bindings are kept. The plugin host calls it when it
// disables a plugin.
func (v *VHost) TypeGone(name string) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	for _, x := range v.exchangeList() {
		var gone []exchange.Router
		x.mu.Lock()
		if x.Type == name && x.typ != nil {
			gone = append(gone, x.router)
			x.router = missingType{name: name}
			x.typ = nil
		}
		x.viaMu.Lock()
		if r := x.via[name]; r != nil {
			gone = append(gone, r)
			delete(x.via, name)
		}
		x.viaMu.Unlock()
		x.mu.Unlock()
		for _, r := range gone {
			r.Delete()
		}
	}
}

// TypeBack rebuilds the routers of exchanges of type name from their
// bindings, once a plugin providing it is enabled again. Each router is
// built (plugin calls) before it is swapped in under the exchange's lock.
func (v *VHost) TypeBack(name string) error {
	t, ok := v.types.Lookup(name)
	if !ok {
		return reply.CommandInvalid("invalid exchange type '%s'", name)
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	var firstErr error
	for _, x := range v.exchangeList() {
		if x.Type != name || x.typ != nil {
			continue
		}
		r, err := t.Create(x.Definition)
		if err == nil {
			for _, b := range bySeq(x.bindings.Items()) {
				if err = r.AddBinding(b); err != nil {
					r.Delete()
					break
				}
			}
		}
		if err == nil && x.policy != nil {
			_ = r.PolicyChanged(x.policy.Definition)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		x.mu.Lock()
		x.router, x.typ = r, t
		x.mu.Unlock()
	}
	return firstErr
}

// ExchangeInfo is a snapshot of an exchange for listings.
type ExchangeInfo struct {
	exchange.Definition
	Policy   string
	Bindings int
	Info     map[string]any
	Counters stats.Values // message statistics
	Rates    stats.Rates
	Held     int // messages held for delayed routing
	// MayHold is set for exchanges of types that may hold messages (not
	// the built-in ones).
	MayHold bool
}

// Exchanges lists the exchanges, the default one included. A plugin's
// figures (Info) are asked for under the exchange's own lock only.
func (v *VHost) Exchanges() []ExchangeInfo {
	list := v.exchangeList()
	held := v.holds.Counts()
	out := make([]ExchangeInfo, 0, len(list))
	for _, x := range list {
		x.mu.RLock()
		info := ExchangeInfo{Definition: x.Definition, Policy: x.policyName(), Bindings: x.bindings.Len(),
			Held: held[x.Name], MayHold: !builtInType(x.Type)}
		if !x.deleted {
			// Deleted meanwhile (it was listed before): its router is
			// released without the lock (deleteExchange), so not asked.
			info.Info = x.router.Info()
		}
		x.mu.RUnlock()
		info.Counters, info.Rates = x.Counters.Values(), x.Counters.Rates()
		out = append(out, info)
	}
	return out
}

// builtInType reports the types that never hold messages.
func builtInType(name string) bool {
	switch name {
	case "direct", "fanout", "topic", "headers":
		return true
	}
	return false
}

// defaultRouter is the default exchange: every queue is reachable by its
// name. It holds no bindings of its own; each queue carries the implicit
// binding it returns.
type defaultRouter struct{ v *VHost }

func (d *defaultRouter) ValidateBinding(*exchange.Binding) error {
	return reply.AccessRefused("operation not permitted on the default exchange")
}
func (d *defaultRouter) AddBinding(*exchange.Binding) error       { return d.ValidateBinding(nil) }
func (d *defaultRouter) RemoveBindings([]*exchange.Binding) error { return d.ValidateBinding(nil) }
func (d *defaultRouter) PolicyChanged(protocol.Table) error       { return nil }
func (d *defaultRouter) Delete()                                  {}
func (d *defaultRouter) Info() map[string]any                     { return nil }

// Route reads the queue map under the vhost's read lock: the default
// exchange is never changed, so its own lock is not taken.
func (d *defaultRouter) Route(m *message.Message, r *exchange.Result) error {
	d.v.mu.RLock()
	b := d.v.defaults[m.RoutingKey]
	d.v.mu.RUnlock()
	if b != nil {
		r.Bindings = append(r.Bindings, b)
	}
	return nil
}
