package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
)

// The cluster's topology and messages, end to end: three Warren processes
// and amqp091-go clients connected to different nodes.

func (n *clusterNode) dial(t *testing.T) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	c, err := amqp.Dial("amqp://guest:guest@" + n.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return c, ch
}

func threeProcesses(t *testing.T) []*clusterNode {
	t.Helper()
	return threeProcessesOf(t, "")
}

// threeProcessesOf is threeProcesses running bin ("": the usual build).
func threeProcessesOf(t *testing.T, bin string) []*clusterNode {
	t.Helper()
	n1 := startClusterBinary(t, bin, "n1", nil)
	n2 := startClusterBinary(t, bin, "n2", []string{n1.listen})
	n3 := startClusterBinary(t, bin, "n3", []string{n1.listen})
	all := []*clusterNode{n1, n2, n3}
	waitUntil(t, "three running nodes", func() bool { return len(n1.running(t)) == 3 })
	return all
}

// TestClusterMessagesAcrossNodes: a queue homed on n2, bound through n3 to
// an exchange declared through n1, gets what is published on n1 and n3,
// in order, with confirms sent once n2 has the messages; mandatory
// returns, alternate exchanges and dead-lettering cross nodes too.
func TestClusterMessagesAcrossNodes(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch1 := n1.dial(t)
	_, ch2 := n2.dial(t)
	_, ch3 := n3.dial(t)

	if err := ch1.ExchangeDeclare("orders", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch2.QueueDeclare("work", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch3.QueueBind("work", "new", "orders", false, nil); err != nil {
		t.Fatal(err)
	}
	// A passive declare through any node sees the queue.
	if _, err := ch1.QueueDeclarePassive("work", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// n1 knowing the queue does not mean it applied n3's bind yet.
	catchUp(t, n1)

	if err := ch1.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch1.NotifyPublish(make(chan amqp.Confirmation, 200))
	returns := ch1.NotifyReturn(make(chan amqp.Return, 1))
	const count = 100
	ctx := context.Background()
	for i := range count {
		err := ch1.PublishWithContext(ctx, "orders", "new", false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, Body: fmt.Appendf(nil, "%03d", i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range count {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("message %d nacked", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d confirms", i, count)
		}
	}
	// Published on n1, confirmed: n2 has them all, in order.
	q, err := ch3.QueueDeclarePassive("work", true, false, false, false, nil)
	if err != nil || q.Messages != count {
		t.Fatalf("work through n3: %+v, %v", q, err)
	}
	deliveries, err := ch2.Consume("work", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		d := <-deliveries
		if string(d.Body) != fmt.Sprintf("%03d", i) {
			t.Fatalf("delivery %d is %q", i, d.Body)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	}

	// Mandatory and unroutable: returned by the node it was published on.
	if err := ch1.PublishWithContext(ctx, "orders", "nobody", true, false, amqp.Publishing{Body: []byte("lost")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-returns:
		if r.ReplyCode != 312 || string(r.Body) != "lost" {
			t.Fatalf("return %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.return")
	}
	<-confirms

	// Through the default exchange, by the queue's name, from n3.
	if err := ch3.PublishWithContext(ctx, "", "work", true, false, amqp.Publishing{Body: []byte("by-name")}); err != nil {
		t.Fatal(err)
	}
	if d := <-deliveries; string(d.Body) != "by-name" {
		t.Fatalf("got %q", d.Body)
	} else {
		d.Ack(false)
	}

	// An alternate exchange on n3 takes what orders-ae cannot route, into
	// a queue on n2.
	if err := ch3.ExchangeDeclare("fallback", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch3.ExchangeDeclare("orders-ae", "direct", true, false, false, false, amqp.Table{"alternate-exchange": "fallback"}); err != nil {
		t.Fatal(err)
	}
	if err := ch2.QueueBind("work", "", "fallback", false, nil); err != nil {
		t.Fatal(err)
	}
	catchUp(t, n1)
	if err := ch1.PublishWithContext(ctx, "orders-ae", "unbound", false, false, amqp.Publishing{Body: []byte("via-ae")}); err != nil {
		t.Fatal(err)
	}
	if c := <-confirms; !c.Ack {
		t.Fatal("the message for the alternate exchange was nacked")
	}
	if d := <-deliveries; string(d.Body) != "via-ae" {
		t.Fatalf("got %q", d.Body)
	} else {
		d.Ack(false)
	}

	// A queue on n1 dead-letters expired messages to a queue on n2.
	if _, err := ch1.QueueDeclare("short-lived", true, false, false, false, amqp.Table{
		"x-message-ttl": int32(50), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}); err != nil {
		t.Fatal(err)
	}
	// (Published through the node that declared it: another node may
	// apply the declare a moment after it was answered.)
	if err := ch1.PublishWithContext(ctx, "", "short-lived", false, false, amqp.Publishing{Body: []byte("expired")}); err != nil {
		t.Fatal(err)
	}
	<-confirms
	select {
	case d := <-deliveries:
		if string(d.Body) != "expired" || d.Headers["x-death"] == nil {
			t.Fatalf("dead letter %q %v", d.Body, d.Headers)
		}
		d.Ack(false)
	case <-time.After(10 * time.Second):
		t.Fatal("the dead letter never reached n2")
	}

	// A queue full with reject-publish nacks a publisher on another node.
	if _, err := ch2.QueueDeclare("tiny", true, false, false, false, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	// n1 may apply the declare a moment after n2 answered it; a passive
	// declare that misses catches up with the cluster's log first.
	if _, err := ch1.QueueDeclarePassive("tiny", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if err := ch1.PublishWithContext(ctx, "", "tiny", false, false, amqp.Publishing{Body: []byte("t")}); err != nil {
			t.Fatal(err)
		}
		if c := <-confirms; c.Ack != want {
			t.Fatalf("publish %d to a full queue on another node: ack=%v", i, c.Ack)
		}
	}

	// A consumer's exclusive queue on n3 gets what is published on n1.
	_, ch3b := n3.dial(t)
	mine, err := ch3b.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch3b.QueueBind(mine.Name, "new", "orders", false, nil); err != nil {
		t.Fatal(err)
	}
	own, err := ch3b.Consume(mine.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// n1 may apply the bind a moment after n3 answered it (routing is not
	// read-your-writes across nodes): a lookup that misses on n1 catches
	// up with the cluster's log first.
	catchUp(t, n1)
	if err := ch1.PublishWithContext(ctx, "orders", "new", false, false, amqp.Publishing{Body: []byte("both")}); err != nil {
		t.Fatal(err)
	}
	<-confirms
	for _, c := range []<-chan amqp.Delivery{own, deliveries} {
		select {
		case d := <-c:
			if string(d.Body) != "both" {
				t.Fatalf("got %q", d.Body)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a bound queue missed the message")
		}
	}
}

// TestClusterKillDuringDeclares: 1,000 queue declares through two nodes
// while the third is killed with kill -9: every declare that got its
// declare-ok is on all three nodes afterwards.
func TestClusterKillDuringDeclares(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	const total = 1000
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	third := make(chan struct{})
	var once sync.Once
	for w := range 8 {
		via := []*clusterNode{n1, n2}[w%2]
		_, ch := via.dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 8 {
				name := fmt.Sprintf("burst-%04d", i)
				if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err == nil {
					mu.Lock()
					acked[name] = true
					mu.Unlock()
				} else if ch.IsClosed() {
					return
				}
				if i >= total/3 {
					once.Do(func() { close(third) })
				}
			}
		}()
	}
	<-third
	n3.stop(syscall.SIGKILL)
	wg.Wait()
	if len(acked) < total/2 {
		t.Fatalf("only %d of %d declares were answered with two of three nodes up", len(acked), total)
	}
	n3.restart(t)
	queuesOn := func(n *clusterNode) map[string]bool {
		_, ch := n.dial(t)
		out := map[string]bool{}
		for i := range total {
			name := fmt.Sprintf("burst-%04d", i)
			if _, err := ch.QueueDeclarePassive(name, true, false, false, false, nil); err == nil {
				out[name] = true
			} else if ch, err = reopen(n, t); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	var final map[string]bool
	waitUntil(t, "the three nodes agree", func() bool {
		a, b, c := queuesOn(n1), queuesOn(n2), queuesOn(n3)
		final = a
		return maps.Equal(a, b) && maps.Equal(b, c)
	})
	for name := range acked {
		if !final[name] {
			t.Errorf("%s got its declare-ok and is missing", name)
		}
	}
	t.Logf("%d of %d declares answered; %d queues in the end", len(acked), total, len(final))
}

// reopen opens a new channel after a passive declare closed one.
func reopen(n *clusterNode, t *testing.T) (*amqp.Channel, error) {
	_, ch := n.dial(t)
	return ch, nil
}

// TestClusterConsumeThroughAnotherNode: a queue homed on n2 is consumed
// and read with basic.get through n3 and n1: deliveries in order within
// the prefetch, acks, requeues and rejects settled on n2, and a consuming
// node that dies leaves its unacked messages to the others.
func TestClusterConsumeThroughAnotherNode(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch1 := n1.dial(t)
	_, ch2 := n2.dial(t)
	_, ch3 := n3.dial(t)
	if _, err := ch2.QueueDeclare("jobs", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Routing is not read-your-writes across nodes: n1 must have applied
	// the declare made through n2 before it routes to the queue, or the
	// publishes below are unroutable and dropped.
	catchUp(t, n1)
	catchUp(t, n3)
	ctx := context.Background()
	publish := func(body string) {
		t.Helper()
		if err := ch1.PublishWithContext(ctx, "", "jobs", false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
	}
	depth := func() int {
		t.Helper()
		q, err := ch2.QueueDeclarePassive("jobs", true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return q.Messages
	}

	// basic.get through n3.
	for _, b := range []string{"g1", "g2", "g3"} {
		publish(b)
	}
	waitUntil(t, "three messages on n2", func() bool { return depth() == 3 })
	d, ok, err := ch3.Get("jobs", false)
	if err != nil || !ok || string(d.Body) != "g1" || d.MessageCount != 2 {
		t.Fatalf("get through n3: %q %v %v (%d left)", d.Body, ok, err, d.MessageCount)
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "g1 requeued", func() bool { return depth() == 3 })
	d, ok, _ = ch3.Get("jobs", false)
	if !ok || string(d.Body) != "g1" || !d.Redelivered {
		t.Fatalf("after a requeue: %q redelivered=%v", d.Body, d.Redelivered)
	}
	d.Ack(false)
	if d, ok, _ = ch3.Get("jobs", true); !ok || string(d.Body) != "g2" {
		t.Fatalf("no-ack get: %q", d.Body)
	}
	if d, ok, _ = ch3.Get("jobs", false); !ok || string(d.Body) != "g3" {
		t.Fatalf("get: %q", d.Body)
	}
	d.Reject(false)
	if _, ok, _ = ch3.Get("jobs", false); ok {
		t.Fatal("get from an empty queue")
	}
	waitUntil(t, "jobs empty", func() bool { return depth() == 0 })

	// A consumer on n3 with a prefetch gets them all, in order.
	const count = 200
	for i := range count {
		publish(fmt.Sprintf("%03d", i))
	}
	if err := ch3.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch3.Consume("jobs", "on-n3", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		select {
		case d := <-deliveries:
			if string(d.Body) != fmt.Sprintf("%03d", i) {
				t.Fatalf("delivery %d is %q", i, d.Body)
			}
			d.Ack(false)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d deliveries", i, count)
		}
	}
	waitUntil(t, "all acked on n2", func() bool { return depth() == 0 })

	// The prefetch holds on the queue's node: with 10 unacked, 5 of 15
	// stay ready there.
	for i := range 15 {
		publish(fmt.Sprintf("p%02d", i))
	}
	var held []amqp.Delivery
	for range 10 {
		held = append(held, <-deliveries)
	}
	waitUntil(t, "5 of 15 ready on n2 with a prefetch of 10 used up", func() bool { return depth() == 5 })
	// Another node's management API lists the queue with its home and
	// the home's figures.
	code, body := adminGet(t, "http://"+n1.admin+"/api/queues/%2F/jobs", "guest", "guest")
	var view struct {
		Node    string `json:"node"`
		Ready   int    `json:"messages_ready"`
		Unacked int    `json:"messages_unacknowledged"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &view) != nil || view.Node != "n2" || view.Ready != 5 || view.Unacked != 10 {
		t.Fatalf("GET /api/queues/%%2F/jobs on n1: %d %s", code, body)
	}
	held[9].Ack(true)
	for range 5 {
		(<-deliveries).Ack(false)
	}
	waitUntil(t, "all acked on n2", func() bool { return depth() == 0 })

	// Closing n3's channel with unacked messages gives them back.
	for _, b := range []string{"u1", "u2"} {
		publish(b)
	}
	for range 2 {
		<-deliveries // not acked
	}
	ch3.Close()
	waitUntil(t, "unacked requeued", func() bool { return depth() == 2 })

	// A consuming node killed with unacked messages: they go back too.
	_, ch3 = n3.dial(t)
	deliveries, err = ch3.Consume("jobs", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case d := <-deliveries:
			if !d.Redelivered {
				t.Fatalf("%q not redelivered", d.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the requeued messages did not come")
		}
	}
	n3.stop(syscall.SIGKILL)
	own, err := ch1.Consume("jobs", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case d := <-own:
			d.Ack(false)
		case <-time.After(20 * time.Second):
			t.Fatal("the dead node's unacked messages never came back")
		}
	}

	// The queue's node killed: its consumers elsewhere are cancelled.
	cancels := ch1.NotifyCancel(make(chan string, 1))
	n2.stop(syscall.SIGKILL)
	select {
	case <-cancels:
	case <-time.After(20 * time.Second):
		t.Fatal("no basic.cancel when the queue's node died")
	}
}

// TestClusterConsumerPriorities: a consumer on another node than the
// queue's home keeps its x-priority there: it is served before the
// home's own consumer of lower priority, which gets messages only while
// the remote one's prefetch is full.
func TestClusterConsumerPriorities(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch1 := n1.dial(t)
	_, ch2 := n2.dial(t)
	_, ch3 := n3.dial(t)
	if _, err := ch2.QueueDeclare("prio-jobs", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []*amqp.Channel{ch2, ch3} {
		if err := ch.Qos(3, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	local, err := ch2.Consume("prio-jobs", "local", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := ch3.Consume("prio-jobs", "remote", false, false, false, false, amqp.Table{"x-priority": int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := ch1.Publish("", "prio-jobs", false, false, amqp.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	take := func(ds <-chan amqp.Delivery, n int) []string {
		var got []string
		for range n {
			select {
			case d := <-ds:
				got = append(got, string(d.Body))
			case <-time.After(10 * time.Second):
				t.Fatalf("got %v, waited for %d", got, n)
			}
		}
		return got
	}
	if got := fmt.Sprint(take(remote, 3), take(local, 2)); got != "[0 1 2] [3 4]" {
		t.Fatalf("remote (priority 5) and local deliveries: %s, want [0 1 2] [3 4]", got)
	}
}

// TestClusterDirectReplyTo: a request published on n1 with reply_to
// amq.rabbitmq.reply-to reaches a server consuming on n3, whose reply,
// published on n3 to the token, is forwarded to the client's channel on
// n1.
func TestClusterDirectReplyTo(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n3 := nodes[0], nodes[2]
	_, client := n1.dial(t)
	_, server := n3.dial(t)
	if _, err := server.QueueDeclare("rpc-across", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	requests, err := server.Consume("rpc-across", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	replies, err := client.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := client.Publish("", "rpc-across", false, false, amqp.Publishing{ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		var req amqp.Delivery
		select {
		case req = <-requests:
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d never reached n3", i)
		}
		if err := server.Publish("", req.ReplyTo, false, false, amqp.Publishing{CorrelationId: req.CorrelationId, Body: []byte("pong")}); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-replies:
			if d.CorrelationId != fmt.Sprint(i) || string(d.Body) != "pong" {
				t.Fatalf("reply %d: %q %q", i, d.CorrelationId, d.Body)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("reply %d published on n3 never reached n1", i)
		}
	}
}

// catchUp makes node n apply every change committed so far: a passive
// declare of a queue nobody declared misses, and a miss first catches up
// with the cluster's log (a Raft read index) before it answers 404.
func catchUp(t *testing.T, n *clusterNode) {
	t.Helper()
	conn, ch := n.dial(t)
	defer conn.Close()
	_, err := ch.QueueDeclarePassive("catch-up-"+uniq(t, ""), false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)
}

// TestClusterMandatoryToQueueOfDownNode: a queue whose home node is down
// is left out of routing, as in RabbitMQ: a mandatory message that reached
// only it comes back 312 NO_ROUTE, then is confirmed, so the publisher
// can tell unroutable from failed; one that also reached a queue up is
// delivered there. Without mandatory the publisher is nacked: the queue
// exists, and a retry may find its node back.
func TestClusterMandatoryToQueueOfDownNode(t *testing.T) {
	nodes := threeProcesses(t)
	_, ch3 := nodes[2].dial(t)
	if _, err := ch3.QueueDeclare("on-n3", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, ch1 := nodes[0].dial(t)
	if _, err := ch1.QueueDeclare("on-n1", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch1.ExchangeDeclare("both", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"on-n1", "on-n3"} {
		if err := ch1.QueueBind(q, "", "both", false, nil); err != nil {
			t.Fatal(err)
		}
	}
	nodes[2].stop(syscall.SIGKILL)
	poll.Until(t, 20*time.Second, "n1 seeing n3 down", func() bool {
		return !slices.Contains(nodes[0].running(t), "n3")
	})
	if err := ch1.Confirm(false); err != nil {
		t.Fatal(err)
	}
	returns := ch1.NotifyReturn(make(chan amqp.Return, 1))
	publish := func(exchange, key string, mandatory bool) bool {
		t.Helper()
		c, err := ch1.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, mandatory, false,
			amqp.Publishing{Body: []byte(key), DeliveryMode: amqp.Persistent})
		if err != nil {
			t.Fatal(err)
		}
		return c.Wait()
	}
	// The return comes before the confirm.
	if !publish("", "on-n3", true) {
		t.Fatal("a mandatory publish to a queue whose node is down was nacked; RabbitMQ returns it and confirms")
	}
	select {
	case r := <-returns:
		if r.ReplyCode != amqp.NoRoute || r.RoutingKey != "on-n3" {
			t.Fatalf("returned with %d %q for %q", r.ReplyCode, r.ReplyText, r.RoutingKey)
		}
	default:
		t.Fatal("a mandatory publish to a queue whose node is down was confirmed and not returned")
	}
	if publish("", "on-n3", false) {
		t.Fatal("a publish to a queue whose node is down was confirmed: it went nowhere")
	}
	if !publish("both", "", true) {
		t.Fatal("a publish that reached a queue up was nacked")
	}
	select {
	case r := <-returns:
		t.Fatalf("a publish that reached a queue up was returned: %d %q", r.ReplyCode, r.ReplyText)
	default:
	}
	if q, err := ch1.QueueDeclarePassive("on-n1", true, false, false, false, nil); err != nil || q.Messages != 1 {
		t.Fatalf("on-n1 after the fan-out: %+v, %v", q, err)
	}
}
