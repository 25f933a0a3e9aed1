package broker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// testBroker builds a broker on dir without listeners; the test ends it.
func testBroker(t testing.TB, dir string, tweak ...func(*config.Config)) *Broker {
	t.Helper()
	b, err := tryBroker(t, dir, tweak...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tryBroker(t testing.TB, dir string, tweak ...func(*config.Config)) (*Broker, error) {
	t.Helper()
	cfg := config.Default()
	cfg.AMQP.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Stream.Listen = nil
	cfg.MQTT.Listen = nil
	cfg.Admin.Listen = ""
	cfg.Storage.DataDir = dir
	for _, f := range tweak {
		f(&cfg)
	}
	b, err := New(cfg, zerolog.New(io.Discard))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	return b, nil
}

// A document in RabbitMQ's shapes, with the variants its files come in.
const sampleDefs = `{
  "rabbit_version": "3.10.8",
  "users": [
    {"name": "ann", "password_hash": "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR", "tags": "administrator, monitoring", "limits": {}},
    {"name": "erin", "password_hash": "AQIDBLio9SzvEssMq/uuyJgHqD7fLrNCrOuD6XSfiO8HIlZEkTuNq9GnKc+Br8spkYiUK9z0egVQ2dCetKJi6un6XGM=",
     "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": ["management"]},
    {"name": "plain", "password": "plain-pw", "tags": []},
    {"name": "nopass", "password_hash": "", "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []}
  ],
  "vhosts": [{"name": "v1", "description": "ignored", "metadata": {"tags": []}}],
  "permissions": [{"user": "ann", "vhost": "v1", "configure": ".*", "write": ".*", "read": ".*"}],
  "topic_permissions": [{"user": "ann", "vhost": "v1", "exchange": "amq.topic", "write": ".*", "read": ".*"}],
  "parameters": [{"vhost": "v1", "component": "vhost-limits", "name": "limits", "value": {"max-queues": 100}}],
  "global_parameters": [{"name": "cluster_name", "value": "rabbit@x"}],
  "policies": [{"vhost": "v1", "name": "ttl", "pattern": "^q", "apply-to": "queues", "definition": {"message-ttl": 1000}, "priority": 2}],
  "exchanges": [
    {"name": "x1", "vhost": "v1", "type": "topic", "durable": true, "auto_delete": false, "internal": false, "arguments": {"alternate-exchange": "ae"}},
    {"name": "amq.skipped", "vhost": "v1", "type": "direct", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}
  ],
  "queues": [{"name": "q1", "vhost": "v1", "durable": true, "auto_delete": false, "arguments": {"x-max-length": 10}}],
  "bindings": [
    {"source": "x1", "vhost": "v1", "destination": "q1", "destination_type": "queue", "routing_key": "a.#", "arguments": {}},
    {"source": "amq.fanout", "vhost": "v1", "destination": "x1", "destination_type": "exchange", "routing_key": "", "arguments": {"k": 1}}
  ],
  "frobnicators": []
}`

func TestImportAppliesEverySection(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir)
	if err := b.ImportDefinitions(context.Background(), []byte(sampleDefs), ""); err != nil {
		t.Fatal(err)
	}
	check := func(b *Broker) {
		t.Helper()
		ann, ok := b.Users().User("ann")
		if !ok || strings.Join(ann.Tags, ",") != "administrator,monitoring" {
			t.Fatalf("ann: %+v", ann)
		}
		for user, pw := range map[string]string{"ann": "test12", "erin": "erin-pw", "plain": "plain-pw"} {
			if _, err := b.Users().Login(user, pw, true); err != nil {
				t.Errorf("%s cannot log in: %v", user, err)
			}
		}
		if _, err := b.Users().Login("nopass", "", true); err == nil {
			t.Error("a user without a password logged in")
		}
		if p, ok := b.Users().Permission("v1", "ann"); !ok || !p.CanRead("q1") {
			t.Error("ann's permission is missing")
		}
		v, ok := b.VHost("v1")
		if !ok {
			t.Fatal("no vhost v1")
		}
		if x, err := v.Exchange("x1"); err != nil || x.Type != "topic" || x.Alternate() != "ae" {
			t.Errorf("x1: %v", err)
		}
		if _, err := v.Exchange("amq.skipped"); err == nil {
			t.Error("an amq.* exchange was imported")
		}
		if _, err := v.Queue("q1", nil); err != nil {
			t.Error(err)
		}
		if n := len(v.Bindings()); n != 2 {
			t.Errorf("%d bindings, want 2", n)
		}
		if len(v.Policies()) != 1 {
			t.Error("policy missing")
		}
		// cluster_name is applied, stored, and exported again.
		if got := b.ClusterName(); got != "rabbit@x" {
			t.Errorf("cluster name %q, want rabbit@x", got)
		}
		if gp := b.ExportDefinitions().GlobalParameters; len(gp) != 1 || gp[0] != (GlobalParameter{Name: "cluster_name", Value: "rabbit@x"}) {
			t.Errorf("exported global parameters: %+v", gp)
		}
	}
	check(b)
	// Again: the same definitions are a no-op.
	if err := b.ImportDefinitions(context.Background(), []byte(sampleDefs), ""); err != nil {
		t.Fatalf("importing again: %v", err)
	}
	check(b)
	// The hashing algorithm is stored with the user.
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	check(testBroker(t, dir))
}

func TestImportOldFileMeansMD5(t *testing.T) {
	b := testBroker(t, t.TempDir())
	h := auth.MD5.Hash("old-pw")
	doc := `{"rabbit_version": "3.5.7", "users": [{"name": "old", "password_hash": "` + h + `", "tags": ""}]}`
	if err := b.ImportDefinitions(context.Background(), []byte(doc), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Users().Login("old", "old-pw", true); err != nil {
		t.Fatalf("a user of a RabbitMQ 3.5 file cannot log in: %v", err)
	}
	if u, _ := b.Users().User("old"); u.Hashing != auth.MD5 {
		t.Fatalf("hashing %q", u.Hashing)
	}
}

func TestImportUpdatesUsersAndRefusesInequivalentEntities(t *testing.T) {
	b := testBroker(t, t.TempDir())
	if err := b.ImportDefinitions(context.Background(), []byte(sampleDefs), ""); err != nil {
		t.Fatal(err)
	}
	newHash := auth.SHA512.Hash("changed")
	doc := `{"users": [{"name": "ann", "password_hash": "` + newHash + `", "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": ["management"]}]}`
	if err := b.ImportDefinitions(context.Background(), []byte(doc), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Users().Login("ann", "changed", true); err != nil {
		t.Fatalf("ann's password was not updated: %v", err)
	}
	for _, c := range []struct{ doc, entity, field string }{
		{`{"exchanges": [{"name": "x1", "vhost": "v1", "type": "direct", "durable": true}]}`, "exchange 'x1' in vhost 'v1'", "type"},
		{`{"queues": [{"name": "q1", "vhost": "v1", "durable": false}]}`, "queue 'q1' in vhost 'v1'", "durable"},
		{`{"queues": [{"name": "q1", "vhost": "v1", "durable": true, "arguments": {"x-max-length": 11}}]}`, "queue 'q1' in vhost 'v1'", "x-max-length"},
	} {
		err := b.ImportDefinitions(context.Background(), []byte(c.doc), "")
		if !errors.Is(err, ErrInvalidDefinitions) || !strings.Contains(err.Error(), c.entity) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v, want an error naming %s and %s", c.doc, err, c.entity, c.field)
		}
	}
}

// Each bad value is reported with its entity and field, and a document
// with one changes nothing, even where the rest of it is good.
func TestImportRefusesBadValuesBeforeApplyingAny(t *testing.T) {
	good := `{"name": "fresh", "vhost": "v1", "durable": true}`
	cases := []struct{ section, entity, want string }{
		{`"users": [{"name": "u", "password_hash": "AAAA", "hashing_algorithm": "rabbit_password_hashing_sha1"}]`, "user 'u'", "hashing_algorithm"},
		{`"users": [{"name": "u", "password_hash": "c2hvcnQ="}]`, "user 'u'", "password_hash"},
		{`"users": [{"name": "u", "password_hash": "", "tags": 7}]`, "user 'u'", "tags"},
		{`"users": [{"password_hash": ""}]`, "users[0]", "name"},
		{`"vhosts": [{"name": 3}]`, "vhosts[0]", "name"},
		{`"vhosts": [{"name": "v\u0000x"}]`, "vhost 'v", `name: vhost name "v\x00x" holds a control character`},
		{`"users": [{"name": "admin\u202e", "password_hash": ""}]`, "user 'admin", `name: user name "admin\u202e" holds a bidirectional formatting character`},
		{`"exchanges": [{"name": "e\te", "vhost": "v1", "type": "direct", "durable": true}]`, "in vhost 'v1'", `name: in vhost 'v1', exchange name "e\te" holds a control character`},
		{`"queues": [{"name": "q\u2066", "vhost": "v1", "durable": true}]`, "in vhost 'v1'", `name: in vhost 'v1', queue name "q\u2066" holds a bidirectional formatting character`},
		{`"permissions": [{"user": "ghost", "vhost": "v1", "configure": ".*", "write": ".*", "read": ".*"}]`, "permission of user 'ghost' in vhost 'v1'", "user"},
		{`"permissions": [{"user": "ann", "vhost": "v1", "configure": "(", "write": ".*", "read": ".*"}]`, "permission of user 'ann' in vhost 'v1'", "configure"},
		{`"policies": [{"vhost": "v1", "name": "p", "pattern": ".*", "definition": {"max-lenght": 1}}]`, "policy 'p' in vhost 'v1'", "max-lenght"},
		{`"policies": [{"vhost": "v1", "name": "p", "pattern": ".*", "apply-to": "things", "definition": {"max-length": 1}}]`, "policy 'p' in vhost 'v1'", "apply-to"},
		{`"policies": [{"vhost": "v1", "name": "p", "pattern": ".*", "priority": "high", "definition": {"max-length": 1}}]`, "policy 'p' in vhost 'v1'", "priority"},
		{`"operator_policies": [{"vhost": "v1", "name": "op", "pattern": ".*", "definition": {"dead-letter-exchange": "x"}}]`, "operator policy 'op' in vhost 'v1'", "dead-letter-exchange"},
		{`"exchanges": [{"name": "e", "vhost": "v1", "type": "nope", "durable": true}]`, "exchange 'e' in vhost 'v1'", "type"},
		{`"exchanges": [{"name": "e", "vhost": "v1", "type": "direct", "durable": "yes"}]`, "exchange 'e' in vhost 'v1'", "durable"},
		{`"exchanges": [{"name": "e", "vhost": "nowhere", "type": "direct", "durable": true}]`, "exchange 'e' in vhost 'nowhere'", "vhost"},
		{`"queues": [{"name": "q", "vhost": "v1", "durable": true, "arguments": {"x-max-length": "many"}}]`, "queue 'q' in vhost 'v1'", "x-max-length"},
		{`"queues": [{"name": "q", "vhost": "v1", "durable": true, "arguments": {"x-queue-type": "bogus"}}]`, "queue 'q' in vhost 'v1'", "x-queue-type"},
		{`"queues": [{"name": "q", "vhost": "v1", "durable": true, "arguments": {"x-queue-type": "stream", "x-max-age": "0s"}}]`, "queue 'q' in vhost 'v1'", "invalid_max_age"},
		{`"queues": [{"name": "q", "vhost": "v1", "durable": true, "arguments": []}, {"name": "q", "vhost": "v1", "durable": false}]`, "queue 'q' in vhost 'v1'", "twice"},
		{`"queues": [{"name": "q", "vhost": "v1", "durable": true, "arguments": "x"}]`, "queue 'q' in vhost 'v1'", "arguments"},
		{`"bindings": [{"source": "x1", "vhost": "v1", "destination": "nope", "destination_type": "queue", "routing_key": ""}]`, "binding from exchange 'x1' to queue 'nope' in vhost 'v1'", "destination"},
		{`"bindings": [{"source": "nope", "vhost": "v1", "destination": "q1", "destination_type": "queue", "routing_key": ""}]`, "binding from exchange 'nope' to queue 'q1' in vhost 'v1'", "source"},
		{`"bindings": [{"source": "x1", "vhost": "v1", "destination": "q1", "destination_type": "thing", "routing_key": ""}]`, "in vhost 'v1'", "destination_type"},
		{`"bindings": {}`, "bindings", "must be a list"},
		{`"parameters": [{"vhost": "v1", "component": "no-such-component", "name": "u1", "value": {"uri": "amqp://"}}]`, "parameter 'u1' of component 'no-such-component' in vhost 'v1'", "no component 'no-such-component'"},
		{`"parameters": [{"vhost": "v1", "component": "shovel", "name": "s1", "value": {"src-uri": "amqp://"}}]`, "parameter 's1' of component 'shovel' in vhost 'v1'", `Key "dest-uri" not found in shovel`},
		{`"parameters": [{"vhost": "v1", "component": "operator_policy", "name": "op", "value": {"pattern": ".*", "definition": {"alternate-exchange": "x"}}}]`, "operator policy 'op' in vhost 'v1'", "alternate-exchange"},
		{`"parameters": [{"vhost": "v1", "component": "operator_policy", "name": "op", "value": 3}]`, "operator policy 'op' in vhost 'v1'", "value"},
		{`"vhosts": [{"name": "new-vhost", "limits": {"max-chairs": 3}}]`, "vhost 'new-vhost'", "max-chairs"},
		{`"global_parameters": [{"name": "cluster_name", "value": ""}]`, "global_parameters[0]", "value"},
		{`"global_parameters": [{"name": "cluster_name", "value": 7}]`, "global_parameters[0]", "value"},
	}
	for _, c := range cases {
		b := testBroker(t, t.TempDir())
		if err := b.ImportDefinitions(context.Background(), []byte(sampleDefs), ""); err != nil {
			t.Fatal(err)
		}
		before, _ := json.Marshal(b.ExportDefinitions())
		doc := `{"vhosts": [{"name": "new-vhost"}], "queues": [` + good + `], ` + c.section + `}`
		if strings.HasPrefix(c.section, `"queues"`) {
			doc = `{"vhosts": [{"name": "new-vhost"}], ` + c.section + `}`
		}
		err := b.ImportDefinitions(context.Background(), []byte(doc), "")
		var inv *InvalidError
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), c.entity) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant an error naming %q and %q", c.section, err, c.entity, c.want)
		}
		after, _ := json.Marshal(b.ExportDefinitions())
		if string(before) != string(after) {
			t.Errorf("%s: a refused document changed the broker", c.section)
		}
	}
	b := testBroker(t, t.TempDir())
	if err := b.ImportDefinitions(context.Background(), []byte(" \n"), ""); err != nil {
		t.Errorf("an empty document (RabbitMQ: 204): %v", err)
	}
	for _, doc := range []string{`{nope`, `[]`, `"x"`, `{} {}`} {
		if err := b.ImportDefinitions(context.Background(), []byte(doc), ""); !errors.Is(err, ErrInvalidDefinitions) || !strings.Contains(err.Error(), "document") {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

func TestVHostScopedImportAndExport(t *testing.T) {
	b := testBroker(t, t.TempDir())
	if err := b.ImportDefinitions(context.Background(), []byte(sampleDefs), ""); err != nil {
		t.Fatal(err)
	}
	part, err := b.ExportVHostDefinitions("v1")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(part)
	if strings.Contains(string(doc), `"vhost":"v1","durable"`) || !strings.Contains(string(doc), `"name":"q1","durable"`) {
		t.Fatalf("a vhost's export names the vhost in its queues: %s", doc)
	}
	if _, err := b.AddVHost("v2"); err != nil {
		t.Fatal(err)
	}
	// Users and vhosts are ignored; everything lands in v2.
	withUsers := strings.Replace(string(doc), `{`, `{"users": [{"name": "sneaky", "password": "x"}], `, 1)
	if err := b.ImportDefinitions(context.Background(), []byte(withUsers), "v2"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Users().User("sneaky"); ok {
		t.Fatal("a vhost's import created a user")
	}
	again, _ := b.ExportVHostDefinitions("v2")
	part.Policies[0].VHost = "v2"
	want, _ := json.Marshal(part)
	got, _ := json.Marshal(again)
	if string(got) != string(want) {
		t.Fatalf("v2 is not a copy of v1:\n got %s\nwant %s", got, want)
	}
	if err := b.ImportDefinitions(context.Background(), doc, "nowhere"); err == nil || !strings.Contains(err.Error(), "no vhost 'nowhere'") {
		t.Fatalf("import into a missing vhost: %v", err)
	}
}

func TestExportLeavesOutWhatCannotBeImported(t *testing.T) {
	b := testBroker(t, t.TempDir())
	v, _ := b.VHost("/")
	owner := new(int)
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "mine", Exclusive: true, Owner: owner}, false); err != nil {
		t.Fatal(err)
	}
	if err := v.Bind("amq.direct", exchange.Destination{Kind: exchange.ToQueue, Name: "mine"}, "k", nil, owner); err != nil {
		t.Fatal(err)
	}
	d := b.ExportDefinitions()
	if len(d.Queues) != 0 || len(d.Bindings) != 0 || len(d.Exchanges) != 0 {
		t.Fatalf("exported an exclusive queue, its binding or a built-in exchange: %+v", d)
	}
	if d.RabbitVersion != DefinitionsFormat || d.ProductName != "Warren" || d.Users[0].HashingAlgorithm != string(auth.SHA256) {
		t.Fatalf("header or user: %+v", d)
	}
}

func TestLoadFileAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "defs.json")
	if err := os.WriteFile(file, []byte(sampleDefs), 0o600); err != nil {
		t.Fatal(err)
	}
	b := testBroker(t, t.TempDir(), func(c *config.Config) { c.Definitions.LoadFile = file })
	if _, err := b.Users().Login("erin", "erin-pw", true); err != nil {
		t.Fatalf("load_file not applied: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"queues": [{"name": "q", "vhost": "/", "durable": "maybe"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err := tryBroker(t, dir, func(c *config.Config) { c.Definitions.LoadFile = bad })
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "queue 'q'") || !strings.Contains(err.Error(), "durable") {
		t.Fatalf("bad file: %v", err)
	}
	// The refused start released the data directory.
	testBroker(t, dir)
	_, err = tryBroker(t, t.TempDir(), func(c *config.Config) { c.Definitions.LoadFile = bad + ".missing" })
	if err == nil || !strings.Contains(err.Error(), bad+".missing") {
		t.Fatalf("missing file: %v", err)
	}
}

// Operator policies move both ways through definitions, apart from the
// policies of the same name: exported as RabbitMQ 3.10.8 exports them
// (parameters of component operator_policy), read in that form and in the
// operator_policies section earlier Warren exports had.
func TestOperatorPoliciesInDefinitions(t *testing.T) {
	for _, form := range []string{
		`"parameters": [{"vhost": "v", "component": "operator_policy", "name": "cap",
			"value": {"pattern": "^q", "apply-to": "queues", "definition": {"max-length": 10}, "priority": 1}}]`,
		`"operator_policies": [{"vhost": "v", "name": "cap", "pattern": "^q", "apply-to": "queues", "definition": {"max-length": 10}, "priority": 1}]`,
	} {
		b := testBroker(t, t.TempDir())
		doc := `{"vhosts": [{"name": "v"}],
		"policies": [{"vhost": "v", "name": "cap", "pattern": "^q", "apply-to": "queues", "definition": {"max-length": 20}, "priority": 0}],
		` + form + `}`
		if err := b.ImportDefinitions(context.Background(), []byte(doc), ""); err != nil {
			t.Fatal(err)
		}
		v, _ := b.VHost("v")
		if ops, ps := v.OperatorPolicies(), v.Policies(); len(ops) != 1 || !ops[0].Operator || ops[0].Priority != 1 || len(ps) != 1 || ps[0].Operator {
			t.Fatalf("operator policies %+v, policies %+v", ops, ps)
		}
		out, _ := json.Marshal(b.ExportDefinitions())
		var back struct{ Parameters []ParameterDefinition }
		if err := json.Unmarshal(out, &back); err != nil || len(back.Parameters) != 1 || back.Parameters[0].Component != "operator_policy" ||
			back.Parameters[0].Name != "cap" || back.Parameters[0].VHost != "v" ||
			back.Parameters[0].Value.(map[string]any)["definition"].(map[string]any)["max-length"] != float64(10) {
			t.Fatalf("exported %s", out)
		}
		if err := b.ClearOperatorPolicy("v", "cap"); err != nil {
			t.Fatal(err)
		}
		if out, _ := json.Marshal(b.ExportDefinitions()); strings.Contains(string(out), "operator_polic") {
			t.Fatalf("an export without operator policies names them: %s", out)
		}
	}
}

// Global parameters beside cluster_name are kept as they come (any JSON
// value), moved by definitions and kept across a restart; RabbitMQ's
// internal_cluster_id, its own cluster's, is not taken.
func TestGlobalParameters(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir)
	doc := `{"global_parameters": [{"name": "cluster_name", "value": "c1"}, {"name": "internal_cluster_id", "value": "rabbitmq-cluster-id-x"},
		{"name": "mine", "value": {"a": [1, "b"], "c": true}}]}`
	if err := b.ImportDefinitions(context.Background(), []byte(doc), ""); err != nil {
		t.Fatal(err)
	}
	if got := b.GlobalParameters(); len(got) != 1 || got["mine"] == nil {
		t.Fatalf("global parameters %v", got)
	}
	export := func(b *Broker) string {
		out, _ := json.Marshal(b.ExportDefinitions().GlobalParameters)
		return string(out)
	}
	want := `[{"name":"cluster_name","value":"c1"},{"name":"mine","value":{"a":[1,"b"],"c":true}}]`
	if got := export(b); got != want {
		t.Fatalf("exported %s, want %s", got, want)
	}
	if err := b.SetGlobalParameter("other", int64(7)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetGlobalParameter(ParamClusterName, int64(7)); err == nil {
		t.Fatal("a cluster name that is a number was taken")
	}
	if err := b.SetGlobalParameter(pluginSettingsParam("x"), "v"); err == nil {
		t.Fatal("a global parameter took the name of a plugin's settings")
	}
	// A plugin's settings share the store's keyspace and are no global
	// parameter (a restart once read them as one and refused to start).
	if err := b.store.PutMeta(storage.KindParameter, "", pluginSettingsParam("x"), settingsRecord{Settings: protocol.Table{"k": "v"}}.Table()); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = testBroker(t, dir)
	if got, want := export(b), `[{"name":"cluster_name","value":"c1"},{"name":"mine","value":{"a":[1,"b"],"c":true}},{"name":"other","value":7}]`; got != want {
		t.Fatalf("after a restart %s, want %s", got, want)
	}
	for _, name := range []string{"mine", ParamClusterName} {
		if err := b.ClearGlobalParameter(name); err != nil {
			t.Fatal(err)
		}
	}
	if b.ClusterName() != b.NodeName() {
		t.Fatalf("cluster name %q after clearing it", b.ClusterName())
	}
	if got, want := export(b), `[{"name":"other","value":7}]`; got != want {
		t.Fatalf("after clearing %s, want %s", got, want)
	}
}

// node_name names the node; without it the name is warren@HOST.
func TestNodeNameSetting(t *testing.T) {
	if n := testBroker(t, t.TempDir()).NodeName(); !strings.HasPrefix(n, "warren@") {
		t.Fatalf("default node name %q", n)
	}
	b := testBroker(t, t.TempDir(), func(c *config.Config) { c.NodeName = "rabbit@box" })
	if b.NodeName() != "rabbit@box" || b.ClusterName() != "rabbit@box" {
		t.Fatalf("node %q, cluster %q", b.NodeName(), b.ClusterName())
	}
}
