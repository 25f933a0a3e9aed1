package vhost

import (
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// SetPolicy adds or replaces a policy, stores it, and applies the result to
// every exchange and queue.
func (v *VHost) SetPolicy(p *policy.Policy) error {
	if v.store != nil {
		if err := v.store.PutMeta(storage.KindPolicy, v.Name, p.Name, policyRecord(p)); err != nil {
			return stored(err)
		}
	}
	v.mu.Lock()
	v.policies.Put(p)
	pending := v.applyPolicies()
	v.mu.Unlock()
	applyQueuePolicies(pending)
	return nil
}

// DeletePolicy removes a policy (404 when there is none of that name).
func (v *VHost) DeletePolicy(name string) error {
	v.mu.Lock()
	if !v.policies.Delete(name) {
		v.mu.Unlock()
		return reply.NotFound("no policy '%s' in vhost '%s'", name, v.Name)
	}
	if v.store != nil {
		if err := v.store.DeleteMeta(storage.KindPolicy, v.Name, name); err != nil {
			v.log.Error().Err(err).Str("policy", name).Msg("could not delete the stored policy; it will come back after a restart")
		}
	}
	pending := v.applyPolicies()
	v.mu.Unlock()
	applyQueuePolicies(pending)
	return nil
}

// Policies lists the policies in precedence order.
func (v *VHost) Policies() []*policy.Policy {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.policies.List()
}

type queuePolicy struct {
	q   *queue.Queue
	def protocol.Table
}

// applyPolicies refreshes every exchange's policy now and returns the
// queues' for after the lock is released: applying a limit can dead-letter,
// and dead-lettering takes the read lock. v.mu is held.
func (v *VHost) applyPolicies() []queuePolicy {
	for _, x := range v.exchanges {
		if x.Name != "" {
			v.applyExchangePolicy(x)
		}
	}
	pending := make([]queuePolicy, 0, len(v.queues))
	for _, q := range v.queues {
		qp := queuePolicy{q: q}
		if p := v.policies.For(policy.Queues, q.Name); p != nil {
			qp.def = p.Definition
		}
		pending = append(pending, qp)
	}
	return pending
}

func applyQueuePolicies(pending []queuePolicy) {
	for _, qp := range pending {
		qp.q.ApplyPolicy(qp.def)
	}
}

// applyExchangePolicy sets x's policy and the alternate exchange in force:
// the declare argument wins over the policy, as in RabbitMQ. v.mu is held.
func (v *VHost) applyExchangePolicy(x *Exchange) {
	x.policy = v.policies.For(policy.Exchanges, x.Name)
	x.alternate = ""
	if ae, ok := x.Args["alternate-exchange"].(string); ok {
		x.alternate = ae
	} else if x.policy != nil {
		if ae, ok := x.policy.Definition["alternate-exchange"].(string); ok {
			x.alternate = ae
		}
	}
	var def protocol.Table
	if x.policy != nil {
		def = x.policy.Definition
	}
	_ = x.router.PolicyChanged(def)
}
