package vhost

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/topology"

	"github.com/warrenmq/warren/core/denseset"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

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
		return v.proposeBinding(topology.OpBind, source, dest, key, args, owner)
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	return v.addBinding(source, dest, key, args, owner, 0, true)
}

// Binding is one binding BindAll makes.
type Binding struct {
	Source string
	Dest   exchange.Destination
	Key    string
	Args   protocol.Table
}

// storeWriters is how many of BindAll's synced writes are in flight at
// once: the store's committer makes one fsync for all it has, so a
// thousand bindings cost a few fsyncs rather than a thousand.
const storeWriters = 256

// BindAll makes each binding as Bind would, in order, for a caller with
// many (a definitions import): the checks and the numbering are Bind's,
// under defMu, but the bindings' stored records are written together and
// waited for once, then the bindings enter their routers in order. It
// returns how many were made or found existing; on an error, those before
// the one named are made, stored and routed, and nothing of it or of the
// ones after it is left, in the store or in memory. In a cluster each is
// proposed in turn.
func (v *VHost) BindAll(bindings []Binding) (int, error) {
	if v.cluster != nil {
		for i, bd := range bindings {
			if err := v.Bind(bd.Source, bd.Dest, bd.Key, bd.Args, nil); err != nil {
				return i, err
			}
		}
		return len(bindings), nil
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	// Check and number them all first; a failure stops the list there.
	pending := make([]pendingBinding, 0, len(bindings))
	seen := make(map[topology.BindingKey]bool, len(bindings))
	var failed error
	for _, bd := range bindings {
		if bd.Source == "" || bd.Dest.Kind == exchange.ToExchange && bd.Dest.Name == "" {
			failed = reply.AccessRefused("operation not permitted on the default exchange")
			break
		}
		nb, err := v.newBinding(bd.Source, bd.Dest, bd.Key, bd.Args, nil, 0)
		if err != nil {
			failed = err
			break
		}
		if nb.b != nil && seen[nb.key] {
			nb.b = nil // the same binding twice in the list: made once
		}
		seen[nb.key] = true
		pending = append(pending, nb)
	}
	persisted := func(nb pendingBinding) bool { return nb.b != nil && v.keeps(nb.b.Durable) }
	written := manyWrites(len(pending), func(i int) error {
		if nb := pending[i]; persisted(nb) {
			return v.store.PutBinding(v.Name, nb.b.Seq, topology.BindingRecordOf(nb.b).Table())
		}
		return nil
	})
	// Route them in order, up to the first that failed; what was stored
	// of it and after it is taken back.
	made := len(pending)
	for i, nb := range pending {
		if written[i] != nil {
			made, failed = i, queuetype.Stored(written[i])
			break
		}
		if nb.b == nil {
			continue
		}
		if err := v.installBinding(nb); err != nil {
			made, failed = i, err
			break
		}
	}
	manyWrites(len(pending)-made, func(i int) error {
		if nb := pending[made+i]; persisted(nb) && written[made+i] == nil {
			return v.store.DeleteBinding(v.Name, nb.b.Seq)
		}
		return nil
	})
	return made, failed
}

// manyWrites runs write(0..n-1) with up to storeWriters at once and
// returns their errors.
func manyWrites(n int, write func(i int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, storeWriters)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = write(i)
		}()
	}
	wg.Wait()
	return errs
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
	nb, err := v.newBinding(source, dest, key, args, owner, seq)
	if err != nil || nb.b == nil {
		return err
	}
	persisted := persist && v.keeps(nb.b.Durable)
	if persisted {
		if err := v.store.PutBinding(v.Name, nb.b.Seq, topology.BindingRecordOf(nb.b).Table()); err != nil {
			return queuetype.Stored(err)
		}
	}
	if err := v.installBinding(nb); err != nil {
		if persisted {
			_ = v.store.DeleteBinding(v.Name, nb.b.Seq)
		}
		return err
	}
	return nil
}

// pendingBinding is a binding checked and numbered, not yet in its
// source's router nor the maps.
type pendingBinding struct {
	key topology.BindingKey
	src *Exchange
	b   *exchange.Binding // nil when the binding exists already
}

// newBinding makes the checks a binding must pass and builds it; seq 0
// takes the next number. defMu is held.
func (v *VHost) newBinding(source string, dest exchange.Destination, key string, args protocol.Table, owner any, seq uint64) (pendingBinding, error) {
	bk, err := topology.KeyOf(source, dest, key, args)
	if err != nil {
		return pendingBinding{}, err
	}
	src := v.exchanges[source]
	if src == nil {
		return pendingBinding{}, v.noExchange(source)
	}
	target, err := v.target(dest, owner)
	if err != nil {
		return pendingBinding{}, err
	}
	if v.bindings[bk] != nil {
		return pendingBinding{key: bk, src: src}, nil
	}
	if seq == 0 {
		seq = v.bindSeq.Add(1)
	}
	b := &exchange.Binding{Source: source, Destination: dest, Key: key, Args: args, Seq: seq, Target: target,
		Durable: src.Durable && durableTarget(target)}
	if err := src.router.ValidateBinding(b); err != nil {
		return pendingBinding{}, reply.As(err)
	}
	return pendingBinding{key: bk, src: src, b: b}, nil
}

// installBinding adds a new binding to its source's router (and the
// source's routers of other types) and to the maps; defMu is held.
func (v *VHost) installBinding(nb pendingBinding) error {
	src, b := nb.src, nb.b
	src.mu.Lock()
	err := src.router.AddBinding(b)
	if err == nil {
		src.viaMu.Lock()
		for via, r := range src.via {
			if err := r.AddBinding(b); err != nil {
				v.refusedViaBinding(src, via, b, err)
			}
		}
		src.viaMu.Unlock()
		src.bindings.Add(b)
	}
	src.mu.Unlock()
	if err != nil {
		return reply.As(err)
	}
	v.mu.Lock()
	v.bindings[nb.key] = b
	bound := v.byDest[b.Destination]
	if bound == nil {
		bound = new(denseset.Set[*exchange.Binding])
		v.byDest[b.Destination] = bound
	}
	bound.Add(b)
	v.mu.Unlock()
	v.touch()
	return nil
}

// boundTo returns the bindings to dest, in Seq order; mu or defMu is held.
func (v *VHost) boundTo(dest exchange.Destination) []*exchange.Binding {
	if bound := v.byDest[dest]; bound != nil {
		return bySeq(bound.Items())
	}
	return nil
}

// bySeq returns a copy of bs in Seq order, the order they were made in,
// which the sets that hold bindings do not keep: routers are given
// bindings in that order, and auto-deletes follow it.
func bySeq(bs []*exchange.Binding) []*exchange.Binding {
	out := slices.Clone(bs)
	slices.SortFunc(out, func(a, b *exchange.Binding) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// durableTarget reports whether a binding's destination survives restarts.
func durableTarget(t any) bool {
	switch t := t.(type) {
	case queuetype.Local:
		return t.Persists()
	case *Exchange:
		return t.Durable
	case *queuetype.RemoteQueue:
		return t.Durable && !t.Exclusive
	case queuetype.Queue:
		return true // queues of the other types are durable
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
	t := v.queues[dest.Name]
	if t != nil && owner == anyOwner && v.shadowed[dest.Name] != nil && localOnly(t) {
		// A command's queue is the cluster's: a local exclusive queue
		// nobody bound yet shadows one homed elsewhere for clients only.
		t = v.shadowed[dest.Name]
	}
	switch {
	case t == nil:
		return nil, reply.NotFound("no queue '%s' in vhost '%s'", dest.Name, v.Name)
	case t.Elsewhere() != "" && t.Via().Exclusive && owner != anyOwner:
		return nil, v.locked(dest.Name)
	}
	if err := v.checkOwner(t, owner); err != nil {
		return nil, err
	}
	return t, nil
}

// Unbind removes a binding. Removing one that does not exist is a no-op, as
// RabbitMQ has it, but a missing source or destination is 404.
func (v *VHost) Unbind(source string, dest exchange.Destination, key string, args protocol.Table, owner any) error {
	if source == "" {
		return reply.AccessRefused("operation not permitted on the default exchange")
	}
	if v.cluster != nil {
		return v.proposeBinding(topology.OpUnbind, source, dest, key, args, owner)
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	return v.unbind(source, dest, key, args, owner)
}

// unbind is Unbind's change; defMu is held.
func (v *VHost) unbind(source string, dest exchange.Destination, key string, args protocol.Table, owner any) error {
	bk, err := topology.KeyOf(source, dest, key, args)
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
// lock, and the stored bindings are deleted with neither held. Each step
// costs the same per binding whatever the size of the exchange (the
// routers' and the vhost's sets), so a source's lock is held for its own
// bindings' removal only.
func (v *VHost) removeBindings(bs []*exchange.Binding) {
	defer v.touch()
	bySource := make(map[string][]*exchange.Binding)
	var sources []string // in first-seen order, so auto-deletes happen in a fixed order
	var stored []*exchange.Binding
	v.mu.Lock()
	for _, b := range bs {
		bk, _ := topology.KeyOf(b.Source, b.Destination, b.Key, b.Args)
		if v.bindings[bk] != b {
			continue
		}
		delete(v.bindings, bk)
		if bound := v.byDest[b.Destination]; bound != nil && bound.Remove(b) && bound.Len() == 0 {
			delete(v.byDest, b.Destination)
		}
		if _, seen := bySource[b.Source]; !seen {
			sources = append(sources, b.Source)
		}
		bySource[b.Source] = append(bySource[b.Source], b)
		if v.keeps(b.Durable) {
			stored = append(stored, b)
		}
	}
	v.mu.Unlock()
	// Written together, as BindAll writes them: a queue's hundred durable
	// bindings cost a few synced commits, not a hundred in a row.
	for i, err := range manyWrites(len(stored), func(i int) error { return v.store.DeleteBinding(v.Name, stored[i].Seq) }) {
		if err != nil {
			b := stored[i]
			v.log.Error().Err(err).Str("source", b.Source).Str("destination", b.Destination.Name).Msg("could not delete the stored binding; it will come back after a restart")
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
			src.bindings.Remove(b)
		}
		_ = src.router.RemoveBindings(list)
		src.viaMu.Lock()
		for _, r := range src.via {
			_ = r.RemoveBindings(list)
		}
		src.viaMu.Unlock()
		empty := src.bindings.Len() == 0
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
