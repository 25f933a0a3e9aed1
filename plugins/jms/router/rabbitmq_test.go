package router

import (
	"strings"
	"testing"

	"github.com/warrenmq/warren/sdk"
)

// The cases in this file were run against RabbitMQ 3.10.8 with the
// rabbitmq_jms_topic_exchange plugin: one queue per binding (named as the
// binding here), the bindings made on an x-jms-topic exchange, each
// message published to it, then a basic.get on every queue. The rabbitmq
// fields are what RabbitMQ delivered; where Warren deliberately does
// otherwise (README.md, "Differences from RabbitMQ"), the warren field
// says what Warren does and the test checks that.

// erlSel is a binding made the JMS client's way, with its version
// argument as the client sends it.
func erlSel(term string) map[string]any {
	return map[string]any{ArgErlangSelector: term, "rjms_version": "3.4.0"}
}

// TestJMSClientTopology: the JMS client binds a subscriber's queue to its
// session's x-jms-topic exchange with the topic's routing key and the
// compiled selector, and binds that exchange to the topic exchange with
// the topic's key. RabbitMQ's x-jms-topic then routes on the selectors
// alone: a binding with another key, or one that as a topic pattern
// would not match, still gets every message its selector is true for.
func TestJMSClientTopology(t *testing.T) {
	weightOver10 := `{'>',{'ident',<<"weight">>},10}.`
	routeEach(t,
		[]bindingSpec{
			{"same-key", "orders", erlSel(weightOver10)},
			{"other-key", "other.key", erlSel(weightOver10)},
			{"hash", "#", erlSel(`{'<',{'ident',<<"weight">>},10}.`)},
			{"true", "nomatch", erlSel(`'true'.`)},
		},
		[]messageSpec{
			// What the topic exchange passes on for topic "orders".
			{"orders", map[string]any{"weight": int32(11)}, "other-key same-key true"},
			{"orders", map[string]any{"weight": int32(5)}, "hash true"},
			// Published to the x-jms-topic exchange itself.
			{"anything", map[string]any{"weight": int32(11)}, "other-key same-key true"},
			{"", nil, "true"},
		})
}

// TestBindingsRabbitMQRefuses: bindings RabbitMQ does not make. Its
// x-jms-topic reads only rjms_erlang_selector, as a long string, with
// erl_scan and erl_parse:parse_term; when that fails the exception is not
// caught, the binding is not made and the connection is closed with 541
// INTERNAL_ERROR. Warren refuses the selectors it cannot read with a 406 on
// the channel, and gives the bindings without one (which the JMS client
// never makes: a subscriber without a selector is bound to the topic
// exchange itself) the seed's topic routing.
func TestBindingsRabbitMQRefuses(t *testing.T) {
	cases := []struct {
		name    string
		args    map[string]any
		warren  string // the 406's text, or what the binding receives
		message string // the routing key of the one message sent
	}{
		{"no arguments", nil, "q", "k"},
		{"x-selector only", map[string]any{ArgSQLSelector: "weight > 10"}, "q", "k"},
		{"another key", nil, "", "k2"},
		{"empty selector", map[string]any{ArgErlangSelector: ""}, "406: binding argument rjms_erlang_selector is empty", ""},
		{"blank selector", map[string]any{ArgErlangSelector: "  "}, "406: binding argument rjms_erlang_selector is empty", ""},
		{"not a term", map[string]any{ArgErlangSelector: "{'>',"}, "406: invalid selector", ""},
		{"unterminated binary", map[string]any{ArgErlangSelector: `{'>',{'ident',<<"weight>>},10}.`}, "406: invalid selector", ""},
		{"not a string", map[string]any{ArgErlangSelector: int32(5)}, "406: binding argument rjms_erlang_selector must be a string", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, _ := TopicType{}.Create(&sdk.Declaration{})
			args, err := sdk.MakeTable(c.args)
			if err != nil {
				t.Fatal(err)
			}
			b := &sdk.Binding{Destination: "q", Key: "k", Args: args}
			if err := x.AddBinding(b); err != nil {
				want, ok := strings.CutPrefix(c.warren, "406: ")
				if e, is406 := err.(*sdk.Error); !ok || !is406 || e.Code != sdk.PreconditionFailed || !strings.Contains(err.Error(), want) {
					t.Fatalf("bind: %v, want %q", err, c.warren)
				}
				return
			}
			if strings.HasPrefix(c.warren, "406: ") {
				t.Fatalf("bind accepted, want %q", c.warren)
			}
			m, _ := sdk.MakeMessage(c.message, map[string]any{"weight": int32(11)}, nil)
			var r sdk.Result
			if err := x.Route(m, &r); err != nil {
				t.Fatal(err)
			}
			if got := map[bool]string{true: "q", false: ""}[r.Len() == 1]; got != c.warren {
				t.Errorf("routed to %q, want %q", got, c.warren)
			}
		})
	}
}
