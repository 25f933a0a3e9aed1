package tests

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Routing: the built-in exchange types, several paths to one queue,
// exchange-to-exchange bindings, alternate exchanges, mandatory returns.

// routeCase is one binding and one message; match says whether the
// binding routes the message.
type routeCase struct {
	bindKey  string
	bindArgs amqp.Table
	key      string
	headers  amqp.Table
	match    bool
}

// checkRoutes declares an exchange of kind, one queue per case bound as
// the case says, publishes each case's message once and checks which
// queues got it. Every message goes to every binding, so each case is
// checked against all the others' messages too only where the bindings
// agree; cases stay independent because each message carries a tag the
// queues are checked for.
func checkRoutes(t *testing.T, kind string, cases []routeCase) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	_ = c
	x := declareExchange(t, s, ch, "x", kind, nil)
	for i, tc := range cases {
		q := declareQueue(t, s, ch, fmt.Sprint(i), nil)
		bind(t, ch, q, tc.bindKey, x, tc.bindArgs)
		tag := fmt.Sprintf("case-%d", i)
		publishConfirmed(t, ch, x, tc.key, amqp.Publishing{Headers: tc.headers, Body: []byte(tag)})
		got := drain(t, ch, q)
		matched := len(got) == 1 && got[0] == tag
		if len(got) > 1 || (len(got) == 1 && got[0] != tag) {
			t.Errorf("case %d: queue got %q", i, got)
		}
		if matched != tc.match {
			t.Errorf("case %d: binding %q %v, message %q %v: routed=%v, expected %v",
				i, tc.bindKey, tc.bindArgs, tc.key, tc.headers, matched, tc.match)
		}
		if err := ch.QueueUnbind(q, tc.bindKey, x, tc.bindArgs); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDirectRouting(t *testing.T) {
	checkRoutes(t, "direct", []routeCase{
		{bindKey: "a", key: "a", match: true},
		{bindKey: "a", key: "b", match: false},
		{bindKey: "a", key: "A", match: false},
		{bindKey: "", key: "", match: true},
		{bindKey: "", key: "a", match: false},
		{bindKey: "a.b", key: "a.b", match: true},
		{bindKey: "*", key: "a", match: false},
		{bindKey: "#", key: "a", match: false},
	})
}

func TestDirectRoutingSeveralQueues(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	x := declareExchange(t, s, ch, "x", "direct", nil)
	q1 := declareQueue(t, s, ch, "q1", nil)
	q2 := declareQueue(t, s, ch, "q2", nil)
	bind(t, ch, q1, "red", x, nil)
	bind(t, ch, q1, "green", x, nil)
	bind(t, ch, q2, "red", x, nil)
	for _, k := range []string{"red", "green", "blue"} {
		publishConfirmed(t, ch, x, k, body(k))
	}
	if got := drain(t, ch, q1); !reflect.DeepEqual(got, []string{"red", "green"}) {
		t.Fatalf("q1 got %q", got)
	}
	if got := drain(t, ch, q2); !reflect.DeepEqual(got, []string{"red"}) {
		t.Fatalf("q2 got %q", got)
	}
}

func TestFanoutRouting(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	x := declareExchange(t, s, ch, "x", "fanout", nil)
	q1 := declareQueue(t, s, ch, "q1", nil)
	q2 := declareQueue(t, s, ch, "q2", nil)
	bind(t, ch, q1, "", x, nil)
	bind(t, ch, q2, "ignored", x, nil)
	publishConfirmed(t, ch, x, "any.key", body("one"))
	publishConfirmed(t, ch, x, "", body("two"))
	for _, q := range []string{q1, q2} {
		if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"one", "two"}) {
			t.Fatalf("%s got %q", q, got)
		}
	}
}

func TestTopicRouting(t *testing.T) {
	checkRoutes(t, "topic", []routeCase{
		{bindKey: "*.stock.#", key: "usd.stock", match: true},
		{bindKey: "*.stock.#", key: "eur.stock.db", match: true},
		{bindKey: "*.stock.#", key: "stock.nasdaq", match: false},
		{bindKey: "*.stock.#", key: "usd.stock.a.b.c", match: true},
		{bindKey: "*.stock.#", key: "stock", match: false},
		{bindKey: "*.stock.#", key: "a.b.stock", match: false},
		{bindKey: "#", key: "anything.at.all", match: true},
		{bindKey: "#", key: "", match: true},
		{bindKey: "#", key: "single", match: true},
		{bindKey: "", key: "", match: true},
		{bindKey: "", key: "a", match: false},
		{bindKey: "a.*", key: "a.b", match: true},
		{bindKey: "a.*", key: "a", match: false},
		{bindKey: "a.*", key: "a.b.c", match: false},
		{bindKey: "a.*", key: "a.", match: true}, // "*" matches an empty word
		{bindKey: "*", key: "a", match: true},
		{bindKey: "*", key: "", match: false}, // "" is no words at all
		{bindKey: "*", key: "a.b", match: false},
		{bindKey: "#.b", key: "b", match: true},
		{bindKey: "#.b", key: "a.b", match: true},
		{bindKey: "#.b", key: "a.a.b", match: true},
		{bindKey: "#.b", key: "b.c", match: false},
		{bindKey: "a.#.b", key: "a.b", match: true},
		{bindKey: "a.#.b", key: "a.x.y.b", match: true},
		{bindKey: "a.#.b", key: "a", match: false},
		{bindKey: "a.#", key: "a", match: true},
		{bindKey: "a.#", key: "ab", match: false},
		{bindKey: "#.#", key: "", match: true},
		{bindKey: "#.#", key: "a.b.c", match: true},
		{bindKey: "*.*", key: "a.b", match: true},
		{bindKey: "*.*", key: "a", match: false},
		{bindKey: "a.b", key: "a.b", match: true},
		{bindKey: "a.b", key: "a.b.c", match: false},
		{bindKey: "a*", key: "ab", match: false}, // wildcards are whole words only
		{bindKey: "a*", key: "a*", match: true},
		{bindKey: "*.#.*", key: "a", match: false},
		{bindKey: "*.#.*", key: "a.b", match: true},
		{bindKey: "*.#.*", key: "a.b.c.d", match: true},
	})
}

// The seed-001 headers example, with the answers RabbitMQ gives (see
// semantics.md): A = format=pdf,type=report,all; B = format=pdf,type=log,
// any; C = format=zip,type=report,all.
func TestHeadersSeedExample(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	x := declareExchange(t, s, ch, "x", "headers", nil)
	qa := declareQueue(t, s, ch, "A", nil)
	qb := declareQueue(t, s, ch, "B", nil)
	qc := declareQueue(t, s, ch, "C", nil)
	bind(t, ch, qa, "", x, amqp.Table{"format": "pdf", "type": "report", "x-match": "all"})
	bind(t, ch, qb, "", x, amqp.Table{"format": "pdf", "type": "log", "x-match": "any"})
	bind(t, ch, qc, "", x, amqp.Table{"format": "zip", "type": "report", "x-match": "all"})
	publishConfirmed(t, ch, x, "", amqp.Publishing{Headers: amqp.Table{"format": "pdf", "type": "report"}, Body: []byte("1")})
	publishConfirmed(t, ch, x, "", amqp.Publishing{Headers: amqp.Table{"format": "pdf"}, Body: []byte("2")})
	publishConfirmed(t, ch, x, "", amqp.Publishing{Headers: amqp.Table{"format": "zip", "type": "log"}, Body: []byte("3")})
	want := map[string][]string{qa: {"1"}, qb: {"1", "2", "3"}, qc: nil}
	for _, q := range []string{qa, qb, qc} {
		if got := drain(t, ch, q); !reflect.DeepEqual(got, want[q]) {
			t.Errorf("%s got %q, expected %q", q, got, want[q])
		}
	}
}

func TestHeadersRouting(t *testing.T) {
	all := func(kv ...any) amqp.Table { return table("all", kv...) }
	any := func(kv ...any) amqp.Table { return table("any", kv...) }
	checkRoutes(t, "headers", []routeCase{
		// x-match all (also the default)
		{bindArgs: all("a", "1", "b", "2"), headers: amqp.Table{"a": "1", "b": "2"}, match: true},
		{bindArgs: all("a", "1", "b", "2"), headers: amqp.Table{"a": "1", "b": "2", "c": "3"}, match: true},
		{bindArgs: all("a", "1", "b", "2"), headers: amqp.Table{"a": "1"}, match: false},
		{bindArgs: all("a", "1", "b", "2"), headers: amqp.Table{"a": "1", "b": "3"}, match: false},
		{bindArgs: all("a", "1", "b", "2"), headers: nil, match: false},
		{bindArgs: amqp.Table{"a": "1", "b": "2"}, headers: amqp.Table{"a": "1", "b": "2"}, match: true},
		{bindArgs: amqp.Table{"a": "1", "b": "2"}, headers: amqp.Table{"a": "1"}, match: false},
		// x-match any
		{bindArgs: any("a", "1", "b", "2"), headers: amqp.Table{"a": "1"}, match: true},
		{bindArgs: any("a", "1", "b", "2"), headers: amqp.Table{"b": "2", "z": "9"}, match: true},
		{bindArgs: any("a", "1", "b", "2"), headers: amqp.Table{"a": "2", "b": "1"}, match: false},
		{bindArgs: any("a", "1", "b", "2"), headers: nil, match: false},
		// no conditions: all matches everything, any nothing
		{bindArgs: all(), headers: nil, match: true},
		{bindArgs: all(), headers: amqp.Table{"a": "1"}, match: true},
		{bindArgs: nil, headers: amqp.Table{"a": "1"}, match: true},
		{bindArgs: any(), headers: amqp.Table{"a": "1"}, match: false},
		{bindArgs: any(), headers: nil, match: false},
		// x- keys: ignored by all/any, compared by all-with-x/any-with-x
		{bindArgs: all("x-k", "1"), headers: amqp.Table{"x-k": "2"}, match: true},
		{bindArgs: any("x-k", "1"), headers: amqp.Table{"x-k": "1"}, match: false},
		{bindArgs: table("all-with-x", "x-k", "1"), headers: amqp.Table{"x-k": "1"}, match: true},
		{bindArgs: table("all-with-x", "x-k", "1"), headers: amqp.Table{"x-k": "2"}, match: false},
		{bindArgs: table("all-with-x", "x-k", "1", "a", "1"), headers: amqp.Table{"x-k": "1"}, match: false},
		{bindArgs: table("any-with-x", "x-k", "1", "a", "1"), headers: amqp.Table{"x-k": "1"}, match: true},
		{bindArgs: table("any-with-x", "x-k", "1"), headers: amqp.Table{"x-k": "2"}, match: false},
		// void: presence is enough
		{bindArgs: all("a", nil), headers: amqp.Table{"a": "anything"}, match: true},
		{bindArgs: all("a", nil), headers: amqp.Table{"a": int32(7)}, match: true},
		{bindArgs: all("a", nil), headers: amqp.Table{"b": "1"}, match: false},
		{bindArgs: any("a", nil, "b", "1"), headers: amqp.Table{"a": nil}, match: true},
		// the empty string matches only the empty string
		{bindArgs: all("a", ""), headers: amqp.Table{"a": ""}, match: true},
		{bindArgs: all("a", ""), headers: amqp.Table{"a": "x"}, match: false},
		{bindArgs: all("a", ""), headers: amqp.Table{}, match: false},
		// other value types
		{bindArgs: all("b", true), headers: amqp.Table{"b": true}, match: true},
		{bindArgs: all("b", true), headers: amqp.Table{"b": false}, match: false},
		{bindArgs: all("b", true), headers: amqp.Table{"b": "true"}, match: false},
	})
}

// Numbers compare by value across numeric types (int 1 matches long 1 and
// double 1.0); a string never equals a number.
func TestHeadersNumericTypes(t *testing.T) {
	checkRoutes(t, "headers", []routeCase{
		{bindArgs: table("all", "n", int32(1)), headers: amqp.Table{"n": int32(1)}, match: true},
		{bindArgs: table("all", "n", int32(1)), headers: amqp.Table{"n": int64(1)}, match: true},
		{bindArgs: table("all", "n", int32(1)), headers: amqp.Table{"n": int16(1)}, match: true},
		{bindArgs: table("all", "n", int32(1)), headers: amqp.Table{"n": int8(1)}, match: true},
		{bindArgs: table("all", "n", int32(1)), headers: amqp.Table{"n": uint8(1)}, match: true},
		{bindArgs: table("all", "n", int64(1)), headers: amqp.Table{"n": int32(1)}, match: true},
		{bindArgs: table("all", "n", int32(1)), headers: amqp.Table{"n": int64(2)}, match: false},
		{bindArgs: table("all", "n", int32(1)), headers: amqp.Table{"n": "1"}, match: false},
		{bindArgs: table("all", "n", "1"), headers: amqp.Table{"n": int32(1)}, match: false},
		{bindArgs: table("all", "n", float64(1.5)), headers: amqp.Table{"n": float64(1.5)}, match: true},
		{bindArgs: table("all", "n", float64(1.5)), headers: amqp.Table{"n": float32(1.5)}, match: true},
		{bindArgs: table("all", "n", int32(1)), headers: amqp.Table{"n": float64(1)}, match: true},
		{bindArgs: table("all", "n", float64(1)), headers: amqp.Table{"n": int64(1)}, match: true},
		{bindArgs: table("all", "n", float64(1.5)), headers: amqp.Table{"n": int64(1)}, match: false},
		{bindArgs: table("all", "n", float64(1)), headers: amqp.Table{"n": "1"}, match: false},
	})
}

func table(match string, kv ...any) amqp.Table {
	t := amqp.Table{"x-match": match}
	for i := 0; i+1 < len(kv); i += 2 {
		t[kv[i].(string)] = kv[i+1]
	}
	return t
}

// However many bindings or exchange-to-exchange paths lead to a queue, it
// gets one copy.
func TestOneCopyPerQueue(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	topic := declareExchange(t, s, ch, "topic", "topic", nil)
	fan := declareExchange(t, s, ch, "fan", "fanout", nil)
	hdr := declareExchange(t, s, ch, "hdr", "headers", nil)
	q := declareQueue(t, s, ch, "q", nil)
	other := declareQueue(t, s, ch, "other", nil)
	bind(t, ch, q, "a.b", topic, nil)
	bind(t, ch, q, "a.*", topic, nil)
	bind(t, ch, q, "#", topic, nil)
	bind(t, ch, other, "#", topic, nil)
	bind(t, ch, q, "", fan, nil)
	bind(t, ch, q, "", hdr, amqp.Table{"h": "1"})
	bind(t, ch, q, "", hdr, amqp.Table{"x-match": "any", "h": "1", "i": "2"})
	// topic -> fan -> q and topic -> hdr -> q, besides the direct ones.
	if err := ch.ExchangeBind(fan, "#", topic, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeBind(hdr, "a.b", topic, false, nil); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, topic, "a.b", amqp.Publishing{Headers: amqp.Table{"h": "1", "i": "2"}, Body: []byte("once")})
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"once"}) {
		t.Fatalf("q got %q, expected one copy", got)
	}
	if got := drain(t, ch, other); !reflect.DeepEqual(got, []string{"once"}) {
		t.Fatalf("other got %q, expected one copy", got)
	}
}

func TestExchangeToExchange(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	src := declareExchange(t, s, ch, "src", "topic", nil)
	dst := declareExchange(t, s, ch, "dst", "direct", nil)
	q := declareQueue(t, s, ch, "q", nil)
	bind(t, ch, q, "a.b", dst, nil)
	if err := ch.ExchangeBind(dst, "a.*", src, false, nil); err != nil {
		t.Fatal(err)
	}
	// The binding key selects at the source; the message keeps its own
	// routing key at the destination.
	publishConfirmed(t, ch, src, "a.b", body("a.b"))
	publishConfirmed(t, ch, src, "a.c", body("a.c"))    // passes src, not dst
	publishConfirmed(t, ch, src, "x.b", body("x.b"))    // stops at src
	publishConfirmed(t, ch, dst, "a.b", body("direct")) // dst by itself
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"a.b", "direct"}) {
		t.Fatalf("q got %q", got)
	}
	if err := ch.ExchangeUnbind(dst, "a.*", src, false, nil); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, src, "a.b", body("unbound"))
	if got := drain(t, ch, q); len(got) != 0 {
		t.Fatalf("q got %q after exchange.unbind", got)
	}
	// Binding to or from a missing exchange is 404.
	missing := uniq(t, "missing")
	expectCode(t, ch.ExchangeBind(missing, "", src, false, nil), amqp.NotFound)
}

// Cycles between exchanges are cut during delivery; each queue gets one
// copy.
func TestExchangeCycle(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	a := declareExchange(t, s, ch, "a", "fanout", nil)
	b := declareExchange(t, s, ch, "b", "fanout", nil)
	c := declareExchange(t, s, ch, "c", "fanout", nil)
	for _, e := range [][2]string{{a, b}, {b, c}, {c, a}, {a, a}} {
		if err := ch.ExchangeBind(e[1], "", e[0], false, nil); err != nil {
			t.Fatal(err)
		}
	}
	qa := declareQueue(t, s, ch, "qa", nil)
	qc := declareQueue(t, s, ch, "qc", nil)
	bind(t, ch, qa, "", a, nil)
	bind(t, ch, qc, "", c, nil)
	publishConfirmed(t, ch, b, "", body("round"))
	for _, q := range []string{qa, qc} {
		if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"round"}) {
			t.Fatalf("%s got %q", q, got)
		}
	}
}

// returns collects basic.return on a channel.
func returns(ch *amqp.Channel) <-chan amqp.Return {
	return ch.NotifyReturn(make(chan amqp.Return, 16))
}

func expectReturn(t testing.TB, r <-chan amqp.Return, body string) amqp.Return {
	t.Helper()
	select {
	case ret := <-r:
		if string(ret.Body) != body {
			t.Fatalf("returned %q, expected %q", ret.Body, body)
		}
		return ret
	case <-time.After(5 * time.Second):
		t.Fatalf("no basic.return for %q", body)
	}
	return amqp.Return{}
}

func noReturn(t testing.TB, r <-chan amqp.Return) {
	t.Helper()
	select {
	case ret := <-r:
		t.Fatalf("unexpected basic.return %d %s of %q", ret.ReplyCode, ret.ReplyText, ret.Body)
	default:
	}
}

// A mandatory message that routes nowhere comes back with 312 NO_ROUTE;
// with confirms on, the return comes before the ack.
func TestMandatoryUnroutable(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	r := returns(ch)
	x := declareExchange(t, s, ch, "x", "direct", nil)
	q := declareQueue(t, s, ch, "q", nil)
	bind(t, ch, q, "routed", x, nil)

	msg := amqp.Publishing{ContentType: "text/plain", MessageId: "m1", Headers: amqp.Table{"h": "v"}, Body: []byte("lost")}
	if !confirmPublish(t, ch, x, "nowhere", true, msg) {
		t.Fatal("unroutable mandatory publish was nacked, expected ack")
	}
	// The ack has been seen, so the return must already be there.
	select {
	case ret := <-r:
		if ret.ReplyCode != amqp.NoRoute || ret.ReplyText != "NO_ROUTE" || ret.Exchange != x || ret.RoutingKey != "nowhere" {
			t.Fatalf("return %d %q %q %q", ret.ReplyCode, ret.ReplyText, ret.Exchange, ret.RoutingKey)
		}
		if string(ret.Body) != "lost" || ret.ContentType != "text/plain" || ret.MessageId != "m1" || ret.Headers["h"] != "v" {
			t.Fatalf("returned message changed: %+v", ret)
		}
	default:
		t.Fatal("the ack arrived before the basic.return")
	}

	// Routed mandatory messages are not returned; unroutable ones without
	// mandatory are dropped silently.
	if !confirmPublish(t, ch, x, "routed", true, body("fine")) {
		t.Fatal("nacked")
	}
	if !confirmPublish(t, ch, x, "nowhere", false, body("dropped")) {
		t.Fatal("nacked")
	}
	noReturn(t, r)
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"fine"}) {
		t.Fatalf("q got %q", got)
	}

	// The default exchange returns too, for a queue that does not exist.
	if !confirmPublish(t, ch, "", uniq(t, "no-such-queue"), true, body("to nobody")) {
		t.Fatal("nacked")
	}
	ret := expectReturn(t, r, "to nobody")
	if ret.ReplyCode != amqp.NoRoute || ret.Exchange != "" {
		t.Fatalf("return %d via %q", ret.ReplyCode, ret.Exchange)
	}
}

// Without confirms the return still arrives.
func TestMandatoryReturnWithoutConfirms(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	r := returns(ch)
	x := declareExchange(t, s, ch, "x", "fanout", nil)
	if err := ch.PublishWithContext(t.Context(), x, "k", true, false, body("back")); err != nil {
		t.Fatal(err)
	}
	ret := expectReturn(t, r, "back")
	if ret.ReplyCode != amqp.NoRoute {
		t.Fatalf("reply code %d", ret.ReplyCode)
	}
}

func TestPublishToMissingExchange(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	publish(t, ch, uniq(t, "missing"), "k", body("x"))
	e := expectClose(t, closed, amqp.NotFound)
	if !strings.Contains(e.Reason, "NOT_FOUND") {
		t.Fatalf("reason %q", e.Reason)
	}
	// The connection carries on.
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	declareQueue(t, s, ch, "", nil)
}

// immediate=true is not implemented (RabbitMQ: 540, a connection error).
func TestPublishImmediate(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	q := declareQueue(t, s, ch, "", nil)
	if err := ch.PublishWithContext(t.Context(), "", q, false, true, body("now")); err != nil {
		t.Fatal(err)
	}
	expectClose(t, closed, amqp.NotImplemented)
}

func TestAlternateExchange(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	r := returns(ch)
	ae := declareExchange(t, s, ch, "ae", "fanout", nil)
	x := declareExchange(t, s, ch, "x", "direct", amqp.Table{"alternate-exchange": ae})
	routed := declareQueue(t, s, ch, "routed", nil)
	unrouted := declareQueue(t, s, ch, "unrouted", nil)
	bind(t, ch, routed, "key1", x, nil)
	bind(t, ch, unrouted, "", ae, nil)

	msg := amqp.Publishing{Headers: amqp.Table{"h": "v"}, Body: []byte("other")}
	if !confirmPublish(t, ch, x, "key1", true, body("key1")) || !confirmPublish(t, ch, x, "key2", true, msg) {
		t.Fatal("nacked")
	}
	// Routed via the AE counts as routed: no return.
	noReturn(t, r)
	if got := drain(t, ch, routed); !reflect.DeepEqual(got, []string{"key1"}) {
		t.Fatalf("routed got %q", got)
	}
	m := get(t, ch, unrouted)
	// The message is unchanged: same exchange and routing key, same headers.
	if string(m.Body) != "other" || m.Exchange != x || m.RoutingKey != "key2" || m.Headers["h"] != "v" || len(m.Headers) != 1 {
		t.Fatalf("via AE: %q exchange %q key %q headers %v", m.Body, m.Exchange, m.RoutingKey, m.Headers)
	}
}

// An AE's own AE is followed.
func TestAlternateExchangeChain(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	r := returns(ch)
	ae2 := declareExchange(t, s, ch, "ae2", "fanout", nil)
	ae1 := declareExchange(t, s, ch, "ae1", "direct", amqp.Table{"alternate-exchange": ae2})
	x := declareExchange(t, s, ch, "x", "direct", amqp.Table{"alternate-exchange": ae1})
	q1 := declareQueue(t, s, ch, "q1", nil)
	q2 := declareQueue(t, s, ch, "q2", nil)
	bind(t, ch, q1, "for-ae1", ae1, nil)
	bind(t, ch, q2, "", ae2, nil)
	confirmPublish(t, ch, x, "for-ae1", true, body("one"))
	confirmPublish(t, ch, x, "other", true, body("two"))
	noReturn(t, r)
	if got := drain(t, ch, q1); !reflect.DeepEqual(got, []string{"one"}) {
		t.Fatalf("q1 got %q", got)
	}
	if got := drain(t, ch, q2); !reflect.DeepEqual(got, []string{"two"}) {
		t.Fatalf("q2 got %q", got)
	}
}

// A chain of AEs that loops without routing makes the message unroutable.
func TestAlternateExchangeLoop(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	r := returns(ch)
	an, bn := uniq(t, "a"), uniq(t, "b")
	s.ownExchange(an)
	s.ownExchange(bn)
	if err := ch.ExchangeDeclare(an, "direct", false, false, false, false, amqp.Table{"alternate-exchange": bn}); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare(bn, "direct", false, false, false, false, amqp.Table{"alternate-exchange": an}); err != nil {
		t.Fatal(err)
	}
	if !confirmPublish(t, ch, an, "k", true, body("looping")) {
		t.Fatal("nacked")
	}
	ret := expectReturn(t, r, "looping")
	if ret.ReplyCode != amqp.NoRoute {
		t.Fatalf("reply code %d", ret.ReplyCode)
	}
	// An AE that does not exist routes nowhere either.
	x := declareExchange(t, s, ch, "x", "direct", amqp.Table{"alternate-exchange": uniq(t, "missing")})
	confirmPublish(t, ch, x, "k", true, body("no ae"))
	expectReturn(t, r, "no ae")
}

// Seed 001's pika scenario: "ex" (topic, AE "ae") with ex_queue bound by
// "ex"; "ae" (topic) bound to the exchange "ex" by "ae". A mandatory
// publish to ex with key "ae" goes ex -> ae -> ex: a loop, so it is
// returned. With ae_queue bound to ae by "ae" it routes there instead.
func TestSeedAlternateExchangeScenario(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	r := returns(ch)
	aeQueue := declareQueue(t, s, ch, "ae_queue", nil)
	ae := declareExchange(t, s, ch, "ae", "topic", nil)
	if err := ch.ExchangeBind(uniq(t, "ex"), "ae", ae, false, nil); err == nil {
		t.Fatal("exchange.bind to an exchange not yet declared succeeded")
	} else {
		expectCode(t, err, amqp.NotFound)
	}
	_, ch = confirmChannel(t, s)
	r = returns(ch)
	exQueue := declareQueue(t, s, ch, "ex_queue", nil)
	ex := declareExchange(t, s, ch, "ex", "topic", amqp.Table{"alternate-exchange": ae})
	bind(t, ch, exQueue, "ex", ex, nil)
	if err := ch.ExchangeBind(ex, "ae", ae, false, nil); err != nil {
		t.Fatal(err)
	}
	msg := amqp.Publishing{ContentType: "text/plain", DeliveryMode: amqp.Persistent, Body: []byte("Hello World!")}
	if !confirmPublish(t, ch, ex, "ae", true, msg) {
		t.Fatal("nacked")
	}
	ret := expectReturn(t, r, "Hello World!")
	if ret.ReplyCode != amqp.NoRoute || ret.Exchange != ex || ret.RoutingKey != "ae" {
		t.Fatalf("return %d %q %q", ret.ReplyCode, ret.Exchange, ret.RoutingKey)
	}
	for _, q := range []string{exQueue, aeQueue} {
		if got := drain(t, ch, q); len(got) != 0 {
			t.Fatalf("%s got %q", q, got)
		}
	}

	// The commented-out binding in the seed: now the AE routes it.
	bind(t, ch, aeQueue, "ae", ae, nil)
	if !confirmPublish(t, ch, ex, "ae", true, msg) {
		t.Fatal("nacked")
	}
	noReturn(t, r)
	if got := drain(t, ch, aeQueue); !reflect.DeepEqual(got, []string{"Hello World!"}) {
		t.Fatalf("ae_queue got %q", got)
	}
	if got := drain(t, ch, exQueue); len(got) != 0 {
		t.Fatalf("ex_queue got %q", got)
	}
	// And a key ex routes itself never reaches the AE.
	confirmPublish(t, ch, ex, "ex", true, body("direct"))
	noReturn(t, r)
	if got := drain(t, ch, exQueue); !reflect.DeepEqual(got, []string{"direct"}) {
		t.Fatalf("ex_queue got %q", got)
	}
}

// RabbitMQ's sender-selected distribution: the CC and BCC headers (arrays
// of strings) add routing keys; BCC is removed before delivery.
func TestSenderSelectedDistribution(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	x := declareExchange(t, s, ch, "x", "direct", nil)
	qa := declareQueue(t, s, ch, "a", nil)
	qb := declareQueue(t, s, ch, "b", nil)
	qc := declareQueue(t, s, ch, "c", nil)
	bind(t, ch, qa, "a", x, nil)
	bind(t, ch, qb, "b", x, nil)
	bind(t, ch, qc, "c", x, nil)
	publishConfirmed(t, ch, x, "a", amqp.Publishing{
		Headers: amqp.Table{"CC": []interface{}{"b"}, "BCC": []interface{}{"c", "a"}},
		Body:    []byte("m"),
	})
	for _, q := range []string{qa, qb, qc} {
		m := get(t, ch, q)
		if _, ok := m.Headers["BCC"]; ok {
			t.Fatalf("%s: BCC header delivered", q)
		}
		if cc, _ := m.Headers["CC"].([]interface{}); len(cc) != 1 || cc[0] != "b" {
			t.Fatalf("%s: CC header %v", q, m.Headers["CC"])
		}
		empty(t, ch, q) // one copy each, though a is named twice
	}
}

// An x-match other than all, any, all-with-x or any-with-x is refused.
func TestHeadersInvalidXMatch(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	x := declareExchange(t, s, ch, "x", "headers", nil)
	q := declareQueue(t, s, ch, "", nil)
	expectCode(t, ch.QueueBind(q, "", x, false, amqp.Table{"x-match": "some", "a": "1"}), amqp.PreconditionFailed)
}
