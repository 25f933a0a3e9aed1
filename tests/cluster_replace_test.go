package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Replacing a node: a node whose data directory is lost comes back under
// its name as a new incarnation (a new Raft id), by each of the paths an
// operator takes, and the quorum queues and streams it was a member of
// get it back as a member, the old incarnation gone from their groups.

// replicaView is GET /api/queues/%2F/{queue} on one node, as much as the
// replacement test reads.
type replicaView struct {
	Messages int      `json:"messages"`
	Members  []string `json:"members"`
	Raft     *struct {
		Role   string            `json:"role"`
		Commit uint64            `json:"commit_index"`
		Match  map[string]uint64 `json:"match"`
		Voters []string          `json:"voters"`
	} `json:"warren_raft"`
}

func (n *clusterNode) replica(t *testing.T, queue string) replicaView {
	t.Helper()
	if !n.process.running() {
		t.Fatalf("%s exited:\n%s", n.name, n.logText())
	}
	code, body := adminGet(t, "http://"+n.admin+"/api/queues/%2F/"+queue, "guest", "guest")
	var v replicaView
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
		return replicaView{}
	}
	return v
}

// groupIs waits until the group of queue has exactly the members want,
// by name, on its leader (so no incarnation of a node left behind counts
// toward its majority), with every member's log caught up with the
// leader's commit.
func groupIs(t *testing.T, nodes []*clusterNode, queue string, want ...string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%s's group to be %v, caught up", queue, want), func() bool {
		for _, n := range nodes {
			v := n.replica(t, queue)
			if v.Raft == nil || v.Raft.Role != "leader" {
				continue
			}
			if !slices.Equal(v.Raft.Voters, want) || !slices.Equal(v.Members, want) {
				return false
			}
			for _, m := range want {
				if v.Raft.Match[m] < v.Raft.Commit {
					return false
				}
			}
			return true
		}
		return false
	})
}

// rejoined waits until every node runs n, and until the quorum queue and
// the stream have n's new incarnation as a member that holds their
// messages.
func rejoined(t *testing.T, nodes []*clusterNode, n *clusterNode, qq, st string, messages int) {
	t.Helper()
	for _, other := range nodes {
		waitUntil(t, other.name+" to see three nodes running", func() bool {
			if !n.process.running() {
				t.Fatalf("%s exited:\n%s", n.name, n.logText())
			}
			return len(other.running(t)) == 3
		})
	}
	names := []string{"n1", "n2", "n3"}
	groupIs(t, nodes, qq, names...)
	groupIs(t, nodes, st, names...)
	waitUntil(t, n.name+"'s own member of "+qq+" to hold its messages", func() bool {
		v := n.replica(t, qq)
		return v.Raft != nil && v.Raft.Role == "follower" && v.Messages == messages
	})
	// A member reads its own replica.
	all := readStream(t, nodes[0], st, messages)
	sameLog(t, n.name+"'s replica", all, readStream(t, n, st, messages))
	if strings.Contains(n.logText(), "panic") {
		t.Fatalf("%s logged a panic:\n%s", n.name, n.logText())
	}
}

// wipe kills n and starts it again on an empty data directory, with seeds
// (none: a cluster of its own).
func (n *clusterNode) wipe(t *testing.T, seeds ...string) {
	t.Helper()
	n.stop(syscall.SIGKILL)
	quoted := make([]string, len(seeds))
	for i, s := range seeds {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	n.config = fmt.Sprintf("[cluster]\nnode_name = %q\nlisten = %q\nseeds = [%s]\nsecret = %q\nchange_timeout = \"3s\"\n",
		n.name, n.listen, strings.Join(quoted, ", "), clusterSecret)
	n.process = n.startProcess(t, t.TempDir())
}

// TestClusterNodeReplaced wipes a member of a three-node cluster by each
// of the three paths: restarted on an empty data directory with its
// seeds; forgotten (forget_cluster_node) and then restarted so, and
// grown back into the queues (rabbitmq-queues grow); started alone on an
// empty data directory and joined (join_cluster). None panics, and each
// time the quorum queue and the stream end with the three nodes as
// members, the wiped one holding their messages.
func TestClusterNodeReplaced(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n3 := nodes[0], nodes[2]
	_, ch := n1.dial(t)
	for q, typ := range map[string]string{"qq-replaced": "quorum", "st-replaced": "stream"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": typ}); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	publish := func(what string) {
		t.Helper()
		publishAllConfirmed(t, n1, "qq-replaced", what, 100)
		publishAllConfirmed(t, n1, "st-replaced", what, 100)
		total += 100
	}
	publish("before")

	t.Log("wiped and restarted with its seeds")
	n3.wipe(t, n1.listen)
	rejoined(t, nodes, n3, "qq-replaced", "st-replaced", total)
	publish("after-restart")

	t.Log("forgotten, wiped and restarted with its seeds, grown back")
	n3.stop(syscall.SIGKILL)
	waitUntil(t, "n1 to see n3 down", func() bool { return !slices.Contains(n1.running(t), "n3") })
	if err := httpJSON("DELETE", "http://"+n1.admin+"/api/warren/cluster/nodes/n3", ""); err != nil {
		t.Fatal(err)
	}
	groupIs(t, nodes[:2], "qq-replaced", "n1", "n2")
	groupIs(t, nodes[:2], "st-replaced", "n1", "n2")
	publish("after-forget")
	n3.wipe(t, n1.listen)
	waitUntil(t, "n1 to see n3 back", func() bool { return slices.Contains(n1.running(t), "n3") })
	if err := httpJSON("POST", "http://"+n1.admin+"/api/warren/quorum/grow", `{"node": "n3", "strategy": "all"}`); err != nil {
		t.Fatal(err)
	}
	rejoined(t, nodes, n3, "qq-replaced", "st-replaced", total)
	publish("after-grow")

	t.Log("wiped, started alone and joined")
	n3.wipe(t)
	if err := httpJSON("POST", "http://"+n3.admin+"/api/warren/cluster/join", fmt.Sprintf(`{"seed": %q}`, n1.listen)); err != nil {
		t.Fatal(err)
	}
	rejoined(t, nodes, n3, "qq-replaced", "st-replaced", total)
	publish("after-join")
	groupIs(t, nodes, "qq-replaced", "n1", "n2", "n3")
}
