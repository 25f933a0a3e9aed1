package vhost_test

import (
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// The checks give the answer the declare would, and declare nothing.
func TestCheckExchangeAndQueue(t *testing.T) {
	v := newTestVHost(t, false)
	if _, err := v.DeclareExchange(exchange.Definition{Name: "x", Type: "topic", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "q", Durable: true, Args: protocol.Table{"x-max-length": int64(5)}}, false); err != nil {
		t.Fatal(err)
	}
	owner := new(int)
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "mine", Exclusive: true, Owner: owner}, false); err != nil {
		t.Fatal(err)
	}
	exchanges := []struct {
		def  exchange.Definition
		want string // "" for success
	}{
		{exchange.Definition{Name: "x", Type: "topic", Durable: true}, ""},
		{exchange.Definition{Name: "x", Type: "direct", Durable: true}, "inequivalent arg 'type'"},
		{exchange.Definition{Name: "new", Type: "fanout"}, ""},
		{exchange.Definition{Name: "new", Type: "nope"}, "invalid exchange type"},
		{exchange.Definition{Name: "new", Type: "direct", Args: protocol.Table{"alternate-exchange": int64(1)}}, "alternate-exchange"},
		{exchange.Definition{Name: "amq.new", Type: "direct"}, "reserved prefix"},
		{exchange.Definition{Name: "amq.direct", Type: "direct", Durable: true}, ""},
		{exchange.Definition{Name: "", Type: "direct"}, "default exchange"},
	}
	for _, c := range exchanges {
		err := v.CheckExchange(c.def)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckExchange(%+v) = %v, want %q", c.def, err, c.want)
		}
	}
	queues := []struct {
		def  topology.QueueDef
		want string
	}{
		{topology.QueueDef{Name: "q", Durable: true, Args: protocol.Table{"x-max-length": int64(5)}}, ""},
		{topology.QueueDef{Name: "q", Durable: true}, "inequivalent arg 'x-max-length'"},
		{topology.QueueDef{Name: "q", Durable: false, Args: protocol.Table{"x-max-length": int64(5)}}, "inequivalent arg 'durable'"},
		{topology.QueueDef{Name: "fresh", Args: protocol.Table{"x-overflow": "sideways"}}, "x-overflow"},
		{topology.QueueDef{Name: "mine"}, "exclusive"},
		{topology.QueueDef{Name: "amq.q"}, "reserved prefix"},
		{topology.QueueDef{Name: "fresh", Durable: true}, ""},
	}
	for _, c := range queues {
		err := v.CheckQueue(c.def)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckQueue(%+v) = %v, want %q", c.def, err, c.want)
		}
	}
	if _, err := v.Exchange("new"); err == nil {
		t.Error("CheckExchange declared an exchange")
	}
	if _, err := v.Queue("fresh", nil); err == nil {
		t.Error("CheckQueue declared a queue")
	}
}
