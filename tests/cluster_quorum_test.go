package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/tests/losscheck"
)

// Quorum queues across three Warren processes, end to end with amqp091-go
// clients, whose every publish, confirm and delivery tests/losscheck
// records.

// liveCluster is a three-process cluster whose nodes a test kills and
// restarts while clients use them: urls lists the nodes up.
type liveCluster struct {
	t     *testing.T
	mu    sync.Mutex
	nodes []*clusterNode
	up    map[*clusterNode]bool
}

func newLiveCluster(t *testing.T, nodes []*clusterNode) *liveCluster {
	c := &liveCluster{t: t, nodes: nodes, up: map[*clusterNode]bool{}}
	for _, n := range nodes {
		c.up[n] = true
	}
	return c
}

func (c *liveCluster) urls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.nodes {
		if c.up[n] {
			out = append(out, "amqp://guest:guest@"+n.addr+"/")
		}
	}
	return out
}

func (c *liveCluster) live() []*clusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*clusterNode
	for _, n := range c.nodes {
		if c.up[n] {
			out = append(out, n)
		}
	}
	return out
}

func (c *liveCluster) kill(n *clusterNode) {
	c.mu.Lock()
	c.up[n] = false
	c.mu.Unlock()
	n.stop(syscall.SIGKILL)
}

func (c *liveCluster) restart(n *clusterNode) {
	n.restart(c.t)
	c.mu.Lock()
	c.up[n] = true
	c.mu.Unlock()
}

// byName is the node named name.
func (c *liveCluster) byName(name string) *clusterNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// leader is the queue's leader as node n's admin API lists it ("" when
// it names none or does not answer).
func leaderOf(n *clusterNode, queue string) string {
	req, _ := http.NewRequest("GET", "http://"+n.admin+"/api/queues/%2F/"+queue, nil)
	req.SetBasicAuth("guest", "guest")
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var q struct {
		Leader string `json:"leader"`
	}
	if json.NewDecoder(resp.Body).Decode(&q) != nil {
		return ""
	}
	return q.Leader
}

// TestClusterQuorumKillLeader kills the quorum queue leader's node with
// SIGKILL, round after round, while two publishers with confirms and two
// consumers acking use whichever nodes are up, and brings it back each
// time. Nothing confirmed is lost, nothing acked comes back as new, and
// confirms resume within seconds of each kill. WARREN_QQ_KILLS sets the
// rounds (3 by default; the check is 20).
func TestClusterQuorumKillLeader(t *testing.T) {
	rounds := 3
	if s := os.Getenv("WARREN_QQ_KILLS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	c := newLiveCluster(t, threeProcesses(t))
	r, failovers := killLeaderRounds(t, c, rounds)
	t.Logf("%s; failovers %v", r, failovers)
	if len(r.Lost) > 0 || len(r.Problems) > 0 {
		t.Fatal(r)
	}
	// Every member agrees: nothing left.
	for _, n := range c.nodes {
		waitUntil(t, "an empty queue on "+n.name, func() bool {
			code, body := adminGet(t, "http://"+n.admin+"/api/queues/%2F/qq-kills", "guest", "guest")
			var q struct {
				Messages int `json:"messages"`
			}
			return code == 200 && json.Unmarshal([]byte(body), &q) == nil && q.Messages == 0
		})
	}
}

// killLeaderRounds runs two publishers with confirms and two consumers
// acking on a quorum queue, through whichever nodes are up, and kills the
// leader's node with SIGKILL rounds times, restarting it each time once a
// new leader took over and confirms resumed. It returns the checker's
// report once every confirmed message was delivered (or 20 s passed), and
// how long each failover took (the kill to a new leader listed).
func killLeaderRounds(t *testing.T, c *liveCluster, rounds int) (losscheck.Report, []time.Duration) {
	t.Helper()
	_, ch := c.nodes[0].dial(t)
	if _, err := ch.QueueDeclare("qq-kills", true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	check := losscheck.New()
	stop, stopConsumers := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(2)
		go func() { defer wg.Done(); check.Publish(fmt.Sprint("p", i), "qq-kills", 50, c.urls, stop) }()
		go func() { defer wg.Done(); check.Consume(fmt.Sprint("c", i), "qq-kills", 50, c.urls, stopConsumers) }()
	}
	var failovers []time.Duration
	for round := range rounds {
		var leader string
		waitUntil(t, "a leader", func() bool {
			leader = leaderOf(c.live()[0], "qq-kills")
			return leader != ""
		})
		before := check.Report().Confirmed
		waitUntil(t, "confirms before the kill", func() bool { return check.Report().Confirmed > before+200 })
		victim := c.byName(leader)
		killed := time.Now()
		fault := check.AddFault(losscheck.Fault{Node: victim.addr, Kind: "kill", From: killed})
		c.kill(victim)
		waitUntil(t, "a new leader", func() bool {
			l := leaderOf(c.live()[0], "qq-kills")
			return l != "" && l != leader
		})
		failovers = append(failovers, time.Since(killed))
		confirmed := check.Report().Confirmed
		waitUntil(t, "confirms after the kill", func() bool { return check.Report().Confirmed > confirmed+200 })
		r := check.Report()
		t.Logf("round %d: killed %s (leader), new leader after %v; so far %d published, %d confirmed, %d nacked, %d delivered",
			round+1, leader, failovers[round].Round(time.Millisecond), r.Published, r.Confirmed, r.Nacked, r.Delivered)
		c.restart(victim)
		check.EndFault(fault, time.Now())
	}
	close(stop)
	poll.Within(20*time.Second, check.Drained) // the report says what did not come
	time.Sleep(time.Second)                    // time for a wrong redelivery to show, or the last acks to land
	close(stopConsumers)
	wg.Wait()
	return check.Report(), failovers
}

// TestClusterQuorumMinority: a node that can reach no other confirms
// nothing: its publish is nacked when the entry could not be committed.
func TestClusterQuorumMinority(t *testing.T) {
	nodes := threeProcesses(t)
	_, ch1 := nodes[0].dial(t)
	if _, err := ch1.QueueDeclare("qq-minority", true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	nodes[0].stop(syscall.SIGKILL)
	nodes[1].stop(syscall.SIGKILL)
	_, ch := nodes[2].dial(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	if err := ch.PublishWithContext(context.Background(), "", "qq-minority", false, false,
		amqp.Publishing{Body: []byte("minority"), DeliveryMode: amqp.Persistent}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-confirms:
		if c.Ack {
			t.Fatal("the minority confirmed a publish")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the minority answered nothing: a nack was due after 10 s")
	}
}
