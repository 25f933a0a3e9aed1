package tests

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/tests/losscheck"
)

// The cluster's fault test: three Warren processes, each on its own
// loopback address and reached by the others through a proxy that can cut
// it off; publishers with confirms and consumers with manual acks work
// through every node while the test kills (kill -9), pauses (SIGSTOP) and
// cuts off the leader of a quorum queue, and cuts off a follower, healing
// each after a while. tests/losscheck records what the clients saw and
// reports what a broker must not do.

// proxiedNode is a cluster node the others reach through its proxy: ip is
// the loopback address it listens and dials from.
type proxiedNode struct {
	*clusterNode
	ip    string
	proxy *linkProxy
}

// proxiedCluster starts n nodes on 127.0.0.2, .3, ..., each advertising its
// proxy to the others; it skips when the loopback addresses are missing.
func proxiedCluster(t *testing.T, n int) []*proxiedNode {
	t.Helper()
	return proxiedClusterOf(t, "", n)
}

// proxiedClusterOf is proxiedCluster running bin ("": the usual build).
func proxiedClusterOf(t *testing.T, bin string, n int) []*proxiedNode {
	t.Helper()
	var nodes []*proxiedNode
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		ip := fmt.Sprintf("127.0.0.%d", i+2)
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Skipf("cannot listen on %s (a loopback /8 is needed): %v", ip, err)
		}
		listen := ln.Addr().String()
		ln.Close()
		pn := &proxiedNode{ip: ip, proxy: newLinkProxy(t, listen)}
		seeds := ""
		if i > 0 {
			seeds = fmt.Sprintf("%q", nodes[0].proxy.addr())
		}
		cn := &clusterNode{name: name, listen: listen, bin: bin}
		cn.config = fmt.Sprintf("[cluster]\nnode_name = %q\nlisten = %q\nadvertise = %q\nseeds = [%s]\nsecret = %q\nchange_timeout = \"3s\"\n",
			name, listen, pn.proxy.addr(), seeds, clusterSecret)
		cn.process = cn.startProcess(t, t.TempDir())
		pn.clusterNode = cn
		nodes = append(nodes, pn)
	}
	waitUntil(t, fmt.Sprintf("%d running nodes", n), func() bool { return len(nodes[0].running(t)) == n })
	return nodes
}

// isolate cuts n off from every other node, both ways, or heals it.
func isolate(nodes []*proxiedNode, n *proxiedNode, cut bool) {
	for _, other := range nodes {
		if other != n {
			other.proxy.cut(n.ip, cut)
			n.proxy.cut(other.ip, cut)
		}
	}
}

// faultCluster is the fault test's cluster: which nodes are up for the
// clients, by name, as processes restart on new ports.
type faultCluster struct {
	mu    sync.Mutex
	nodes []*proxiedNode
}

func (c *faultCluster) url(name string) losscheck.URLs {
	return func() []string {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			if n.name == name && n.process.running() {
				return []string{n.url()}
			}
		}
		return nil
	}
}

// nameOf names the node an AMQP URL reaches.
func (c *faultCluster) nameOf(url string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.url() == url {
			return n.name
		}
	}
	return url
}

func (c *faultCluster) byName(name string) *proxiedNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// TestClusterFaults runs the fault rounds on a quorum queue: each round
// kills the leader, pauses it, cuts it off, and cuts off a follower.
// WARREN_FAULT_ROUNDS sets the rounds (1 by default; the check is
// 20 kills, 10 leader and 5 follower partitions), WARREN_FAULT_HOLD how
// long a pause or a partition lasts (10s by default).
func TestClusterFaults(t *testing.T) {
	skipReference(t)
	rounds, hold := faultSettings()
	c := &faultCluster{nodes: proxiedCluster(t, 3)}
	const queue = "qq-faults"
	_, ch := c.nodes[0].dial(t)
	if _, err := ch.QueueDeclare(queue, true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	check := losscheck.New()
	check.NameNodes(c.nameOf)
	stop, stopConsumers := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(2)
		go func() { defer wg.Done(); check.Publish("p"+n.name, queue, 20, c.url(n.name), stop) }()
		go func() { defer wg.Done(); check.Consume("c"+n.name, queue, 20, c.url(n.name), stopConsumers) }()
	}
	faultRounds(t, c, check, queue, rounds, hold)
	close(stop)
	if !poll.Within(30*time.Second, check.Drained) {
		// What is missing, and each one's story, rather than a bare
		// timeout.
		r := check.Report()
		for _, body := range r.Lost[:min(3, len(r.Lost))] {
			t.Log(check.History(body))
		}
		t.Fatalf("confirmed messages not delivered 30 s after the publishers stopped: %s", r)
	}
	time.Sleep(losscheck.Settle) // time for a wrong redelivery to show
	close(stopConsumers)
	wg.Wait()
	failOnProblems(t, check)
}

// failOnProblems logs the checker's report and fails on any problem but
// those of the kinds named in unknowable, with the whole story of the
// messages the first problems name.
func failOnProblems(t *testing.T, check *losscheck.Checker, unknowable ...string) {
	t.Helper()
	r := check.Report()
	t.Logf("%s", r)
	problems := slices.DeleteFunc(slices.Clone(r.Problems), func(p string) bool {
		kind, _, _ := strings.Cut(p, ":")
		return slices.Contains(unknowable, kind)
	})
	if len(r.Lost) == 0 && len(problems) == 0 {
		return
	}
	for _, p := range problems[:min(3, len(problems))] {
		for _, w := range strings.Fields(p) {
			if strings.HasPrefix(w, "pn") && strings.Count(w, "-") == 2 {
				t.Log(check.History(strings.TrimRight(w, ",;")))
			}
		}
	}
	t.Fatal(r)
}

// TestClusterStreamFaults runs the fault rounds on a stream, with
// publishers through every node: afterwards every node holds the same
// log at dense offsets, with every confirmed message once and each
// publisher's messages in the order it sent them.
func TestClusterStreamFaults(t *testing.T) {
	skipReference(t)
	rounds, hold := faultSettings()
	c := &faultCluster{nodes: proxiedCluster(t, 3)}
	const stream = "stream-faults"
	args := amqp.Table{"x-queue-type": "stream"}
	_, ch := c.nodes[0].dial(t)
	if _, err := ch.QueueDeclare(stream, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	check := losscheck.New()
	check.NameNodes(c.nameOf)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); check.Publish("p"+n.name, stream, 20, c.url(n.name), stop) }()
	}
	faultRounds(t, c, check, stream, rounds, hold)
	close(stop)
	wg.Wait()
	// Every member has applied the same log once they agree on its length.
	var length int
	counts := map[string]int{}
	defer func() {
		if t.Failed() {
			t.Logf("messages by node: %v", counts)
		}
	}()
	poll.Until(t, 30*time.Second, "every node counting the same messages", func() bool {
		clear(counts)
		lengths := map[int]bool{}
		for _, n := range c.nodes {
			code, body := adminGet(t, "http://"+n.admin+"/api/queues/%2F/"+stream, "guest", "guest")
			var q struct {
				Messages *int `json:"messages"`
			}
			if code != 200 || json.Unmarshal([]byte(body), &q) != nil || q.Messages == nil {
				return false
			}
			counts[n.name] = *q.Messages
			lengths[*q.Messages] = true
			length = *q.Messages
		}
		return len(lengths) == 1
	})
	var first []string
	for _, n := range c.nodes {
		_, ch := n.dial(t)
		log := readStreamOn(t, ch, n.name+": "+stream, stream, length) // offsets dense
		if first == nil {
			first = log
			for _, body := range log {
				check.Read("reader", n.name, body)
			}
			continue
		}
		sameLog(t, c.nodes[0].name+" and "+n.name, first, log)
	}
	t.Logf("%d messages in the stream, the same on every node", length)
	// Read once the faults are over, the stream cannot tell a message
	// appended after its publisher's nack from one a majority had before
	// its publisher's node was cut off (and could not learn so): "nacked,
	// delivered" is left to the quorum queue's test, whose consumers read
	// as the messages come.
	failOnProblems(t, check, "nacked, delivered")
}

// faultSettings reads WARREN_FAULT_ROUNDS (1 by default) and
// WARREN_FAULT_HOLD (10s by default).
func faultSettings() (rounds int, hold time.Duration) {
	rounds, hold = 1, 10*time.Second
	if s := os.Getenv("WARREN_FAULT_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("WARREN_FAULT_HOLD"); s != "" {
		hold, _ = time.ParseDuration(s)
	}
	return rounds, hold
}

// faultRounds runs the fault rounds on queue, whose publishers are named
// "p" and their node's name: each round kills its leader (2 s), pauses it,
// cuts it off, and cuts off a follower (hold each), recording every fault
// in check; before each and after the last, every node's publisher must
// have 100 more confirms.
func faultRounds(t *testing.T, c *faultCluster, check *losscheck.Checker, queue string, rounds int, hold time.Duration) {
	t.Helper()
	leader := func() *proxiedNode {
		var name string
		waitUntil(t, "a leader of "+queue, func() bool {
			for _, n := range c.nodes {
				if n.process.running() {
					if name = leaderOf(n.clusterNode, queue); name != "" {
						return true
					}
				}
			}
			return false
		})
		return c.byName(name)
	}
	// progress waits for 100 more confirms through every node.
	progress := func(what string) {
		t.Helper()
		before := map[string]int{}
		for _, n := range c.nodes {
			before[n.name] = check.Confirms("p" + n.name)
		}
		waitUntil(t, "confirms through every node "+what, func() bool {
			for _, n := range c.nodes {
				if check.Confirms("p"+n.name) < before[n.name]+100 {
					return false
				}
			}
			return true
		})
	}
	// fault applies a fault to n (start), holds it, and ends it; the
	// record's window begins once it is in force (a cut's connections
	// are closed), so what a client sent before is not counted as sent
	// into it.
	fault := func(n *proxiedNode, kind string, start func(), wait time.Duration, end func()) {
		t.Helper()
		progress("before " + kind + " of " + n.name)
		start()
		from := time.Now()
		i := check.AddFault(losscheck.Fault{Node: n.name, Kind: kind, From: from})
		time.Sleep(wait) // the fault's length: a wait, not a synchronization
		end()
		check.EndFault(i, time.Now())
		t.Logf("%s of %s from %s to %s: %s", kind, n.name, from.Format("15:04:05.000"), time.Now().Format("15:04:05.000"), check.Report().String())
	}
	for round := range rounds {
		t.Logf("round %d", round+1)
		l := leader()
		fault(l, "kill", func() {
			c.mu.Lock()
			l.stop(syscall.SIGKILL)
			c.mu.Unlock()
		}, 2*time.Second, func() {
			c.mu.Lock()
			l.restart(t)
			c.mu.Unlock()
		})
		l = leader()
		fault(l, "pause", func() { _ = l.cmd.Process.Signal(syscall.SIGSTOP) }, hold,
			func() { _ = l.cmd.Process.Signal(syscall.SIGCONT) })
		l = leader()
		fault(l, "partition", func() { isolate(c.nodes, l, true) }, hold, func() { isolate(c.nodes, l, false) })
		l = leader()
		var follower *proxiedNode
		for _, n := range c.nodes {
			if n != l {
				follower = n
			}
		}
		fault(follower, "partition", func() { isolate(c.nodes, follower, true) }, hold, func() { isolate(c.nodes, follower, false) })
	}
	progress("after the faults")
}

// TestClusterFaultsSeeEarlyConfirms checks the checker with a build that
// confirms a publish before a majority has it (the tag
// warren_unsafe_confirm): a leader cut off from the others goes on
// confirming what its own clients publish, and losscheck must report
// those confirms from a minority. (A kill is no such check: what a
// follower forwarded is sent again to the next leader, so a kill loses
// only what the leader's own clients sent in the last moment.)
func TestClusterFaultsSeeEarlyConfirms(t *testing.T) {
	skipReference(t)
	bin, err := buildWarren("warren_unsafe_confirm")
	if err != nil {
		t.Fatal(err)
	}
	c := &faultCluster{nodes: proxiedClusterOf(t, bin, 3)}
	const queue = "qq-early"
	_, ch := c.nodes[0].dial(t)
	if _, err := ch.QueueDeclare(queue, true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	check := losscheck.New()
	check.NameNodes(c.nameOf)
	// Confirmed at once, publishers are held back by nothing else.
	check.Pace(500 * time.Microsecond)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for _, n := range c.nodes {
		wg.Add(2)
		go func() { defer wg.Done(); check.Publish("p"+n.name, queue, 20, c.url(n.name), stop) }()
		go func() { defer wg.Done(); check.Consume("c"+n.name, queue, 20, c.url(n.name), stop) }()
	}
	var leader *proxiedNode
	poll.Until(t, 20*time.Second, "a leader of "+queue, func() bool {
		leader = c.byName(leaderOf(c.nodes[0].clusterNode, queue))
		return leader != nil
	})
	confirmed := check.Confirms("p" + leader.name)
	poll.Until(t, 20*time.Second, "confirms through the leader", func() bool { return check.Confirms("p"+leader.name) > confirmed+100 })
	isolate(c.nodes, leader, true)
	fault := check.AddFault(losscheck.Fault{Node: leader.name, Kind: "partition", From: time.Now()})
	confirmed = check.Confirms("p" + leader.name)
	poll.Until(t, 20*time.Second, "confirms through the cut-off leader", func() bool { return check.Confirms("p"+leader.name) > confirmed+100 })
	isolate(c.nodes, leader, false)
	check.EndFault(fault, time.Now())
	r := check.Report()
	if r.Count["minority confirm"] == 0 {
		t.Fatalf("replication broken on purpose, and no confirm from the cut-off minority reported: %s", r)
	}
	t.Logf("as it should, the checker reports %d confirms from a cut-off minority: %s", r.Count["minority confirm"], r)
}
