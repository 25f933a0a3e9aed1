package vhost

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// host is the vhost's queuetype.Host: a handle, copied freely.
type host struct{ v *VHost }

// Host is the vhost's handle for queue types.
func (v *VHost) Host() queuetype.Host { return host{v} }

func (h host) Name() string               { return h.v.Name }
func (h host) Self() string               { return h.v.self() }
func (h host) Logger() *zerolog.Logger    { return &h.v.log }
func (h host) Store() queuetype.Store     { return h.v.store }
func (h host) Groups() *cluster.Groups    { return h.v.groups }
func (h host) Up(node string) bool        { return h.v.cluster != nil && h.v.cluster.Up(node) }
func (h host) NodeID(node string) uint64  { return h.v.cluster.NodeID(node) }
func (h host) Cluster() queuetype.Cluster { return h.v.cluster }
func (h host) Removed(id uint64) bool     { return h.v.cluster.Removed(id) }
func (h host) Policy(name string) *policy.Policy {
	h.v.mu.RLock()
	defer h.v.mu.RUnlock()
	return h.v.queuePolicy(name)
}
func (h host) Lookup(name string) queuetype.Queue { return h.v.lookup(name) }
func (h host) List() []queuetype.Queue            { return h.v.queueList() }
func (h host) Register(q queuetype.Queue)         { h.v.register(q) }
func (h host) ParseDeclare(def topology.QueueDef) (queue.Settings, error) {
	return h.v.parseDeclare(def)
}
func (h host) EquivalentDurable(args protocol.Table, def topology.QueueDef, compared ...string) error {
	return topology.EquivalentQueue(h.v.Name, topology.Shape{Durable: true, Args: args}, def, compared...)
}
func (h host) Equivalent(s topology.Shape, def topology.QueueDef) error {
	return topology.EquivalentQueue(h.v.Name, s, def)
}
func (h host) CheckOwner(t queuetype.Queue, owner any) error { return h.v.checkOwner(t, owner) }
func (h host) Owner(def topology.QueueDef) any {
	if def.Owner == anyOwner {
		return nil
	}
	return def.Owner
}
func (h host) Redeclare(t queuetype.Queue, def topology.QueueDef) error {
	_, _, err := h.v.redeclare(t, def)
	return err
}
func (h host) Shared(name string) queuetype.Queue {
	h.v.mu.RLock()
	defer h.v.mu.RUnlock()
	return h.v.shared(name)
}
func (h host) Unregister(q queuetype.Queue) { h.v.unregister(q) }
func (h host) Drop(q queuetype.Queue)       { h.v.dropQueue(q) }

// ---- classic queues
func (h host) Memory() queue.MemoryLimit { return h.v.memory }
func (h host) Bodies() *message.Bodies   { return h.v.bodies }
func (h host) NextOrder() uint64         { return h.v.queueSeq.Add(1) }
func (h host) QueueStore() queue.Store   { return h.v.storeOrNil() }
func (h host) Keeps(durable bool) bool   { return h.v.keeps(durable) }
func (h host) MoveDeadLetters(l queuetype.Local, dead []queue.Dead) {
	h.v.moveDeadLetters([]deadLetters{{q: l, dead: dead}})
}
func (h host) AfterSync(done func(error)) { h.v.AfterSync(done) }

// ---- the cluster's commands
func (h host) Propose(c topology.Command) error { return h.v.propose(c) }
func (h host) NewIncarnation() uint64           { return newIncarnation() }
func (h host) AddRemote(def topology.QueueDef, persist bool) error {
	return h.v.addRemote(&queuetype.RemoteQueue{Name: def.Name, Home: def.Home, Durable: def.Durable, AutoDelete: def.AutoDelete,
		Exclusive: def.Exclusive, Args: def.Args, ID: def.ID}, persist)
}
func (h host) Lost(name string, incarnation uint64) {
	h.v.lost = append(h.v.lost, lostQueue{name: name, id: incarnation})
}
func (h host) DeclaredAlready(def topology.QueueDef) (bool, error) { return h.v.declaredAlready(def) }

// ---- groups
func (h host) ProposeDelete(name string, incarnation uint64, consumers, held, ready int, ifUnused, ifEmpty bool) (int, error) {
	return h.v.proposeDelete(name, incarnation, consumers, held, ready, ifUnused, ifEmpty)
}

// ---- messages and time
func (h host) DeadLetter(from string, s queue.Settings, m *message.Message, reason queue.Reason, counters *stats.Meter, done func(ok bool)) {
	h.v.deadLetterOne(from, s, m, reason, counters, done)
}
func (h host) Expired(q queuetype.Queue, unused func() bool) {
	v := h.v
	if v.cluster != nil {
		if unused() {
			v.queueGone(q.Name(), q.Incarnation()) // deleted on every node when it is applied
		}
		return
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.lookup(q.Name()) == q && unused() {
		v.forget(q)
	}
}
func (h host) Every(name string, d time.Duration, f func()) {
	v := h.v
	if _, started := v.loops.LoadOrStore(name, true); started {
		return
	}
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-v.closing:
				return
			case <-t.C:
			}
			f()
		}
	}()
}

// ---- other nodes
func (h host) CallHome(rq *queuetype.RemoteQueue, op string, req protocol.Table) (protocol.Table, error) {
	return h.v.callHome(rq, op, req)
}
func (h host) RemoteStats(rq *queuetype.RemoteQueue) (queue.Stats, error) { return h.v.remoteStats(rq) }
func (h host) Elsewhere(rq *queuetype.RemoteQueue) error                  { return h.v.elsewhere(rq) }
func (h host) RemoteSource(rq *queuetype.RemoteQueue) *remote.Source {
	v := h.v
	return v.consuming.Source(remote.Home{Node: rq.Home, Queue: rq.Name,
		Call: func(op string, req protocol.Table) (protocol.Table, error) { return v.callHome(rq, op, req) }})
}
func (h host) HandleConsumerCall(op string, src queuetype.Source, req protocol.Table) (protocol.Table, error) {
	return h.v.consuming.HandleConsumerCall(op, src, req)
}
