package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/names"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// ImportDefinitions validates a definitions document in full and, when
// nothing in it is bad, applies it (definitions.go tells how). A refused
// document is an *InvalidError and changes nothing. scope "" imports the
// whole document; a vhost name imports only that vhost's part, as
// POST /api/definitions/{vhost} does, and the vhost must exist.
//
// ctx bounds the wait for another import and the checking: once it is
// done (the client went away, or its answer could no longer be sent)
// the import stops with ctx's error and nothing applied. Applying is
// never stopped by it, so an import is never left half applied for want
// of a reader; it is bounded by the document, which the admin API bounds
// by admin.max_body_size.
func (b *Broker) ImportDefinitions(ctx context.Context, doc []byte, scope string) error {
	select {
	case b.defsMu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.defsMu }()
	if scope != "" {
		if _, ok := b.VHost(scope); !ok {
			return reply.NotFound("no vhost '%s'", scope)
		}
	}
	plan, err := b.planImport(ctx, doc, scope)
	if ctx.Err() != nil {
		// Checking stopped part way: what it found is not the answer.
		b.log.Info().Err(ctx.Err()).Msg("definitions: import abandoned before anything was applied")
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	for _, note := range plan.skipped {
		b.log.Info().Str("skipped", note).Msg("definitions: not imported, Warren cannot apply it")
	}
	return b.apply(plan)
}

// LoadDefinitionsFile imports a definitions file, as definitions.load_file
// does at start; an error names the file.
func (b *Broker) LoadDefinitionsFile(path string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("definitions.load_file: %w", err)
	}
	if err := b.ImportDefinitions(context.Background(), doc, ""); err != nil {
		return fmt.Errorf("definitions.load_file %s: %w", path, err)
	}
	b.log.Info().Str("file", path).Msg("definitions loaded")
	return nil
}

// importPlan is a validated document: what to apply, in order.
type importPlan struct {
	vhosts      []string
	users       []*auth.User
	permissions []permissionPlan
	topicPerms  []topicPermissionRecord
	vhostLimits []vhostLimitsPlan
	vhostParams []VHostParameter // registered components' parameters
	policies    []policyPlan
	exchanges   []exchange.Definition
	queues      []queuePlan
	bindings    []bindingPlan
	clusterName string         // the cluster_name global parameter, if given
	globals     map[string]any // the other global parameters, as field values
	skipped     []string       // entities Warren cannot apply, for the log
}

type vhostLimitsPlan struct {
	vhost  string
	limits topology.Limits
}

type permissionPlan struct {
	vhost, user, configure, write, read string
}

type policyPlan struct {
	vhost string
	p     *policy.Policy
}

type queuePlan struct {
	vhost string
	def   topology.QueueDef
}

type bindingPlan struct {
	vhost, source, key string
	dest               exchange.Destination
	args               protocol.Table
}

// planner validates a document against the broker as it is plus what the
// document creates.
type planner struct {
	b       *Broker
	scope   string
	version string
	p       problems
	plan    importPlan

	vhosts    map[string]*vhost.VHost // each vhost entities go into: the broker's, or a scratch one
	users     map[string]bool         // users the document creates
	exchanges map[string]map[string]exchange.Definition
	queues    map[string]map[string]topology.QueueDef
}

// sections are the parts of a document Warren reads; in a vhost's import,
// only the second line.
var (
	brokerSections = []string{"users", "vhosts", "permissions", "topic_permissions", "global_parameters"}
	vhostSections  = []string{"parameters", "policies", "operator_policies", "queues", "exchanges", "bindings"}
	metaFields     = []string{"rabbit_version", "rabbitmq_version", "product_name", "product_version"}
)

func (b *Broker) planImport(ctx context.Context, doc []byte, scope string) (*importPlan, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return &importPlan{}, nil // an empty body is an empty document, as RabbitMQ reads it
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil || dec.More() || top == nil {
		why := "not a JSON object"
		if err != nil {
			why += ": " + err.Error()
		}
		return nil, &InvalidError{Problems: []Problem{{Entity: "document", Reason: why}}}
	}
	pl := &planner{b: b, scope: scope, vhosts: map[string]*vhost.VHost{}, users: map[string]bool{},
		exchanges: map[string]map[string]exchange.Definition{}, queues: map[string]map[string]topology.QueueDef{}}
	pl.version, _ = top["rabbitmq_version"].(string)
	if pl.version == "" {
		pl.version, _ = top["rabbit_version"].(string)
	}
	known := map[string]bool{}
	for _, k := range append(append(append([]string{}, brokerSections...), vhostSections...), metaFields...) {
		known[k] = true
	}
	for k := range top {
		if !known[k] {
			pl.skip("section %q", k)
		}
	}
	each := func(section string, f func(o *object)) {
		list, ok := top[section].([]any)
		if !ok {
			if top[section] != nil {
				pl.p.add(section, "", "must be a list, not %s", jsonKind(top[section]))
			}
			return
		}
		for i, e := range list {
			if i%1024 == 0 && ctx.Err() != nil {
				return // ImportDefinitions answers with ctx's error
			}
			m, ok := e.(map[string]any)
			if !ok {
				pl.p.add(fmt.Sprintf("%s[%d]", section, i), "", "must be an object, not %s", jsonKind(e))
				continue
			}
			f(&object{m: m, entity: fmt.Sprintf("%s[%d]", section, i), p: &pl.p})
		}
	}
	if scope == "" {
		each("vhosts", pl.vhost)
		each("users", pl.user)
		each("permissions", pl.permission)
		each("topic_permissions", pl.topicPermission)
		each("global_parameters", pl.globalParameter)
	} else {
		for _, s := range brokerSections {
			if top[s] != nil {
				pl.skip("section %q in an import to vhost '%s'", s, scope)
			}
		}
		pl.vhosts[scope], _ = b.VHost(scope)
	}
	each("parameters", pl.parameter)
	each("policies", pl.policy)
	each("operator_policies", pl.operatorPolicy)
	each("exchanges", pl.exchange)
	each("queues", pl.queue)
	each("bindings", pl.binding)
	if len(pl.p.list) > 0 {
		return nil, &InvalidError{Problems: pl.p.list}
	}
	return &pl.plan, nil
}

// describe names an entity for problems: "queue 'q' in vhost 'v'", or its
// place in the document ("queues[3]") while it has no name to show.
func describe(o *object, kind, scope string) string {
	name, ok := o.m["name"].(string)
	if !ok {
		return o.entity
	}
	if kind == "vhost" || kind == "user" {
		return fmt.Sprintf("%s '%s'", kind, name)
	}
	return fmt.Sprintf("%s '%s' in vhost '%s'", kind, name, entityVHost(o, scope))
}

// entityVHost is the vhost an entity names, for describing it.
func entityVHost(o *object, scope string) string {
	if scope != "" {
		return scope
	}
	v, _ := o.m["vhost"].(string)
	return v
}

func (pl *planner) skip(format string, args ...any) {
	pl.plan.skipped = append(pl.plan.skipped, fmt.Sprintf(format, args...))
}

// vhostOf returns the vhost an entity goes into: the import's scope, or
// its own vhost field. With check, the vhost must exist or be in the
// document.
func (pl *planner) vhostOf(o *object, check bool) string {
	if pl.scope != "" {
		return pl.scope
	}
	name := o.str("vhost", check)
	if check && name != "" && pl.target(name) == nil {
		o.bad("vhost", "no vhost '%s' in the broker or the document", name)
	}
	return name
}

// target is the vhost to check an entity against: the broker's, or for a
// vhost the document creates, a scratch one without a store, which holds
// the predeclared exchanges and nothing else.
func (pl *planner) target(name string) *vhost.VHost {
	if v, ok := pl.vhosts[name]; ok {
		return v
	}
	v, ok := pl.b.VHost(name)
	if !ok {
		return nil
	}
	pl.vhosts[name] = v
	return v
}

func (pl *planner) vhost(o *object) {
	o.entity = describe(o, "vhost", "")
	name := o.name("name")
	if name == "" {
		return
	}
	if l, ok := o.m["limits"].(map[string]any); ok && len(l) > 0 {
		// Newer RabbitMQ puts a vhost's limits on the vhost too; they are
		// the vhost-limits parameter's.
		limits := topology.Limits(o.limits("limits"))
		if err := topology.CheckLimits(limits); err != nil {
			o.bad("limits", "%s", reason(err))
		}
		pl.plan.vhostLimits = append(pl.plan.vhostLimits, vhostLimitsPlan{vhost: name, limits: limits})
	}
	if _, seen := pl.vhosts[name]; seen {
		return
	}
	v, ok := pl.b.VHost(name)
	if !ok {
		if err := names.Check("vhost", name); err != nil {
			o.bad("name", "%v", err)
			return
		}
		v = vhost.New(vhost.Config{Name: name, Types: pl.b.types, QueueTypes: pl.b.queueTypes, Logger: pl.b.log})
	}
	pl.vhosts[name] = v
	pl.plan.vhosts = append(pl.plan.vhosts, name)
}

// preHashingVersion reports whether a file's RabbitMQ version predates
// 3.6, whose users' hashes are MD5 without saying so.
func preHashingVersion(version string) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major < 3 || major == 3 && minor < 6)
}

func (pl *planner) user(o *object) {
	o.entity = describe(o, "user", "")
	name := o.name("name")
	if name == "" {
		return
	}
	if _, ok := pl.b.users.User(name); !ok {
		if err := names.Check("user", name); err != nil {
			o.bad("name", "%v", err)
		}
	}
	u := &auth.User{Name: name, Tags: o.tags("tags")}
	switch {
	case o.has("hashing_algorithm"):
		h, err := auth.ParseHashing(o.str("hashing_algorithm", true))
		if err != nil {
			o.bad("hashing_algorithm", "%v", err)
		}
		u.Hashing = h
	case preHashingVersion(pl.version):
		u.Hashing = auth.MD5
	default:
		u.Hashing = auth.SHA256
	}
	switch {
	case o.has("password_hash"):
		u.PasswordHash = o.str("password_hash", true)
		if err := u.Hashing.Valid(u.PasswordHash); err != nil {
			o.bad("password_hash", "%v", err)
		}
	case o.has("password"):
		u.Hashing = auth.SHA256
		if pw := o.str("password", true); pw != "" {
			u.PasswordHash = auth.HashPassword(pw)
		}
	default:
		o.bad("password_hash", "missing (and no password)")
	}
	if o.has("limits") { // absent: an existing user keeps theirs
		u.Limits = o.limits("limits")
		if err := auth.CheckUserLimits(u.Limits); err != nil {
			o.bad("limits", "%v", err)
		}
	}
	pl.users[name] = true
	pl.plan.users = append(pl.plan.users, u)
}

func (pl *planner) permission(o *object) {
	if u, ok := o.m["user"].(string); ok {
		v, _ := o.m["vhost"].(string)
		o.entity = fmt.Sprintf("permission of user '%s' in vhost '%s'", u, v)
	}
	user, vh := o.str("user", true), o.str("vhost", true)
	c, w, r := o.str("configure", true), o.str("write", true), o.str("read", true)
	if user != "" && !pl.users[user] {
		if _, ok := pl.b.users.User(user); !ok {
			o.bad("user", "no user '%s' in the broker or the document", user)
		}
	}
	if vh != "" && pl.target(vh) == nil {
		o.bad("vhost", "no vhost '%s' in the broker or the document", vh)
	}
	for field, expr := range map[string]string{"configure": c, "write": w, "read": r} {
		if _, err := regexp.Compile(expr); err != nil {
			o.bad(field, "bad regular expression %q: %v", expr, err)
		}
	}
	pl.plan.permissions = append(pl.plan.permissions, permissionPlan{vhost: vh, user: user, configure: c, write: w, read: r})
}

func (pl *planner) topicPermission(o *object) {
	if u, ok := o.m["user"].(string); ok {
		v, _ := o.m["vhost"].(string)
		x, _ := o.m["exchange"].(string)
		o.entity = fmt.Sprintf("topic permission of user '%s' in vhost '%s' on exchange '%s'", u, v, x)
	}
	user, vh, x := o.str("user", true), o.str("vhost", true), o.str("exchange", true)
	w, r := o.str("write", true), o.str("read", true)
	if user != "" && !pl.users[user] {
		if _, ok := pl.b.users.User(user); !ok {
			o.bad("user", "no user '%s' in the broker or the document", user)
		}
	}
	if vh != "" && pl.target(vh) == nil {
		o.bad("vhost", "no vhost '%s' in the broker or the document", vh)
	}
	if o.has("exchange") && x == "" {
		o.bad("exchange", "must name an exchange")
	}
	for field, expr := range map[string]string{"write": w, "read": r} {
		if _, err := regexp.Compile(expr); err != nil {
			o.bad(field, "bad regular expression %q: %v", expr, err)
		}
	}
	pl.plan.topicPerms = append(pl.plan.topicPerms, topicPermissionRecord{VHost: vh, User: user, Exchange: x, Write: w, Read: r})
}

// parameter takes a vhost's limits (component vhost-limits), an
// operator policy (component operator_policy, as RabbitMQ 3.10.8 exports
// them) and a registered component's parameter, which its Check passed.
// A component not registered is a RabbitMQ plugin's Warren does not have
// (federation-upstream): refused by name, since importing the rest
// without it would leave a broker that silently does less.
func (pl *planner) parameter(o *object) {
	component, name := o.str("component", false), o.str("name", false)
	switch component {
	case "vhost-limits":
	case operatorPolicyComponent:
		value, ok := o.m["value"].(map[string]any)
		if !ok {
			o.entity = describe(o, "operator policy", pl.scope)
			o.bad("value", "must be an object (pattern, definition, priority, apply-to), not %s", jsonKind(o.m["value"]))
			return
		}
		m := map[string]any{"name": o.m["name"], "vhost": o.m["vhost"]}
		for k, v := range value {
			m[k] = v
		}
		pl.operatorPolicy(&object{m: m, entity: o.entity, p: o.p})
		return
	default:
		o.entity = fmt.Sprintf("parameter '%s' of component '%s' in vhost '%s'", name, component, pl.vhostOf(o, false))
		pl.componentParameter(o, component)
		return
	}
	o.entity = fmt.Sprintf("limits of vhost '%s'", pl.vhostOf(o, false))
	vh := pl.vhostOf(o, true)
	if _, ok := o.m["value"].(map[string]any); !ok {
		o.bad("value", "must be an object of limits, not %s", jsonKind(o.m["value"]))
		return
	}
	l := topology.Limits(o.limits("value"))
	if err := topology.CheckLimits(l); err != nil {
		o.bad("value", "%s", reason(err))
	}
	pl.plan.vhostLimits = append(pl.plan.vhostLimits, vhostLimitsPlan{vhost: vh, limits: l})
}

// componentParameter plans a parameter of a registered component.
func (pl *planner) componentParameter(o *object, component string) {
	c, ok := pl.b.parameterComponent(component)
	if !ok {
		has := append([]string{"vhost-limits", operatorPolicyComponent}, pl.b.ParameterComponents()...)
		o.bad("component", "Warren has no component '%s' (it has %s)", component, strings.Join(has, ", "))
		return
	}
	name := o.name("name")
	vh := pl.vhostOf(o, true)
	raw := o.m["value"]
	switch raw.(type) {
	case map[string]any, []any:
	default:
		o.bad("value", "must be an object or a list, not %s", jsonKind(raw))
		return
	}
	value, err := valueFromJSON(raw)
	if err != nil {
		o.bad("value", "%v", err)
		return
	}
	if name == "" || vh == "" {
		return
	}
	value = nonNilValue(value)
	if err := c.Check(vh, name, value, ""); err != nil {
		o.bad("value", "%v", err)
		return
	}
	pl.plan.vhostParams = append(pl.plan.vhostParams, VHostParameter{VHost: vh, Component: component, Name: name, Value: value})
}

func (pl *planner) policy(o *object)         { pl.anyPolicy(o, false) }
func (pl *planner) operatorPolicy(o *object) { pl.anyPolicy(o, true) }

// anyPolicy plans a policy, or an operator policy (whose definition takes
// policy.OperatorKeys only).
func (pl *planner) anyPolicy(o *object, operator bool) {
	kind := "policy"
	if operator {
		kind = "operator policy"
	}
	o.entity = describe(o, kind, pl.scope)
	before := len(pl.p.list)
	name := o.name("name")
	vh := pl.vhostOf(o, true)
	pattern := o.str("pattern", true)
	if _, err := regexp.Compile(pattern); err != nil {
		o.bad("pattern", "bad regular expression %q: %v", pattern, err)
	}
	applyTo := policy.All
	if o.has("apply-to") {
		applyTo = policy.ApplyTo(o.str("apply-to", true))
		switch applyTo {
		case policy.Queues, policy.Exchanges, policy.All:
		default:
			o.bad("apply-to", "must be queues, exchanges or all, not %q", applyTo)
		}
	}
	priority := o.integer("priority", 0)
	def, err := tableFromJSON(o.m["definition"])
	switch {
	case err != nil:
		o.bad("definition", "%v", err)
	case len(def) == 0:
		o.bad("definition", "missing or empty")
	}
	if len(pl.p.list) > before {
		return // policy.New would repeat what is already reported
	}
	newPolicy := policy.New
	if operator {
		newPolicy = policy.NewOperator
	}
	p, err := newPolicy(name, pattern, applyTo, priority, def)
	if err != nil {
		o.bad("definition", "%v", err)
		return
	}
	pl.plan.policies = append(pl.plan.policies, policyPlan{vhost: vh, p: p})
}

func (pl *planner) exchange(o *object) {
	o.entity = describe(o, "exchange", pl.scope)
	name := o.str("name", true)
	vh := pl.vhostOf(o, true)
	def := exchange.Definition{VHost: vh, Name: name, Type: o.str("type", true),
		Durable: o.boolean("durable", true, true), AutoDelete: o.boolean("auto_delete", false, false),
		Internal: o.boolean("internal", false, false)}
	args, err := tableFromJSON(o.m["arguments"])
	if err != nil {
		o.bad("arguments", "%v", err)
	}
	def.Args = args
	if _, isString := o.m["name"].(string); isString && (name == "" || topology.ReservedName(name)) {
		pl.skip("exchange '%s' in vhost '%s' (the default and amq.* exchanges are the broker's own)", name, vh)
		return
	}
	v := pl.target(vh)
	if v == nil || name == "" {
		return
	}
	if prev, ok := pl.exchanges[vh][name]; ok {
		if !reflect.DeepEqual(prev, def) {
			o.bad("", "declared twice in the document, differently")
		}
		return
	}
	if err := v.CheckExchange(def); err != nil {
		o.bad(exchangeField(err), "%s", reason(err))
		return
	}
	if pl.exchanges[vh] == nil {
		pl.exchanges[vh] = map[string]exchange.Definition{}
	}
	pl.exchanges[vh][name] = def
	pl.plan.exchanges = append(pl.plan.exchanges, def)
}

// exchangeField guesses which field a declare's refusal is about, for the
// problem's field; the refusal's text names it in full either way.
func exchangeField(err error) string {
	text := reply.As(err).Text
	switch {
	case strings.Contains(text, "exchange name \""):
		return "name"
	case strings.Contains(text, "exchange type"):
		return "type"
	case strings.Contains(text, "inequivalent arg 'type'"):
		return "type"
	case strings.Contains(text, "inequivalent arg 'durable'"):
		return "durable"
	case strings.Contains(text, "inequivalent arg 'auto_delete'"):
		return "auto_delete"
	case strings.Contains(text, "inequivalent arg 'internal'"):
		return "internal"
	}
	return "arguments"
}

func (pl *planner) queue(o *object) {
	o.entity = describe(o, "queue", pl.scope)
	name := o.str("name", true)
	vh := pl.vhostOf(o, true)
	def := topology.QueueDef{Name: name, Durable: o.boolean("durable", true, true), AutoDelete: o.boolean("auto_delete", false, false)}
	args, err := tableFromJSON(o.m["arguments"])
	if err != nil {
		o.bad("arguments", "%v", err)
	}
	def.Args = args
	switch t := o.str("type", false); t {
	case "", "classic":
	case "quorum", "stream":
		// RabbitMQ exports a quorum queue or a stream with its type in
		// the arguments too; one without them is made one all the same.
		if def.Args == nil {
			def.Args = protocol.Table{}
		}
		if _, ok := def.Args["x-queue-type"]; !ok {
			def.Args["x-queue-type"] = t
		}
	default:
		o.bad("type", "Warren has classic and quorum queues and streams, not %q", t)
	}
	if name == "" {
		if _, isString := o.m["name"].(string); isString {
			o.bad("name", "must not be empty")
		}
		return
	}
	if topology.ReservedName(name) {
		pl.skip("queue '%s' in vhost '%s' (amq.* names are the broker's own)", name, vh)
		return
	}
	v := pl.target(vh)
	if v == nil {
		return
	}
	if prev, ok := pl.queues[vh][name]; ok {
		if !reflect.DeepEqual(prev, def) {
			o.bad("", "declared twice in the document, differently")
		}
		return
	}
	if err := v.CheckQueue(def); err != nil {
		field := "arguments"
		if text := reply.As(err).Text; strings.Contains(text, "queue name \"") || strings.Contains(text, "queue should be less than") {
			field = "name"
		} else if strings.Contains(text, "'durable'") {
			field = "durable"
		} else if strings.Contains(text, "'auto_delete'") {
			field = "auto_delete"
		}
		o.bad(field, "%s", reason(err))
		return
	}
	if pl.queues[vh] == nil {
		pl.queues[vh] = map[string]topology.QueueDef{}
	}
	pl.queues[vh][name] = def
	pl.plan.queues = append(pl.plan.queues, queuePlan{vhost: vh, def: def})
}

func (pl *planner) binding(o *object) {
	if s, ok := o.m["source"].(string); ok {
		d, _ := o.m["destination"].(string)
		k, _ := o.m["destination_type"].(string)
		o.entity = fmt.Sprintf("binding from exchange '%s' to %s '%s' in vhost '%s'", s, k, d, entityVHost(o, pl.scope))
	}
	source, dest := o.str("source", true), o.str("destination", true)
	vh := pl.vhostOf(o, true)
	kind := o.str("destination_type", true)
	key := o.str("routing_key", false)
	args, err := tableFromJSON(o.m["arguments"])
	if err != nil {
		o.bad("arguments", "%v", err)
	}
	d := exchange.Destination{Kind: exchange.ToQueue, Name: dest}
	switch kind {
	case "queue":
	case "exchange":
		d.Kind = exchange.ToExchange
	case "":
	default:
		o.bad("destination_type", "must be queue or exchange, not %q", kind)
	}
	if o.has("source") && source == "" {
		o.bad("source", "the default exchange takes no bindings")
	}
	v := pl.target(vh)
	if v == nil {
		return
	}
	if source != "" && !pl.hasExchange(v, source) {
		o.bad("source", "no exchange '%s' in the broker or the document", source)
	}
	if dest != "" {
		switch d.Kind {
		case exchange.ToExchange:
			if !pl.hasExchange(v, dest) {
				o.bad("destination", "no exchange '%s' in the broker or the document", dest)
			}
		case exchange.ToQueue:
			if _, planned := pl.queues[vh][dest]; !planned {
				if _, err := v.Queue(dest, nil); err != nil {
					o.bad("destination", "%s", reason(err))
				}
			}
		}
	}
	if len(args) > 0 {
		if _, err := protocol.AppendTable(nil, args); err != nil {
			o.bad("arguments", "%v", err)
		}
	}
	pl.plan.bindings = append(pl.plan.bindings, bindingPlan{vhost: vh, source: source, key: key, dest: d, args: args})
}

// reason is a refusal's text without its AMQP reply name
// ("PRECONDITION_FAILED - "): in a definitions problem it names nothing.
func reason(err error) string {
	text := reply.As(err).Text
	if _, rest, ok := strings.Cut(text, " - "); ok {
		return rest
	}
	return text
}

func (pl *planner) hasExchange(v *vhost.VHost, name string) bool {
	if _, planned := pl.exchanges[v.Name][name]; planned {
		return true
	}
	_, err := v.Exchange(name)
	return err == nil
}

// globalParameter plans a global parameter: cluster_name renames the
// cluster, RabbitMQ's internal_cluster_id (its own cluster's) is
// skipped, any other is kept as it is, any JSON value.
func (pl *planner) globalParameter(o *object) {
	name := o.str("name", true)
	switch name {
	case ParamClusterName:
	case "internal_cluster_id":
		pl.skip("global parameter '%s'", name)
		return
	default:
		value, err := tableFromJSON(map[string]any{"value": o.m["value"]})
		if _, present := o.m["value"]; !present || err != nil {
			o.bad("value", "missing, or not a value a field table holds: %v", err)
			return
		}
		if pl.plan.globals == nil {
			pl.plan.globals = map[string]any{}
		}
		pl.plan.globals[name] = value["value"]
		return
	}
	if value := o.str("value", true); value != "" {
		pl.plan.clusterName = value
	} else if _, ok := o.m["value"].(string); ok {
		o.bad("value", "must not be empty")
	}
}

// apply makes a validated plan real, in dependency order. An error names
// the entity it stopped at; what came before stays applied.
func (b *Broker) apply(plan *importPlan) error {
	failed := func(entity string, err error) error {
		return fmt.Errorf("definitions applied only up to %s, which failed: %w", entity, err)
	}
	for _, name := range plan.vhosts {
		if _, err := b.AddVHost(name); err != nil {
			return failed(fmt.Sprintf("vhost '%s'", name), err)
		}
	}
	if plan.clusterName != "" {
		if err := b.SetClusterName(plan.clusterName); err != nil {
			return failed("global parameter 'cluster_name'", err)
		}
	}
	for name, value := range plan.globals {
		if err := b.SetGlobalParameter(name, value); err != nil {
			return failed(fmt.Sprintf("global parameter '%s'", name), err)
		}
	}
	for _, u := range plan.users {
		if err := b.putUser(u); err != nil {
			return failed(fmt.Sprintf("user '%s'", u.Name), err)
		}
	}
	for _, p := range plan.permissions {
		if err := b.SetPermission(p.vhost, p.user, p.configure, p.write, p.read); err != nil {
			return failed(fmt.Sprintf("permission of user '%s' in vhost '%s'", p.user, p.vhost), err)
		}
	}
	for _, p := range plan.topicPerms {
		if err := b.SetTopicPermission(p.VHost, p.User, p.Exchange, p.Write, p.Read); err != nil {
			return failed(fmt.Sprintf("topic permission of user '%s' in vhost '%s' on exchange '%s'", p.User, p.VHost, p.Exchange), err)
		}
	}
	vhostOf := func(name string) (*vhost.VHost, error) {
		v, ok := b.VHost(name)
		if !ok {
			return nil, reply.NotFound("no vhost '%s'", name)
		}
		return v, nil
	}
	for _, p := range plan.policies {
		v, err := vhostOf(p.vhost)
		if err == nil {
			err = v.SetPolicy(p.p)
		}
		if err != nil {
			return failed(fmt.Sprintf("policy '%s' in vhost '%s'", p.p.Name, p.vhost), err)
		}
	}
	for _, def := range plan.exchanges {
		v, err := vhostOf(def.VHost)
		if err == nil {
			_, err = v.DeclareExchange(def, false)
		}
		if err != nil {
			return failed(fmt.Sprintf("exchange '%s' in vhost '%s'", def.Name, def.VHost), err)
		}
	}
	for _, q := range plan.queues {
		v, err := vhostOf(q.vhost)
		if err == nil {
			_, err = v.Declare(q.def, false)
		}
		if err != nil {
			return failed(fmt.Sprintf("queue '%s' in vhost '%s'", q.def.Name, q.vhost), err)
		}
	}
	// Bindings go in runs of one vhost's, each run's stored records
	// written together (vhost.BindAll): a synced write each made an
	// import of 100,000 bindings take minutes.
	for rest := plan.bindings; len(rest) > 0; {
		run := 1
		for run < len(rest) && rest[run].vhost == rest[0].vhost {
			run++
		}
		list := make([]vhost.Binding, run)
		for i, bd := range rest[:run] {
			list[i] = vhost.Binding{Source: bd.source, Dest: bd.dest, Key: bd.key, Args: bd.args}
		}
		v, err := vhostOf(rest[0].vhost)
		made := 0
		if err == nil {
			made, err = v.BindAll(list)
		}
		if err != nil {
			bd := rest[made]
			return failed(fmt.Sprintf("binding from exchange '%s' to %s '%s' in vhost '%s'", bd.source, bd.dest.Kind, bd.dest.Name, bd.vhost), err)
		}
		rest = rest[run:]
	}
	// After the topology, so that a component (a shovel) finds what its
	// parameter names.
	for _, p := range plan.vhostParams {
		if _, err := b.SetVHostParameter(p.VHost, p.Component, p.Name, p.Value, ""); err != nil {
			return failed(fmt.Sprintf("parameter '%s' of component '%s' in vhost '%s'", p.Name, p.Component, p.VHost), err)
		}
	}
	// Limits last: the document's own queues and connections are not
	// refused by the limits it sets, so what was checked is what applies.
	for _, l := range plan.vhostLimits {
		if err := b.SetVHostLimits(l.vhost, l.limits); err != nil {
			return failed(fmt.Sprintf("limits of vhost '%s'", l.vhost), err)
		}
	}
	return nil
}
