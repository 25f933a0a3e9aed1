package admin

import (
	"encoding/json"
	"slices"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/tablejson"
)

// Runtime parameters, as RabbitMQ 3.10.8's /api/parameters serves them:
// per vhost, by component and name. vhost-limits (named limits: the
// vhost's limits whole, as /api/vhost-limits has them one by one) is the
// broker's own; the other components are those a part of Warren
// registered (broker.RegisterParameterComponent, such as shovel), whose
// values are JSON objects the component checks and the broker stores. A
// component that is neither (federation-upstream) is refused by name, as
// RabbitMQ refuses one whose plugin is not enabled. A policymaker reads
// and changes them; a listing shows the vhosts the user may see.
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
// the path's component and vhost when it names them: per vhost, its
// limits first, then its components' parameters by component and name.
func (a *api) parameterList(c *call) ([]broker.ParameterDefinition, error) {
	out := []broker.ParameterDefinition{}
	comp := c.path("component")
	if comp != "" && comp != componentVHostLimits && !a.isComponent(comp) && len(a.b.VHostParameters("", comp)) == 0 {
		return out, nil // a component Warren has not: none, whatever the vhost
	}
	vs, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if comp == "" || comp == componentVHostLimits {
			if l := v.Limits(); len(l) > 0 {
				out = append(out, broker.ParameterDefinition{Value: l, VHost: v.Name, Component: componentVHostLimits, Name: vhostLimitsName})
			}
		}
		if comp == componentVHostLimits {
			continue
		}
		for _, p := range a.b.VHostParameters(v.Name, comp) {
			out = append(out, parameterJSON(p))
		}
	}
	return out, nil
}

func parameterJSON(p broker.VHostParameter) broker.ParameterDefinition {
	return broker.ParameterDefinition{Value: tablejson.Value(p.Value), VHost: p.VHost, Component: p.Component, Name: p.Name}
}

// isComponent reports whether a part of Warren registered the component.
func (a *api) isComponent(name string) bool {
	return slices.Contains(a.b.ParameterComponents(), name)
}

func (a *api) parameters(c *call) (any, error) { return a.parameterList(c) }

func (a *api) parameter(c *call) (any, error) {
	if comp := c.path("component"); comp != componentVHostLimits {
		v, err := c.vhost()
		if err != nil {
			return nil, err
		}
		if p, ok := a.b.LookupVHostParameter(v.Name, comp, c.path("name")); ok {
			return parameterJSON(p), nil
		}
		return nil, errNotFound
	}
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

// putParameter replaces a vhost's limits whole, or sets a registered
// component's parameter: {"value": {...}}.
func (a *api) putParameter(c *call) (any, error) {
	if comp := c.path("component"); comp != componentVHostLimits && a.isComponent(comp) {
		return a.putComponentParameter(c, comp)
	}
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

// putComponentParameter sets a parameter of a registered component; the
// broker answers a value its component refuses in RabbitMQ's words
// ("Validation failed ...", 400).
func (a *api) putComponentParameter(c *call, comp string) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	value, err := parameterValue(c)
	if err != nil {
		return nil, err
	}
	switch value.(type) {
	case map[string]any, []any:
	default:
		return nil, badRequest("Validation failed\n\nthe value of a %s parameter must be a JSON object or list\n", comp)
	}
	created, err := a.b.SetVHostParameter(v.Name, comp, c.path("name"), amqpValue(value), c.u.Name)
	if err != nil {
		return nil, err
	}
	return createdOrUpdated(created)
}

// deleteParameter clears a vhost's limits or a component's parameter; a
// parameter of a component Warren does not have is not found, as in
// RabbitMQ 3.10.8.
func (a *api) deleteParameter(c *call) (any, error) {
	if comp := c.path("component"); comp != componentVHostLimits {
		v, err := c.vhost()
		if err != nil {
			return nil, err
		}
		if _, ok := a.b.LookupVHostParameter(v.Name, comp, c.path("name")); !ok {
			return nil, errNotFound
		}
		return nil, a.b.ClearVHostParameter(v.Name, comp, c.path("name"))
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
