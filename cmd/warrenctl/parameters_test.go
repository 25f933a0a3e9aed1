package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/protocol"
)

// fakeComponent stands for a registered component (shovel): a value
// needs the key "src-uri".
type fakeComponent struct{}

func (fakeComponent) Check(vhost, name string, value protocol.Table, user string) error {
	if _, ok := value["src-uri"]; !ok {
		return errors.New(`Key "src-uri" not found in fake`)
	}
	return nil
}

// Runtime parameters as rabbitmqctl sets, lists and clears them.
func TestParameters(t *testing.T) {
	b, url := newBroker(t)
	b.RegisterParameterComponent("fake", fakeComponent{})
	if _, err := b.AddVHost("v"); err != nil {
		t.Fatal(err)
	}
	run := ctlMust(t, url)
	run("set_parameter", "fake", "s1", `{"src-uri": "amqp://", "n": 2}`)
	run("set_parameter", "-p", "v", "fake", "s2", `{"src-uri": "amqp://v"}`)
	if p, ok := b.LookupVHostParameter("/", "fake", "s1"); !ok || p.Value["n"] != int64(2) {
		t.Fatalf("parameter s1: %+v %v", p, ok)
	}
	if _, ok := b.LookupVHostParameter("v", "fake", "s2"); !ok {
		t.Fatal("parameter s2 not set in vhost v")
	}
	if err := b.SetVHostLimits("/", topology.Limits{"max-queues": 9}); err != nil {
		t.Fatal(err)
	}
	out := run("list_parameters")
	want := "Listing runtime parameters for vhost / ...\ncomponent\tname\tvalue\n" +
		"vhost-limits\tlimits\t{\"max-queues\":9}\nfake\ts1\t{\"n\":2,\"src-uri\":\"amqp://\"}\n"
	if out != want {
		t.Fatalf("list_parameters:\n%s\nwant\n%s", out, want)
	}
	if out := run("list_parameters", "-p", "v", "-q"); out != "component\tname\tvalue\nfake\ts2\t{\"src-uri\":\"amqp://v\"}\n" {
		t.Fatalf("list_parameters -p v:\n%s", out)
	}
	if _, err := ctl(t, url, "set_parameter", "fake", "bad", `{"dest-uri": "x"}`); err == nil || !strings.Contains(err.Error(), "Validation failed\n\nKey \"src-uri\" not found in fake") {
		t.Fatalf("a value the component refuses: %v", err)
	}
	if _, err := ctl(t, url, "set_parameter", "federation-upstream", "s", `{"uri": "x"}`); err == nil || !strings.Contains(err.Error(), "component federation-upstream not found") {
		t.Fatalf("a component not registered: %v", err)
	}
	if _, err := ctl(t, url, "set_parameter", "fake", "bad", "{not json"); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("a value that is not JSON: %v", err)
	}
	run("clear_parameter", "fake", "s1")
	if _, ok := b.LookupVHostParameter("/", "fake", "s1"); ok {
		t.Fatal("parameter still there after clear_parameter")
	}
	if _, err := ctl(t, url, "clear_parameter", "fake", "s1"); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Fatalf("clearing a missing parameter: %v", err)
	}
}

// A shovel set as a parameter, its status, a restart and its deletion,
// as rabbitmqctl's shovel commands.
func TestShovelCommands(t *testing.T) {
	b, url := newBroker(t)
	if err := b.Start(); err != nil { // shovels run once the broker serves
		t.Fatal(err)
	}
	run := ctlMust(t, url)
	run("set_parameter", "shovel", "s1", `{"src-uri": "amqp://", "src-queue": "from", "dest-uri": "amqp://", "dest-queue": "to"}`)
	poll.Until(t, 30*time.Second, "the shovel running", func() bool {
		out := run("shovel_status", "-q")
		return strings.Contains(out, "s1\t/\tdynamic\trunning\tamqp://\tfrom\tamqp://\tto")
	})
	run("restart_shovel", "s1")
	poll.Until(t, 30*time.Second, "the shovel running again", func() bool {
		return strings.Contains(run("shovel_status", "-q"), "s1\t/\tdynamic\trunning")
	})
	run("delete_shovel", "s1")
	if _, ok := b.LookupVHostParameter("/", "shovel", "s1"); ok {
		t.Fatal("delete_shovel left the parameter")
	}
	if _, err := ctl(t, url, "restart_shovel", "s1"); err == nil {
		t.Fatal("restart_shovel of a deleted shovel succeeded")
	}
}
