package vhost

import (
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/protocol"
)

// What a part of the broker that follows the topology (federation) reads
// of it: which exchanges and queues a kind of policy applies to, an
// exchange's bindings, and a call (Config.Changed) after each change, so
// that it looks again rather than polls.

// touch tells the broker the topology changed.
func (v *VHost) touch() {
	if v.changed != nil {
		v.changed()
	}
}

// PolicyTarget is an exchange or a queue and the policy in force on it.
type PolicyTarget struct {
	Name   string
	Policy *policy.Policy
}

// PolicyTargets lists the exchanges and the queues whose policy in force
// has a definition that wants says it wants, leaving out the default
// exchange, internal exchanges and queues declared for an internal
// purpose (x-internal-purpose, as a federation link's upstream queue),
// which RabbitMQ never federates. It reads under mu alone.
func (v *VHost) PolicyTargets(wants func(def protocol.Table) bool) (exchanges, queues []PolicyTarget) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	any := false
	for _, p := range v.policies.List() {
		if wants(p.Definition) {
			any = true
			break
		}
	}
	if !any {
		return nil, nil
	}
	for name, x := range v.exchanges {
		if name == "" || x.Internal {
			continue
		}
		if p := v.policies.For(policy.Exchanges, name); p != nil && wants(p.Definition) {
			exchanges = append(exchanges, PolicyTarget{Name: name, Policy: p})
		}
	}
	for name, t := range v.queues {
		if _, internal := t.Arguments()["x-internal-purpose"]; internal {
			continue
		}
		if p := v.queuePolicy(name); p != nil && wants(p.Definition) {
			queues = append(queues, PolicyTarget{Name: name, Policy: p})
		}
	}
	return exchanges, queues
}

// BindingsFrom lists the bindings whose source is the exchange, in
// creation order; none when there is no such exchange.
func (v *VHost) BindingsFrom(source string) []BindingInfo {
	v.mu.RLock()
	x := v.exchanges[source]
	v.mu.RUnlock()
	if x == nil {
		return nil
	}
	x.mu.RLock()
	bs := bySeq(x.bindings.Items())
	x.mu.RUnlock()
	out := make([]BindingInfo, len(bs))
	for i, b := range bs {
		out[i] = BindingInfo{Source: b.Source, Destination: b.Destination, Key: b.Key, Args: b.Args}
	}
	return out
}
