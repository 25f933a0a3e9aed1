package broker

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// root is a node's default vhost.
func root(t *testing.T, b *Broker) *vhost.VHost {
	t.Helper()
	v, ok := b.VHost("/")
	if !ok {
		t.Fatal("no vhost /")
	}
	return v
}

// publishVia publishes body to exchange x on node b and waits until every
// queue that took it has it (forwarded, and stored when persistent).
func publishVia(t *testing.T, b *Broker, x, key, body string, persistent bool) vhost.Outcome {
	t.Helper()
	v := root(t, b)
	ex, err := v.Exchange(x)
	if err != nil {
		t.Fatal(err)
	}
	var props []byte
	var flags uint16
	if persistent {
		flags, props = protocol.FlagDeliveryMode, []byte{2}
	}
	m, err := message.New(x, key, flags, props, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	out, err := v.Publish(ex, m, &vhost.RouteBuffers{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Forwarded != nil {
		done := make(chan error, 1)
		out.Forwarded.Then(func(err error) { done <- err })
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("forwarding %q: %v", body, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("forwarding %q: no answer", body)
		}
	}
	return out
}

func code(err error) uint16 {
	if e := reply.As(err); e != nil {
		return e.Code
	}
	return 0
}

// TestClusterTopology: exchanges, queues and bindings declared on any
// node are on every node; a queue lives on the node that declared it, and
// what is published on another reaches it, once per node.
func TestClusterTopology(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	v1, v2, v3 := root(t, n1.Broker), root(t, n2.Broker), root(t, n3.Broker)

	if _, err := v1.DeclareExchange(exchange.Definition{Name: "orders", Type: "direct", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	// Answered once applied here; the others follow.
	if _, err := v1.Exchange("orders"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"on-n2", "also-on-n2"} {
		if _, err := v2.Declare(topology.QueueDef{Name: q, Durable: true}, false); err != nil {
			t.Fatal(err)
		}
	}
	d, err := v3.Declare(topology.QueueDef{Name: "on-n3", Durable: true}, false)
	if err != nil || d.Home() != "" || !d.Created {
		t.Fatalf("declare on n3: %+v, %v", d, err)
	}
	for _, q := range []string{"on-n2", "also-on-n2", "on-n3"} {
		if err := v1.Bind("orders", exchange.Destination{Kind: exchange.ToQueue, Name: q}, "k", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, nodes, "bindings", func(b *Broker) bool {
		v, _ := b.VHost("/")
		return len(v.Bindings()) == 3 && v.HasQueue("on-n2") && v.HasQueue("on-n3")
	})

	// A redeclare anywhere is compared with the queue, without a round.
	_, err = v1.Declare(topology.QueueDef{Name: "on-n2", Durable: false}, false)
	if code(err) != protocol.PreconditionFailed || !strings.Contains(err.Error(), "inequivalent arg 'durable'") {
		t.Fatalf("inequivalent redeclare through n1: %v", err)
	}
	d, err = v1.Declare(topology.QueueDef{Name: "on-n2", Durable: true}, true)
	if err != nil || d.Home() != "n2" {
		t.Fatalf("passive declare through n1: %+v, %v", d, err)
	}

	// Published on n1: n2 gets one forward for its two queues, n3 one.
	out := publishVia(t, n1.Broker, "orders", "k", "transient", false)
	if !out.Routed() || out.Queues != 0 {
		t.Fatalf("outcome %+v", out)
	}
	publishVia(t, n3.Broker, "orders", "k", "persistent", true)
	for _, c := range []struct {
		v    *vhost.VHost
		name string
	}{{v2, "on-n2"}, {v2, "also-on-n2"}, {v3, "on-n3"}} {
		info, ok := c.v.QueueInfo(c.name)
		if !ok || info.Ready != 2 {
			t.Fatalf("%s holds %+v", c.name, info.Stats)
		}
	}
	// The counts of a remote queue come from its home.
	if ready, _, err := v1.Counts(d); err != nil || ready != 2 {
		t.Fatalf("counts through n1: %d, %v", ready, err)
	}
	if n, err := v1.PurgeQueue("also-on-n2", nil); err != nil || n != 2 {
		t.Fatalf("purge through n1: %d, %v", n, err)
	}
	_, err = v3.DeleteQueue("on-n2", nil, false, true)
	if code(err) != protocol.PreconditionFailed {
		t.Fatalf("if-empty delete of a queue with messages through n3: %v", err)
	}
	if n, err := v3.DeleteQueue("on-n2", nil, false, false); err != nil || n != 2 {
		t.Fatalf("delete through n3: %d, %v", n, err)
	}
	eventually(t, nodes, "on-n2 gone with its binding", func(b *Broker) bool {
		v, _ := b.VHost("/")
		return !v.HasQueue("on-n2") && len(v.Bindings()) == 2
	})

	// An exclusive queue is its connection's, on its node; once bound,
	// messages published elsewhere reach it, and it goes when its
	// connection does.
	owner := new(int)
	ex, err := v1.Declare(topology.QueueDef{Name: "mine", Exclusive: true, Owner: owner}, false)
	if err != nil || ex.Home() != "" || ex.Type() != "classic" {
		t.Fatal(err)
	}
	if err := v1.Bind("orders", exchange.Destination{Kind: exchange.ToQueue, Name: "mine"}, "k", nil, owner); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "the exclusive queue's binding", func(b *Broker) bool {
		v, _ := b.VHost("/")
		return len(v.Bindings()) == 3
	})
	if _, err := v2.Declare(topology.QueueDef{Name: "mine"}, false); code(err) != protocol.ResourceLocked {
		t.Fatalf("declaring another node's exclusive queue: %v", err)
	}
	publishVia(t, n2.Broker, "orders", "k", "to-the-exclusive-queue", false)
	if st, _, _ := ex.Queue().Figures(); st.Ready != 1 {
		t.Fatalf("exclusive queue holds %+v", st)
	}
	v1.OwnerGone(owner)
	eventually(t, nodes, "the exclusive queue gone", func(b *Broker) bool {
		v, _ := b.VHost("/")
		return !v.HasQueue("mine") && len(v.Bindings()) == 2
	})

	// An auto-delete exchange goes everywhere with its last binding.
	if _, err := v2.DeclareExchange(exchange.Definition{Name: "temp", Type: "fanout", AutoDelete: true}, false); err != nil {
		t.Fatal(err)
	}
	dest := exchange.Destination{Kind: exchange.ToQueue, Name: "on-n3"}
	if err := v1.Bind("temp", dest, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := v3.Unbind("temp", dest, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "auto-delete exchange gone", func(b *Broker) bool {
		v, _ := b.VHost("/")
		_, err := v.Exchange("temp")
		return err != nil
	})

	// A restarted node has what it had, and what changed meanwhile; a
	// transient queue of its own did not survive, anywhere.
	if _, err := v3.Declare(topology.QueueDef{Name: "transient-on-n3"}, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "the transient queue", func(b *Broker) bool { v, _ := b.VHost("/"); return v.HasQueue("transient-on-n3") })
	n3.stop(t)
	if _, err := v1.Declare(topology.QueueDef{Name: "while-n3-was-down"}, false); err != nil {
		t.Fatal(err)
	}
	if err := v2.Bind("orders", exchange.Destination{Kind: exchange.ToQueue, Name: "while-n3-was-down"}, "k", nil, nil); err != nil {
		t.Fatal(err)
	}
	// The queue's home is down: its queue cannot be declared or used.
	eventually(t, nodes[:1], "n3 seen down", func(b *Broker) bool { return !b.Cluster().Alive("n3") })
	_, err = v1.Declare(topology.QueueDef{Name: "on-n3", Durable: true}, false)
	if code(err) != protocol.NotFound || !strings.Contains(err.Error(), "home node 'n3' of durable queue 'on-n3'") {
		t.Fatalf("declare of a queue whose node is down: %v", err)
	}
	_, err = v1.Declare(topology.QueueDef{Name: "on-n3"}, true)
	if code(err) != protocol.NotFound || !strings.Contains(err.Error(), "is down or inaccessible") {
		t.Fatalf("passive declare of a queue whose node is down: %v", err)
	}
	n3.start(t)
	v3 = root(t, n3.Broker)
	eventually(t, nodes, "caught up", func(b *Broker) bool {
		v, _ := b.VHost("/")
		return v.HasQueue("while-n3-was-down") && len(v.Bindings()) == 3
	})
	eventually(t, nodes, "the transient queue gone", func(b *Broker) bool { v, _ := b.VHost("/"); return !v.HasQueue("transient-on-n3") })
	if info, ok := v3.QueueInfo("on-n3"); !ok || info.Ready != 1 {
		t.Fatalf("on-n3 after its node's restart: %+v", info.Stats)
	}
	publishVia(t, n3.Broker, "orders", "k", "after-restart", true)
	if info, ok := v1.QueueInfo("while-n3-was-down"); !ok || info.Ready != 1 {
		t.Fatalf("forwarded from the restarted node: %+v", info.Stats)
	}

	// Every node agrees on the whole topology.
	want := topologyOf(t, n1.Broker)
	for _, n := range nodes[1:] {
		if got := topologyOf(t, n.Broker); got != want {
			t.Fatalf("%s's topology differs:\n%s\nn1's:\n%s", n.name, got, want)
		}
	}
}

// topologyOf is a vhost's topology with every queue's home spelled out,
// in an order that does not depend on the node.
func topologyOf(t *testing.T, b *Broker) string {
	t.Helper()
	top := root(t, b).Topology().Table()
	for _, k := range []string{"exchanges", "queues"} {
		list, _ := top[k].([]any)
		slices.SortFunc(list, func(a, b any) int {
			return strings.Compare(a.(protocol.Table)["name"].(string), b.(protocol.Table)["name"].(string))
		})
		for _, it := range list {
			rec := it.(protocol.Table)
			delete(rec, "id") // the store id, the home's own
			if args, ok := rec["arguments"].(protocol.Table); ok && len(args) == 0 {
				delete(rec, "arguments")
			}
		}
	}
	js, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// TestClusterTopologySnapshot: a node restored from a snapshot has the
// cluster's topology: its own queues made, the others' known by home.
func TestClusterTopologySnapshot(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n3 := nodes[0], nodes[2]
	v1, v3 := root(t, n1.Broker), root(t, n3.Broker)
	if _, err := v1.DeclareExchange(exchange.Definition{Name: "x", Type: "topic", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		v    *vhost.VHost
		name string
	}{{v1, "q1"}, {v3, "q3"}} {
		if _, err := q.v.Declare(topology.QueueDef{Name: q.name, Durable: true}, false); err != nil {
			t.Fatal(err)
		}
		if err := v1.Bind("x", exchange.Destination{Kind: exchange.ToQueue, Name: q.name}, "#", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, nodes, "bindings", func(b *Broker) bool { v, _ := b.VHost("/"); return len(v.Bindings()) == 2 })
	log, _ := n1.store.RaftLog(metaGroup)
	snap, err := metaState{b: n1.Broker, log: log}.Snapshot()
	if err != nil {
		t.Fatal(err)
	}

	// A fresh node named n3, with something the snapshot lacks.
	fresh := testBroker(t, t.TempDir(), func(c *config.Config) {
		c.Cluster = config.Cluster{NodeName: "n3", Listen: "127.0.0.1:0", Secret: "sixteen+ characters",
			ChangeTimeout: config.Duration(3 * time.Second)}
	})
	vf := root(t, fresh)
	if _, err := vf.Declare(topology.QueueDef{Name: "stale", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	freshLog, _ := fresh.store.RaftLog(metaGroup)
	if err := (metaState{b: fresh, log: freshLog}).Restore(100, snap); err != nil {
		t.Fatal(err)
	}
	if got, want := topologyOf(t, fresh), topologyOf(t, n3.Broker); got != want {
		t.Fatalf("restored topology:\n%s\nn3's:\n%s", got, want)
	}
	if d, err := vf.Declare(topology.QueueDef{Name: "q3", Durable: true}, true); err != nil || d.Home() != "" {
		t.Fatalf("q3 on the restored n3: %+v, %v", d, err)
	}
}

// TestClusterPluginSet: a plugin enabled through one node is enabled on
// every node, in order with the declares that use its types, and a
// disable goes everywhere too.
func TestClusterPluginSet(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n3 := nodes[0], nodes[2]
	if err := n1.EnablePlugin("consistent-hash"); err != nil {
		t.Fatal(err)
	}
	// Declared at once, before the others may have loaded the module:
	// they have the exchange all the same, and it routes once they do.
	if _, err := root(t, n1.Broker).DeclareExchange(exchange.Definition{Name: "spread", Type: "x-consistent-hash", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := root(t, n3.Broker).Declare(topology.QueueDef{Name: "share", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	if err := root(t, n3.Broker).Bind("spread", exchange.Destination{Kind: exchange.ToQueue, Name: "share"}, "1", nil, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "the plugin enabled", func(b *Broker) bool {
		return slices.Contains(b.EnabledPlugins(), "consistent-hash")
	})
	for _, n := range nodes {
		publishVia(t, n.Broker, "spread", "any-key", "hashed", false)
	}
	if info, _ := root(t, n3.Broker).QueueInfo("share"); info.Ready != 3 {
		t.Fatalf("share holds %d, want one from each node", info.Ready)
	}
	// A disable is checked where it is asked (exchanges use the type)...
	if err := n3.DisablePlugin("consistent-hash", false); code(err) != protocol.PreconditionFailed {
		t.Fatalf("disabling a plugin whose type is in use: %v", err)
	}
	// ...and, forced, made everywhere.
	if err := n3.DisablePlugin("consistent-hash", true); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "the plugin disabled", func(b *Broker) bool {
		return !slices.Contains(b.EnabledPlugins(), "consistent-hash")
	})
}

// TestClusterAlarmHoldsForwards: a resource alarm on a queue's node holds
// the messages other nodes forward there, as it holds its own
// publishers; they arrive, and are confirmed, once it clears.
func TestClusterAlarmHoldsForwards(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2 := nodes[0], nodes[1]
	if _, err := root(t, n2.Broker).Declare(topology.QueueDef{Name: "held", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "the queue", func(b *Broker) bool { v, _ := b.VHost("/"); return v.HasQueue("held") })
	n2.Alarm().Set(true, "memory")
	v1 := root(t, n1.Broker)
	ex, _ := v1.Exchange("")
	m, _ := message.New("", "held", 0, nil, []byte("waits"))
	out, err := v1.Publish(ex, m, &vhost.RouteBuffers{})
	if err != nil || out.Forwarded == nil {
		t.Fatalf("publish: %+v, %v", out, err)
	}
	done := make(chan error, 1)
	out.Forwarded.Then(func(err error) { done <- err })
	select {
	case err := <-done:
		t.Fatalf("confirmed during the alarm: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if info, _ := root(t, n2.Broker).QueueInfo("held"); info.Ready != 0 {
		t.Fatal("enqueued during the alarm")
	}
	n2.Alarm().Set(false, "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not confirmed after the alarm cleared")
	}
	if info, _ := root(t, n2.Broker).QueueInfo("held"); info.Ready != 1 {
		t.Fatalf("held has %d after the alarm", info.Ready)
	}
}

// TestClusterPluginSettings: a setting changed through one node reaches
// the plugin on every node, and a refused one changes nothing anywhere.
func TestClusterPluginSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin")
	}
	wasm := filepath.Join(t.TempDir(), "content-router.wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-buildmode=c-shared", "-o", wasm, "./examples/content-router")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	module, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	nodes := threeBrokers(t)
	for _, n := range nodes {
		dir := n.cfg.PluginDir()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "content-router.wasm"), module, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes[0].EnablePlugin("content-router"); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "the plugin enabled", func(b *Broker) bool {
		return slices.Contains(b.EnabledPlugins(), "content-router")
	})
	maxBody := func(b *Broker) any {
		for _, p := range b.Plugins() {
			if p.Name == "content-router" && p.Info != nil && len(p.Info.Settings) > 0 {
				return p.Info.Settings[0].Value
			}
		}
		return nil
	}
	if err := nodes[1].ConfigurePlugin("content-router", "max_body", "2048"); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "max_body 2048", func(b *Broker) bool { return maxBody(b) == int64(2048) })
	if err := nodes[2].ConfigurePlugin("content-router", "max_body", "-1"); code(err) != protocol.PreconditionFailed {
		t.Fatalf("a value the plugin refuses: %v", err)
	}
	if err := nodes[2].ConfigurePlugin("content-router", "max_body", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "max_body reset", func(b *Broker) bool { return maxBody(b) == nil })
}
