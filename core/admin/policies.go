package admin

import (
	"encoding/json"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/vhost"
)

// Policies and operator policies: the same shapes under
// /api/policies and /api/operator-policies. Any management user lists
// both; a policymaker reads and sets policies, only an administrator
// reads one operator policy or sets them (RabbitMQ 3.10.8's rules).
func (a *api) routePolicies(mux *router) {
	for _, k := range []policies{{}, {operator: true}} {
		base := "/api/" + k.path()
		a.handle(mux, "GET "+base, management, k.list)
		a.handle(mux, "GET "+base+"/{vhost}", management, k.list)
		a.handle(mux, "GET "+base+"/{vhost}/{name}", management, k.one)
		a.handle(mux, "PUT "+base+"/{vhost}/{name}", k.setter(), func(c *call) (any, error) { return a.putPolicy(c, k) })
		a.handle(mux, "DELETE "+base+"/{vhost}/{name}", k.setter(), func(c *call) (any, error) { return a.deletePolicy(c, k) })
	}
}

// policies are the handlers' kind: a user's policies, or with operator
// the operator policies.
type policies struct{ operator bool }

func (k policies) path() string {
	if k.operator {
		return "operator-policies"
	}
	return "policies"
}

// setter is the tag that may set them.
func (k policies) setter() access {
	if k.operator {
		return administrator
	}
	return policymaker
}

func (k policies) of(v *vhost.VHost) []*policy.Policy {
	if k.operator {
		return v.OperatorPolicies()
	}
	return v.Policies()
}

func (k policies) list(c *call) (any, error) {
	vs, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	out := []broker.PolicyDefinition{}
	for _, v := range vs {
		for _, p := range k.of(v) {
			out = append(out, broker.PolicyDefinitionOf(v.Name, p))
		}
	}
	return out, nil
}

// one shows one policy to a policymaker, one operator policy to an
// administrator; RabbitMQ 3.10.8 refuses the other tags with its own
// words, though it lists the vhost's policies to them.
func (k policies) one(c *call) (any, error) {
	switch {
	case k.operator && !c.isAdmin():
		return nil, notAuthorised("Not administrator user")
	case !c.isAdmin() && !c.u.HasTag(tagPolicymaker):
		return nil, notAuthorised("User not authorised to access object")
	}
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	for _, p := range k.of(v) {
		if p.Name == c.path("name") {
			return broker.PolicyDefinitionOf(v.Name, p), nil
		}
	}
	return nil, errNotFound
}

// putPolicy sets a policy. The definition is checked by policy.New or
// policy.NewOperator (the check every way of setting one shares), and a
// refusal is RabbitMQ's 400 "Validation failed" naming the key.
func (a *api) putPolicy(c *call, k policies) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	var body struct {
		Pattern    *string         `json:"pattern"`
		Definition map[string]any  `json:"definition"`
		Priority   json.RawMessage `json:"priority"`
		ApplyTo    string          `json:"apply-to"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Pattern == nil {
		return nil, badRequest("[{key_missing,pattern}]")
	}
	if body.Definition == nil {
		return nil, badRequest("[{key_missing,definition}]")
	}
	priority := 0
	if len(body.Priority) > 0 && string(body.Priority) != "null" {
		if err := json.Unmarshal(body.Priority, &priority); err != nil {
			return nil, badRequest("Validation failed\n\npriority should be a number, actually was %s\n", body.Priority)
		}
	}
	name := c.path("name")
	existed := false
	for _, p := range k.of(v) {
		existed = existed || p.Name == name
	}
	newPolicy, set := policy.New, a.b.SetPolicy
	if k.operator {
		newPolicy, set = policy.NewOperator, a.b.SetOperatorPolicy
	}
	p, err := newPolicy(name, *body.Pattern, policy.ApplyTo(body.ApplyTo), priority, amqpTable(body.Definition))
	if err != nil {
		return nil, badRequest("Validation failed\n\n%v\n", err)
	}
	if err := set(v.Name, p.Name, p.Pattern, p.ApplyTo, p.Priority, p.Definition); err != nil {
		return nil, err
	}
	return createdOrUpdated(!existed)
}

func (a *api) deletePolicy(c *call, k policies) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	found := false
	for _, p := range k.of(v) {
		found = found || p.Name == c.path("name")
	}
	if !found {
		return nil, errNotFound
	}
	if k.operator {
		return nil, a.b.ClearOperatorPolicy(v.Name, c.path("name"))
	}
	return nil, a.b.ClearPolicy(v.Name, c.path("name"))
}
