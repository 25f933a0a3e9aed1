package admin

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/internal/tablejson"
	"github.com/warrenmq/warren/protocol"
)

// Global parameters, as RabbitMQ 3.10.8 serves them: cluster_name (the
// cluster's name, as /api/cluster-name has it) and any other an operator
// sets, any JSON value, stored and replicated by the broker. A
// policymaker (or an administrator) reads and changes them, as in
// RabbitMQ 3.10.8.

func (a *api) routeGlobalParameters(mux *router) {
	a.handle(mux, "GET /api/global-parameters", policymaker, a.globalParameters)
	a.handle(mux, "GET /api/global-parameters/{name}", policymaker, a.globalParameter)
	a.handle(mux, "PUT /api/global-parameters/{name}", policymaker, a.putGlobalParameter)
	a.handle(mux, "DELETE /api/global-parameters/{name}", policymaker, a.deleteGlobalParameter)
}

// globalParameterJSON is one global parameter, in RabbitMQ's order.
type globalParameterJSON struct {
	Value any    `json:"value"`
	Name  string `json:"name"`
}

// globalParameterList is every global parameter, cluster_name first, the
// others by name.
func (a *api) globalParameterList() []globalParameterJSON {
	out := []globalParameterJSON{{Name: broker.ParamClusterName, Value: a.b.ClusterName()}}
	globals := a.b.GlobalParameters()
	for _, name := range slices.Sorted(maps.Keys(globals)) {
		out = append(out, globalParameterJSON{Name: name, Value: tablejson.Render(protocol.Table{"value": globals[name]})["value"]})
	}
	return out
}

func (a *api) globalParameters(*call) (any, error) {
	return a.globalParameterList(), nil
}

func (a *api) globalParameter(c *call) (any, error) {
	for _, p := range a.globalParameterList() {
		if p.Name == c.path("name") {
			return p, nil
		}
	}
	return nil, errNotFound
}

// parameterValue reads a parameter's request body, {"value": ...}, as
// RabbitMQ does: the value is any JSON, its numbers kept exact.
func parameterValue(c *call) (any, error) {
	var body struct {
		Value json.RawMessage `json:"value"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Value == nil {
		return nil, badRequest("[{key_missing,value}]")
	}
	dec := json.NewDecoder(bytes.NewReader(body.Value))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return nil, badRequest("field 'value': %v", err)
	}
	return value, nil
}

func (a *api) putGlobalParameter(c *call) (any, error) {
	value, err := parameterValue(c)
	if err != nil {
		return nil, err
	}
	name := c.path("name")
	_, existed := a.b.GlobalParameters()[name]
	existed = existed || name == broker.ParamClusterName
	if err := a.b.SetGlobalParameter(name, amqpValue(value)); err != nil {
		return nil, badRequest("%v", err)
	}
	return createdOrUpdated(!existed)
}

func (a *api) deleteGlobalParameter(c *call) (any, error) {
	name := c.path("name")
	if _, ok := a.b.GlobalParameters()[name]; !ok && name != broker.ParamClusterName {
		return nil, errNotFound
	}
	return nil, a.b.ClearGlobalParameter(name)
}
