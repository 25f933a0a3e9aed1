package broker

import (
	"maps"
	"slices"
	"sort"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/tablejson"
	"github.com/warrenmq/warren/protocol"
)

// ExportDefinitions describes the whole broker in RabbitMQ 3.10.8's
// definitions format (see definitions.go for what is in it).
func (b *Broker) ExportDefinitions() *Definitions {
	d := &Definitions{
		RabbitVersion: DefinitionsFormat, RabbitMQVersion: DefinitionsFormat,
		ProductName: "Warren", ProductVersion: Version,
		Users: []UserDefinition{}, VHosts: []VHostDefinition{}, Permissions: []PermissionDefinition{},
		TopicPermissions: []TopicPermission{}, Parameters: []ParameterDefinition{},
		GlobalParameters: []GlobalParameter{}, Policies: []PolicyDefinition{},
		Queues: []QueueDefinition{}, Exchanges: []ExchangeDefinition{}, Bindings: []BindingDefinition{},
	}
	if n := b.clusterName.Load(); n != nil {
		d.GlobalParameters = append(d.GlobalParameters, GlobalParameter{Name: ParamClusterName, Value: *n})
	}
	globals := b.GlobalParameters()
	for _, name := range slices.Sorted(maps.Keys(globals)) {
		d.GlobalParameters = append(d.GlobalParameters, GlobalParameter{Name: name, Value: tablejson.Render(protocol.Table{"value": globals[name]})["value"]})
	}
	for _, u := range b.users.Users() {
		tags := append([]string{}, u.Tags...)
		d.Users = append(d.Users, UserDefinition{Name: u.Name, PasswordHash: u.PasswordHash,
			HashingAlgorithm: u.Hashing.Name(), Tags: tags, Limits: limitsJSON(u.Limits)})
	}
	for _, p := range b.users.Permissions() {
		d.Permissions = append(d.Permissions, PermissionDefinition{User: p.User, VHost: p.VHost,
			Configure: p.Configure, Write: p.Write, Read: p.Read})
	}
	for _, p := range b.users.TopicPermissions() {
		d.TopicPermissions = append(d.TopicPermissions, TopicPermission{User: p.User, VHost: p.VHost,
			Exchange: p.Exchange, Write: p.Write, Read: p.Read})
	}
	for _, name := range b.VHosts() {
		v, ok := b.VHost(name)
		if !ok {
			continue // deleted meanwhile
		}
		d.VHosts = append(d.VHosts, VHostDefinition{Name: name})
		part := exportVHost(v, true, b.VHostParameters(name, ""))
		d.Parameters = append(d.Parameters, part.Parameters...)
		d.Policies = append(d.Policies, part.Policies...)
		d.Queues = append(d.Queues, part.Queues...)
		d.Exchanges = append(d.Exchanges, part.Exchanges...)
		d.Bindings = append(d.Bindings, part.Bindings...)
	}
	return d
}

// ExportVHostDefinitions describes one vhost as RabbitMQ 3.10.8's
// /api/definitions/{vhost} does.
func (b *Broker) ExportVHostDefinitions(name string) (*VHostDefinitions, error) {
	v, ok := b.VHost(name)
	if !ok {
		return nil, reply.NotFound("no vhost '%s'", name)
	}
	return exportVHost(v, false, b.VHostParameters(name, "")), nil
}

// exportVHost lists a vhost's parameters (params: its components'),
// policies, queues, exchanges and bindings; withVHost puts the vhost's
// name in parameters, queues, exchanges and bindings, as the whole
// broker's export has it.
func exportVHost(v *vhost.VHost, withVHost bool, params []VHostParameter) *VHostDefinitions {
	d := &VHostDefinitions{RabbitVersion: DefinitionsFormat, Parameters: []ParameterDefinition{},
		Policies: []PolicyDefinition{}, Queues: []QueueDefinition{}, Exchanges: []ExchangeDefinition{},
		Bindings: []BindingDefinition{}}
	name := ""
	if withVHost {
		name = v.Name
	}
	if l := v.Limits(); len(l) > 0 {
		d.Parameters = append(d.Parameters, ParameterDefinition{Value: l, VHost: name, Component: "vhost-limits", Name: "limits"})
	}
	pols := v.Policies()
	sort.Slice(pols, func(i, j int) bool { return pols[i].Name < pols[j].Name })
	for _, p := range pols {
		d.Policies = append(d.Policies, PolicyDefinitionOf(v.Name, p))
	}
	ops := v.OperatorPolicies()
	sort.Slice(ops, func(i, j int) bool { return ops[i].Name < ops[j].Name })
	for _, p := range ops {
		d.Parameters = append(d.Parameters, ParameterDefinition{VHost: name, Component: operatorPolicyComponent, Name: p.Name,
			Value: map[string]any{"pattern": p.Pattern, "definition": tablejson.Render(p.Definition), "priority": p.Priority,
				"apply-to": string(p.ApplyTo)}})
	}
	for _, p := range params { // sorted by component and name
		d.Parameters = append(d.Parameters, ParameterDefinition{VHost: name, Component: p.Component, Name: p.Name, Value: tablejson.Value(p.Value)})
	}
	// Bindings are kept only to queues in the export: not to exclusive
	// queues, nor to a queue declared after the listing.
	exported := map[string]bool{}
	qs := v.QueueEntries() // every node's queues; no figures needed
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	for _, q := range qs {
		if q.Exclusive {
			continue
		}
		exported[q.Name] = true
		d.Queues = append(d.Queues, QueueDefinition{Name: q.Name, VHost: name, Durable: q.Durable,
			AutoDelete: q.AutoDelete, Arguments: tablejson.Render(q.Args)})
	}
	xs := v.Exchanges()
	sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
	for _, x := range xs {
		if x.Name == "" || topology.ReservedName(x.Name) {
			continue
		}
		d.Exchanges = append(d.Exchanges, ExchangeDefinition{Name: x.Name, VHost: name, Type: x.Type,
			Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal, Arguments: tablejson.Render(x.Args)})
	}
	for _, bi := range v.Bindings() {
		if bi.Destination.Kind == exchange.ToQueue && !exported[bi.Destination.Name] {
			continue
		}
		d.Bindings = append(d.Bindings, BindingDefinition{Source: bi.Source, VHost: name,
			Destination: bi.Destination.Name, DestinationType: bi.Destination.Kind.String(),
			RoutingKey: bi.Key, Arguments: tablejson.Render(bi.Args)})
	}
	return d
}

// PolicyDefinitionOf is p of vhost in the definitions format, which is
// also how the management API lists policies.
func PolicyDefinitionOf(vhost string, p *policy.Policy) PolicyDefinition {
	return PolicyDefinition{VHost: vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: string(p.ApplyTo),
		Definition: tablejson.Render(p.Definition), Priority: p.Priority}
}

// limitsJSON is a user's limits as the export shows them: {} for none.
func limitsJSON(l map[string]int64) map[string]any {
	out := make(map[string]any, len(l))
	for k, n := range l {
		out[k] = n
	}
	return out
}
