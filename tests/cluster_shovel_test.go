package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// shovelsSeenBy is /api/shovels through node n.
func shovelsSeenBy(t *testing.T, n *clusterNode) []shovelStatus {
	t.Helper()
	code, body := adminGet(t, "http://"+n.admin+"/api/shovels", "guest", "guest")
	if code != 200 {
		t.Fatalf("GET /api/shovels through %s: %d %s", n.name, code, body)
	}
	var out []shovelStatus
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out
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
	_, sch := survivor.dial(t)
	got := map[string]int{}
	waitUntil(t, "every message moved", func() bool {
		for {
			d, ok, err := sch.Get("to", true)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got[string(d.Body)]++
		}
		return len(got) == 1000
	})
	var dups []string
	for body, n := range got {
		if n > 1 {
			dups = append(dups, body)
		}
	}
	slices.Sort(dups)
	t.Logf("%d messages moved, %d of them twice (published by the killed node's shovel, not yet acked at the source): %v", len(got), len(dups), dups)
	byName[runner].restart(t)
	waitUntil(t, "the killed node back", func() bool { return len(survivor.running(t)) == 3 })
}
