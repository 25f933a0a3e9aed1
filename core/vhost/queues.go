package vhost

import (
	"crypto/rand"
	"encoding/base64"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// MaxNameLength bounds exchange and queue names, as shortstr does.
const MaxNameLength = 255

// QueueDef is what queue.declare asks for.
type QueueDef struct {
	Name       string // "" asks for a server-named queue
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       protocol.Table
	// Owner identifies the declaring connection; it owns an exclusive queue.
	Owner any
	// ServerNamed says Name came from ServerNamed (the client asked for a
	// server-named queue, and its permissions were checked on this name):
	// the reserved prefix is the broker's own.
	ServerNamed bool
}

// ServerNamed returns a fresh name like RabbitMQ's: amq.gen- and 22
// URL-safe base64 characters.
func ServerNamed() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "amq.gen-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// Queue returns the named queue for a connection: 404 when missing, 405
// when another connection owns it exclusively.
func (v *VHost) Queue(name string, owner any) (*queue.Queue, error) {
	v.mu.RLock()
	q := v.queues[name]
	v.mu.RUnlock()
	return q, v.checkQueue(q, name, owner)
}

func (v *VHost) checkQueue(q *queue.Queue, name string, owner any) error {
	if q == nil {
		return reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
	}
	if q.Exclusive && q.Owner != owner {
		return v.locked(name)
	}
	return nil
}

func (v *VHost) locked(name string) error {
	return reply.ResourceLocked("cannot obtain exclusive access to locked queue '%s' in vhost '%s'. "+
		"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name, v.Name)
}

// DeclareQueue creates a queue or checks an existing one (406 when its
// flags or arguments differ). passive only checks that it exists and is
// accessible. It returns the queue and whether it was created.
//
// A new queue is built, stored (a synced write) and given its policy under
// defMu alone, and enters the maps only when complete.
func (v *VHost) DeclareQueue(def QueueDef, passive bool) (*queue.Queue, bool, error) {
	if passive {
		q, err := v.Queue(def.Name, def.Owner)
		if err == nil {
			q.Touch()
		}
		return q, false, err
	}
	if def.Name == "" {
		def.Name = ServerNamed()
	} else if !def.ServerNamed && ReservedName(def.Name) {
		return nil, false, reply.AccessRefused("queue name '%s' contains reserved prefix 'amq.*'", def.Name)
	}
	settings, err := queue.ParseArgs(def.Name, v.Name, def.Args)
	if err != nil {
		return nil, false, err
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.closed.Load() {
		return nil, false, reply.New(protocol.ConnectionForced, "vhost '%s' is shutting down", v.Name)
	}
	if q := v.queues[def.Name]; q != nil {
		if err := v.checkQueue(q, def.Name, def.Owner); err != nil {
			return nil, false, err
		}
		if err := v.equivalentQueue(q, def); err != nil {
			return nil, false, err
		}
		q.Touch()
		return q, false, nil
	}
	var qid uint64
	if v.store != nil && def.Durable && !def.Exclusive {
		qid = v.store.NewID()
	}
	q := v.newQueue(def, settings, qid)
	if q.Persists() {
		if err := v.store.PutMeta(storage.KindQueue, v.Name, q.Name, queueRecord(q)); err != nil {
			_, _ = q.Delete(false, false)
			return nil, false, stored(err)
		}
	}
	if p := v.policies.For(policy.Queues, def.Name); p != nil {
		// The queue holds nothing yet, so this cannot dead-letter.
		q.ApplyPolicy(p.Definition)
	}
	v.registerQueue(q)
	return q, true, nil
}

// newQueue creates a queue, not yet registered.
func (v *VHost) newQueue(def QueueDef, settings queue.Settings, qid uint64) *queue.Queue {
	var owner any
	if def.Exclusive {
		owner = def.Owner
	}
	return queue.New(queue.Config{
		Name: def.Name, VHost: v.Name, Durable: def.Durable, Exclusive: def.Exclusive,
		AutoDelete: def.AutoDelete, Args: def.Args, Owner: owner, Settings: settings, Events: v,
		Store: v.storeOrNil(), QID: qid, Memory: v.memory, Order: v.queueSeq.Add(1),
	})
}

// registerQueue adds q and its implicit binding from the default exchange
// to the maps; defMu is held.
func (v *VHost) registerQueue(q *queue.Queue) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.queues[q.Name] = q
	v.defaults[q.Name] = &exchange.Binding{
		Destination: exchange.Destination{Kind: exchange.ToQueue, Name: q.Name},
		Key:         q.Name, Target: q, Durable: q.Durable,
	}
}

// storeOrNil hands queues the store as an interface that is nil when the
// vhost has none (a nil *storage.Store in an interface would not be).
func (v *VHost) storeOrNil() queue.Store {
	if v.store == nil {
		return nil
	}
	return v.store
}

// queueArgsCompared are the arguments a redeclare must repeat exactly.
var queueArgsCompared = []string{
	"x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes", "x-overflow",
	"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-max-priority",
	"x-single-active-consumer", "x-delivery-limit", "x-queue-type",
}

func (v *VHost) equivalentQueue(q *queue.Queue, def QueueDef) error {
	diff := func(field string, got, cur any) error {
		return reply.PreconditionFailed("inequivalent arg '%s' for queue '%s' in vhost '%s': received '%v' but current is '%v'",
			field, def.Name, v.Name, got, cur)
	}
	switch {
	case q.Durable != def.Durable:
		return diff("durable", def.Durable, q.Durable)
	case q.AutoDelete != def.AutoDelete:
		return diff("auto_delete", def.AutoDelete, q.AutoDelete)
	case q.Exclusive != def.Exclusive:
		return v.locked(def.Name)
	}
	for _, k := range queueArgsCompared {
		got, hasGot := def.Args[k]
		cur, hasCur := q.Args[k]
		if hasGot != hasCur || !exchange.ValuesEqual(got, cur) {
			return diff(k, describe(got, hasGot), describe(cur, hasCur))
		}
	}
	return nil
}

func describe(v any, present bool) any {
	if !present {
		return "none"
	}
	return v
}

// DeleteQueue deletes a queue (see queue.Delete for the conditions) and its
// bindings, and returns the number of ready messages it held.
func (v *VHost) DeleteQueue(name string, owner any, ifUnused, ifEmpty bool) (int, error) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	q := v.queues[name]
	if err := v.checkQueue(q, name, owner); err != nil {
		return 0, err
	}
	n, err := q.Delete(ifUnused, ifEmpty)
	if err != nil {
		return 0, err
	}
	v.forgetQueue(q)
	return n, nil
}

// forgetQueue removes a deleted queue from the maps, its bindings, and its
// stored record; defMu is held.
func (v *VHost) forgetQueue(q *queue.Queue) {
	if v.queues[q.Name] != q {
		return
	}
	dest := exchange.Destination{Kind: exchange.ToQueue, Name: q.Name}
	v.mu.Lock()
	delete(v.queues, q.Name)
	delete(v.defaults, q.Name)
	bound := append([]*exchange.Binding(nil), v.byDest[dest]...)
	v.mu.Unlock()
	v.removeBindings(bound)
	if q.Persists() {
		if err := v.store.DeleteMeta(storage.KindQueue, v.Name, q.Name); err != nil {
			v.log.Error().Err(err).Str("queue", q.Name).Msg("could not delete the stored queue; it will come back after a restart")
		}
	}
}

// dropQueue deletes q unconditionally, if it is still the one registered.
func (v *VHost) dropQueue(q *queue.Queue) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.queues[q.Name] != q {
		return
	}
	_, _ = q.Delete(false, false)
	v.forgetQueue(q)
}

// PurgeQueue drops a queue's ready messages and returns how many.
func (v *VHost) PurgeQueue(name string, owner any) (int, error) {
	q, err := v.Queue(name, owner)
	if err != nil {
		return 0, err
	}
	return q.Purge(), nil
}

// OwnerGone deletes the exclusive queues of a closed connection.
func (v *VHost) OwnerGone(owner any) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	for _, q := range v.queueList() {
		if q.Exclusive && q.Owner == owner {
			_, _ = q.Delete(false, false)
			v.forgetQueue(q)
		}
	}
}

// Unused implements queue.Events: x-expires elapsed.
func (v *VHost) Unused(q *queue.Queue) { v.dropQueue(q) }

// Abandoned implements queue.Events: the last consumer of an auto-delete
// queue left.
func (v *VHost) Abandoned(q *queue.Queue) { v.dropQueue(q) }

// queueList returns the queues, for work done without mu.
func (v *VHost) queueList() []*queue.Queue {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]*queue.Queue, 0, len(v.queues))
	for _, q := range v.queues {
		out = append(out, q)
	}
	return out
}

// QueueEntry is a queue as a listing first sees it: what the vhost knows
// of it, read under the vhost's lock. Info reads the queue's own figures.
type QueueEntry struct {
	Name, Policy                   string
	Durable, Exclusive, AutoDelete bool
	Args                           protocol.Table
	q                              *queue.Queue
}

// QueueInfo is a snapshot of a queue for listings.
type QueueInfo struct {
	QueueEntry
	queue.Stats
	Counters stats.Values // message statistics
	Rates    stats.Rates
}

// Info reads the queue's depth and message statistics, under the queue's
// lock.
func (e QueueEntry) Info() QueueInfo {
	return QueueInfo{QueueEntry: e, Stats: e.q.Stats(), Counters: e.q.Counters.Values(), Rates: e.q.Counters.Rates()}
}

// entry is q's listing entry; the caller holds mu.
func (v *VHost) entry(q *queue.Queue) QueueEntry {
	e := QueueEntry{Name: q.Name, Durable: q.Durable, Exclusive: q.Exclusive, AutoDelete: q.AutoDelete, Args: q.Args, q: q}
	if p := v.policies.For(policy.Queues, q.Name); p != nil {
		e.Policy = p.Name
	}
	return e
}

// QueueEntries lists the queues without their figures, taking only the
// vhost's lock: a listing that pages by name reads the figures of the
// page's queues only.
func (v *VHost) QueueEntries() []QueueEntry {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]QueueEntry, 0, len(v.queues))
	for _, q := range v.queues {
		out = append(out, v.entry(q))
	}
	return out
}

// Queues lists the queues with their figures. The names and policies are
// read under mu, the figures from each queue afterwards: a listing never
// holds the vhost's lock while it waits for a queue's.
func (v *VHost) Queues() []QueueInfo {
	entries := v.QueueEntries()
	out := make([]QueueInfo, len(entries))
	for i, e := range entries {
		out[i] = e.Info()
	}
	return out
}

// QueueInfo is one queue's snapshot, as Queues lists it; ok is false when
// there is no such queue.
func (v *VHost) QueueInfo(name string) (QueueInfo, bool) {
	v.mu.RLock()
	q := v.queues[name]
	var e QueueEntry
	if q != nil {
		e = v.entry(q)
	}
	v.mu.RUnlock()
	if q == nil {
		return QueueInfo{}, false
	}
	return e.Info(), true
}

// QueueNames lists the queues' names, in no order; it takes only the
// vhost's lock, never a queue's.
func (v *VHost) QueueNames() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]string, 0, len(v.queues))
	for name := range v.queues {
		out = append(out, name)
	}
	return out
}
