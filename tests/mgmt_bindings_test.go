package tests

import (
	"strings"
	"testing"
)

type bindingRow struct {
	Source          string         `json:"source"`
	VHost           string         `json:"vhost"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
	PropertiesKey   string         `json:"properties_key"`
}

// Bindings through the API: the default exchange's implicit ones listed,
// creation with RabbitMQ's Location, lookup and deletion by
// properties_key, and RabbitMQ's refusals.
func TestMgmtBindings(t *testing.T) {
	m := startMgmt(t)
	m.expect("PUT", "/api/queues/"+m.v()+"/q1", `{}`, 201)
	m.expect("PUT", "/api/exchanges/"+m.v()+"/x1", `{"type":"topic"}`, 201)
	base := "/api/bindings/" + m.v() + "/e/x1/q/q1"

	r := m.expect("POST", base, `{"routing_key":"k/ey %","arguments":{"foo":"bar"}}`, 201)
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "q1/k%252Fey%2B%2525~") {
		t.Fatalf("Location %q", loc)
	}
	if loc := m.expect("POST", base, `{"routing_key":"a.#"}`, 201).header.Get("Location"); loc != "q1/a.%2523" {
		t.Fatalf("Location %q", loc)
	}
	if loc := m.expect("POST", base, `{}`, 201).header.Get("Location"); loc != "q1/~" {
		t.Fatalf("Location %q", loc)
	}
	m.expect("POST", "/api/bindings/"+m.v()+"/e/x1/e/amq.direct", `{"routing_key":"rk"}`, 201)

	var all []bindingRow
	m.expect("GET", "/api/bindings/"+m.v(), "", 200).json(t, &all)
	var keys []string
	for _, b := range all {
		keys = append(keys, b.Source+">"+b.Destination+":"+b.PropertiesKey)
	}
	got := strings.Join(keys, " ")
	// The hash after "~" is RabbitMQ's phash2 there and Warren's own here.
	want := []string{">q1:q1", "x1>amq.direct:rk", "x1>q1:~", "x1>q1:a.%23", "x1>q1:k%2Fey+%25~"}
	for i, w := range want {
		if i >= len(keys) || !strings.HasPrefix(keys[i], w) {
			t.Fatalf("bindings %s, want %v", got, want)
		}
	}
	if all[0].RoutingKey != "q1" || all[0].DestinationType != "queue" || all[0].VHost != m.vhost {
		t.Fatalf("the default exchange's binding: %+v", all[0])
	}

	var between []bindingRow
	m.expect("GET", base, "", 200).json(t, &between)
	if len(between) != 3 {
		t.Fatalf("between x1 and q1: %+v", between)
	}
	withArgs := between[2]
	if withArgs.Arguments["foo"] != "bar" {
		t.Fatalf("arguments: %+v", withArgs)
	}
	var one bindingRow
	m.expect("GET", base+"/"+esc(withArgs.PropertiesKey), "", 200).json(t, &one)
	if one.RoutingKey != "k/ey %" {
		t.Fatalf("by properties key: %+v", one)
	}
	m.expect("GET", base+"/~", "", 200).json(t, &one)
	if one.RoutingKey != "" {
		t.Fatalf("by ~: %+v", one)
	}
	m.expectNotFound("GET", base+"/nope")
	m.expect("DELETE", base+"/"+esc(withArgs.PropertiesKey), "", 204)
	m.expectNotFound("DELETE", base+"/"+esc(withArgs.PropertiesKey))
	m.expect("GET", "/api/bindings/"+m.v()+"/e/x1/e/amq.direct/rk", "", 200)
	m.expect("DELETE", "/api/bindings/"+m.v()+"/e/x1/e/amq.direct/rk", "", 204)

	var qb []bindingRow
	m.expect("GET", "/api/queues/"+m.v()+"/q1/bindings", "", 200).json(t, &qb)
	if len(qb) != 3 || qb[0].Source != "" {
		t.Fatalf("the queue's bindings: %+v", qb)
	}

	// Refusals.
	m.expectError(m.call("POST", "/api/bindings/"+m.v()+"/e/nox/q/q1", `{"routing_key":"rk"}`), 404, "not_found",
		"no exchange 'nox' in vhost '"+m.vhost+"'")
	m.expectError(m.call("POST", "/api/bindings/"+m.v()+"/e/x1/q/noq", `{"routing_key":"rk"}`), 404, "not_found",
		"no queue 'noq' in vhost '"+m.vhost+"'")
	m.expectError(m.call("POST", "/api/bindings/"+m.v()+"/e/amq.default/q/q1", `{"routing_key":"rk"}`), 401, "not_authorised", "Access refused.")
	// RabbitMQ lists nothing, rather than a 404, between missing ends.
	m.expect("GET", "/api/bindings/"+m.v()+"/e/nox/q/q1", "", 200)
}

// A binding is found by its properties key or by its plain routing key,
// escaped once or not at all, as RabbitMQ 3.10.8 finds it (rabbit-hole's
// DeleteBinding sends the routing key).
func TestMgmtBindingByPlainRoutingKey(t *testing.T) {
	m := startMgmt(t)
	q := uniq(t, "pk")
	m.expect("PUT", "/api/queues/"+m.v()+"/"+esc(q), `{}`, 201)
	base := "/api/bindings/" + m.v() + "/e/amq.topic/q/" + esc(q)
	m.expect("POST", base, `{"routing_key":"a.*"}`, 201)
	m.expect("POST", base, `{"routing_key":"k.#"}`, 201)
	for _, p := range []string{"a.*", "a.%2A", "k.%23", "k.%2523"} {
		m.expect("GET", base+"/"+p, "", 200)
	}
	m.expect("DELETE", base+"/a.*", "", 204)
	m.expect("DELETE", base+"/k.%2523", "", 204)
	var left []any
	m.expect("GET", base, "", 200).json(t, &left)
	if len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}
