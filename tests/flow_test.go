package tests

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestQuorumPublisherInFlowWhileTheLogCannotCommit: a publisher that does
// not wait for confirms, on a node whose quorum queue cannot commit (the
// other two members are paused), is held once its channel has the
// bounded number of publishes unanswered: its connection shows state
// "flow", as RabbitMQ's credit flow does, instead of piling its
// messages onto the group. Once the members are back it goes on, and
// its last publish is confirmed.
func TestQuorumPublisherInFlowWhileTheLogCannotCommit(t *testing.T) {
	skipReference(t)
	nodes := threeProcesses(t)
	_, ch1 := nodes[0].dial(t)
	if _, err := ch1.QueueDeclare("qq-flow", true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	n3 := nodes[2]
	for _, n := range nodes[:2] {
		if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.cmd.Process.Signal(syscall.SIGCONT) })
	}

	c, ch := n3.dial(t)
	const n = 3000
	published := make(chan error, 1)
	go func() {
		for i := range n {
			if err := ch.PublishWithContext(context.Background(), "", "qq-flow", false, false,
				amqp.Publishing{Body: fmt.Appendf(nil, "m%d", i)}); err != nil {
				published <- err
				return
			}
		}
		published <- nil
	}()
	name := c.LocalAddr().String()
	state := func() string {
		var conns []struct {
			Name, State string
			PeerPort    int `json:"peer_port"`
		}
		apiGet(t, "http://"+n3.admin+"/api/connections", &conns)
		for _, cn := range conns {
			if fmt.Sprintf("127.0.0.1:%d", cn.PeerPort) == name {
				return cn.State
			}
		}
		return "gone"
	}
	waitUntil(t, "the publisher's connection in flow", func() bool { return state() == "flow" })

	for _, n := range nodes[:2] {
		if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the publisher's connection running again", func() bool { return state() == "running" })
	select {
	case err := <-published:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the publisher is still held 30 s after the members came back")
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "qq-flow", false, false,
		amqp.Publishing{Body: []byte("last"), DeliveryMode: amqp.Persistent})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		t.Fatalf("the last publish: ok=%v err=%v", ok, err)
	}
}
