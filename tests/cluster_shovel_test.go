package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// seenBy is the list an admin route (path) answers through node n.
func seenBy[T any](t *testing.T, n *clusterNode, path string) []T {
	t.Helper()
	code, body := adminGet(t, "http://"+n.admin+path, "guest", "guest")
	if code != 200 {
		t.Fatalf("GET %s through %s: %d %s", path, n.name, code, body)
	}
	var out []T
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// takeEach gets from queue through node n until it has taken n distinct
// messages, and says which came more than once.
func takeEach(t *testing.T, n *clusterNode, queue string, want int) (got map[string]int, twice []string) {
	t.Helper()
	_, ch := n.dial(t)
	got = map[string]int{}
	waitUntil(t, fmt.Sprintf("%d messages in %s", want, queue), func() bool {
		for {
			d, ok, err := ch.Get(queue, true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got[string(d.Body)]++
		}
		return len(got) == want
	})
	for body, k := range got {
		if k > 1 {
			twice = append(twice, body)
		}
	}
	slices.Sort(twice)
	return got, twice
}

// shovelsSeenBy is /api/shovels through node n.
func shovelsSeenBy(t *testing.T, n *clusterNode) []shovelStatus {
	t.Helper()
	return seenBy[shovelStatus](t, n, "/api/shovels")
}

// In a cluster one node runs a shovel, every node shows it in
// /api/shovels with the node that runs it, and when that node is killed
// (kill -9) another takes the shovel over: between quorum queues, every
// confirmed message reaches the destination.
func TestClusterShovelMovesWhenItsNodeDies(t *testing.T) {
	skipReference(t)
	nodes := threeProcesses(t)
	byName := map[string]*clusterNode{}
	for _, n := range nodes {
		byName[n.name] = n
	}
	_, ch := nodes[0].dial(t)
	for _, q := range []string{"from", "to"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			t.Fatal(err)
		}
	}
	def := `{"value":{"src-uri":"amqp://","src-queue":"from","dest-uri":"amqp://","dest-queue":"to","reconnect-delay":0.5}}`
	if err := adminCall(nodes[1].process, "PUT", "/api/parameters/shovel/%2F/move", def); err != nil {
		t.Fatal(err)
	}
	var runner string
	waitUntil(t, "every node showing the shovel running on one node", func() bool {
		runner = ""
		for _, n := range nodes {
			ss := shovelsSeenBy(t, n)
			if len(ss) != 1 || ss[0].State != "running" || ss[0].Name != "move" || (runner != "" && ss[0].Node != runner) {
				return false
			}
			runner = ss[0].Node
		}
		return true
	})
	publishAll := func(via *clusterNode, from, to int) {
		_, pch := via.dial(t)
		if err := pch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			c, err := pch.PublishWithDeferredConfirm("", "from", false, false, amqp.Publishing{Body: []byte(fmt.Sprint(i)), DeliveryMode: 2})
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
	publishAll(survivor, 0, 500)
	byName[runner].stop(syscall.SIGKILL)
	publishAll(survivor, 500, 1000)
	waitUntil(t, "another node running the shovel", func() bool {
		ss := shovelsSeenBy(t, survivor)
		return len(ss) == 1 && ss[0].State == "running" && ss[0].Node != runner
	})
	got, dups := takeEach(t, survivor, "to", 1000)
	t.Logf("%d messages moved, %d of them twice (published by the killed node's shovel, not yet acked at the source): %v", len(got), len(dups), dups)
	byName[runner].restart(t)
	waitUntil(t, "the killed node back", func() bool { return len(survivor.running(t)) == 3 })
}
