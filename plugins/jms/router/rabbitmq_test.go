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

// TestDivisionByZero: RabbitMQ divides with Erlang's '/', except by zero,
// where its evaluator answers the atom plus_infinity, minus_infinity or
// nan (for a positive, negative or zero dividend). In Erlang's term order
// every atom is greater than every number and less than every binary, and
// an atom equals only itself; arithmetic on an atom fails. So there
// x / 0 > 5 is true whatever the sign of x, x / 0 < 5 is false, and
// 0 / 0 = 0 / 0 is true. Warren divides by zero as Java does with floats
// (IEEE 754: +Inf, -Inf, NaN), which is what a JMS application's selector
// means: the results agree for a positive dividend only.
func TestDivisionByZero(t *testing.T) {
	div := func(op, rhs string) map[string]any {
		return erlSel(`{'` + op + `',{'/',{'ident',<<"a">>},{'ident',<<"b">>}},` + rhs + `}.`)
	}
	binds := []bindingSpec{
		{"gt5", "k", div(">", "5")},
		{"lt5", "k", div("<", "5")},
		{"eq5", "k", div("=", "5")},
		{"ne5", "k", div("<>", "5")},
		{"gtbin", "k", div(">", `<<"zzz">>`)},
		{"eqself", "k", erlSel(`{'=',{'/',{'ident',<<"a">>},{'ident',<<"b">>}},{'/',{'ident',<<"a">>},{'ident',<<"b">>}}}.`)},
		{"isnull", "k", erlSel(`{'is_null',{'/',{'ident',<<"a">>},{'ident',<<"b">>}}}.`)},
		{"between", "k", erlSel(`{'between',{'/',{'ident',<<"a">>},{'ident',<<"b">>}},0,1000000}.`)},
	}
	cases := []struct {
		a, b             any
		rabbitmq, warren string
	}{
		{int32(1), int32(0), "eqself gt5 ne5", "eqself gt5 ne5"},
		{int32(-1), int32(0), "eqself gt5 ne5", "eqself lt5 ne5"},
		{int32(0), int32(0), "eqself gt5 ne5", "ne5"},
		{int32(1), 0.0, "eqself gt5 ne5", "eqself gt5 ne5"},
		{-1.5, 0.0, "eqself gt5 ne5", "eqself lt5 ne5"},
		// Not by zero: both divide as floats.
		{int32(10), int32(1), "between eqself gt5 ne5", "between eqself gt5 ne5"},
		{int32(7), int32(2), "between eqself lt5 ne5", "between eqself lt5 ne5"},
	}
	var msgs []messageSpec
	for _, c := range cases {
		msgs = append(msgs, messageSpec{"k", map[string]any{"a": c.a, "b": c.b}, c.warren})
	}
	routeEach(t, binds, msgs)

	// Arithmetic on the result: RabbitMQ's evaluator fails (badarith), the
	// publisher's channel crashes and its connection is closed with 541
	// INTERNAL_ERROR. Warren goes on with +Inf.
	routeEach(t,
		[]bindingSpec{
			{"plus", "k", erlSel(`{'>',{'+',{'/',{'ident',<<"a">>},0},1},5}.`)},
			{"ctl", "k", erlSel(`'true'.`)},
		},
		[]messageSpec{{"k", map[string]any{"a": int32(1)}, "ctl plus"}})
}

// TestSameKeyAndDestination: RabbitMQ keeps one selector per binding key
// and destination, the last bound, and applies it to every binding with
// that key and destination; unbinding any of them removes it, and the
// others then select nothing. Warren keeps each binding's own selector.
func TestSameKeyAndDestination(t *testing.T) {
	f := newFixture(t, TopicType{})
	one := f.bind("q", "k", erlSel(`{'=',{'ident',<<"n">>},1}.`))
	f.bind("q", "k", erlSel(`{'=',{'ident',<<"n">>},2}.`))
	for _, c := range []struct {
		n                int32
		rabbitmq, warren string
	}{
		{1, "", "q"},
		{2, "q", "q"},
	} {
		if got := f.route("k", map[string]any{"n": c.n}); got != c.warren {
			t.Errorf("n = %d: routed to %q, want %q (RabbitMQ: %q)", c.n, got, c.warren, c.rabbitmq)
		}
	}
	if err := f.x.RemoveBindings([]sdk.BindingID{one}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n                int32
		rabbitmq, warren string
	}{
		{1, "", ""},
		{2, "", "q"},
	} {
		if got := f.route("k", map[string]any{"n": c.n}); got != c.warren {
			t.Errorf("after unbinding n = 1's: n = %d: routed to %q, want %q (RabbitMQ: %q)", c.n, got, c.warren, c.rabbitmq)
		}
	}
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
		// RabbitMQ's parse_term needs the full stop; Warren takes the term
		// without it, as it takes it with one.
		{"no full stop", map[string]any{ArgErlangSelector: `{'>',{'ident',<<"weight">>},10}`}, "q", "other"},
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

// TestUnknownOperators: RabbitMQ takes any Erlang term as a selector and
// evaluates an operator it does not know to the atom error (a tuple of
// four or more elements, or an atom, to itself). A message is selected
// only when the whole selector is true, so alone they select nothing, but
// under 'or' and in comparisons they select: RabbitMQ's routing is in the
// rabbitmq column. Warren refuses them with 406 when the binding is made,
// so that a subscriber learns its selector means nothing here instead of
// silently receiving nothing (or everything).
func TestUnknownOperators(t *testing.T) {
	cases := []struct {
		term     string
		rabbitmq string // with the message {weight: 11}, beside a 'true' binding ctl
		warren   string // the 406's text
	}{
		{`{'gt',{'ident',<<"weight">>},10}.`, "ctl", "unknown selector operator 'gt'"},
		{`{'abs',{'ident',<<"weight">>}}.`, "ctl", "unknown selector operator 'abs'"},
		{`{'or',{'gt',1,2},'true'}.`, "ctl q", "unknown selector operator 'gt'"},
		{`{'not',{'gt',1,2}}.`, "ctl", "unknown selector operator 'gt'"},
		{`{'>',{'gt',1,2},5}.`, "ctl q", "unknown selector operator 'gt'"},
		{`{'foo',1,2,3}.`, "ctl", "unknown selector operator 'foo'"},
		{`foo.`, "ctl", "atom 'foo'"},
	}
	for _, c := range cases {
		x, _ := TopicType{}.Create(&sdk.Declaration{})
		args, _ := sdk.MakeTable(erlSel(c.term))
		err := x.AddBinding(&sdk.Binding{Destination: "q", Key: "k", Args: args})
		if e, ok := err.(*sdk.Error); !ok || e.Code != sdk.PreconditionFailed || !strings.Contains(err.Error(), c.warren) {
			t.Errorf("%s: got %v, want a 406 with %q (RabbitMQ routes to %q)", c.term, err, c.warren, c.rabbitmq)
		}
	}
}
