package topology

import (
	"maps"
	"slices"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// BindingKey identifies a binding: AMQP treats two binds with the same
// source, destination, key and arguments as one.
type BindingKey struct {
	Source string
	Dest   exchange.Destination
	Key    string
	args   string // the arguments' canonical encoding (sorted keys)
}

// KeyOf is the key of a binding; 406 for arguments that do not encode.
func KeyOf(source string, dest exchange.Destination, key string, args protocol.Table) (BindingKey, error) {
	k := BindingKey{Source: source, Dest: dest, Key: key}
	if len(args) > 0 {
		enc, err := protocol.AppendTable(nil, args)
		if err != nil {
			return k, reply.PreconditionFailed("invalid binding arguments: %v", err)
		}
		k.args = string(enc)
	}
	return k, nil
}

// Changes are what makes a vhost's topology a snapshot's (Diff), in the
// order they are made: exchanges first, then queues, then bindings.
type Changes struct {
	// DeleteExchanges are the exchanges the snapshot lacks or has
	// otherwise; DeclareExchanges every exchange it has (declaring one
	// that matches changes nothing).
	DeleteExchanges  []string
	DeclareExchanges []ExchangeRecord
	// DeleteQueues are the incarnations it lacks; Members the new members
	// of a replicated queue whose change this node missed; DeclareQueues
	// the queues it has that the vhost lacks.
	DeleteQueues  []DeleteQueue
	Members       []QuorumMembers
	DeclareQueues []QueueDef
	// Unbind are the bindings it lacks; Bind every binding it has, in its
	// order (binding again what is bound changes nothing).
	Unbind []BindingRecord
	Bind   []BindingRecord
}

// Diff is what makes have, a vhost's topology, want's. A queue is the
// same queue when its incarnation is; have's Members are set for
// replicated queues only. A binding of want whose arguments do not encode
// is left out and reported: the first such error is returned with the
// changes, which are made all the same.
func Diff(have, want Snapshot) (Changes, error) {
	var c Changes
	wantX := map[string]ExchangeRecord{}
	for _, x := range want.Exchanges {
		wantX[x.Name] = x
	}
	for _, x := range have.Exchanges {
		w, ok := wantX[x.Name]
		if !ok || EquivalentExchange(x.Definition("", ""), w.Definition("", "")) != nil {
			c.DeleteExchanges = append(c.DeleteExchanges, x.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(wantX)) {
		c.DeclareExchanges = append(c.DeclareExchanges, wantX[name])
	}

	wantQ := map[string]QueueRecord{}
	for _, q := range want.Queues {
		wantQ[q.Name] = q
	}
	for _, q := range have.Queues {
		w, ok := wantQ[q.Name]
		if !ok || w.Incarnation != q.Incarnation {
			c.DeleteQueues = append(c.DeleteQueues, DeleteQueue{Name: q.Name, Incarnation: q.Incarnation})
			continue
		}
		delete(wantQ, q.Name)
		if q.Members != nil && w.Members != nil && !slices.Equal(q.Members, w.Members) {
			// A change of members this node missed, the log behind it
			// compacted: without it, a member removed meanwhile would
			// run on, and ask to be added back.
			c.Members = append(c.Members, QuorumMembers{Name: q.Name, Incarnation: q.Incarnation, Members: w.Members})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(wantQ)) {
		def := wantQ[name].Def("")
		def.FromSnapshot = true
		c.DeclareQueues = append(c.DeclareQueues, def)
	}

	var firstErr error
	wanted := map[BindingKey]bool{}
	for _, b := range want.Bindings {
		k, err := KeyOf(b.Source, b.Destination, b.Key, b.Args)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !wanted[k] {
			wanted[k] = true
			c.Bind = append(c.Bind, b)
		}
	}
	for _, b := range have.Bindings {
		if k, err := KeyOf(b.Source, b.Destination, b.Key, b.Args); err != nil || !wanted[k] {
			c.Unbind = append(c.Unbind, b)
		}
	}
	return c, firstErr
}
