package admin

import (
	"encoding/json"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
)

// Runtime parameters, as RabbitMQ 3.10.8's /api/parameters serves them:
// per vhost, by component and name. Warren's one component is
// vhost-limits (named limits: the vhost's limits whole, as
// /api/vhost-limits has them one by one); a component it does not have
// (shovel, federation-upstream) is refused by name, as RabbitMQ refuses
// one whose plugin is not enabled. A policymaker reads and changes them.
func (a *api) routeParameters(mux *router) {
	a.handle(mux, "GET /api/parameters", policymaker, a.parameters)
	a.handle(mux, "GET /api/parameters/{component}", policymaker, a.parameters)
	a.handle(mux, "GET /api/parameters/{component}/{vhost}", policymaker, a.parameters)
	a.handle(mux, "GET /api/parameters/{component}/{vhost}/{name}", policymaker, a.parameter)
	a.handle(mux, "PUT /api/parameters/{component}/{vhost}/{name}", policymaker, a.putParameter)
	a.handle(mux, "DELETE /api/parameters/{component}/{vhost}/{name}", policymaker, a.deleteParameter)
}

const (
	componentVHostLimits = "vhost-limits"
	vhostLimitsName      = "limits"
)

// parameterList is every parameter of the vhosts the user may see, of
// the path's component and vhost when it names them.
func (a *api) parameterList(c *call) ([]broker.ParameterDefinition, error) {
	out := []broker.ParameterDefinition{}
	if comp := c.path("component"); comp != "" && comp != componentVHostLimits {
		return out, nil
	}
	vs, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if l := v.Limits(); len(l) > 0 {
			out = append(out, broker.ParameterDefinition{Value: l, VHost: v.Name, Component: componentVHostLimits, Name: vhostLimitsName})
		}
	}
	return out, nil
}

func (a *api) parameters(c *call) (any, error) { return a.parameterList(c) }

func (a *api) parameter(c *call) (any, error) {
	list, err := a.parameterList(c)
	if err != nil {
		return nil, err
	}
	for _, p := range list {
		if p.Name == c.path("name") {
			return p, nil
		}
	}
	return nil, errNotFound
}

// parameterVHost checks the path's component and name, and finds its
// vhost.
func (a *api) parameterVHost(c *call) (*vhost.VHost, error) {
	if comp := c.path("component"); comp != componentVHostLimits {
		return nil, badRequest("Validation failed\n\ncomponent %s not found\n", comp)
	}
	if name := c.path("name"); name != vhostLimitsName {
		return nil, badRequest("Validation failed\n\nthe vhost-limits parameter is named limits, not %s\n", name)
	}
	v, ok := a.findVHost(c.path("vhost"))
	if !ok {
		return nil, errNotFound
	}
	return v, nil
}

// putParameter replaces a vhost's limits whole: {"value": {...}}.
func (a *api) putParameter(c *call) (any, error) {
	v, err := a.parameterVHost(c)
	if err != nil {
		return nil, err
	}
	var body struct {
		Value *map[string]json.Number `json:"value"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if err := keysPresent(field{"value", body.Value != nil}); err != nil {
		return nil, err
	}
	l := topology.Limits{}
	for k, x := range *body.Value {
		n, err := x.Int64()
		if err != nil {
			return nil, badRequest("Validation failed\n\n%s should be a number, actually was %s\n", k, x)
		}
		l[k] = n
	}
	if err := topology.CheckLimits(l); err != nil {
		return nil, badRequest("%s", reason(err))
	}
	existed := len(v.Limits()) > 0
	if err := a.b.SetVHostLimits(v.Name, l); err != nil {
		return nil, err
	}
	return createdOrUpdated(!existed)
}

// deleteParameter clears a vhost's limits; a parameter of a component
// Warren does not have is not found, as in RabbitMQ 3.10.8.
func (a *api) deleteParameter(c *call) (any, error) {
	if c.path("component") != componentVHostLimits {
		return nil, errNotFound
	}
	v, err := a.parameterVHost(c)
	if err != nil {
		return nil, err
	}
	if len(v.Limits()) == 0 {
		return nil, errNotFound
	}
	return nil, a.b.SetVHostLimits(v.Name, topology.Limits{})
}
