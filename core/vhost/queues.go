package vhost

import (
	"errors"

	"github.com/warrenmq/warren/core/names"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// Declared is the queue a declare found or made.
type Declared struct {
	Name    string
	Created bool
	t       queuetype.Queue
}

// Queue is the declared queue.
func (d Declared) Queue() queuetype.Queue { return d.t }

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

// Queue returns the named queue for a connection: 404 when missing, 405
// when another connection owns it exclusively; one homed on another node
// is refused (elsewhere).
func (v *VHost) Queue(name string, owner any) (queuetype.Queue, error) {
	t := v.lookup(name)
	if t == nil && v.caughtUp() {
		t = v.lookup(name)
	}
	if t == nil {
		return nil, reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
	}
	if t.Elsewhere() != "" {
		return nil, v.elsewhere(t.Via())
	}
	return t, v.checkOwner(t, owner)
}

// checkNewQueue makes the checks only a new queue's declare makes: its
// name (names.Check; a server-made one passes), its arguments
// (queue.CheckDeclareArgs) and the vhost's max-queues (limits.go).
func (v *VHost) checkNewQueue(def topology.QueueDef) error {
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
func (v *VHost) declared(name string) bool { return v.queues[name] != nil }

// HasQueue reports whether a queue of that name exists, here or, in a
// cluster, on another node.
func (v *VHost) HasQueue(name string) bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.queues[name] != nil
}

// checkOwner refuses (405) a connection other than its owner the use of
// an exclusive queue; a command of the cluster (anyOwner) passes.
func (v *VHost) checkOwner(t queuetype.Queue, owner any) error {
	if l, ok := t.(queuetype.Local); ok && l.Exclusive() && l.Owner() != owner && owner != anyOwner {
		return v.locked(t.Name())
	}
	return nil
}

func (v *VHost) locked(name string) error { return topology.Locked(v.Name, name) }

// Declare creates a queue or checks an existing one (406 when its flags
// or arguments differ). A new queue's arguments are checked as
// RabbitMQ checks them (queue.CheckDeclareArgs), whichever way the
// declare came in. passive only checks that it exists and is
// accessible. In a cluster the queue may be homed on another node.
//
// A new queue is built, stored (a synced write) and given its policy under
// defMu alone, and enters the maps only when complete.
func (v *VHost) Declare(def topology.QueueDef, passive bool) (Declared, error) {
	if passive {
		if !v.HasQueue(def.Name) {
			// In a cluster, a queue declared through another node a
			// moment ago counts.
			v.caughtUp()
		}
		t := v.lookup(def.Name)
		switch {
		case t == nil:
			return Declared{}, reply.NotFound("no queue '%s' in vhost '%s'", def.Name, v.Name)
		case t.Elsewhere() != "" && (t.Via().Exclusive || !v.cluster.Up(t.Elsewhere())):
			return Declared{}, v.elsewhere(t.Via())
		}
		if err := v.checkOwner(t, def.Owner); err != nil {
			return Declared{}, err
		}
		t.Touch()
		return Declared{Name: def.Name, t: t}, nil
	}
	if def.Name == "" {
		def.Name = topology.ServerNamed()
		def.ServerNamed = true
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
	qt, err := v.typeOf(def)
	if err != nil {
		return Declared{}, err
	}
	t, created, err := qt.Declare(v.Host(), def)
	if err != nil {
		return Declared{}, err
	}
	return Declared{Name: def.Name, t: t, Created: created}, nil
}

// DeclareQueue is Declare for a queue whose messages are kept on this
// node (a Local: a classic queue): one homed on another is refused, and
// so is one of another type.
func (v *VHost) DeclareQueue(def topology.QueueDef, passive bool) (queuetype.Local, bool, error) {
	d, err := v.Declare(def, passive)
	if err != nil {
		return nil, false, err
	}
	if d.Home() != "" {
		return nil, false, v.elsewhere(d.t.Via())
	}
	l, ok := d.t.(queuetype.Local)
	if !ok {
		return nil, false, reply.PreconditionFailed("queue '%s' in vhost '%s' is a %s", d.Name, v.Name, d.t.Kind())
	}
	return l, d.Created, nil
}

// Counts are a declared queue's ready messages and consumers, as
// queue.declare-ok reports them.
func (v *VHost) Counts(d Declared) (ready, consumers int, err error) { return d.t.DeclareCounts() }

// parseDeclare checks what every queue's declare must pass: the name,
// the arguments, a vhost still open.
func (v *VHost) parseDeclare(def topology.QueueDef) (queue.Settings, error) {
	if !def.ServerNamed && topology.ReservedName(def.Name) {
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

// storeOrNil hands queues the store as an interface that is nil when the
// vhost has none (a nil *storage.Store in an interface would not be).
func (v *VHost) storeOrNil() queue.Store {
	if v.store == nil {
		return nil
	}
	return v.store
}

// DeleteQueue deletes a queue (see queue.Delete for the conditions) and its
// bindings, and returns the number of ready messages it held. A queue the
// cluster shares is deleted by a proposal, once its conditions hold.
func (v *VHost) DeleteQueue(name string, owner any, ifUnused, ifEmpty bool) (int, error) {
	if v.cluster != nil {
		t := v.lookup(name)
		if t == nil && v.caughtUp() {
			t = v.lookup(name)
		}
		if t != nil && t.Incarnation() != 0 {
			if err := v.checkOwner(t, owner); err != nil {
				return 0, err
			}
			return t.DeleteReplicated(ifUnused, ifEmpty)
		}
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	t := v.queues[name]
	if t == nil {
		return 0, reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
	}
	if err := v.checkOwner(t, owner); err != nil {
		return 0, err
	}
	n, err := t.DeleteChecks(ifUnused, ifEmpty)
	if err != nil {
		return 0, err
	}
	v.dropped(t)
	return n, nil
}

// PurgeQueue drops a queue's ready messages and returns how many.
func (v *VHost) PurgeQueue(name string, owner any) (int, error) {
	t := v.lookup(name)
	if t == nil {
		return 0, reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
	}
	if err := v.checkOwner(t, owner); err != nil {
		return 0, err
	}
	return t.Purge()
}

// OwnerGone deletes the exclusive queues of a closed connection.
func (v *VHost) OwnerGone(owner any) {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	for _, t := range v.queueList() {
		if l, ok := t.(queuetype.Local); ok && l.Exclusive() && l.Owner() == owner {
			v.dropped(l) // its Release deletes it
		}
	}
}

// QueueEntry is a queue as a listing first sees it: what the vhost knows
// of it, read under the vhost's lock. Info reads the queue's own figures.
type QueueEntry struct {
	Name, Policy, OperatorPolicy   string
	Durable, Exclusive, AutoDelete bool
	Args                           protocol.Table
	// Home is the node a queue homed on another node lives on; "" for a
	// queue of this node.
	Home string
	// Type is "quorum" for a quorum queue, "stream" for a stream, "" for
	// a classic one.
	Type string
	t    queuetype.Queue
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
	// Memory is what the messages it holds in memory here take, for a
	// queue that keeps them in this process (a Local); HasMemory says
	// it is one.
	Memory    int64
	HasMemory bool
}

// Info reads the queue's depth and message statistics, under the queue's
// lock; a remote queue's depth comes from its home, in a call.
func (e QueueEntry) Info() QueueInfo {
	st, m, err := e.t.Figures()
	info := QueueInfo{QueueEntry: e, Stats: st, Counters: m.Values(), Rates: m.Rates(), Down: err != nil}
	if l, ok := e.t.(queuetype.Local); ok {
		info.Memory, info.HasMemory = l.MemoryBytes(), true
	}
	return info
}

// QueueEntries lists the queues, those homed on other nodes of a cluster
// too, without their figures, taking only the vhost's lock: a listing
// that pages by name reads the figures of the page's queues only.
func (v *VHost) QueueEntries() []QueueEntry {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]QueueEntry, 0, len(v.queues))
	for _, t := range v.queues {
		out = append(out, v.listEntry(t))
	}
	return out
}

// Queues lists the queues of this node with their figures (a node
// reports its own queues' metrics). The names and policies are read under
// mu, the figures from each queue afterwards: a listing never holds the
// vhost's lock while it waits for a queue's.
func (v *VHost) Queues() []QueueInfo {
	v.mu.RLock()
	entries := make([]QueueEntry, 0, len(v.queues))
	for _, t := range v.queues {
		if t.Elsewhere() == "" {
			entries = append(entries, v.listEntry(t))
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
	if t := v.queues[name]; t != nil {
		e = v.listEntry(t)
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
	out := make([]string, 0, len(v.queues))
	for name := range v.queues {
		out = append(out, name)
	}
	return out
}
