package vhost

import (
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// SetPolicy adds or replaces a policy, stores it, and applies the result to
// every exchange and queue.
func (v *VHost) SetPolicy(p *policy.Policy) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.store != nil {
		if err := v.store.PutMeta(storage.KindPolicy, v.Name, p.Name, policyRecordOf(p).Table()); err != nil {
			return stored(err)
		}
	}
	v.mu.Lock()
	v.policies.Put(p)
	v.mu.Unlock()
	v.applyPolicies()
	return nil
}

// DeletePolicy removes a policy (404 when there is none of that name).
func (v *VHost) DeletePolicy(name string) error {
	v.defMu.Lock()
	defer v.defMu.Unlock()
	v.mu.Lock()
	deleted := v.policies.Delete(name)
	v.mu.Unlock()
	if !deleted {
		return reply.NotFound("no policy '%s' in vhost '%s'", name, v.Name)
	}
	if v.store != nil {
		if err := v.store.DeleteMeta(storage.KindPolicy, v.Name, name); err != nil {
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

// applyPolicies puts the policy now in force on every exchange and queue;
// defMu is held, nothing else. Applying a queue limit can dead-letter,
// which routes, so no lock but defMu may be held here.
func (v *VHost) applyPolicies() {
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
