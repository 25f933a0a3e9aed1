package broker

import (
	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/tablerec"
	"github.com/warrenmq/warren/protocol"
)

// Every record the broker stores, every definitions change the metadata
// group carries (replicated.go) and the group's snapshot is one of the
// types below, encoded (Table) and decoded (read...) here and nowhere else,
// as a vhost's are in core/vhost's records.go: AMQP field tables with a
// version (internal/tablerec), so that a node refuses, by name and
// version, what it cannot read rather than misread it. Version 1 is what
// releases before versions wrote, without a version field.
const recordVersion = 1

// userRecord is a stored user (storage.KindUser, keyed by name) and a user
// of a snapshot or of a put_user change (which name it).
type userRecord struct {
	Name         string
	PasswordHash string
	Hashing      auth.Hashing // absent from a record from before Warren kept it: SHA-256
	Tags         []string
	// Limits ("limits") are absent when there are none, and from records
	// of releases before user limits.
	Limits map[string]int64
}

func userRecordOf(u *auth.User) userRecord {
	return userRecord{Name: u.Name, PasswordHash: u.PasswordHash, Hashing: auth.Hashing(u.Hashing.Name()), Tags: u.Tags, Limits: u.Limits}
}

func (r userRecord) user(name string) *auth.User {
	if name == "" {
		name = r.Name
	}
	tags := r.Tags
	if tags == nil {
		tags = []string{}
	}
	return &auth.User{Name: name, PasswordHash: r.PasswordHash, Hashing: r.Hashing, Tags: tags, Limits: r.Limits}
}

func (r userRecord) Table() protocol.Table {
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion)}
	r.put(t)
	return t
}

func (r userRecord) put(t protocol.Table) {
	t["password_hash"], t["hashing_algorithm"] = r.PasswordHash, r.Hashing.Name()
	t["tags"] = tablerec.StringList(r.Tags)
	if r.Tags == nil {
		t["tags"] = []any{}
	}
	if r.Name != "" {
		t["name"] = r.Name
	}
	if len(r.Limits) > 0 {
		t["limits"] = limitsTable(r.Limits)
	}
}

func readUserRecord(t protocol.Table) (userRecord, error) {
	return tablerec.Read("user record", t, recordVersion, readUser)
}

func readUser(r *tablerec.Reader) userRecord {
	u := userRecord{Name: r.StringOr("name", ""), PasswordHash: r.StringOr("password_hash", ""),
		Hashing: auth.Hashing(auth.Hashing(r.StringOr("hashing_algorithm", "")).Name()), Tags: r.Strings("tags")}
	if lt := r.Table("limits"); lt != nil {
		u.Limits = readLimits(r, "limits", lt)
	}
	return u
}

// permissionRecord is a stored permission (storage.KindPermission, keyed
// by vhost and user) and one of a snapshot or of a set_permission change
// (which name them).
type permissionRecord struct {
	VHost, User            string
	Configure, Write, Read string
}

func (r permissionRecord) Table() protocol.Table {
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion)}
	r.put(t)
	return t
}

func (r permissionRecord) put(t protocol.Table) {
	t["configure"], t["write"], t["read"] = r.Configure, r.Write, r.Read
	if r.VHost != "" || r.User != "" {
		t["vhost"], t["user"] = r.VHost, r.User
	}
}

func readPermissionRecord(t protocol.Table) (permissionRecord, error) {
	return tablerec.Read("permission record", t, recordVersion, readPermission)
}

func readPermission(r *tablerec.Reader) permissionRecord {
	return permissionRecord{VHost: r.StringOr("vhost", ""), User: r.StringOr("user", ""),
		Configure: r.String("configure"), Write: r.String("write"), Read: r.String("read")}
}

// topicPermissionRecord is one topic permission: a user's on one exchange
// in one vhost, as a snapshot or a set_topic_permission change carries it
// (naming all three), and as one entry of topicPermissionsRecord (naming
// the exchange only).
type topicPermissionRecord struct {
	VHost, User, Exchange string
	Write, Read           string
}

func (r topicPermissionRecord) Table() protocol.Table {
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion)}
	r.put(t)
	return t
}

func (r topicPermissionRecord) put(t protocol.Table) {
	t["exchange"], t["write"], t["read"] = r.Exchange, r.Write, r.Read
	if r.VHost != "" || r.User != "" {
		t["vhost"], t["user"] = r.VHost, r.User
	}
}

func readTopicPermissionRecord(t protocol.Table) (topicPermissionRecord, error) {
	return tablerec.Read("topic permission record", t, recordVersion, readTopicPermission)
}

func readTopicPermission(r *tablerec.Reader) topicPermissionRecord {
	return topicPermissionRecord{VHost: r.StringOr("vhost", ""), User: r.StringOr("user", ""),
		Exchange: r.String("exchange"), Write: r.String("write"), Read: r.String("read")}
}

// topicPermissionsRecord is the stored form (storage.KindTopicPermission,
// keyed by vhost and user): all of a user's topic permissions in a vhost.
type topicPermissionsRecord struct {
	Exchanges []topicPermissionRecord // naming the exchange only
}

func (r topicPermissionsRecord) Table() protocol.Table {
	list := make([]any, 0, len(r.Exchanges))
	for _, p := range r.Exchanges {
		list = append(list, p.Table())
	}
	return protocol.Table{tablerec.VersionKey: int64(recordVersion), "exchanges": list}
}

func readTopicPermissionsRecord(t protocol.Table) (topicPermissionsRecord, error) {
	r := tablerec.Open("topic permissions record", t, recordVersion)
	list := r.Tables("exchanges")
	if err := r.Err(); err != nil {
		return topicPermissionsRecord{}, err
	}
	var out topicPermissionsRecord
	for _, e := range list {
		p, err := readTopicPermissionRecord(e)
		if err != nil {
			return out, err
		}
		out.Exchanges = append(out.Exchanges, p)
	}
	return out, nil
}

// vhostRecord is a stored vhost (storage.KindVHost, keyed by name): its
// limits ("limits") and metadata ("description", "tags"), each absent
// from records of releases before them and of vhosts without any.
type vhostRecord struct {
	Limits      topology.Limits
	Description string
	Tags        []string
}

func vhostRecordOf(v *vhost.VHost) vhostRecord {
	m := v.Metadata()
	return vhostRecord{Limits: v.Limits(), Description: m.Description, Tags: m.Tags}
}

func (r vhostRecord) Table() protocol.Table {
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion)}
	if len(r.Limits) > 0 {
		t["limits"] = limitsTable(r.Limits)
	}
	if r.Description != "" {
		t["description"] = r.Description
	}
	if len(r.Tags) > 0 {
		t["tags"] = tablerec.StringList(r.Tags)
	}
	return t
}

func readVHostRecord(t protocol.Table) (vhostRecord, error) {
	return tablerec.Read("vhost record", t, recordVersion, readVHost)
}

func readVHost(r *tablerec.Reader) vhostRecord {
	rec := vhostRecord{Description: r.StringOr("description", ""), Tags: r.Strings("tags")}
	if lt := r.Table("limits"); lt != nil {
		rec.Limits = readLimits(r, "limits", lt)
	}
	return rec
}

// limitsTable is a vhost's or a user's limits as a record holds them.
func limitsTable(l map[string]int64) protocol.Table {
	t := make(protocol.Table, len(l))
	for k, n := range l {
		t[k] = n
	}
	return t
}

// readLimits reads a limits table, each value an integer.
func readLimits(r *tablerec.Reader, key string, t protocol.Table) map[string]int64 {
	l := make(map[string]int64, len(t))
	for k, x := range t {
		n, ok := x.(int64)
		if !ok {
			r.Fail(key+"."+k, "an integer", x)
			return nil
		}
		l[k] = n
	}
	return l
}

// pluginRecord is an enabled plugin (storage.KindPlugin, keyed by name):
// where its module came from.
type pluginRecord struct{ Source string }

func (r pluginRecord) Table() protocol.Table {
	return protocol.Table{tablerec.VersionKey: int64(recordVersion), "source": r.Source}
}

func readPluginRecord(t protocol.Table) (pluginRecord, error) {
	r := tablerec.Open("plugin record", t, recordVersion)
	rec := pluginRecord{Source: r.StringOr("source", "")}
	return rec, r.Err()
}

// settingsRecord is a plugin's stored overrides (storage.KindParameter,
// "plugin_settings:" and its name).
type settingsRecord struct{ Settings protocol.Table }

func (r settingsRecord) Table() protocol.Table {
	return protocol.Table{tablerec.VersionKey: int64(recordVersion), "settings": nonNil(r.Settings)}
}

func readSettingsRecord(t protocol.Table) (settingsRecord, error) {
	r := tablerec.Open("plugin settings record", t, recordVersion)
	rec := settingsRecord{Settings: r.Table("settings")}
	return rec, r.Err()
}

// clusterNameRecord is the stored cluster name (storage.KindParameter,
// ParamClusterName).
type clusterNameRecord struct{ Value string }

func (r clusterNameRecord) Table() protocol.Table {
	return protocol.Table{tablerec.VersionKey: int64(recordVersion), "value": r.Value}
}

func readClusterNameRecord(t protocol.Table) (clusterNameRecord, error) {
	r := tablerec.Open("cluster name record", t, recordVersion)
	rec := clusterNameRecord{Value: r.String("value")}
	return rec, r.Err()
}

// globalParameterRecord is a stored global parameter other than the
// cluster's name (storage.KindParameter, keyed by its name): any value a
// field table holds.
type globalParameterRecord struct{ Value any }

func (r globalParameterRecord) Table() protocol.Table {
	return protocol.Table{tablerec.VersionKey: int64(recordVersion), "value": r.Value}
}

func readGlobalParameterRecord(t protocol.Table) (globalParameterRecord, error) {
	r := tablerec.Open("global parameter record", t, recordVersion)
	v, ok := t["value"]
	if !ok {
		r.Fail("value", "a value", nil)
	}
	return globalParameterRecord{Value: v}, r.Err()
}

// vhostParameterRecord is a stored vhost parameter
// (storage.KindVHostParameter, keyed by vhost and component/name): its
// value; and one of a snapshot or of a set_vhost_parameter change, which
// name it.
type vhostParameterRecord struct {
	VHost, Component, Name string
	Value                  any // protocol.Table or []any
}

func (r vhostParameterRecord) Table() protocol.Table {
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion)}
	r.put(t)
	return t
}

func (r vhostParameterRecord) put(t protocol.Table) {
	t["value"] = nonNilValue(r.Value)
	if r.VHost != "" || r.Component != "" || r.Name != "" {
		t["vhost"], t["component"], t["name"] = r.VHost, r.Component, r.Name
	}
}

func readVHostParameterRecord(t protocol.Table) (vhostParameterRecord, error) {
	r := tablerec.Open("vhost parameter record", t, recordVersion)
	rec := readVHostParameter(r, t, false)
	return rec, r.Err()
}

// readVHostParameter reads a parameter's value and, named (a change's, a
// snapshot's), its vhost, component and name.
func readVHostParameter(r *tablerec.Reader, t protocol.Table, named bool) vhostParameterRecord {
	var rec vhostParameterRecord
	switch v := t["value"].(type) {
	case protocol.Table, []any:
		rec.Value = nonNilValue(v)
	default:
		r.Fail("value", "a table or an array", v)
	}
	if named {
		rec.VHost, rec.Component, rec.Name = r.String("vhost"), r.String("component"), r.String("name")
	}
	return rec
}

// nonNilValue is a parameter's value, an empty table for none.
func nonNilValue(v any) any {
	switch x := v.(type) {
	case protocol.Table:
		return nonNil(x)
	case []any:
		return x
	}
	return protocol.Table{}
}

func nonNil(t protocol.Table) protocol.Table {
	if t == nil {
		return protocol.Table{}
	}
	return t
}

// ---- definitions changes (replicated.go)

// A definitionsChange is one command of the metadata group: the broker's
// own, or a vhost's topology command (topologyChange).
type definitionsChange interface{ op() string }

type (
	putUser         struct{ User userRecord }
	deleteUser      struct{ Name string }
	setPermission   struct{ Permission permissionRecord }
	clearPermission struct{ VHost, User string }
	// setTopicPermission sets one; clearTopicPermission clears one, or
	// with Exchange "" all of the user's in the vhost.
	setTopicPermission   struct{ Permission topicPermissionRecord }
	clearTopicPermission struct{ VHost, User, Exchange string }
	addVHost             struct{ Name string }
	// setVHostLimits replaces a vhost's limits (none: cleared).
	setVHostLimits struct {
		VHost  string
		Limits topology.Limits
	}
	// setVHostMetadata replaces a vhost's description and tags.
	setVHostMetadata struct {
		VHost, Description string
		Tags               []string
	}
	deleteVHost struct{ Name string }
	// setPolicy and clearPolicy are an operator policy's with Operator
	// (ops of their own, which a node of an earlier release refuses by
	// name rather than take for a user's policy).
	setPolicy struct {
		VHost, Name, Pattern string
		ApplyTo              policy.ApplyTo
		Priority             int64
		Definition           protocol.Table
		Operator             bool
	}
	clearPolicy struct {
		VHost, Name string
		Operator    bool
	}
	setClusterName struct{ Name string }
	// setGlobalParameter and clearGlobalParameter are the global
	// parameters beside cluster_name (clearing cluster_name is one too).
	setGlobalParameter struct {
		Name  string
		Value any
	}
	clearGlobalParameter struct{ Name string }
	syncChange           struct{} // changes nothing (proposed by earlier versions' Sync)
	enablePlugin         struct{ Name string }
	disablePlugin        struct{ Name string }
	configurePlugin      struct {
		Name     string
		Settings protocol.Table
	}
	// setVHostParameter and clearVHostParameter are a registered
	// component's parameters (vhostparams.go).
	setVHostParameter   struct{ Param vhostParameterRecord }
	clearVHostParameter struct{ VHost, Component, Name string }
	// topologyChange is a vhost's command (core/topology).
	topologyChange struct {
		VHost   string
		Command topology.Command
	}
)

func (putUser) op() string              { return opPutUser }
func (deleteUser) op() string           { return opDeleteUser }
func (setPermission) op() string        { return opSetPermission }
func (clearPermission) op() string      { return opClearPermission }
func (setTopicPermission) op() string   { return opSetTopicPermission }
func (clearTopicPermission) op() string { return opClearTopicPermission }
func (addVHost) op() string             { return opAddVHost }
func (setVHostLimits) op() string       { return opSetVHostLimits }
func (setVHostMetadata) op() string     { return opSetVHostMetadata }
func (deleteVHost) op() string          { return opDeleteVHost }
func (c setPolicy) op() string          { return pick(c.Operator, opSetOperatorPolicy, opSetPolicy) }
func (c clearPolicy) op() string        { return pick(c.Operator, opClearOperatorPolicy, opClearPolicy) }
func (setClusterName) op() string       { return opSetClusterName }
func (setGlobalParameter) op() string   { return opSetGlobalParameter }
func (clearGlobalParameter) op() string { return opClearGlobalParameter }
func (setVHostParameter) op() string    { return opSetVHostParameter }
func (clearVHostParameter) op() string  { return opClearVHostParameter }
func (syncChange) op() string           { return opSync }
func (enablePlugin) op() string         { return opEnablePlugin }
func (disablePlugin) op() string        { return opDisablePlugin }
func (configurePlugin) op() string      { return opConfigurePlugin }
func (c topologyChange) op() string     { return topology.Op(c.Command) }

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}

func policyChange(vhost string, p *policy.Policy) setPolicy {
	return setPolicy{VHost: vhost, Name: p.Name, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: int64(p.Priority),
		Definition: p.Definition, Operator: p.Operator}
}

// changeTable encodes a change as the metadata group carries it.
func changeTable(c definitionsChange) protocol.Table {
	if tc, ok := c.(topologyChange); ok {
		return topology.CommandTable(tc.VHost, tc.Command)
	}
	t := protocol.Table{"op": c.op(), tablerec.VersionKey: int64(recordVersion)}
	switch c := c.(type) {
	case putUser:
		c.User.put(t)
	case deleteUser:
		t["name"] = c.Name
	case setPermission:
		c.Permission.put(t)
	case clearPermission:
		t["vhost"], t["user"] = c.VHost, c.User
	case setTopicPermission:
		c.Permission.put(t)
	case clearTopicPermission:
		t["vhost"], t["user"], t["exchange"] = c.VHost, c.User, c.Exchange
	case addVHost:
		t["name"] = c.Name
	case setVHostLimits:
		t["vhost"], t["limits"] = c.VHost, limitsTable(c.Limits)
	case setVHostMetadata:
		t["vhost"], t["description"], t["tags"] = c.VHost, c.Description, tablerec.StringList(c.Tags)
	case deleteVHost:
		t["name"] = c.Name
	case setPolicy:
		t["vhost"], t["name"], t["pattern"], t["apply_to"] = c.VHost, c.Name, c.Pattern, string(c.ApplyTo)
		t["priority"], t["definition"] = c.Priority, nonNil(c.Definition)
	case clearPolicy:
		t["vhost"], t["name"] = c.VHost, c.Name
	case setClusterName:
		t["name"] = c.Name
	case setGlobalParameter:
		t["name"], t["value"] = c.Name, c.Value
	case clearGlobalParameter:
		t["name"] = c.Name
	case setVHostParameter:
		c.Param.put(t)
	case clearVHostParameter:
		t["vhost"], t["component"], t["name"] = c.VHost, c.Component, c.Name
	case enablePlugin:
		t["name"] = c.Name
	case disablePlugin:
		t["name"] = c.Name
	case configurePlugin:
		t["name"], t["settings"] = c.Name, nonNil(c.Settings)
	}
	return t
}

// readChange reads what changeTable wrote. An op this node does not know,
// or a version, is refused by name, as a field of the wrong type is.
func readChange(t protocol.Table) (definitionsChange, error) {
	op, _ := t["op"].(string)
	if topology.IsCommand(op) {
		vh, c, err := topology.ReadCommand(t)
		return topologyChange{VHost: vh, Command: c}, err
	}
	r := tablerec.Open(op+" change", t, recordVersion)
	var c definitionsChange
	switch op {
	case opPutUser:
		u := readUser(r)
		u.Name = r.String("name")
		c = putUser{User: u}
	case opDeleteUser:
		c = deleteUser{Name: r.String("name")}
	case opSetPermission:
		p := readPermission(r)
		p.VHost, p.User = r.String("vhost"), r.String("user")
		c = setPermission{Permission: p}
	case opClearPermission:
		c = clearPermission{VHost: r.String("vhost"), User: r.String("user")}
	case opSetTopicPermission:
		p := readTopicPermission(r)
		p.VHost, p.User = r.String("vhost"), r.String("user")
		c = setTopicPermission{Permission: p}
	case opClearTopicPermission:
		c = clearTopicPermission{VHost: r.String("vhost"), User: r.String("user"), Exchange: r.String("exchange")}
	case opAddVHost:
		c = addVHost{Name: r.String("name")}
	case opSetVHostMetadata:
		c = setVHostMetadata{VHost: r.String("vhost"), Description: r.String("description"), Tags: r.Strings("tags")}
	case opSetVHostLimits:
		c = setVHostLimits{VHost: r.String("vhost"), Limits: readLimits(r, "limits", r.Table("limits"))}
	case opDeleteVHost:
		c = deleteVHost{Name: r.String("name")}
	case opSetPolicy, opSetOperatorPolicy:
		c = setPolicy{VHost: r.String("vhost"), Name: r.String("name"), Pattern: r.String("pattern"),
			ApplyTo: policy.ApplyTo(r.StringOr("apply_to", "")), Priority: r.IntOr("priority", 0), Definition: r.Table("definition"),
			Operator: op == opSetOperatorPolicy}
	case opClearPolicy, opClearOperatorPolicy:
		c = clearPolicy{VHost: r.String("vhost"), Name: r.String("name"), Operator: op == opClearOperatorPolicy}
	case opSetClusterName:
		c = setClusterName{Name: r.String("name")}
	case opSetGlobalParameter:
		v, ok := t["value"]
		if !ok {
			r.Fail("value", "a value", nil)
		}
		c = setGlobalParameter{Name: r.String("name"), Value: v}
	case opClearGlobalParameter:
		c = clearGlobalParameter{Name: r.String("name")}
	case opSetVHostParameter:
		c = setVHostParameter{Param: readVHostParameter(r, t, true)}
	case opClearVHostParameter:
		c = clearVHostParameter{VHost: r.String("vhost"), Component: r.String("component"), Name: r.String("name")}
	case opSync:
		c = syncChange{}
	case opEnablePlugin:
		c = enablePlugin{Name: r.String("name")}
	case opDisablePlugin:
		c = disablePlugin{Name: r.String("name")}
	case opConfigurePlugin:
		c = configurePlugin{Name: r.String("name"), Settings: r.Table("settings")}
	default:
		return nil, reply.Internal("unknown definitions change %q (a node of a later release?)", op)
	}
	if err := r.Err(); err != nil {
		return nil, reply.Internal("%v", err)
	}
	return c, nil
}

// metaSnapshot is the metadata group's snapshot: every broker-wide
// definition, and each vhost's topology (core/topology.Snapshot).
type metaSnapshot struct {
	Users       []userRecord
	Permissions []permissionRecord
	// TopicPermissions ("topic_permissions") are absent from snapshots
	// of releases before them: none.
	TopicPermissions []topicPermissionRecord
	// VHostLimits ("vhost_limits") are those of the vhosts that have any;
	// VHostMeta ("vhost_metadata") likewise.
	VHostLimits map[string]topology.Limits
	VHostMeta   map[string]topology.Metadata
	VHosts      []string
	Policies    []setPolicy
	Topology    map[string]protocol.Table
	Plugins     []string
	ClusterName string
	// GlobalParameters ("global_parameters") are those beside
	// cluster_name, by name; absent from snapshots of releases before
	// them.
	GlobalParameters map[string]any
	// VHostParameters ("vhost_parameters") are registered components'
	// parameters; absent from snapshots of releases before them.
	VHostParameters []vhostParameterRecord
}

func (s metaSnapshot) Table() protocol.Table {
	var users, perms, pols []any
	for _, u := range s.Users {
		users = append(users, u.Table())
	}
	for _, p := range s.Permissions {
		perms = append(perms, p.Table())
	}
	topicPerms := make([]any, 0, len(s.TopicPermissions))
	for _, p := range s.TopicPermissions {
		topicPerms = append(topicPerms, p.Table())
	}
	for _, p := range s.Policies {
		pols = append(pols, changeTable(p))
	}
	tops := protocol.Table{}
	for vh, t := range s.Topology {
		tops[vh] = t
	}
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion), "users": users, "permissions": perms,
		"vhosts": tablerec.StringList(s.VHosts), "policies": pols, "topology": tops, "plugins": tablerec.StringList(s.Plugins),
		"topic_permissions": topicPerms}
	if s.ClusterName != "" {
		t["cluster_name"] = s.ClusterName
	}
	if len(s.GlobalParameters) > 0 {
		t["global_parameters"] = protocol.Table(s.GlobalParameters)
	}
	if len(s.VHostParameters) > 0 {
		params := make([]any, 0, len(s.VHostParameters))
		for _, p := range s.VHostParameters {
			params = append(params, p.Table())
		}
		t["vhost_parameters"] = params
	}
	if len(s.VHostLimits) > 0 {
		lt := protocol.Table{}
		for vh, l := range s.VHostLimits {
			lt[vh] = limitsTable(l)
		}
		t["vhost_limits"] = lt
	}
	if len(s.VHostMeta) > 0 {
		mt := protocol.Table{}
		for vh, m := range s.VHostMeta {
			mt[vh] = protocol.Table{"description": m.Description, "tags": tablerec.StringList(m.Tags)}
		}
		t["vhost_metadata"] = mt
	}
	return t
}

func readMetaSnapshot(t protocol.Table) (metaSnapshot, error) {
	r := tablerec.Open("metadata snapshot", t, recordVersion)
	s := metaSnapshot{VHosts: r.Strings("vhosts"), Plugins: r.Strings("plugins"), ClusterName: r.StringOr("cluster_name", ""),
		Topology: map[string]protocol.Table{}}
	users, perms, pols, tops := r.Tables("users"), r.Tables("permissions"), r.Tables("policies"), r.Table("topology")
	var topicPerms []protocol.Table
	if _, ok := t["topic_permissions"]; ok {
		topicPerms = r.Tables("topic_permissions")
	}
	vparams := r.Tables("vhost_parameters")
	for vh, x := range r.Table("vhost_metadata") {
		mt, ok := x.(protocol.Table)
		if !ok {
			r.Fail("vhost_metadata."+vh, "a table", x)
			break
		}
		mr := tablerec.Open("metadata of vhost "+vh, mt, recordVersion)
		m := topology.Metadata{Description: mr.StringOr("description", ""), Tags: mr.Strings("tags")}
		if err := mr.Err(); err != nil {
			r.Fail("vhost_metadata."+vh, "a description and tags", x)
			break
		}
		if s.VHostMeta == nil {
			s.VHostMeta = map[string]topology.Metadata{}
		}
		s.VHostMeta[vh] = m
	}
	if g := r.Table("global_parameters"); len(g) > 0 {
		s.GlobalParameters = map[string]any(g)
	}
	for vh, x := range r.Table("vhost_limits") {
		lt, ok := x.(protocol.Table)
		if !ok {
			r.Fail("vhost_limits."+vh, "a table", x)
			break
		}
		if l := readLimits(r, "vhost_limits."+vh, lt); len(l) > 0 {
			if s.VHostLimits == nil {
				s.VHostLimits = map[string]topology.Limits{}
			}
			s.VHostLimits[vh] = l
		}
	}
	if err := r.Err(); err != nil {
		return s, err
	}
	for _, p := range topicPerms {
		rec, err := readTopicPermissionRecord(p)
		if err != nil {
			return s, err
		}
		s.TopicPermissions = append(s.TopicPermissions, rec)
	}
	for _, p := range vparams {
		pr := tablerec.Open("vhost parameter of a snapshot", p, recordVersion)
		rec := readVHostParameter(pr, p, true)
		if err := pr.Err(); err != nil {
			return s, err
		}
		s.VHostParameters = append(s.VHostParameters, rec)
	}
	for _, u := range users {
		rec, err := readUserRecord(u)
		if err != nil {
			return s, err
		}
		s.Users = append(s.Users, rec)
	}
	for _, p := range perms {
		rec, err := readPermissionRecord(p)
		if err != nil {
			return s, err
		}
		s.Permissions = append(s.Permissions, rec)
	}
	for _, p := range pols {
		c, err := readChange(p)
		if err != nil {
			return s, err
		}
		sp, ok := c.(setPolicy)
		if !ok {
			return s, reply.Internal("metadata snapshot: a policy that is a %s change", c.op())
		}
		s.Policies = append(s.Policies, sp)
	}
	for vh, x := range tops {
		vt, ok := x.(protocol.Table)
		if !ok {
			return s, reply.Internal("metadata snapshot: the topology of vhost '%s' is %T, want a table", vh, x)
		}
		s.Topology[vh] = vt
	}
	return s, nil
}
