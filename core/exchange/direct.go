package exchange

import (
	"github.com/warrenmq/warren/core/denseset"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

// Direct routes a message to the bindings whose key equals its routing key.
type Direct struct{}

func (Direct) Name() string                     { return "direct" }
func (Direct) ValidateDeclare(Definition) error { return nil }
func (Direct) Create(Definition) (Router, error) {
	return &directRouter{byKey: make(map[string]*denseset.Set[*Binding])}, nil
}

type directRouter struct {
	byKey map[string]*denseset.Set[*Binding]
}

func (r *directRouter) ValidateBinding(*Binding) error { return nil }

func (r *directRouter) AddBinding(b *Binding) error {
	set := r.byKey[b.Key]
	if set == nil {
		set = new(denseset.Set[*Binding])
		r.byKey[b.Key] = set
	}
	set.Add(b)
	return nil
}

func (r *directRouter) RemoveBindings(bs []*Binding) error {
	for _, b := range bs {
		if set := r.byKey[b.Key]; set != nil && set.Remove(b) && set.Len() == 0 {
			delete(r.byKey, b.Key)
		}
	}
	return nil
}

func (r *directRouter) Route(m *message.Message, res *Result) error {
	if set := r.byKey[m.RoutingKey]; set != nil {
		res.Bindings = append(res.Bindings, set.Items()...)
	}
	return nil
}

func (r *directRouter) PolicyChanged(protocol.Table) error { return nil }
func (r *directRouter) Delete()                            {}
func (r *directRouter) Info() map[string]any               { return nil }

// Fanout routes every message to every binding; keys are ignored.
type Fanout struct{}

func (Fanout) Name() string                      { return "fanout" }
func (Fanout) ValidateDeclare(Definition) error  { return nil }
func (Fanout) Create(Definition) (Router, error) { return &fanoutRouter{}, nil }

type fanoutRouter struct {
	all denseset.Set[*Binding]
}

func (r *fanoutRouter) ValidateBinding(*Binding) error { return nil }

func (r *fanoutRouter) AddBinding(b *Binding) error {
	r.all.Add(b)
	return nil
}

func (r *fanoutRouter) RemoveBindings(bs []*Binding) error {
	for _, b := range bs {
		r.all.Remove(b)
	}
	return nil
}

func (r *fanoutRouter) Route(_ *message.Message, res *Result) error {
	res.Bindings = append(res.Bindings, r.all.Items()...)
	return nil
}

func (r *fanoutRouter) PolicyChanged(protocol.Table) error { return nil }
func (r *fanoutRouter) Delete()                            {}
func (r *fanoutRouter) Info() map[string]any               { return nil }
