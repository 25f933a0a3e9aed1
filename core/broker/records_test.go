package broker

import (
	"reflect"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/internal/tablerec"
	"github.com/warrenmq/warren/protocol"
)

// throughBytes is t as the store or the log gives it back.
func throughBytes(t testing.TB, tab protocol.Table) protocol.Table {
	t.Helper()
	out, err := tablerec.Reencode(tab)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func someChanges() []definitionsChange {
	return []definitionsChange{
		putUser{User: userRecord{Name: "u", PasswordHash: "aGFzaA==", Hashing: auth.SHA512, Tags: []string{"administrator", "x"}}},
		putUser{User: userRecord{Name: "nobody", Hashing: auth.SHA256}},
		putUser{User: userRecord{Name: "capped", Hashing: auth.SHA256, Limits: map[string]int64{"max-channels": 4}}},
		deleteUser{Name: "u"},
		setPermission{Permission: permissionRecord{VHost: "/", User: "u", Configure: ".*", Write: "^a", Read: ""}},
		clearPermission{VHost: "/", User: "u"},
		setTopicPermission{Permission: topicPermissionRecord{VHost: "/", User: "u", Exchange: "amq.topic", Write: "^{username}\\.", Read: ""}},
		clearTopicPermission{VHost: "/", User: "u", Exchange: "amq.topic"},
		clearTopicPermission{VHost: "/", User: "u"},
		addVHost{Name: "v"},
		setVHostLimits{VHost: "v", Limits: topology.Limits{"max-queues": 10, "max-connections": -1}},
		setVHostLimits{VHost: "v", Limits: topology.Limits{}},
		setVHostMetadata{VHost: "v", Description: "d", Tags: []string{"a", "b"}},
		deleteVHost{Name: "v"},
		setPolicy{VHost: "/", Name: "p", Pattern: "^q", ApplyTo: policy.Queues, Priority: 7, Definition: protocol.Table{"max-length": int64(9)}},
		clearPolicy{VHost: "/", Name: "p"},
		setPolicy{VHost: "/", Name: "p", Pattern: "^q", ApplyTo: policy.Queues, Definition: protocol.Table{"max-length": int64(2)}, Operator: true},
		clearPolicy{VHost: "/", Name: "p", Operator: true},
		setGlobalParameter{Name: "g", Value: protocol.Table{"a": int64(1)}},
		clearGlobalParameter{Name: "g"},
		setVHostParameter{Param: vhostParameterRecord{VHost: "/", Component: "shovel", Name: "s/1",
			Value: protocol.Table{"src-uri": "amqp://", "n": int64(1), "l": []any{"a"}, "t": protocol.Table{"k": 1.5}}}},
		setVHostParameter{Param: vhostParameterRecord{VHost: "/", Component: "shovel", Name: "empty", Value: protocol.Table{}}},
		clearVHostParameter{VHost: "/", Component: "shovel", Name: "s/1"},
		setClusterName{Name: "rabbit@here"},
		syncChange{},
		enablePlugin{Name: "delayed_message"},
		disablePlugin{Name: "delayed_message"},
		configurePlugin{Name: "consistent_hash", Settings: protocol.Table{"ring": int64(64)}},
		topologyChange{VHost: "/", Command: topology.DeleteExchange{Name: "x", IfUnused: true}},
		topologyChange{VHost: "v", Command: topology.Bind{Binding: topology.BindingRecord{Source: "amq.topic",
			Destination: exchange.Destination{Kind: exchange.ToQueue, Name: "q"}, Key: "a.#"}}},
	}
}

// Every change, record and snapshot reads back as it was written.
func TestRecordsRoundTrip(t *testing.T) {
	for _, c := range someChanges() {
		got, err := readChange(throughBytes(t, changeTable(c)))
		if err != nil {
			t.Fatalf("%#v: %v", c, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("read back %#v\nwrote %#v", got, c)
		}
	}
	u := userRecord{PasswordHash: "h", Hashing: auth.MD5, Tags: []string{"monitoring"}}
	if got, err := readUserRecord(throughBytes(t, u.Table())); err != nil || !reflect.DeepEqual(got, u) {
		t.Fatalf("user %#v (%v)", got, err)
	}
	p := permissionRecord{Configure: "c", Write: "w", Read: "r"}
	if got, err := readPermissionRecord(throughBytes(t, p.Table())); err != nil || got != p {
		t.Fatalf("permission %#v (%v)", got, err)
	}
	vr := vhostRecord{Limits: topology.Limits{"max-connections": 3}, Description: "d", Tags: []string{"t"}}
	if got, err := readVHostRecord(throughBytes(t, vr.Table())); err != nil || !reflect.DeepEqual(got, vr) {
		t.Fatalf("vhost %#v (%v)", got, err)
	}
	tp := topicPermissionsRecord{Exchanges: []topicPermissionRecord{{Exchange: "amq.topic", Write: "w", Read: "r"}, {Exchange: "x", Write: "", Read: ".*"}}}
	if got, err := readTopicPermissionsRecord(throughBytes(t, tp.Table())); err != nil || !reflect.DeepEqual(got, tp) {
		t.Fatalf("topic permissions %#v (%v)", got, err)
	}
	if got, err := readPluginRecord(throughBytes(t, pluginRecord{Source: "shipped"}.Table())); err != nil || got.Source != "shipped" {
		t.Fatalf("plugin %#v (%v)", got, err)
	}
	s := settingsRecord{Settings: protocol.Table{"a": true}}
	if got, err := readSettingsRecord(throughBytes(t, s.Table())); err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("settings %#v (%v)", got, err)
	}
	if got, err := readClusterNameRecord(throughBytes(t, clusterNameRecord{Value: "c"}.Table())); err != nil || got.Value != "c" {
		t.Fatalf("cluster name %#v (%v)", got, err)
	}
	vp := vhostParameterRecord{Value: protocol.Table{"src-uri": "amqp://", "n": int64(2)}}
	if got, err := readVHostParameterRecord(throughBytes(t, vp.Table())); err != nil || !reflect.DeepEqual(got, vp) {
		t.Fatalf("vhost parameter %#v (%v)", got, err)
	}
	snap := metaSnapshot{
		Users:            []userRecord{{Name: "guest", PasswordHash: "x", Hashing: auth.SHA256, Tags: []string{"administrator"}}},
		Permissions:      []permissionRecord{{VHost: "/", User: "guest", Configure: ".*", Write: ".*", Read: ".*"}},
		TopicPermissions: []topicPermissionRecord{{VHost: "/", User: "guest", Exchange: "amq.topic", Write: "^a", Read: ".*"}},
		VHostLimits:      map[string]topology.Limits{"v": {"max-queues": 7}},
		VHostMeta:        map[string]topology.Metadata{"v": {Description: "d", Tags: []string{"x"}}},
		VHosts:           []string{"/", "v"},
		Policies: []setPolicy{{VHost: "/", Name: "p", Pattern: ".*", ApplyTo: policy.All, Definition: protocol.Table{"x": "y"}},
			{VHost: "/", Name: "p", Pattern: ".*", ApplyTo: policy.Queues, Definition: protocol.Table{"max-length": int64(1)}, Operator: true}},
		Topology:         map[string]protocol.Table{"/": {"exchanges": []any(nil), "queues": []any{protocol.Table{"name": "q"}}}},
		Plugins:          []string{"delayed_message"},
		ClusterName:      "c",
		GlobalParameters: map[string]any{"g": protocol.Table{"a": int64(1)}, "n": "x"},
		VHostParameters: []vhostParameterRecord{{VHost: "/", Component: "shovel", Name: "s", Value: protocol.Table{"src-uri": "amqp://"}},
			{VHost: "v", Component: "shovel", Name: "e", Value: protocol.Table{}}},
	}
	got, err := readMetaSnapshot(throughBytes(t, snap.Table()))
	if err != nil || !reflect.DeepEqual(got, snap) {
		t.Fatalf("snapshot read back %#v (%v)\nwrote %#v", got, err, snap)
	}
}

// What releases before versions wrote reads as what it meant.
func TestRecordsOfBeforeVersions(t *testing.T) {
	oldChanges := []struct {
		old  protocol.Table
		want definitionsChange
	}{
		{protocol.Table{"op": "put_user", "name": "u", "password_hash": "h", "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []any{"management"}},
			putUser{User: userRecord{Name: "u", PasswordHash: "h", Hashing: auth.SHA256, Tags: []string{"management"}}}},
		{protocol.Table{"op": "set_permission", "vhost": "/", "user": "u", "configure": "", "write": ".*", "read": ".*"},
			setPermission{Permission: permissionRecord{VHost: "/", User: "u", Write: ".*", Read: ".*"}}},
		{protocol.Table{"op": "set_policy", "vhost": "/", "name": "p", "pattern": "q", "apply_to": "queues", "priority": int64(2), "definition": protocol.Table{"a": int64(1)}},
			setPolicy{VHost: "/", Name: "p", Pattern: "q", ApplyTo: policy.Queues, Priority: 2, Definition: protocol.Table{"a": int64(1)}}},
		{protocol.Table{"op": "configure_plugin", "name": "n", "settings": protocol.Table{}}, configurePlugin{Name: "n"}},
		{protocol.Table{"op": "sync"}, syncChange{}},
		{protocol.Table{"op": "delete_queue", "vhost": "/", "name": "q", "id": int64(4)},
			topologyChange{VHost: "/", Command: topology.DeleteQueue{Name: "q", Incarnation: 4}}},
	}
	for _, c := range oldChanges {
		got, err := readChange(throughBytes(t, c.old))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%v read as %#v (%v), want %#v", c.old, got, err, c.want)
		}
	}
	// A user stored before Warren kept the algorithm: SHA-256.
	u, err := readUserRecord(protocol.Table{"password_hash": "h", "tags": []any{}})
	if err != nil || u.user("n").Hashing.Name() != string(auth.SHA256) || u.user("n").Name != "n" {
		t.Fatalf("an old user: %#v (%v)", u, err)
	}
	// A vhost record was an empty table; a snapshot had no version.
	if rec, err := readVHostRecord(protocol.Table{}); err != nil || rec.Limits != nil {
		t.Fatal(rec, err)
	}
	old := protocol.Table{"users": []any{protocol.Table{"name": "g", "password_hash": "p", "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []any{}}},
		"permissions": []any{protocol.Table{"vhost": "/", "user": "g", "configure": ".*", "write": ".*", "read": ".*"}},
		"vhosts":      []any{"/"}, "policies": []any{}, "topology": protocol.Table{"/": protocol.Table{}}, "plugins": []any{}, "cluster_name": "c"}
	snap, err := readMetaSnapshot(throughBytes(t, old))
	if err != nil || len(snap.Users) != 1 || snap.Users[0].Name != "g" || len(snap.Permissions) != 1 || snap.ClusterName != "c" ||
		snap.TopicPermissions != nil || snap.VHostParameters != nil ||
		len(snap.VHosts) != 1 || len(snap.Topology) != 1 {
		t.Fatalf("an old snapshot read as %#v (%v)", snap, err)
	}
}

// A change or record this node cannot read is refused, by name.
func TestRecordsRefuseWhatTheyCannotRead(t *testing.T) {
	later := changeTable(addVHost{Name: "v"})
	later[tablerec.VersionKey] = int64(recordVersion + 1)
	if _, err := readChange(later); err == nil || !strings.Contains(err.Error(), "add_vhost change of version 2") {
		t.Fatalf("a later version: %v", err)
	}
	if _, err := readChange(protocol.Table{"op": "set_topic_permission"}); err == nil || !strings.Contains(err.Error(), "set_topic_permission") {
		t.Fatalf("an unknown op: %v", err)
	}
	wrong := changeTable(setPolicy{VHost: "/", Name: "p", Pattern: "x"})
	wrong["priority"] = "high"
	if _, err := readChange(wrong); err == nil || !strings.Contains(err.Error(), `"priority"`) {
		t.Fatalf("a field of another type: %v", err)
	}
	if _, err := readPermissionRecord(protocol.Table{"configure": ".*", "wirte": ".*", "read": ".*"}); err == nil || !strings.Contains(err.Error(), `"write"`) {
		t.Fatalf("a misspelt field: %v", err)
	}
	if _, err := readChange(protocol.Table{"op": "set_vhost_parameter", "vhost": "/", "component": "c", "name": "n"}); err == nil || !strings.Contains(err.Error(), `"value"`) {
		t.Fatalf("a parameter without a value: %v", err)
	}
	if _, err := readVHostParameterRecord(protocol.Table{"value": "x"}); err == nil {
		t.Fatal("a parameter whose value is no table was read")
	}
	snap := metaSnapshot{Policies: []setPolicy{{VHost: "/", Name: "p"}}}.Table()
	snap["policies"] = []any{changeTable(addVHost{Name: "v"})}
	if _, err := readMetaSnapshot(snap); err == nil {
		t.Fatal("a snapshot whose policy is another change was read")
	}
}

// The decoders take any table without panicking, and what they accept
// encodes to a table they read back the same.
func FuzzReadChanges(f *testing.F) {
	for _, c := range someChanges() {
		b, err := protocol.AppendTable(nil, changeTable(c))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	b, err := protocol.AppendTable(nil, metaSnapshot{VHosts: []string{"/"}, Users: []userRecord{{Name: "u"}}}.Table())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	b, err = protocol.AppendTable(nil, topicPermissionsRecord{Exchanges: []topicPermissionRecord{{Exchange: "x", Write: "w", Read: "r"}}}.Table())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, _, err := protocol.DecodeTable(b)
		if err != nil {
			return
		}
		if c, err := readChange(tab); err == nil {
			again, err := readChange(throughBytes(t, changeTable(c)))
			if err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("change %#v read back as %#v (%v)", c, again, err)
			}
		}
		if s, err := readMetaSnapshot(tab); err == nil {
			again, err := readMetaSnapshot(throughBytes(t, s.Table()))
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Fatalf("snapshot %#v read back as %#v (%v)", s, again, err)
			}
		}
		if r, err := readTopicPermissionsRecord(tab); err == nil {
			again, err := readTopicPermissionsRecord(throughBytes(t, r.Table()))
			if err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("topic permissions %#v read back as %#v (%v)", r, again, err)
			}
		}
		if u, err := readUserRecord(tab); err == nil {
			again, err := readUserRecord(throughBytes(t, u.Table()))
			if err != nil || !reflect.DeepEqual(again, u) {
				t.Fatalf("user %#v read back as %#v (%v)", u, again, err)
			}
		}
	})
}
