package queuetype_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// namedType is a Type that is only a name: the registry asks no more.
type namedType struct {
	queuetype.Type
	name string
}

func (t namedType) Name() string { return t.name }

// A declaration finds its type by the x-queue-type it names (classic when
// it names none); a replicated one that names none is the untyped one,
// as records from before a second replicated type were written.
func TestTypesFindTheDeclaredType(t *testing.T) {
	ts := queuetype.NewTypes("quorum", namedType{name: queue.Classic}, namedType{name: "quorum"}, namedType{name: "stream"})
	typed := func(name string) protocol.Table { return protocol.Table{"x-queue-type": name} }
	cases := []struct {
		what     string
		def      topology.QueueDef
		restored string // "" for none
		asked    string
	}{
		{"no type named", topology.QueueDef{Name: "q"}, queue.Classic, queue.Classic},
		{"a stream", topology.QueueDef{Args: typed("stream")}, "stream", "stream"},
		{"replicated, untyped", topology.QueueDef{Members: []string{"n1"}}, "quorum", queue.Classic},
		{"replicated stream", topology.QueueDef{Members: []string{"n1"}, Args: typed("stream")}, "stream", "stream"},
		{"unknown type", topology.QueueDef{Args: typed("x-mine")}, "", ""},
	}
	name := func(qt queuetype.Type, ok bool) string {
		if !ok {
			return ""
		}
		return qt.Name()
	}
	for _, c := range cases {
		if got := name(ts.Restored(c.def)); got != c.restored {
			t.Errorf("%s: Restored = %q, want %q", c.what, got, c.restored)
		}
		if got := name(ts.Asked(c.def)); got != c.asked {
			t.Errorf("%s: Asked = %q, want %q", c.what, got, c.asked)
		}
	}
	var none *queuetype.Types
	if _, ok := none.Restored(topology.QueueDef{Members: []string{"n1"}}); ok {
		t.Error("a vhost without types found one")
	}
}

// typePackages implement the contract; none may import core/vhost, or
// the contract would be back inside the vhost.
var typePackages = []string{"classicqueue", "quorumqueue", "streamqueue", "membership", "queuetype"}

func TestTypesDoNotImportTheVHost(t *testing.T) {
	for _, p := range typePackages {
		out, err := exec.Command("go", "list", "-deps", "github.com/warrenmq/warren/core/"+p).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "github.com/warrenmq/warren/core/vhost" {
				t.Errorf("core/%s imports core/vhost: a queue type reaches the vhost only through queuetype.Host", p)
			}
		}
	}
}
