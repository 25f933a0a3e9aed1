package vhost

import (
	"sort"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// bindingKey identifies a binding: AMQP treats two binds with the same
// source, destination, key and arguments as one.
type bindingKey struct {
	source string
	dest   exchange.Destination
	key    string
	args   string // the arguments' canonical encoding (sorted keys)
}

func keyOf(source string, dest exchange.Destination, key string, args protocol.Table) (bindingKey, error) {
	k := bindingKey{source: source, dest: dest, key: key}
	if len(args) > 0 {
		enc, err := protocol.AppendTable(nil, args)
		if err != nil {
			return k, reply.PreconditionFailed("invalid binding arguments: %v", err)
		}
		k.args = string(enc)
	}
	return k, nil
}

// Bind links source to a destination. Binding twice is a no-op. The
// destination may be a queue (queue.bind) or an exchange (exchange.bind).
func (v *VHost) Bind(source string, dest exchange.Destination, key string, args protocol.Table, owner any) error {
	if source == "" {
		return reply.AccessRefused("operation not permitted on the default exchange")
	}
	if dest.Kind == exchange.ToExchange && dest.Name == "" {
		return reply.AccessRefused("operation not permitted on the default exchange")
	}
	if v.cluster != nil {
		return v.proposeBinding(OpBind, source, dest, key, args, owner)
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	return v.addBinding(source, dest, key, args, owner, 0, true)
}

// addBinding adds a binding unless it exists; seq 0 takes the next number.
// A binding between two durable ends is stored when persist is set (not
// when it is being restored from the store); defMu is held.
//
// The checks and the synced write run without any other lock; only adding
// the binding to the source's router (a plugin call, for a plugin type)
// holds the source exchange's lock, which stalls that exchange's
// publishers alone.
func (v *VHost) addBinding(source string, dest exchange.Destination, key string, args protocol.Table, owner any, seq uint64, persist bool) error {
	bk, err := keyOf(source, dest, key, args)
	if err != nil {
		return err
	}
	src := v.exchanges[source]
	if src == nil {
		return v.noExchange(source)
	}
	target, err := v.target(dest, owner)
	if err != nil {
		return err
	}
	if v.bindings[bk] != nil {
		return nil
	}
	if seq == 0 {
		seq = v.bindSeq.Add(1)
	}
	b := &exchange.Binding{Source: source, Destination: dest, Key: key, Args: args, Seq: seq, Target: target,
		Durable: src.Durable && durableTarget(target)}
	if err := src.router.ValidateBinding(b); err != nil {
		return reply.As(err)
	}
	persisted := persist && v.keeps(b.Durable)
	if persisted {
		if err := v.store.PutBinding(v.Name, b.Seq, bindingRecord(b)); err != nil {
			return stored(err)
		}
	}
	src.mu.Lock()
	err = src.router.AddBinding(b)
	if err == nil {
		src.viaMu.Lock()
		for via, r := range src.via {
			if err := r.AddBinding(b); err != nil {
				v.refusedViaBinding(src, via, b, err)
			}
		}
		src.viaMu.Unlock()
		src.bindings = append(src.bindings, b)
	}
	src.mu.Unlock()
	if err != nil {
		if persisted {
			_ = v.store.DeleteBinding(v.Name, b.Seq)
		}
		return reply.As(err)
	}
	v.mu.Lock()
	v.bindings[bk] = b
	v.byDest[dest] = append(v.byDest[dest], b)
	v.mu.Unlock()
	return nil
}

// durableTarget reports whether a binding's destination survives restarts.
func durableTarget(t any) bool {
	switch t := t.(type) {
	case *queue.Queue:
		return t.Persists()
	case *Exchange:
		return t.Durable
	case *RemoteQueue:
		return t.Durable && !t.Exclusive
	case *QuorumQueue, *StreamQueue:
		return true
	}
	return false
}

// target resolves a destination; defMu or mu is held.
func (v *VHost) target(dest exchange.Destination, owner any) (any, error) {
	if dest.Kind == exchange.ToExchange {
		x := v.exchanges[dest.Name]
		if x == nil {
			return nil, v.noExchange(dest.Name)
		}
		return x, nil
	}
	if qq := v.quorums[dest.Name]; qq != nil {
		return qq, nil
	}
	if s := v.streams[dest.Name]; s != nil {
		return s, nil
	}
	q := v.queues[dest.Name]
	if q == nil || q.Exclusive && v.homed[dest.Name] == 0 && owner == anyOwner {
		// A command's queue is the cluster's: a local exclusive queue
		// nobody bound yet shadows it for clients only.
		if rq := v.remote[dest.Name]; rq != nil {
			if rq.Exclusive && owner != anyOwner {
				return nil, v.locked(dest.Name)
			}
			return rq, nil
		}
	}
	if err := v.checkQueue(q, dest.Name, owner); err != nil {
		return nil, err
	}
	return q, nil
}

// Unbind removes a binding. Removing one that does not exist is a no-op, as
// RabbitMQ has it, but a missing source or destination is 404.
func (v *VHost) Unbind(source string, dest exchange.Destination, key string, args protocol.Table, owner any) error {
	if source == "" {
		return reply.AccessRefused("operation not permitted on the default exchange")
	}
	if v.cluster != nil {
		return v.proposeBinding(OpUnbind, source, dest, key, args, owner)
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	return v.unbind(source, dest, key, args, owner)
}

// unbind is Unbind's change; defMu is held.
func (v *VHost) unbind(source string, dest exchange.Destination, key string, args protocol.Table, owner any) error {
	bk, err := keyOf(source, dest, key, args)
	if err != nil {
		return err
	}
	if v.exchanges[source] == nil {
		return v.noExchange(source)
	}
	if _, err := v.target(dest, owner); err != nil {
		return err
	}
	if b := v.bindings[bk]; b != nil {
		v.removeBindings([]*exchange.Binding{b})
	}
	return nil
}

// removeBindings drops bindings from every index and from their sources'
// routers, then deletes auto-delete exchanges left without bindings; defMu
// is held. The maps change under mu, each source's router under its own
// lock, and the stored bindings are deleted with neither held.
func (v *VHost) removeBindings(bs []*exchange.Binding) {
	bySource := make(map[string][]*exchange.Binding)
	var sources []string // in first-seen order, so auto-deletes happen in a fixed order
	v.mu.Lock()
	for _, b := range bs {
		bk, _ := keyOf(b.Source, b.Destination, b.Key, b.Args)
		if v.bindings[bk] != b {
			continue
		}
		delete(v.bindings, bk)
		v.byDest[b.Destination] = exchange.RemoveBinding(v.byDest[b.Destination], b)
		if len(v.byDest[b.Destination]) == 0 {
			delete(v.byDest, b.Destination)
		}
		if _, seen := bySource[b.Source]; !seen {
			sources = append(sources, b.Source)
		}
		bySource[b.Source] = append(bySource[b.Source], b)
	}
	v.mu.Unlock()
	for _, source := range sources {
		for _, b := range bySource[source] {
			if v.keeps(b.Durable) {
				if err := v.store.DeleteBinding(v.Name, b.Seq); err != nil {
					v.log.Error().Err(err).Str("source", b.Source).Str("destination", b.Destination.Name).Msg("could not delete the stored binding; it will come back after a restart")
				}
			}
		}
	}
	for _, source := range sources {
		list := bySource[source]
		src := v.exchanges[source]
		if src == nil {
			continue
		}
		src.mu.Lock()
		for _, b := range list {
			src.bindings = exchange.RemoveBinding(src.bindings, b)
		}
		_ = src.router.RemoveBindings(list)
		src.viaMu.Lock()
		for _, r := range src.via {
			_ = r.RemoveBindings(list)
		}
		src.viaMu.Unlock()
		empty := len(src.bindings) == 0
		src.mu.Unlock()
		if src.AutoDelete && empty && !src.deleted {
			v.deleteExchange(src)
		}
	}
}

// BindingInfo is a binding for listings.
type BindingInfo struct {
	Source      string
	Destination exchange.Destination
	Key         string
	Args        protocol.Table
}

// Bindings lists the explicit bindings in creation order.
func (v *VHost) Bindings() []BindingInfo {
	v.mu.RLock()
	all := make([]*exchange.Binding, 0, len(v.bindings))
	for _, b := range v.bindings {
		all = append(all, b)
	}
	v.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	out := make([]BindingInfo, len(all))
	for i, b := range all {
		out[i] = BindingInfo{Source: b.Source, Destination: b.Destination, Key: b.Key, Args: b.Args}
	}
	return out
}
