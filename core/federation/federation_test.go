package federation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

// entry is one x-received-from entry naming a broker and vhost.
func entry(cluster, vhost string) protocol.Table {
	return protocol.Table{"cluster-name": cluster, "vhost": vhost, "uri": "amqp://" + cluster}
}

// The hops rule of the upstream's internal exchange and of the link:
// fewer than max-hops crossed, and not the downstream's own broker and
// vhost before.
func TestShouldForward(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers protocol.Table
		maxHops int64
		want    bool
	}{
		{"no headers", nil, 1, true},
		{"not federated yet", protocol.Table{"a": "b"}, 1, true},
		{"a client's header that is not a path", protocol.Table{ReceivedFrom: "x"}, 1, true},
		{"one hop, max 1", protocol.Table{ReceivedFrom: []any{entry("b", "/")}}, 1, false},
		{"one hop, max 2", protocol.Table{ReceivedFrom: []any{entry("b", "/")}}, 2, true},
		{"been at the downstream", protocol.Table{ReceivedFrom: []any{entry("c", "/"), entry("down", "/")}}, 5, false},
		{"been at the downstream's cluster in another vhost", protocol.Table{ReceivedFrom: []any{entry("down", "other")}}, 5, true},
	} {
		if got := ShouldForward(tc.headers, tc.maxHops, "down", "/"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A binding goes upstream with this broker prepended to x-bound-from and
// the hops it may still travel: the least of the link's max-hops and one
// fewer than where it came from; not at all when none are left or it
// came from the upstream itself.
func TestBindingsPropagate(t *testing.T) {
	l := &link{spec: Spec{VHost: "/", Name: "x", Upstream: Upstream{MaxHops: 2}}}
	b := &binder{l: l, suffix: "A", upCluster: "up", upVHost: "/", cluster: "me"}
	mine := func(hops int16) protocol.Table {
		return protocol.Table{"cluster-name": "me", "vhost": "/", "exchange": "/:x A", "hops": hops}
	}
	from := func(cluster string, hops int16) protocol.Table {
		return protocol.Table{"cluster-name": cluster, "vhost": "/", "exchange": "/:x B", "hops": hops}
	}
	for _, tc := range []struct {
		name string
		args protocol.Table
		want []any // the x-bound-from wanted; nil: not propagated
	}{
		{"a binding made here", protocol.Table{}, []any{mine(2)}},
		{"one with 3 hops left", protocol.Table{BoundFrom: []any{from("c", 3)}}, []any{mine(2), from("c", 3)}},
		{"one with 2 hops left", protocol.Table{BoundFrom: []any{from("c", 2)}}, []any{mine(1), from("c", 2)}},
		{"one with its last hop spent", protocol.Table{BoundFrom: []any{from("c", 1)}}, nil},
		{"one from the upstream", protocol.Table{BoundFrom: []any{from("c", 5), from("up", 5)}}, nil},
	} {
		got, ok := b.propagated(tc.args)
		if ok != (tc.want != nil) {
			t.Errorf("%s: propagated %v", tc.name, ok)
			continue
		}
		if ok && !same(got[BoundFrom], tc.want) {
			t.Errorf("%s: x-bound-from %s, want %s", tc.name, show(got[BoundFrom]), show(tc.want))
		}
	}
}

// A queue link's headers: the original exchange and key kept the first
// time, the visit counted, the link's entry first, CC renamed.
func TestQueueLinkHeaders(t *testing.T) {
	link := protocol.Table{"uri": "amqp://up", "queue": "q"}
	clone := func() protocol.Table {
		c := protocol.Table{}
		for k, v := range link {
			c[k] = v
		}
		return c
	}
	first := visited(protocol.Table{"CC": []any{"k2"}, "h": "v"}, clone(), "ex", "k")
	want := protocol.Table{"x-original-cc": []any{"k2"}, "h": "v", "x-original-exchange": "ex", "x-original-routing-key": "k",
		ReceivedFrom: []any{protocol.Table{"uri": "amqp://up", "queue": "q", "visit-count": int64(1)}}}
	if !same(first, want) {
		t.Fatalf("first visit: %s, want %s", show(first), show(want))
	}
	other := protocol.Table{"uri": "amqp://other", "queue": "q", "visit-count": int64(1)}
	first[ReceivedFrom] = append(first[ReceivedFrom].([]any), other)
	second := visited(first, clone(), "", "q")
	path := second[ReceivedFrom].([]any)
	if len(path) != 2 || path[0].(protocol.Table)["visit-count"] != int64(2) || !same(path[1], other) ||
		second["x-original-exchange"] != "ex" || second["x-original-routing-key"] != "k" {
		t.Fatalf("second visit: %s", show(second))
	}
}

func TestUpstreamQueueName(t *testing.T) {
	for _, tc := range []struct{ upX, upVHost, vhost, x, want string }{
		{"x", "/", "/", "x", "federation: x -> c1"},
		{"up", "/", "/", "x", "federation: up -> c1:x"},
		{"x", "u", "/", "x", "federation: x -> c1:/:x"},
	} {
		if got := upstreamQueueName(tc.upX, tc.upVHost, tc.vhost, tc.x, "c1"); got != tc.want {
			t.Errorf("%+v: %q", tc, got)
		}
	}
}

// A policy names one upstream, a set (all: every upstream) or a
// pattern; a set's element overrides its upstream's keys; a name with
// no upstream is passed over.
func TestUpstreamsForAPolicy(t *testing.T) {
	p := Params{
		Upstreams: map[string]protocol.Table{
			"east": {"uri": "amqp://e", "max-hops": int64(3), "expires": int64(1000)},
			"west": {"uri": []any{"amqp://w1", "amqp://w2"}, "ack-mode": "no-ack", "reconnect-delay": 0.5},
		},
		Sets: map[string][]any{"s": {protocol.Table{"upstream": "west", "exchange": "other", "prefetch-count": int64(5)},
			protocol.Table{"upstream": "gone"}}},
	}
	names := func(us []Upstream) string {
		var out []string
		for _, u := range us {
			out = append(out, u.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		def  protocol.Table
		want string
	}{
		{protocol.Table{PolicyUpstream: "east"}, "east"},
		{protocol.Table{PolicyUpstream: "gone"}, ""},
		{protocol.Table{PolicyUpstreamSet: "all"}, "east,west"},
		{protocol.Table{PolicyUpstreamSet: "s"}, "west"},
		{protocol.Table{PolicyUpstreamPattern: "^w"}, "west"},
		{protocol.Table{"max-length": int64(1)}, ""},
	} {
		if got := names(p.For(tc.def)); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.def, got, tc.want)
		}
	}
	east := p.For(protocol.Table{PolicyUpstream: "east"})[0]
	if east.MaxHops != 3 || east.Expires != 1000 || east.AckMode != OnConfirm || east.Prefetch != 1000 ||
		east.ReconnectDelay != 5*time.Second || east.ConsumerTag != "federation-link-east" || east.Exchange != "" {
		t.Errorf("east with RabbitMQ's defaults: %+v", east)
	}
	west := p.For(protocol.Table{PolicyUpstreamSet: "s"})[0]
	if west.Exchange != "other" || west.Prefetch != 5 || west.AckMode != NoAck || len(west.URIs) != 2 ||
		west.ReconnectDelay != 500*time.Millisecond || west.MaxHops != 1 {
		t.Errorf("west through set s: %+v", west)
	}
}

// Upstreams and sets are checked as RabbitMQ 3.10.8 checks them, in its
// words, naming the parameter.
func TestCheckUpstreamsAndSets(t *testing.T) {
	for _, tc := range []struct {
		set   bool
		value any
		want  string // "" accepted; else a line of the error
	}{
		{false, protocol.Table{"uri": "amqp://h", "max-hops": int64(2), "ack-mode": "on-publish", "trust-user-id": true}, ""},
		{false, protocol.Table{"uri": []any{"amqp://a", "amqps://b"}}, ""},
		{false, protocol.Table{"max-hops": int64(1)}, `Key "uri" not found in up`},
		{false, protocol.Table{"uri": "http://h"}, `"http://h" not a valid URI`},
		{false, protocol.Table{"uri": "amqp://h", "max-hops": "2"}, `max-hops should be a number, actually was "2"`},
		{false, protocol.Table{"uri": "amqp://h", "ack-mode": "sometimes"}, `ack-mode should be one of no-ack, on-publish, on-confirm, actually was "sometimes"`},
		{false, protocol.Table{"uri": "amqp://h", "trust-user-id": "yes"}, `trust-user-id should be boolean`},
		{false, protocol.Table{"uri": "amqp://h", "bogus": int64(1)}, `Unrecognised terms bogus in up`},
		{false, []any{}, `up not a list a list`},
		{true, []any{protocol.Table{"upstream": "a"}, protocol.Table{"upstream": "b", "max-hops": int64(3)}}, ""},
		{true, []any{protocol.Table{"max-hops": int64(3)}}, `Key "upstream" not found in up`},
		{true, []any{protocol.Table{"upstream": "a", "uri": "amqp://x"}}, `Unrecognised terms uri in up`},
		{true, protocol.Table{"upstream": "a"}, `up should be list, actually was an object`},
	} {
		check := CheckUpstream
		if tc.set {
			check = CheckSet
		}
		err := check("up", tc.value)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.value, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.value, err, tc.want)
		}
	}
}

func same(a, b any) bool { return show(a) == show(b) }

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The x-federation-upstream type asks for x-max-hops as a long, as
// RabbitMQ does, and routes as a fanout only what ShouldForward lets go
// to the downstream its arguments name.
func TestUpstreamExchangeType(t *testing.T) {
	typ := UpstreamExchangeType{}
	for _, tc := range []struct {
		args protocol.Table
		want string
	}{
		{protocol.Table{MaxHopsArg: int64(1)}, ""},
		{protocol.Table{}, "Argument x-max-hops missing"},
		{protocol.Table{MaxHopsArg: int32(1)}, "Argument x-max-hops must be of type long"},
	} {
		err := typ.ValidateDeclare(exchange.Definition{Args: tc.args})
		if (tc.want == "") != (err == nil) || (err != nil && !strings.HasSuffix(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	r, err := typ.Create(exchange.Definition{Args: protocol.Table{MaxHopsArg: int64(2), DownstreamNameArg: "down", DownstreamVHostArg: "/"}})
	if err != nil {
		t.Fatal(err)
	}
	b := &exchange.Binding{Destination: exchange.Destination{Name: "q"}}
	if err := r.AddBinding(b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		headers protocol.Table
		routed  bool
	}{
		{nil, true},
		{protocol.Table{ReceivedFrom: []any{entry("b", "/")}}, true},
		{protocol.Table{ReceivedFrom: []any{entry("b", "/"), entry("c", "/")}}, false}, // max-hops spent
		{protocol.Table{ReceivedFrom: []any{entry("down", "/")}}, false},               // been there
	} {
		var props []byte
		var flags uint16
		if tc.headers != nil {
			props, err = protocol.AppendTable(nil, tc.headers)
			if err != nil {
				t.Fatal(err)
			}
			flags = protocol.FlagHeaders
		}
		m, err := message.New("x", "", flags, props, nil)
		if err != nil {
			t.Fatal(err)
		}
		var res exchange.Result
		if err := r.Route(m, &res); err != nil {
			t.Fatal(err)
		}
		if got := len(res.Bindings) == 1; got != tc.routed {
			t.Errorf("%s: routed %v, want %v", show(tc.headers), got, tc.routed)
		}
	}
}
