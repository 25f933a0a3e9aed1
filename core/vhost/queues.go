package vhost

import (
	"crypto/rand"
	"encoding/base64"
	"errors"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/names"
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
	// Home and ID are a replicated queue's home node and incarnation (see
	// cluster.go); both are empty on a node of its own.
	Home string
	ID   uint64
	// Members are a replicated queue's nodes in a cluster (replicated.go).
	Members []string
	// MemberIDs are the Raft ids of their incarnations when the queue was
	// declared, which make its group's first configuration (bootIDs).
	MemberIDs []uint64
	// restored: the declaration comes from a snapshot of the metadata,
	// not a declare (a quorum queue's member then joins its group).
	restored bool
}

// Declared is the queue a declare found or made: Local when it is a
// classic queue on this node.
type Declared struct {
	Name    string
	Local   *queue.Queue
	Created bool
	t       Queue // any other: of a registered type, or homed elsewhere
}

// Home is the node a classic queue homed on another node is on; "" for
// every other queue.
func (d Declared) Home() string {
	if d.t != nil {
		return d.t.Elsewhere()
	}
	return ""
}

// Type is the declared queue's x-queue-type (classic for a queue homed
// on another node too).
func (d Declared) Type() string {
	if d.t != nil {
		return d.t.Type()
	}
	return queue.Classic
}

// MemberNodes are a quorum queue's or a replicated stream's nodes, the
// one that stood first for leader first; nil for other queues.
func (d Declared) MemberNodes() []string {
	if d.t != nil {
		return d.t.MemberNodes()
	}
	return nil
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
	if q == nil && !v.HasQueue(name) && v.caughtUp() {
		v.mu.RLock()
		q = v.queues[name]
		v.mu.RUnlock()
	}
	if q == nil {
		if rq := v.remoteQueue(name); rq != nil {
			return nil, v.elsewhere(rq)
		}
	}
	return q, v.checkQueue(q, name, owner)
}

// checkNewQueue makes the checks only a new queue's declare makes: its
// name (names.Check; a server-made one passes), its arguments
// (queue.CheckDeclareArgs) and the vhost's max-queues (limits.go).
func (v *VHost) checkNewQueue(def QueueDef) error {
	if !def.ServerNamed {
		switch err := names.Check("queue", def.Name); {
		case errors.Is(err, names.ErrTooLong):
			// RabbitMQ 3.10.8's management API says so in these words
			// (AMQP cannot carry such a name).
			return reply.PreconditionFailed("queue should be less than 255 bytes, actually was %d\n", len(def.Name))
		case err != nil:
			return reply.PreconditionFailed("in vhost '%s', %v", v.Name, err)
		}
	}
	if err := queue.CheckDeclareArgs(def.Name, v.Name, def.Args); err != nil {
		return err
	}
	return v.checkQueueLimit(def.Name)
}

// declared says whether a queue of that name is known, of any type or
// node; defMu is held (the maps change only under it).
func (v *VHost) declared(name string) bool {
	return v.queues[name] != nil || v.typed[name] != nil
}

// HasQueue reports whether a queue of that name exists, here or, in a
// cluster, on another node.
func (v *VHost) HasQueue(name string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.queues[name] != nil || v.typed[name] != nil
}

func (v *VHost) checkQueue(q *queue.Queue, name string, owner any) error {
	if q == nil {
		return reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
	}
	if q.Exclusive && q.Owner != owner && owner != anyOwner {
		return v.locked(name)
	}
	return nil
}

func (v *VHost) locked(name string) error {
	return reply.ResourceLocked("cannot obtain exclusive access to locked queue '%s' in vhost '%s'. "+
		"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", name, v.Name)
}

// Declare creates a queue or checks an existing one (406 when its flags
// or arguments differ). A new queue's arguments are checked as
// RabbitMQ checks them (queue.CheckDeclareArgs), whichever way the
// declare came in. passive only checks that it exists and is
// accessible. In a cluster the queue may be homed on another node.
//
// A new queue is built, stored (a synced write) and given its policy under
// defMu alone, and enters the maps only when complete.
func (v *VHost) Declare(def QueueDef, passive bool) (Declared, error) {
	if passive {
		if !v.HasQueue(def.Name) {
			// In a cluster, a queue declared through another node a
			// moment ago counts.
			v.caughtUp()
		}
		if t := v.typedQueue(def.Name); t != nil {
			if t.Elsewhere() != "" && (t.Via().Exclusive || !v.cluster.Up(t.Elsewhere())) {
				return Declared{}, v.elsewhere(t.Via())
			}
			t.Touch()
			return Declared{Name: def.Name, t: t}, nil
		}
		q, err := v.Queue(def.Name, def.Owner)
		if err != nil {
			return Declared{}, err
		}
		q.Touch()
		return Declared{Name: q.Name, Local: q}, nil
	}
	if def.Name == "" {
		def.Name = ServerNamed()
		def.ServerNamed = true
	}
	if _, typed := v.queueTypes.asked(def); def.Exclusive && !typed {
		// An exclusive classic queue ends with its connection, so
		// RabbitMQ declares it non-durable whatever the flag says: it is
		// listed so, and a redeclare with either value matches. (A
		// quorum queue's or a stream's declare refuses exclusivity, by
		// name.)
		def.Durable = false
	}
	if v.cluster != nil {
		if !def.Exclusive {
			return v.declareReplicated(def)
		}
		if rq := v.remoteQueue(def.Name); rq != nil {
			return Declared{}, v.locked(def.Name)
		}
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if !v.declared(def.Name) {
		if err := v.checkNewQueue(def); err != nil {
			return Declared{}, err
		}
	}
	if qt, ok := v.typeOf(def); ok {
		t, created, err := qt.Declare(v.Host(), def)
		if err != nil {
			return Declared{}, err
		}
		return Declared{Name: def.Name, t: t, Created: created}, nil
	}
	q, created, err := v.declareQueue(def)
	if err != nil {
		return Declared{}, err
	}
	return Declared{Name: q.Name, Local: q, Created: created}, nil
}

// DeclareQueue is Declare for a queue on this node: a queue homed on
// another is refused.
func (v *VHost) DeclareQueue(def QueueDef, passive bool) (*queue.Queue, bool, error) {
	d, err := v.Declare(def, passive)
	if err != nil {
		return nil, false, err
	}
	switch {
	case d.Home() != "":
		return nil, false, v.elsewhere(d.t.Via())
	case d.t != nil:
		return nil, false, reply.PreconditionFailed("queue '%s' in vhost '%s' is a %s", d.Name, v.Name, d.t.Kind())
	}
	return d.Local, d.Created, nil
}

// Counts are a declared queue's ready messages and consumers, as
// queue.declare-ok reports them.
func (v *VHost) Counts(d Declared) (ready, consumers int, err error) { return v.counts(d) }

// parseDeclare checks what every queue's declare must pass: the name,
// the arguments, a vhost still open.
func (v *VHost) parseDeclare(def QueueDef) (queue.Settings, error) {
	if !def.ServerNamed && ReservedName(def.Name) {
		return queue.Settings{}, reply.AccessRefused("queue name '%s' contains reserved prefix 'amq.*'", def.Name)
	}
	settings, err := queue.ParseArgs(def.Name, v.Name, def.Args)
	if err != nil {
		return settings, err
	}
	if v.closed.Load() {
		return settings, reply.New(protocol.ConnectionForced, "vhost '%s' is shutting down", v.Name)
	}
	return settings, nil
}

// declareQueue is Declare's change on this node; defMu is held.
func (v *VHost) declareQueue(def QueueDef) (*queue.Queue, bool, error) {
	settings, err := v.parseDeclare(def)
	if err != nil {
		return nil, false, err
	}
	if q := v.queues[def.Name]; q != nil {
		if err := v.checkQueue(q, def.Name, def.Owner); err != nil {
			return nil, false, err
		}
		if err := v.equivalentQueue(shapeOf(q), def); err != nil {
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
	if q.Persists() || v.keeps(false) && def.ID != 0 {
		if err := v.store.PutMeta(storage.KindQueue, v.Name, q.Name, queueRecordOf(q, def.Home, def.ID).Table()); err != nil {
			_, _ = q.Delete(false, false)
			return nil, false, stored(err)
		}
	}
	if p := v.policies.For(policy.Queues, def.Name); p != nil {
		// The queue holds nothing yet, so this cannot dead-letter.
		q.ApplyPolicy(p.Definition)
	}
	v.registerQueue(q, def.ID)
	return q, true, nil
}

// newQueue creates a queue, not yet registered.
func (v *VHost) newQueue(def QueueDef, settings queue.Settings, qid uint64) *queue.Queue {
	var owner any
	if def.Exclusive && def.Owner != anyOwner {
		owner = def.Owner
	}
	return queue.New(queue.Config{
		Name: def.Name, VHost: v.Name, Durable: def.Durable, Exclusive: def.Exclusive,
		AutoDelete: def.AutoDelete, Args: def.Args, Owner: owner, Settings: settings, Events: v,
		Store: v.storeOrNil(), QID: qid, Memory: v.memory, Order: v.queueSeq.Add(1),
		Bodies: v.bodies,
	})
}

// registerQueue adds q and its implicit binding from the default exchange
// to the maps, with its incarnation when it is replicated; defMu is held.
func (v *VHost) registerQueue(q *queue.Queue, incarnation uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.queues[q.Name] = q
	if incarnation != 0 {
		v.homed[q.Name] = incarnation
	}
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

// equivalentQueue refuses a redeclare def of q that differs from it in
// its flags or in the arguments of compared (queueArgsCompared when nil).
func (v *VHost) equivalentQueue(q queueShape, def QueueDef, compared ...string) error {
	if compared == nil {
		compared = queueArgsCompared
	}
	diff := func(field string, got, cur any) error {
		return reply.PreconditionFailed("inequivalent arg '%s' for queue '%s' in vhost '%s': received '%v' but current is '%v'",
			field, def.Name, v.Name, got, cur)
	}
	// Exclusivity first: RabbitMQ answers 405 to a redeclare that
	// differs in it before it compares anything else.
	switch {
	case q.Exclusive != def.Exclusive:
		return v.locked(def.Name)
	case q.Durable != def.Durable:
		return diff("durable", def.Durable, q.Durable)
	case q.AutoDelete != def.AutoDelete:
		return diff("auto_delete", def.AutoDelete, q.AutoDelete)
	}
	for _, k := range compared {
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
	if v.cluster != nil {
		if t := v.typedQueue(name); t != nil {
			return t.DeleteReplicated(ifUnused, ifEmpty)
		}
		v.mu.RLock()
		q, incarnation := v.queues[name], v.homed[name]
		v.mu.RUnlock()
		if q != nil && incarnation != 0 {
			if err := v.checkQueue(q, name, owner); err != nil {
				return 0, err
			}
			return v.deleteHomed(q, incarnation, ifUnused, ifEmpty)
		}
		if q == nil && v.caughtUp() && v.HasQueue(name) {
			return v.DeleteQueue(name, owner, ifUnused, ifEmpty)
		}
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	q := v.queues[name]
	if t := v.typed[name]; t != nil && q == nil {
		return v.deleteTyped(t, ifUnused, ifEmpty)
	}
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
// stored record; defMu is held. The home of a replicated queue it drops
// of its own accord proposes the delete to the others (a committed
// delete clears the incarnation first, so it proposes nothing).
func (v *VHost) forgetQueue(q *queue.Queue) {
	if v.queues[q.Name] != q {
		return
	}
	dest := exchange.Destination{Kind: exchange.ToQueue, Name: q.Name}
	v.mu.Lock()
	delete(v.queues, q.Name)
	delete(v.defaults, q.Name)
	incarnation := v.homed[q.Name]
	delete(v.homed, q.Name)
	bound := v.boundTo(dest)
	v.mu.Unlock()
	v.removeBindings(bound)
	if q.Persists() || v.keeps(false) && incarnation != 0 {
		if err := v.store.DeleteMeta(storage.KindQueue, v.Name, q.Name); err != nil {
			v.log.Error().Err(err).Str("queue", q.Name).Msg("could not delete the stored queue; it will come back after a restart")
		}
	}
	v.queueGone(q.Name, incarnation)
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
	if t := v.typedQueue(name); t != nil {
		return t.Purge()
	}
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
	// Home is the node a queue homed on another node lives on; "" for a
	// queue of this node.
	Home string
	// Type is "quorum" for a quorum queue, "stream" for a stream, "" for
	// a classic one.
	Type string
	q    *queue.Queue
	t    Queue
}

// QueueInfo is a snapshot of a queue for listings.
type QueueInfo struct {
	QueueEntry
	queue.Stats
	Counters stats.Values // message statistics
	Rates    stats.Rates
	// Down says a remote queue's home did not answer: its figures are
	// unknown.
	Down bool
}

// Info reads the queue's depth and message statistics, under the queue's
// lock; a remote queue's depth comes from its home, in a call.
func (e QueueEntry) Info() QueueInfo {
	if e.t != nil {
		st, m, err := e.t.Figures()
		return QueueInfo{QueueEntry: e, Stats: st, Counters: m.Values(), Rates: m.Rates(), Down: err != nil}
	}
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

// QueueEntries lists the queues, those homed on other nodes of a cluster
// too, without their figures, taking only the vhost's lock: a listing
// that pages by name reads the figures of the page's queues only.
func (v *VHost) QueueEntries() []QueueEntry {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]QueueEntry, 0, len(v.queues)+len(v.typed))
	for _, q := range v.queues {
		out = append(out, v.entry(q))
	}
	for name, t := range v.typed {
		if v.queues[name] == nil { // not shadowed (cluster.go)
			out = append(out, v.typedEntry(t))
		}
	}
	return out
}

// Queues lists the queues of this node with their figures (a node
// reports its own queues' metrics). The names and policies are read under
// mu, the figures from each queue afterwards: a listing never holds the
// vhost's lock while it waits for a queue's.
func (v *VHost) Queues() []QueueInfo {
	v.mu.RLock()
	entries := make([]QueueEntry, 0, len(v.queues)+len(v.typed))
	for _, q := range v.queues {
		entries = append(entries, v.entry(q))
	}
	for _, t := range v.typed {
		if t.Elsewhere() == "" {
			entries = append(entries, v.typedEntry(t))
		}
	}
	v.mu.RUnlock()
	out := make([]QueueInfo, len(entries))
	for i, e := range entries {
		out[i] = e.Info()
	}
	return out
}

// QueueInfo is one queue's snapshot, as QueueEntries and Info give it, a
// remote one's too; ok is false when there is no such queue.
func (v *VHost) QueueInfo(name string) (QueueInfo, bool) {
	v.mu.RLock()
	var e QueueEntry
	ok := true
	if q := v.queues[name]; q != nil {
		e = v.entry(q)
	} else if t := v.typed[name]; t != nil {
		e = v.typedEntry(t)
	} else {
		ok = false
	}
	v.mu.RUnlock()
	if !ok {
		return QueueInfo{}, false
	}
	return e.Info(), true
}

// QueueNames lists the queues' names, every node's, in no order; it takes
// only the vhost's lock, never a queue's.
func (v *VHost) QueueNames() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]string, 0, len(v.queues)+len(v.typed))
	for name := range v.queues {
		out = append(out, name)
	}
	for name := range v.typed {
		if v.queues[name] == nil { // not shadowed (cluster.go)
			out = append(out, name)
		}
	}
	return out
}
