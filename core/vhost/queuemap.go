package vhost

import (
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/storage"
)

// The vhost's queues: one map of queuetype.Queue, whatever their type
// (core/queuetype), which no file of this package names.

// typeOf is the type a declare of def is: that of the queue of the name
// there is, or the one it asks for; defMu is held. A vhost without the
// type (a test's, a broker that does not serve it) refuses the declare.
func (v *VHost) typeOf(def topology.QueueDef) (queuetype.Type, error) {
	name := queue.TypeOf(def.Args)
	if t := v.queues[def.Name]; t != nil {
		name = t.Type()
	}
	if qt, ok := v.queueTypes.Named(name); ok {
		return qt, nil
	}
	return nil, reply.Internal("this node serves no queue of type '%s'", name)
}

// listEntry is t's listing entry; mu is held.
func (v *VHost) listEntry(t queuetype.Queue) QueueEntry {
	rec := t.Record()
	e := QueueEntry{Name: t.Name(), Durable: rec.Durable, Exclusive: rec.Exclusive, AutoDelete: rec.AutoDelete,
		Args: t.Arguments(), Type: t.Type(), Home: t.Elsewhere(), t: t}
	if p := v.policies.For(policy.Queues, e.Name); p != nil {
		e.Policy = p.Name
	}
	if p := v.operatorPolicies.For(policy.Queues, e.Name); p != nil {
		e.OperatorPolicy = p.Name
	}
	return e
}

// lookup is the queue named name, or nil.
func (v *VHost) lookup(name string) queuetype.Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.queues[name]
}

// queueList is every queue, for work done without mu.
func (v *VHost) queueList() []queuetype.Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]queuetype.Queue, 0, len(v.queues))
	for _, q := range v.queues {
		out = append(out, q)
	}
	return out
}

// localOnly says t is this node's alone: an exclusive classic queue
// nobody bound yet, which the cluster does not know of (cluster.go).
func localOnly(t queuetype.Queue) bool {
	l, ok := t.(queuetype.Local)
	return ok && l.Exclusive() && l.Incarnation() == 0
}

// register adds t and its implicit binding from the default exchange
// to the maps; defMu is held. A queue homed elsewhere whose name a local
// exclusive queue holds here waits behind it (shadowed, cluster.go).
func (v *VHost) register(t queuetype.Queue) {
	defer v.touch()
	v.mu.Lock()
	defer v.mu.Unlock()
	name := t.Name()
	if cur := v.queues[name]; cur != nil && cur != t && localOnly(cur) && t.Elsewhere() != "" {
		v.shadowed[name] = t
		return
	}
	v.queues[name] = t
	v.defaults[name] = &exchange.Binding{
		Destination: exchange.Destination{Kind: exchange.ToQueue, Name: name},
		Key:         name, Target: t, Durable: t.Record().Durable,
	}
}

// unregister takes t out of the maps again (a restore that failed);
// defMu is held.
func (v *VHost) unregister(t queuetype.Queue) {
	v.mu.Lock()
	defer v.mu.Unlock()
	name := t.Name()
	if v.queues[name] == t {
		delete(v.queues, name)
		delete(v.defaults, name)
	}
}

// forget removes t from the maps with its bindings and its record,
// then releases what it runs here; defMu is held. A queue of that name
// that is not t (another incarnation) stays; a queue homed elsewhere that
// t shadowed takes its place.
func (v *VHost) forget(t queuetype.Queue) {
	defer v.touch()
	name := t.Name()
	v.mu.Lock()
	if v.shadowed[name] == t {
		delete(v.shadowed, name)
		v.mu.Unlock()
		v.deleteRecord(t)
		return
	}
	if v.queues[name] != t {
		v.mu.Unlock()
		return
	}
	delete(v.queues, name)
	delete(v.defaults, name)
	bound := v.boundTo(exchange.Destination{Kind: exchange.ToQueue, Name: name})
	shadowed := v.shadowed[name]
	delete(v.shadowed, name)
	v.mu.Unlock()
	v.removeBindings(bound)
	v.deleteRecord(t)
	t.Release()
	if shadowed != nil {
		v.register(shadowed)
	}
}

// deleteRecord deletes t's stored declaration, if it has one: a Local
// has one when it persists or the cluster shares it.
func (v *VHost) deleteRecord(t queuetype.Queue) {
	if v.store == nil {
		return
	}
	if l, ok := t.(queuetype.Local); ok && !l.Persists() && !(v.keeps(false) && l.Incarnation() != 0) {
		return
	}
	if err := v.store.DeleteMeta(storage.KindQueue, v.Name, t.Name()); err != nil {
		v.log.Error().Err(err).Str("queue", t.Name()).Str("type", t.Type()).
			Msg("could not delete the stored queue; it will come back after a restart")
	}
}

// dropQueue deletes t, which dropped itself (a classic queue's x-expires,
// auto-delete, or its exclusive owner gone), if it is still the queue of
// its name; in a cluster that shares it, its delete is proposed to the
// others (applied here, it finds the queue gone).
func (v *VHost) dropQueue(t queuetype.Queue) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	v.dropped(t)
}

// dropped is dropQueue's work; defMu is held.
func (v *VHost) dropped(t queuetype.Queue) {
	if v.queues[t.Name()] != t {
		return
	}
	v.forget(t)
	v.queueGone(t.Name(), t.Incarnation())
}

// enqueueOthers hands m to the queues not Local routing reached and empties
// r.others; f hears from each.
func enqueueOthers(m *message.Message, r *RouteBuffers, f *Forwarding) {
	for i, t := range r.others {
		t.Enqueue(m, f.done)
		r.others[i] = nil
	}
	r.others = r.others[:0]
}
