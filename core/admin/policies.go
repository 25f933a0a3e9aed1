package admin

import (
	"encoding/json"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/policy"
)

func (a *api) routePolicies(mux *router) {
	a.handle(mux, "GET /api/policies", management, a.policies)
	a.handle(mux, "GET /api/policies/{vhost}", management, a.policies)
	a.handle(mux, "GET /api/policies/{vhost}/{name}", management, a.policyOne)
	a.handle(mux, "PUT /api/policies/{vhost}/{name}", policymaker, a.putPolicy)
	a.handle(mux, "DELETE /api/policies/{vhost}/{name}", policymaker, a.deletePolicy)
}

func (a *api) policies(c *call) (any, error) {
	vs, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	out := []broker.PolicyDefinition{}
	for _, v := range vs {
		for _, p := range v.Policies() {
			out = append(out, broker.PolicyDefinitionOf(v.Name, p))
		}
	}
	return out, nil
}

// policyOne shows one policy to a policymaker; RabbitMQ 3.10.8 refuses
// the other tags with its own words, though it lists the vhost's
// policies to them.
func (a *api) policyOne(c *call) (any, error) {
	if !c.isAdmin() && !c.u.HasTag(tagPolicymaker) {
		return nil, notAuthorised("User not authorised to access object")
	}
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	for _, p := range v.Policies() {
		if p.Name == c.path("name") {
			return broker.PolicyDefinitionOf(v.Name, p), nil
		}
	}
	return nil, errNotFound
}

// putPolicy sets a policy. The definition is checked by policy.New (the
// check every way of setting a policy shares), and a refusal is RabbitMQ's
// 400 "Validation failed" naming the key.
func (a *api) putPolicy(c *call) (any, error) {
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
	for _, p := range v.Policies() {
		existed = existed || p.Name == name
	}
	p, err := policy.New(name, *body.Pattern, policy.ApplyTo(body.ApplyTo), priority, amqpTable(body.Definition))
	if err != nil {
		return nil, badRequest("Validation failed\n\n%v\n", err)
	}
	if err := a.b.SetPolicy(v.Name, p.Name, p.Pattern, p.ApplyTo, p.Priority, p.Definition); err != nil {
		return nil, err
	}
	return createdOrUpdated(!existed)
}

func (a *api) deletePolicy(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	found := false
	for _, p := range v.Policies() {
		found = found || p.Name == c.path("name")
	}
	if !found {
		return nil, errNotFound
	}
	return nil, a.b.ClearPolicy(v.Name, c.path("name"))
}
