package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// export_definitions from one broker and import_definitions into another
// make the second export the same document.
func TestDefinitionsRoundTrip(t *testing.T) {
	from, fromURL := newBroker(t)
	for _, s := range [][]string{
		{"add_vhost", "orders"},
		{"add_user", "alice", "s3cret"},
		{"set_user_tags", "alice", "administrator", "monitoring"},
		{"set_permissions", "-p", "orders", "alice", "^alice-.*", ".*", ".*"},
		{"set_policy", "-p", "orders", "--apply-to", "queues", "--priority", "3", "cap", "^q", `{"max-length": 5}`},
	} {
		if _, err := ctl(t, fromURL, s...); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
	}
	v, _ := from.VHost("orders")
	if _, err := v.DeclareExchange(exchange.Definition{Name: "in", Type: "headers", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "q1", Durable: true, Args: protocol.Table{"x-message-ttl": int64(500)}}, false); err != nil {
		t.Fatal(err)
	}
	if err := v.Bind("in", exchange.Destination{Kind: exchange.ToQueue, Name: "q1"}, "", protocol.Table{"x-match": "any", "a": int64(1)}, nil); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "defs.json")
	if _, err := ctl(t, fromURL, "export_definitions", file); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the export (it holds password hashes) is not private: %v %v", st.Mode(), err)
	}
	_, toURL := newBroker(t)
	out, err := ctl(t, toURL, "import_definitions", file)
	if err != nil || !strings.Contains(out, "imported") {
		t.Fatalf("import_definitions: %v %s", err, out)
	}
	stdout, err := ctl(t, toURL, "export_definitions", "-")
	if err != nil {
		t.Fatal(err)
	}
	exported, _ := os.ReadFile(file)
	var a, b map[string]any
	if err := json.Unmarshal(exported, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(stdout), &b); err != nil {
		t.Fatalf("export to stdout is not JSON: %v\n%s", err, stdout)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("the imported broker exports another document:\nfrom: %s\nto:   %s", exported, stdout)
	}
	// Alice logs in to the second broker with her password.
	if _, err := ctl(t, toURL, "--user", "alice", "--password", "s3cret", "list_queues", "-p", "orders"); err != nil {
		t.Fatalf("alice on the imported broker: %v", err)
	}
}

func TestImportDefinitionsErrors(t *testing.T) {
	_, url := newBroker(t)
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "x.json")
	_ = os.WriteFile(notJSON, []byte("{nope"), 0o600)
	if _, err := ctl(t, url, "import_definitions", notJSON); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("not JSON: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"queues": [{"name": "q", "vhost": "/", "durable": "maybe"}]}`), 0o600)
	if _, err := ctl(t, url, "import_definitions", bad); err == nil || !strings.Contains(err.Error(), "queue 'q' in vhost '/': durable") || !strings.Contains(err.Error(), "400") {
		t.Fatalf("bad value: %v", err)
	}
	if _, err := ctl(t, url, "import_definitions", filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("a missing file was imported")
	}
	if _, err := ctl(t, url, "export_definitions"); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("no file: %v", err)
	}
}
