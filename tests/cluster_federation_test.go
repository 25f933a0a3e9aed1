package tests

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// fedLinksSeenBy is /api/federation-links through node n.
func fedLinksSeenBy(t *testing.T, n *clusterNode) []fedLink {
	t.Helper()
	return seenBy[fedLink](t, n, "/api/federation-links")
}

// In a cluster one node runs a federation link, every node shows it with
// the node that runs it, and when that node is killed (kill -9) another
// takes the link over, under the same cluster name, so it consumes the
// same queue upstream: every message the upstream confirmed reaches the
// cluster's quorum queue.
func TestClusterFederationMovesWhenItsNodeDies(t *testing.T) {
	skipReference(t)
	up := startWarren(t)
	nodes := threeProcesses(t)
	byName := map[string]*clusterNode{}
	for _, n := range nodes {
		byName[n.name] = n
	}
	_, uch := channel(t, up)
	if err := uch.ExchangeDeclare("fed.x", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, ch := nodes[0].dial(t)
	if err := ch.ExchangeDeclare("fed.x", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("in", true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("in", "k", "fed.x", false, nil); err != nil {
		t.Fatal(err)
	}
	upstream, _ := json.Marshal(map[string]any{"value": map[string]any{"uri": up.url, "reconnect-delay": 0.5}})
	if err := adminCall(nodes[1].process, "PUT", "/api/parameters/federation-upstream/%2F/up", string(upstream)); err != nil {
		t.Fatal(err)
	}
	if err := adminCall(nodes[1].process, "PUT", "/api/policies/%2F/fed", `{"pattern":"^fed\\.","apply-to":"exchanges","definition":{"federation-upstream":"up"}}`); err != nil {
		t.Fatal(err)
	}
	var runner string
	waitUntil(t, "every node showing the link running on one node", func() bool {
		runner = ""
		for _, n := range nodes {
			ls := fedLinksSeenBy(t, n)
			if len(ls) != 1 || ls[0].Status != "running" || ls[0].Exchange != "fed.x" || (runner != "" && ls[0].Node != runner) {
				return false
			}
			runner = ls[0].Node
		}
		return true
	})
	publishAll := func(from, to int) {
		if err := uch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			c, err := uch.PublishWithDeferredConfirm("fed.x", "k", false, false, amqp.Publishing{Body: []byte(fmt.Sprint(i)), DeliveryMode: 2})
			if err != nil {
				t.Fatal(err)
			}
			if !c.Wait() {
				t.Fatalf("message %d nacked", i)
			}
		}
	}
	var survivor *clusterNode
	for _, n := range nodes {
		if n.name != runner {
			survivor = n
			break
		}
	}
	// Bound upstream before anything is published, so that each message
	// has somewhere to go.
	waitUntil(t, "the link's binding upstream", func() bool {
		v, _ := up.b.VHost("/")
		for _, b := range v.Bindings() {
			if b.Source == "fed.x" && b.Key == "k" {
				return true
			}
		}
		return false
	})
	publishAll(0, 500)
	byName[runner].stop(syscall.SIGKILL)
	publishAll(500, 1000)
	waitUntil(t, "another node running the link", func() bool {
		ls := fedLinksSeenBy(t, survivor)
		return len(ls) == 1 && ls[0].Status == "running" && ls[0].Node != runner
	})
	got, dups := takeEach(t, survivor, "in", 1000)
	t.Logf("%d messages federated, %d of them twice (forwarded by the killed node's link, not yet acked upstream): %v", len(got), len(dups), dups)
	byName[runner].restart(t)
	waitUntil(t, "the killed node back", func() bool { return len(survivor.running(t)) == 3 })
}
