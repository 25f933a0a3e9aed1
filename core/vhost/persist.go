package vhost

import (
	"sort"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// keeps reports whether an object is written to the store: a durable one
// when there is a store, and in a cluster every replicated one (see
// cluster.go).
func (v *VHost) keeps(durable bool) bool {
	return v.store != nil && (durable || v.cluster != nil)
}

// AfterSync calls done once everything written so far is on disk (at once
// without a store). Publishers use it to confirm persistent messages.
func (v *VHost) AfterSync(done func(error)) {
	if v.store == nil {
		done(nil)
		return
	}
	v.store.Begin().Commit(true, done)
}

// ---- restoring at start-up: the store already holds these, so nothing is written.

// RestoreExchange recreates a durable exchange. An exchange whose type is
// not registered (its plugin is not enabled yet) is kept and refuses to
// route until the type comes back, as with a disabled plugin.
func (v *VHost) RestoreExchange(def exchange.Definition) {
	def.VHost = v.Name
	v.defMu.Lock()
	defer v.defMu.Unlock()
	v.restoreExchange(def)
}

// restoreExchange is RestoreExchange's work; defMu is held.
func (v *VHost) restoreExchange(def exchange.Definition) {
	if v.exchanges[def.Name] != nil {
		return
	}
	x := &Exchange{Definition: def, router: missingType{name: def.Type}}
	if t, ok := v.types.Lookup(def.Type); ok {
		if r, err := t.Create(def); err == nil {
			x.typ, x.router = t, r
		} else {
			v.log.Warn().Err(err).Str("exchange", def.Name).Msg("restored exchange cannot route")
		}
	} else {
		v.log.Warn().Str("exchange", def.Name).Str("type", def.Type).Msg("restored exchange's type is not available; it refuses to route until it is")
	}
	v.applyExchangePolicy(x)
	v.mu.Lock()
	v.exchanges[def.Name] = x
	v.mu.Unlock()
	v.touch()
}

// RestoreQueue recreates a stored queue under its stored id; its type
// restores it (a classic queue loads its messages from the levels
// recovery counted). In a cluster it may be a queue homed on another
// node, or a transient or exclusive one that did not survive the
// restart: it is restored empty, unusable by clients, and DropLost
// proposes its delete.
func (v *VHost) RestoreQueue(def topology.QueueDef, qid uint64, levels []storage.Level) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	qt, ok := v.queueTypes.Restored(def)
	if !ok {
		return reply.Internal("queue '%s' in vhost '%s': this node serves no queue of type '%s'", def.Name, v.Name, queue.TypeOf(def.Args))
	}
	return qt.Restore(v.Host(), def, qid, levels)
}

// RestoreBinding recreates a durable binding with its stored sequence
// number; bindings must be restored in seq order.
func (v *VHost) RestoreBinding(seq uint64, source string, dest exchange.Destination, key string, args protocol.Table) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if seq > v.bindSeq.Load() {
		v.bindSeq.Store(seq)
	}
	return v.addBinding(source, dest, key, args, nil, seq, false)
}

// RestorePolicy reinstates a stored policy.
func (v *VHost) RestorePolicy(p *policy.Policy) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	v.mu.Lock()
	set, _ := v.set(p.Operator)
	set.Put(p)
	v.mu.Unlock()
	v.applyPolicies()
}

// QueueIDs lists the store ids of the vhost's queues that have one.
func (v *VHost) QueueIDs() []uint64 {
	var ids []uint64
	for _, t := range v.queueList() {
		if id := t.Record().StoreID; id != 0 { // 0: none here (homed elsewhere)
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
