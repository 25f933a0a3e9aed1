package vhost

import (
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// A vhost has two sets of policies, each with its own names: the users'
// and the operator policies (p.Operator) that cap them on queues
// (policy.Effective merges the two a queue has).

// set is the set p belongs in, and the store's kind of its records.
func (v *VHost) set(operator bool) (*policy.Set, storage.Kind) {
	if operator {
		return &v.operatorPolicies, storage.KindOperatorPolicy
	}
	return &v.policies, storage.KindPolicy
}

// SetPolicy adds or replaces a policy, stores it, and applies the result to
// every exchange and queue.
func (v *VHost) SetPolicy(p *policy.Policy) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	set, kind := v.set(p.Operator)
	if v.store != nil {
		if err := v.store.PutMeta(kind, v.Name, p.Name, topology.PolicyRecordOf(p).Table()); err != nil {
			return queuetype.Stored(err)
		}
	}
	v.mu.Lock()
	set.Put(p)
	v.mu.Unlock()
	v.applyPolicies()
	return nil
}

// DeletePolicy removes a policy, an operator policy with operator (404
// when there is none of that name).
func (v *VHost) DeletePolicy(name string, operator bool) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	set, kind := v.set(operator)
	v.mu.Lock()
	deleted := set.Delete(name)
	v.mu.Unlock()
	if !deleted {
		return reply.NotFound("no policy '%s' in vhost '%s'", name, v.Name)
	}
	if v.store != nil {
		if err := v.store.DeleteMeta(kind, v.Name, name); err != nil {
			v.log.Error().Err(err).Str("policy", name).Msg("could not delete the stored policy; it will come back after a restart")
		}
	}
	v.applyPolicies()
	return nil
}

// Policies lists the policies in precedence order.
func (v *VHost) Policies() []*policy.Policy {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.policies.List()
}

// OperatorPolicies lists the operator policies in precedence order.
func (v *VHost) OperatorPolicies() []*policy.Policy {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.operatorPolicies.List()
}

// queuePolicy is the policy in force on the queue name: its policy's
// name, or the operator policy's when it has only that, with the
// definitions merged; nil when none applies. mu is held.
func (v *VHost) queuePolicy(name string) *policy.Policy {
	user := v.policies.For(policy.Queues, name)
	op := v.operatorPolicies.For(policy.Queues, name)
	switch {
	case op == nil:
		return user
	case user == nil:
		return op
	}
	merged := *user
	merged.Definition = policy.Effective(user, op)
	return &merged
}

// applyPolicies puts the policy now in force on every exchange and queue;
// defMu is held, nothing else. Applying a queue limit can dead-letter,
// which routes, so no lock but defMu may be held here.
func (v *VHost) applyPolicies() {
	defer v.touch()
	for _, x := range v.exchangeList() {
		if x.Name != "" {
			v.applyExchangePolicy(x)
		}
	}
	for _, t := range v.queueList() {
		t.PolicyChanged()
	}
}

// applyExchangePolicy sets x's policy and the alternate exchange in force:
// the declare argument wins over the policy, as in RabbitMQ. defMu is
// held; the router hears of the policy under x's lock, since for a plugin
// type that is a change to the routing state.
func (v *VHost) applyExchangePolicy(x *Exchange) {
	p := v.policies.For(policy.Exchanges, x.Name)
	alternate := ""
	if ae, ok := x.Args["alternate-exchange"].(string); ok {
		alternate = ae
	} else if p != nil {
		if ae, ok := p.Definition["alternate-exchange"].(string); ok {
			alternate = ae
		}
	}
	var def protocol.Table
	if p != nil {
		def = p.Definition
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.policy, x.alternate = p, alternate
	_ = x.router.PolicyChanged(def)
}
