package vhost

import (
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// queueAdapter is a queue of a type that keeps its messages outside
// package queue, as the vhost asks it for what every such type answers in
// its own way (RabbitMQ's rabbit_queue_type is the model): quorum queues
// (quorum.go) and streams (streams.go). The vhost holds them in one map,
// typed, and reaches them through this interface wherever it does not
// need the type itself; a type is one adapter and one entry in
// queueTypes, and a queue of it joins the map through registerTyped.
type queueAdapter interface {
	replicated
	// typeName is its x-queue-type.
	typeName() string
	// arguments are its declaration's.
	arguments() protocol.Table
	// figures are its depth and consumers, from its member here or one
	// on another node, and its message statistics.
	figures(v *VHost) (queue.Stats, *stats.Meter, error)
	// status is its group as this node sees it (QueueEntry.QuorumStatus);
	// false when it has none to show.
	status(v *VHost) (QuorumView, bool)
	// record is its stored (and replicated) declaration.
	record() QueueRecord
	// deleteChecks refuses a delete whose conditions (if-unused,
	// if-empty) do not hold, and says how many messages were ready.
	deleteChecks(v *VHost, ifUnused, ifEmpty bool) (ready int, err error)
	// release ends what runs for it on this node and deletes its data,
	// once it has left the maps; defMu is held.
	release(v *VHost)
	// handleCall answers another node's call to this node's member.
	handleCall(v *VHost, op string, req protocol.Table) (protocol.Table, error)
	// addTo adds it, once, to the queues a message reaches.
	addTo(r *RouteBuffers)
	// checkArgs refuses a redeclare's arguments its type cannot take;
	// equivalent refuses a redeclare that differs from it (406).
	checkArgs(v *VHost, def QueueDef) error
	equivalent(v *VHost, def QueueDef) error
	// deleteReplicated proposes its delete to the cluster once the
	// conditions hold.
	deleteReplicated(v *VHost, ifUnused, ifEmpty bool) (int, error)
	// source is what a client on this node consumes from it through
	// (Source): its member here, or one on another node.
	source(v *VHost) (Source, error)
	// purge drops its ready messages (queue.purge) and says how many.
	purge(v *VHost) (int, error)
	// touch records a client's use, for x-expires.
	touch()
	// declareCounts are the ready messages and consumers declare-ok
	// reports.
	declareCounts(v *VHost) (ready, consumers int, err error)
}

// typedEntry is t's listing entry; mu is held.
func (v *VHost) typedEntry(t queueAdapter) QueueEntry {
	e := QueueEntry{Name: t.queueName(), Durable: true, Args: t.arguments(), Type: t.typeName(), t: t, v: v}
	if p := v.policies.For(policy.Queues, e.Name); p != nil {
		e.Policy = p.Name
	}
	return e
}

// typedQueue is the queue adapter named name, or nil.
func (v *VHost) typedQueue(name string) queueAdapter {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.typed[name]
}

// typedAs is the queue of type T named name, or T's zero value.
func typedAs[T queueAdapter](v *VHost, name string) T {
	v.mu.RLock()
	defer v.mu.RUnlock()
	t, _ := v.typed[name].(T)
	return t
}

// typedList is every queue of type T, for work done without mu.
func typedList[T queueAdapter](v *VHost) []T {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []T
	for _, q := range v.typed {
		if t, ok := q.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// registerTyped adds t and its implicit binding from the default exchange
// to the maps; defMu is held.
func (v *VHost) registerTyped(t queueAdapter) {
	v.mu.Lock()
	defer v.mu.Unlock()
	name := t.queueName()
	v.typed[name] = t
	v.defaults[name] = &exchange.Binding{
		Destination: exchange.Destination{Kind: exchange.ToQueue, Name: name},
		Key:         name, Target: t, Durable: true,
	}
}

// deleteTyped deletes t if its conditions hold, with its bindings and
// data; defMu is held.
func (v *VHost) deleteTyped(t queueAdapter, ifUnused, ifEmpty bool) (int, error) {
	ready, err := t.deleteChecks(v, ifUnused, ifEmpty)
	if err != nil {
		return 0, err
	}
	v.forgetTyped(t)
	return ready, nil
}

// forgetTyped removes t from the maps with its bindings and its record,
// then releases what it runs here; defMu is held. A queue of that name
// that is not t (another incarnation) stays.
func (v *VHost) forgetTyped(t queueAdapter) {
	name := t.queueName()
	v.mu.Lock()
	if v.typed[name] != t {
		v.mu.Unlock()
		return
	}
	delete(v.typed, name)
	delete(v.defaults, name)
	bound := v.boundTo(exchange.Destination{Kind: exchange.ToQueue, Name: name})
	v.mu.Unlock()
	v.removeBindings(bound)
	if err := v.store.DeleteMeta(storage.KindQueue, v.Name, name); err != nil {
		v.log.Error().Err(err).Str("queue", name).Str("type", t.typeName()).
			Msg("could not delete the stored queue; it will come back after a restart")
	}
	t.release(v)
}

// A queueType is what the vhost asks of a type before it has a queue of
// it: the checks of a new declare, the declare on a node of its own and
// in a cluster, a declare the cluster committed, and a restore at start.
type queueType struct {
	// check refuses a new declare's arguments (checkNewQueue), all of
	// them: a stream takes arguments a classic queue refuses.
	check func(v *VHost, def QueueDef) error
	// declare makes one on a node of its own, or checks the one there
	// is; defMu is held.
	declare func(v *VHost, def QueueDef) (queueAdapter, bool, error)
	// declareReplicated proposes one to the cluster.
	declareReplicated func(v *VHost, def QueueDef) (Declared, error)
	// applyDeclare carries out a declare the cluster committed; defMu is
	// held.
	applyDeclare func(v *VHost, def QueueDef) error
	// restore reopens a stored one at start.
	restore func(v *VHost, def QueueDef, id uint64) error
}

// queueTypes are the types beside classic queues, by x-queue-type.
var queueTypes = map[string]queueType{
	queue.Quorum: {
		check: func(v *VHost, def QueueDef) error {
			if _, err := queue.ParseArgs(def.Name, v.Name, def.Args); err != nil {
				return err
			}
			return v.checkQuorum(def)
		},
		declare: func(v *VHost, def QueueDef) (queueAdapter, bool, error) {
			qq, created, err := v.declareQuorumDef(def)
			return qq, created, err
		},
		declareReplicated: (*VHost).declareQuorumReplicated,
		applyDeclare:      (*VHost).applyDeclareQuorum,
		restore:           (*VHost).RestoreQuorum,
	},
	queue.Stream: {
		check: (*VHost).streamProperties,
		declare: func(v *VHost, def QueueDef) (queueAdapter, bool, error) {
			s, created, err := v.declareStream(def)
			return s, created, err
		},
		declareReplicated: (*VHost).declareStreamReplicated,
		applyDeclare:      (*VHost).applyDeclareStream,
		restore:           (*VHost).RestoreStream,
	},
}

// typeAsked is the type def's arguments ask for beside classic, if any.
func typeAsked(def QueueDef) (queueType, bool) {
	name, _ := def.Args["x-queue-type"].(string)
	qt, ok := queueTypes[name]
	return qt, ok
}

// typeOf is the type a declare of def is: that of the queue of the name
// there is, or, with no classic queue of the name, the one it asks for;
// mu or defMu is held.
func (v *VHost) typeOf(def QueueDef) (queueType, bool) {
	if t := v.typed[def.Name]; t != nil {
		return queueTypes[t.typeName()], true
	}
	if v.queues[def.Name] != nil {
		return queueType{}, false
	}
	return typeAsked(def)
}
