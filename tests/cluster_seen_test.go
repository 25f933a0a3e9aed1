package tests

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestClusterTopologyReadYourWrites: a declare, bind, unbind or delete
// answered through one node is in force on every node when the answer
// arrives, as in RabbitMQ, whose changes commit on every node first.
// Applications behind a load balancer declare through one node and
// publish through another; a mandatory publish right after declare-ok
// must not come back unroutable, and one without mandatory must not be
// confirmed and dropped.
func TestClusterTopologyReadYourWrites(t *testing.T) {
	skipReference(t)
	nodes := threeProcesses(t)
	_, ch1 := nodes[0].dial(t)
	type publisher struct {
		name    string
		ch      *amqp.Channel
		returns chan amqp.Return
	}
	var pubs []publisher
	for _, n := range nodes[1:] {
		_, ch := n.dial(t)
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, publisher{n.name, ch, ch.NotifyReturn(make(chan amqp.Return, 1))})
	}
	// publish sends one mandatory message through each publisher and
	// says through which it came back unroutable.
	publish := func(exchange, key string) []string {
		t.Helper()
		var back []string
		for _, p := range pubs {
			dc, err := p.ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, true, false,
				amqp.Publishing{Body: []byte(key)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			ok, err := dc.WaitContext(ctx)
			cancel()
			if err != nil || !ok {
				t.Fatalf("%s: publish to %q %q: ok=%v err=%v", p.name, exchange, key, ok, err)
			}
			// A return comes before its publish's ack.
			select {
			case <-p.returns:
				back = append(back, p.name)
			default:
			}
		}
		return back
	}
	// routedThrough names the publishers whose message did not come back.
	routedThrough := func(back []string) []string {
		var out []string
		for _, p := range pubs {
			if !slices.Contains(back, p.name) {
				out = append(out, p.name)
			}
		}
		return out
	}
	if err := ch1.ExchangeDeclare("ryw-x", "direct", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	const rounds = 200
	unroutable := map[string]int{}
	for i := range rounds {
		q := fmt.Sprintf("ryw-%d", i)
		if _, err := ch1.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		for _, n := range publish("", q) {
			unroutable["declare, then publish through "+n]++
		}
		if err := ch1.QueueBind(q, "k"+q, "ryw-x", false, nil); err != nil {
			t.Fatal(err)
		}
		for _, n := range publish("ryw-x", "k"+q) {
			unroutable["bind, then publish through "+n]++
		}
		if err := ch1.QueueUnbind(q, "k"+q, "ryw-x", nil); err != nil {
			t.Fatal(err)
		}
		for _, n := range routedThrough(publish("ryw-x", "k"+q)) {
			unroutable["unbind, then publish routed through "+n]++
		}
		if _, err := ch1.QueueDelete(q, false, false, false); err != nil {
			t.Fatal(err)
		}
		for _, n := range routedThrough(publish("", q)) {
			unroutable["delete, then publish routed through "+n]++
		}
	}
	for what, n := range unroutable {
		t.Errorf("%s: %d of %d", what, n, rounds)
	}
}
