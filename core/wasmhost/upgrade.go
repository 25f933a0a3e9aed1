package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/warrenmq/warren/sdk/abi"
)

// errUpgrade reports a new version of a plugin that could not take over
// from the running one; the running one carries on.
var errUpgrade = errors.New("plugin not upgraded")

// Upgrade replaces a loaded plugin by another build of it while it runs:
//
//  1. The new module is loaded and checked beside the old one, as Load
//     checks a module.
//  2. With mutations of the plugin's exchanges held off (pluginRef.mu),
//     every exchange and binding of the old version is replayed into the
//     new one in the order a restart would replay them, with the same
//     ids. A new version that refuses one, or that no longer provides a
//     type some exchange uses, is discarded with an error naming it.
//  3. The new version takes over the old one's records and its exchange
//     types; every router switches to it at once (one atomic store), and
//     the held-off mutations go to it.
//  4. The old version is retired: calls already in it finish there, then
//     its instances go.
//
// Routes never wait: they keep running on the old version until the
// switch and on the new one after it, so no publish fails or is lost. The
// result's Types may include types the old version lacked; the caller
// registers them (and unregisters the old version's types the new one
// dropped, which no exchange used).
func (h *Host) Upgrade(ctx context.Context, old *Plugin, wasm []byte) (*Plugin, error) {
	name := old.name
	fail := func(err error) (*Plugin, error) {
		return nil, fmt.Errorf("plugins: %w %s: %w", errUpgrade, name, err)
	}
	if d, why := old.disabled(); d {
		return fail(fmt.Errorf("the running version is disabled (%s)", why))
	}
	next, err := h.load(ctx, h.rt, name, wasm)
	if err != nil {
		return fail(err)
	}
	if err := next.switchFrom(old); err != nil {
		next.discard()
		return fail(err)
	}
	h.log.Info().Str("plugin", name).Str("from", old.desc.Version).Str("to", next.desc.Version).
		Int("exchanges", next.Exchanges()).Msg("plugin upgraded")
	old.retire(next.desc.Version)
	return next, nil
}

// switchFrom makes p serve old's exchanges in old's place, with their
// mutations held off meanwhile.
func (p *Plugin) switchFrom(old *Plugin) error {
	h, ref := p.h, old.ref
	ref.mu.Lock()
	defer ref.mu.Unlock()
	if err := p.replayFrom(old); err != nil {
		return err
	}
	// Types both versions have keep their exchangeType (core's registry
	// holds it); the new version's own types join the same ref.
	for i, t := range p.types {
		if j := slices.IndexFunc(old.types, func(o *exchangeType) bool { return o.name == t.name }); j >= 0 {
			p.types[i] = old.types[j]
		} else {
			t.ref = ref
		}
	}
	// The records move before Host.mu is taken, a leaf: ref.mu keeps
	// them still. Should old have been unloaded meanwhile, they are
	// nobody's.
	p.ref = ref
	p.adopt(old)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.plugins[p.name] != old {
		return errors.New("the running version was unloaded meanwhile")
	}
	h.plugins[p.name] = p
	ref.cur.Store(p)
	return nil
}

// replayFrom replays old's state into p's first instance; ref.mu is held
// exclusively, so old's state does not change meanwhile.
func (p *Plugin) replayFrom(old *Plugin) error {
	old.stateMu.Lock()
	replay := old.snapshot()
	for id, x := range old.exchanges {
		def, err := abi.ReadDefinition(x.create)
		if err != nil {
			old.stateMu.Unlock()
			return err
		}
		if !slices.Contains(p.desc.Types, string(def.Type)) {
			old.stateMu.Unlock()
			return fmt.Errorf("the new version (%s) has no exchange type '%s', which exchange '%s' in vhost '%s' uses (id %d)",
				p.desc.Version, def.Type, def.Name, def.VHost, id)
		}
	}
	old.stateMu.Unlock()

	in, err := p.pool.get()
	if err != nil {
		return err
	}
	for _, o := range replay {
		if err := p.apply(in, o.fn, o.in); err != nil {
			p.pool.discard(in, err)
			return fmt.Errorf("the new version (%s) does not accept the running state: %s: %w", p.desc.Version, describeOp(o), err)
		}
	}
	p.pool.put(in)
	return nil
}

// adopt takes old's records of exchanges and ids, which p's instances now
// hold; ref.mu is held exclusively.
func (p *Plugin) adopt(old *Plugin) {
	old.stateMu.Lock()
	p.stateMu.Lock()
	p.exchanges, old.exchanges = old.exchanges, map[uint32]*exchangeRecord{}
	p.bindOrder, p.nextID = old.bindOrder, old.nextID
	p.freeIDs = slices.Clone(old.freeIDs)
	p.stateMu.Unlock()
	old.stateMu.Unlock()
}

// describeOp names a replayed operation for an error.
func describeOp(o op) string {
	switch o.fn {
	case fnCreate:
		if d, err := abi.ReadDefinition(o.in); err == nil {
			return fmt.Sprintf("creating exchange '%s' in vhost '%s'", d.Name, d.VHost)
		}
	case fnAddBinding:
		if b, err := abi.ReadBinding(o.in); err == nil {
			return fmt.Sprintf("adding the binding of exchange id %d to '%s' with key '%s'", b.Exchange, b.DestName, b.Key)
		}
	case fnPolicyChanged:
		return "applying a policy"
	}
	return fnNames[o.fn]
}

// discard drops a version that never served: its instances and code.
func (p *Plugin) discard() {
	p.disable("discarded")
	p.pool.waitClosed(time.Now().Add(2 * p.h.cfg.CallTimeout))
	p.compiled.Close(context.Background())
}

// retire stops an upgraded version once the calls in it are done.
func (p *Plugin) retire(successor string) {
	p.disable("upgraded to version " + successor)
	if !p.pool.waitClosed(time.Now().Add(2 * p.h.cfg.CallTimeout)) {
		p.log.Warn().Msg("an upgraded version still had calls running; its code is kept until the host closes")
		return
	}
	p.compiled.Close(context.Background())
}
