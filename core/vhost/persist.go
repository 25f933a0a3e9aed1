package vhost

import (
	"sort"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Store is what a vhost keeps on disk through: the queues' index and
// messages, and the durable topology. *storage.Store implements it. Every
// metadata write returns once it is synced, so the -ok that follows it is
// a promise the broker can keep after a crash.
type Store interface {
	queue.Store
	PutMeta(kind storage.Kind, vhost, name string, rec protocol.Table) error
	DeleteMeta(kind storage.Kind, vhost, name string) error
	PutBinding(vhost string, seq uint64, rec protocol.Table) error
	DeleteBinding(vhost string, seq uint64) error
	// ScanHeldAt reads held messages (storage/held.go; hold.go).
	ScanHeldAt(sp storage.HeldSpan, from *storage.HeldAfter, limit int, fn func(due int64, seq uint64, rec []byte) bool) error
}

// queueRecordOf is a queue homed here; in a cluster it names its home and
// incarnation too.
func queueRecordOf(q *queue.Queue, home string, incarnation uint64) QueueRecord {
	rec := QueueRecord{Durable: q.Durable, AutoDelete: q.AutoDelete, Args: q.Args, StoreID: q.QID()}
	if incarnation != 0 {
		rec.Exclusive, rec.Home, rec.Incarnation = q.Exclusive, home, incarnation
	}
	return rec
}

// keeps reports whether an object is written to the store: a durable one
// when there is a store, and in a cluster every replicated one (see
// cluster.go).
func (v *VHost) keeps(durable bool) bool {
	return v.store != nil && (durable || v.cluster != nil)
}

func args(t protocol.Table) protocol.Table {
	if t == nil {
		return protocol.Table{}
	}
	return t
}

// stored wraps a failed metadata write as the error its client sees.
func stored(err error) error {
	if err != nil {
		return reply.Internal("could not store the change: %v", err)
	}
	return nil
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
}

// RestoreQueue recreates a durable queue under its stored id and loads its
// messages from the levels recovery counted. In a cluster it may be a
// queue homed on another node, or a transient or exclusive one that did
// not survive the restart: it is restored empty, unusable by clients, and
// DropLost proposes its delete.
func (v *VHost) RestoreQueue(def QueueDef, qid uint64, levels []storage.Level) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if qt, ok := v.queueTypes.asked(def); ok {
		return qt.Restore(v.Host(), def, qid)
	}
	if v.cluster != nil && def.Home != "" && def.Home != v.cluster.Node() {
		return v.addRemote(&RemoteQueue{Name: def.Name, Home: def.Home, Durable: def.Durable, AutoDelete: def.AutoDelete,
			Exclusive: def.Exclusive, Args: def.Args, ID: def.ID}, false)
	}
	settings, err := queue.ParseArgs(def.Name, v.Name, def.Args)
	if err != nil {
		return err
	}
	q := v.newQueue(def, settings, qid)
	// Registered first: messages expiring as they are loaded are
	// dead-lettered, perhaps back into this queue by name.
	v.registerQueue(q, def.ID)
	if def.ID != 0 && (!def.Durable || def.Exclusive) {
		v.lost = append(v.lost, lostQueue{name: def.Name, id: def.ID})
	}
	if err := q.Restore(levels); err != nil {
		_, _ = q.Delete(false, false)
		v.mu.Lock()
		delete(v.queues, q.Name)
		delete(v.defaults, q.Name)
		delete(v.homed, q.Name)
		v.mu.Unlock()
		return err
	}
	if p := v.policies.For(policy.Queues, def.Name); p != nil {
		q.ApplyPolicy(p.Definition)
	}
	return nil
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
	v.policies.Put(p)
	v.mu.Unlock()
	v.applyPolicies()
}

// QueueIDs lists the store ids of the vhost's queues that have one.
func (v *VHost) QueueIDs() []uint64 {
	var ids []uint64
	for _, q := range v.queueList() {
		if id := q.QID(); id != 0 {
			ids = append(ids, id)
		}
	}
	for _, t := range v.typedList() {
		if id := t.Record().StoreID; id != 0 { // 0: none here (homed elsewhere)
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}
