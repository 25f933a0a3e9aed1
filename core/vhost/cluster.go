package vhost

import (
	"crypto/rand"
	"encoding/binary"
	"slices"

	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/replyto"
	"github.com/warrenmq/warren/core/topology"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// A vhost of a cluster member shares its topology with the other nodes.
//
// Every change to exchanges, bindings and non-exclusive queues is a
// command (a topology.Command, carried as a versioned field table
// with an "op", the Op constants) that Cluster.Propose carries through
// the cluster's metadata group; every node applies the commands in the
// same order (Apply) and the change is answered once this node has
// applied it and every member heard from has too, or SeenWithin passed
// (Cluster.Propose). Checks that need no shared state (a reserved name,
// bad arguments) and answers that only read it (a redeclare of what
// exists, a passive declare) are made here, without a round of
// consensus.
//
// A classic queue lives on one node, its home: the node whose client
// declared it. There it is a Local with its messages; on the other nodes
// it is a Queue that holds nothing (classicqueue.Remote), which routing
// reaches like any and whose messages are forwarded home. Operations that need the
// queue's state (a conditional delete, a purge, the counts of a passive
// declare) are calls to the home node, which answers 404 "home node ...
// is down or inaccessible" as RabbitMQ does when that node cannot be
// reached. A local exclusive queue nobody bound yet may have the name of
// one homed elsewhere: for this node's clients it shadows that one, which
// waits in the shadowed map for the cluster's commands (target) and takes
// the name back when the local one goes (forget).
//
// Each replicated queue has an incarnation id, chosen by its declarer. A
// delete names it, so a delete proposed late (an auto-delete queue's home
// proposes one once its last consumer left) never removes a queue
// declared again under the same name meanwhile.
//
// An exclusive queue is its connection's, on its node, and is declared
// there alone. Binding it makes it known to the others (the bind carries
// its home and incarnation), so messages published anywhere reach it; its
// home proposes its delete when its connection closes.
//
// In a cluster every replicated object is kept in the store, transient
// ones too: a node that restarts must come back with the state it had
// applied, since the log it replays starts after that state. A transient
// or exclusive queue homed on a node that restarted did not survive there:
// DropLost proposes the deletes once the node is back in the cluster.

// anyOwner passes every exclusivity check: commands were checked against
// the declaring connection on the node that proposed them.
var anyOwner = new(struct{ anyOwner bool })

// self is this node's name, "" on a node of its own.
func (v *VHost) self() string {
	if v.cluster == nil {
		return ""
	}
	return v.cluster.Node()
}

// caughtUp waits, in a cluster, until this node has applied what was
// committed before; it reports whether a lookup that missed may look
// again.
func (v *VHost) caughtUp() bool {
	return v.cluster != nil && v.cluster.Sync() == nil
}

// newIncarnation returns a fresh nonzero queue incarnation id.
func newIncarnation() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// ---- commands (their records are core/topology's)

// propose proposes c and waits for this node's result of applying it.
func (v *VHost) propose(c topology.Command) error {
	return v.cluster.Propose(topology.CommandTable(v.Name, c))
}

func code(err error) uint16 {
	if e := reply.As(err); e != nil {
		return e.Code
	}
	return 0
}

// Apply carries out a topology command on this node.
func (v *VHost) Apply(cmd protocol.Table) error {
	_, c, err := topology.ReadCommand(cmd)
	if err != nil {
		return err
	}
	return v.ApplyCommand(c)
}

// ApplyCommand carries out a topology command, read, on this node.
func (v *VHost) ApplyCommand(c topology.Command) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	switch c := c.(type) {
	case topology.DeclareExchange:
		return v.applyExchange(c.Exchange.Definition(v.Name, ""))
	case topology.DeleteExchange:
		return v.deleteExchangeNamed(c.Name, c.IfUnused)
	case topology.Bind:
		b := c.Binding
		if c.QueueHome != "" {
			v.shareExclusive(b.Destination.Name, c.QueueHome, c.QueueID)
		}
		return v.addBinding(b.Source, b.Destination, b.Key, b.Args, anyOwner, 0, true)
	case topology.Unbind:
		b := c.Binding
		return v.unbind(b.Source, b.Destination, b.Key, b.Args, anyOwner)
	case topology.DeclareQueue:
		return v.applyDeclareQueue(c.Def)
	case topology.DeleteQueue:
		v.applyDeleteQueue(c.Name, c.Incarnation)
		return nil
	case topology.QuorumMembers:
		return v.applyQuorumMembers(c.Name, c.Incarnation, c.Members)
	}
	return reply.Internal("topology change %T not carried out", c)
}

// applyExchange declares an exchange for the cluster; defMu is held.
func (v *VHost) applyExchange(def exchange.Definition) error {
	if _, known := v.types.Lookup(def.Type); !known && v.exchanges[def.Name] == nil {
		// The declaring node checked the type; this one does not have it
		// (its plugin is not enabled here yet). The exchange is kept,
		// refusing to route until the type comes, so that every node has
		// the same exchanges.
		if v.keeps(def.Durable) {
			if err := v.store.PutMeta(storage.KindExchange, v.Name, def.Name, topology.ExchangeRecordOf(def).Table()); err != nil {
				return queuetype.Stored(err)
			}
		}
		v.restoreExchange(def)
		return nil
	}
	_, err := v.declareExchange(def)
	return err
}

// applyDeclareQueue declares a queue for the cluster; defMu is held. Its
// type makes it: a classic queue on its home, and a queue homed there on
// the others (AddRemote).
func (v *VHost) applyDeclareQueue(def topology.QueueDef) error {
	qt, ok := v.queueTypes.Restored(def)
	if !ok {
		return reply.Internal("queue '%s' in vhost '%s': this node serves no queue of its type", def.Name, v.Name)
	}
	def.Owner = anyOwner
	return qt.ApplyDeclare(v.Host(), def)
}

// addRemote registers a queue homed elsewhere, storing it when persist is
// set; defMu is held.
func (v *VHost) addRemote(rq *queuetype.RemoteQueue, persist bool) error {
	name := queue.TypeOf(rq.Args)
	qt, _ := v.queueTypes.Named(name)
	rt, ok := qt.(queuetype.RemoteType)
	if !ok {
		return reply.Internal("queue '%s' in vhost '%s': this node serves no queue of type '%s' homed elsewhere", rq.Name, v.Name, name)
	}
	r := rt.Remote(v.Host(), rq)
	if persist && v.store != nil {
		if err := v.store.PutMeta(storage.KindQueue, v.Name, rq.Name, r.Record().Table()); err != nil {
			return queuetype.Stored(err)
		}
	}
	v.register(r)
	return nil
}

// shared is the queue name as the cluster knows it: the one of the maps,
// or the one homed elsewhere that a local exclusive queue shadows here
// (nil when there is none); mu or defMu is held.
func (v *VHost) shared(name string) queuetype.Queue {
	t := v.queues[name]
	if t != nil && localOnly(t) {
		return v.shadowed[name]
	}
	return t
}

// shareExclusive records that the exclusive queue name, homed on home, is
// known to the cluster: on its home it gets its incarnation (so closing its
// connection proposes its delete), elsewhere a queue homed there; defMu
// is held.
func (v *VHost) shareExclusive(name, home string, incarnation uint64) {
	v.mu.RLock()
	t, known := v.queues[name], v.shared(name) != nil
	v.mu.RUnlock()
	if home == v.self() {
		l, ok := t.(queuetype.Local)
		if ok && l.Exclusive() && l.Share(incarnation) == incarnation && v.store != nil {
			// Kept so that a restart, which ends it, proposes its delete.
			if err := v.store.PutMeta(storage.KindQueue, v.Name, name, l.Record().Table()); err != nil {
				v.log.Error().Err(err).Str("queue", name).Msg("could not store the exclusive queue; a restart of this node will not delete it on the others")
			}
		}
		return
	}
	if !known {
		_ = v.addRemote(&queuetype.RemoteQueue{Name: name, Home: home, Exclusive: true, AutoDelete: true, ID: incarnation}, true)
	}
}

// applyDeleteQueue deletes the queue name if it is incarnation; defMu is
// held. A queue that is gone or another is no change.
func (v *VHost) applyDeleteQueue(name string, incarnation uint64) {
	v.mu.RLock()
	t := v.shared(name)
	v.mu.RUnlock()
	if t != nil && t.Incarnation() == incarnation {
		v.forget(t) // its Release deletes what it holds here
	}
}

// queueGone proposes the delete of a replicated queue its home dropped of
// its own accord (auto-delete, expiry, its exclusive owner closing).
func (v *VHost) queueGone(name string, incarnation uint64) {
	if v.cluster == nil || incarnation == 0 {
		return
	}
	v.cluster.ProposeLater(topology.CommandTable(v.Name, topology.DeleteQueue{Name: name, Incarnation: incarnation}))
}

// ---- the changes clients ask for, proposed

func (v *VHost) proposeExchange(def exchange.Definition) (*Exchange, error) {
	if x, err := v.Exchange(def.Name); err == nil {
		return x, topology.EquivalentExchange(x.Definition, def)
	}
	if err := v.checkExchangeName(def); err != nil {
		return nil, err
	}
	if _, err := v.checkNewExchange(def); err != nil {
		return nil, err
	}
	rec := topology.ExchangeRecordOf(def)
	rec.Name = def.Name
	if err := v.propose(topology.DeclareExchange{Exchange: rec}); err != nil {
		return nil, err
	}
	return v.Exchange(def.Name)
}

// proposeExchangeDelete proposes a delete even of an exchange this node
// does not know: it may have been declared through another node a moment
// ago, and a client that saw that -ok expects its delete to take.
func (v *VHost) proposeExchangeDelete(name string, ifUnused bool) error {
	return v.propose(topology.DeleteExchange{Name: name, IfUnused: ifUnused})
}

// proposeBinding proposes a bind or an unbind once the ends are found and
// the owner may use them.
func (v *VHost) proposeBinding(op, source string, dest exchange.Destination, key string, args protocol.Table, owner any) error {
	bk, err := topology.KeyOf(source, dest, key, args)
	if err != nil {
		return err
	}
	look := func() (src *Exchange, target any, exists bool, err error) {
		v.mu.RLock()
		defer v.mu.RUnlock()
		src = v.exchanges[source]
		target, err = v.target(dest, owner)
		return src, target, v.bindings[bk] != nil, err
	}
	src, target, exists, err := look()
	if (src == nil || code(err) == protocol.NotFound) && v.caughtUp() {
		src, target, exists, err = look()
	}
	switch {
	case src == nil:
		return v.noExchange(source)
	case err != nil:
		return err
	case exists && op == topology.OpBind:
		return nil // bound already
	}
	// An unbind is proposed even when this node has no such binding: it
	// may have been made through another node a moment ago.
	rec := topology.BindingRecord{Source: source, Destination: dest, Key: key, Args: args}
	if op == topology.OpUnbind {
		return v.propose(topology.Unbind{Binding: rec})
	}
	c := topology.Bind{Binding: rec}
	if l, ok := target.(queuetype.Local); ok && l.Exclusive() {
		// A local exclusive queue gets its incarnation the first time it
		// is bound, so that its delete is proposed when its connection
		// closes even if the bind is still on its way.
		c.QueueHome, c.QueueID = v.self(), l.Share(newIncarnation())
	}
	return v.propose(c)
}

// declareReplicated declares a non-exclusive queue for the cluster: its
// type proposes it.
func (v *VHost) declareReplicated(def topology.QueueDef) (Declared, error) {
	if d, done, err := v.redeclare(v.lookup(def.Name), def); done {
		return d, err
	}
	if err := v.checkNewQueue(def); err != nil {
		return Declared{}, err
	}
	qt, ok := v.queueTypes.Asked(def)
	if !ok {
		return Declared{}, reply.Internal("this node serves no queue of type '%s'", queue.TypeOf(def.Args))
	}
	t, created, err := qt.DeclareReplicated(v.Host(), def)
	if err != nil {
		return Declared{}, err
	}
	return Declared{Name: t.Name(), t: t, Created: created}, nil
}

// redeclare answers a declare of t, a queue that exists, from what this
// node knows; done is false when there is none.
func (v *VHost) redeclare(t queuetype.Queue, def topology.QueueDef) (d Declared, done bool, err error) {
	if t == nil {
		return Declared{}, false, nil
	}
	if home := t.Elsewhere(); home != "" {
		if t.Via().Exclusive {
			return Declared{}, true, v.locked(def.Name)
		}
		// RabbitMQ answers for the unreachable queue before it compares.
		if !v.cluster.Up(home) {
			return Declared{}, true, v.homeDown(t.Via())
		}
	}
	if err := v.checkOwner(t, def.Owner); err != nil {
		return Declared{}, true, err
	}
	if err := t.Equivalent(def); err != nil {
		return Declared{}, true, err
	}
	t.Touch()
	return Declared{Name: def.Name, t: t}, true, nil
}

// remoteQueue returns the queue name if its home is another node (and no
// local exclusive queue shadows it).
func (v *VHost) remoteQueue(name string) *queuetype.RemoteQueue {
	if v.cluster == nil {
		return nil
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if t := v.queues[name]; t != nil && t.Elsewhere() != "" {
		return t.Via()
	}
	return nil
}

// HandleCall answers another node's call: about a queue homed here, or
// about a consumer of this node on a queue homed there.
func (v *VHost) HandleCall(req protocol.Table) (protocol.Table, error) {
	switch op := remote.String(req, "op"); op {
	case remote.CallDeliver, remote.CallCancelled:
		return v.consuming.HandleSourceCall(op, req)
	case remote.CallForget:
		v.ForgetConsumersOf(remote.String(req, "from"), remote.Int(req, "before"))
		return protocol.Table{}, nil
	}
	name, incarnation := remote.String(req, "name"), remote.Int(req, "id")
	v.mu.RLock()
	t := v.queues[name]
	v.mu.RUnlock()
	if t == nil || t.Incarnation() != incarnation || !t.Member() {
		return nil, reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
	}
	return t.HandleCall(remote.String(req, "op"), req)
}

// DropLost proposes the delete of the replicated queues homed here that a
// restart ended (transient and exclusive ones), once the node is back in
// its cluster.
func (v *VHost) DropLost() {
	v.defMu.Lock()
	lost := v.lost
	v.lost = nil
	v.defMu.Unlock()
	for _, l := range lost {
		v.queueGone(l.name, l.id)
	}
}

type lostQueue struct {
	name string
	id   uint64
}

// ---- messages for queues homed on other nodes

// Forwarding is one message's forwards to other nodes, one a node however
// many of its queues the message reached.
type Forwarding struct {
	mu   lockorder.Mutex[lockorder.VHostForwarding]
	n    int   // forwards not answered yet
	err  error // the first failure
	then func(error)
}

// Then calls fn once every node has answered: with nil when every queue
// took the message (and stored it, when it is persistent), else with the
// first failure. Functions given by several calls run in the order given.
func (f *Forwarding) Then(fn func(error)) {
	f.mu.Lock()
	if f.n > 0 {
		if prev := f.then; prev != nil {
			f.then = func(err error) { prev(err); fn(err) }
		} else {
			f.then = fn
		}
		f.mu.Unlock()
		return
	}
	err := f.err
	f.mu.Unlock()
	fn(err)
}

func (f *Forwarding) done(err error) {
	f.mu.Lock()
	f.n--
	if err != nil && f.err == nil {
		f.err = err
	}
	var fn func(error)
	if f.n == 0 {
		fn, f.then = f.then, nil
	}
	err = f.err
	f.mu.Unlock()
	if fn != nil {
		fn(err)
	}
}

// forward sends m to the RemoteQueues routing reached, once a home node,
// and to the other queues it reached, and empties r.remote and r.others;
// nil when there were none. The Forwarding hears from each node and each
// other queue. wait holds a client's publish back while a node's backlog
// is full.
func (v *VHost) forward(m *message.Message, r *RouteBuffers, wait bool) *Forwarding {
	if len(r.remote) == 0 && len(r.others) == 0 {
		return nil
	}
	type batch struct {
		home   string
		queues []string
	}
	var batches []batch
	// A queue whose messages are not taken here is reached through
	// a member.
	var unreachable int
	r.others = throughMembers(r, r.others, &unreachable)
next:
	for _, rq := range r.remote {
		for i := range batches {
			if batches[i].home == rq.Home {
				batches[i].queues = append(batches[i].queues, rq.Name)
				continue next
			}
		}
		batches = append(batches, batch{home: rq.Home, queues: []string{rq.Name}})
	}
	clear(r.remote)
	r.remote = r.remote[:0]
	f := &Forwarding{n: len(batches) + len(r.others) + unreachable}
	for range unreachable {
		f.done(queuetype.ErrNoMember)
	}
	enqueueOthers(m, r, f)
	for _, b := range batches {
		v.cluster.Forward(b.home, v.Name, b.queues, m, wait, f.done)
	}
	return f
}

// throughMembers returns the queues of list whose messages are
// taken on this node, and adds the others to r.remote as the member up
// they are reached through; unreachable counts those with none up.
func throughMembers(r *RouteBuffers, list []queuetype.Queue, unreachable *int) []queuetype.Queue {
	return slices.DeleteFunc(list, func(q queuetype.Queue) bool {
		if q.Here() {
			return false
		}
		if rq := q.Via(); rq != nil {
			r.remote = append(r.remote, rq)
		} else {
			*unreachable++
		}
		return true
	})
}

// Deliver enqueues a message another node forwarded into the queues named
// (those homed here; a queue deleted meanwhile is skipped, as a publish
// finds it gone) and calls done once they have it: after the store synced
// it when it is persistent.
func (v *VHost) Deliver(queues []string, m *message.Message, done func(error)) {
	if len(queues) == 1 && replyto.IsToken(queues[0]) {
		// A direct reply-to reply published on another node.
		if t := v.replies.Target(queues[0]); t != nil {
			t.DeliverReply(m)
		}
		done(nil)
		return
	}
	var r RouteBuffers
	v.mu.RLock()
	for _, name := range queues {
		t := v.queues[name]
		if l, ok := t.(queuetype.Local); ok {
			r.addQueue(l)
		} else if t != nil && t.Here() && !slices.Contains(r.others, t) {
			r.others = append(r.others, t)
		}
	}
	v.mu.RUnlock()
	out := v.enqueue(m, &r)
	classic := func() {
		switch {
		case out.Rejected:
			done(queuetype.ErrRejected)
		case out.Stored:
			v.AfterSync(done)
		default:
			done(nil)
		}
	}
	if len(r.others) == 0 {
		classic()
		return
	}
	f := &Forwarding{n: len(r.others)}
	enqueueOthers(m, &r, f)
	f.Then(func(err error) {
		if err != nil {
			done(err)
			return
		}
		classic()
	})
}

// ---- snapshots of the metadata group

// sharedQueues are the queues the cluster knows of, by name: those whose
// record names a home; mu is held.
func (v *VHost) sharedQueues() map[string]queuetype.Queue {
	out := make(map[string]queuetype.Queue)
	for name := range v.queues {
		if t := v.shared(name); t != nil && t.Record().Home != "" {
			out[name] = t
		}
	}
	return out
}

// Topology is the vhost's share of a metadata snapshot.
func (v *VHost) Topology() topology.Snapshot {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	return v.topology(func(t queuetype.Queue) topology.QueueRecord { return t.Record() })
}

// topology is the vhost's topology, each shared queue's record as rec
// makes it; defMu is held.
func (v *VHost) topology(rec func(queuetype.Queue) topology.QueueRecord) topology.Snapshot {
	var s topology.Snapshot
	for _, x := range v.exchangeList() {
		if x.Name == "" || topology.ReservedName(x.Name) {
			continue
		}
		r := topology.ExchangeRecordOf(x.Definition)
		r.Name = x.Name
		s.Exchanges = append(s.Exchanges, r)
	}
	v.mu.RLock()
	for name, t := range v.sharedQueues() {
		r := rec(t)
		r.Name = name
		s.Queues = append(s.Queues, r)
	}
	v.mu.RUnlock()
	for _, b := range v.Bindings() {
		s.Bindings = append(s.Bindings, topology.BindingRecord(b))
	}
	return s
}

// RestoreTopology makes the vhost's topology a snapshot's (topology.Diff):
// what it lacks is deleted (a queue homed here with its messages), what
// differs is made again, what matches is left alone.
func (v *VHost) RestoreTopology(want topology.Snapshot) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	have := v.topology(func(t queuetype.Queue) topology.QueueRecord {
		r := topology.QueueRecord{Incarnation: t.Incarnation()}
		if g, ok := t.(queuetype.GroupQueue); ok && g.Replicated() {
			r.Members = g.MemberNodes()
		}
		return r
	})
	c, firstErr := topology.Diff(have, want)
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for _, name := range c.DeleteExchanges {
		if x := v.exchanges[name]; x != nil { // not auto-deleted meanwhile
			v.deleteExchange(x)
		}
	}
	for _, rec := range c.DeclareExchanges {
		keep(v.applyExchange(rec.Definition(v.Name, "")))
	}
	for _, d := range c.DeleteQueues {
		v.applyDeleteQueue(d.Name, d.Incarnation)
	}
	for _, m := range c.Members {
		keep(v.applyQuorumMembers(m.Name, m.Incarnation, m.Members))
	}
	for _, def := range c.DeclareQueues {
		keep(v.applyDeclareQueue(def))
	}
	var gone []*exchange.Binding
	v.mu.RLock()
	for _, b := range c.Unbind {
		// Gone already when its source or destination went above.
		if k, err := topology.KeyOf(b.Source, b.Destination, b.Key, b.Args); err == nil && v.bindings[k] != nil {
			gone = append(gone, v.bindings[k])
		}
	}
	v.mu.RUnlock()
	v.removeBindings(gone)
	for _, b := range c.Bind {
		keep(v.addBinding(b.Source, b.Destination, b.Key, b.Args, anyOwner, 0, true))
	}
	return firstErr
}
