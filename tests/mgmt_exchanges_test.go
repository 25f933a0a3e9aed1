package tests

import (
	"reflect"
	"testing"
)

// Exchanges through the API: declare, show, publish, delete, as RabbitMQ
// 3.10.8 answers.
func TestMgmtExchanges(t *testing.T) {
	m := startMgmt(t)
	x := "/api/exchanges/" + m.v() + "/orders"
	m.expect("PUT", x, `{"type":"topic","durable":true,"whatever":[1]}`, 201)
	m.expect("PUT", x, `{"type":"topic","durable":true}`, 204)
	m.expect("PUT", "/api/exchanges/"+m.v()+"/plain", `{}`, 201)
	m.expectError(m.call("PUT", "/api/exchanges/"+m.v()+"/odd", `{"type":"nope"}`), 400, "bad_request", "unknown exchange type 'nope'")
	m.expectError(m.call("PUT", "/api/exchanges/"+m.v()+"/amq.foo", `{"type":"direct"}`), 401, "not_authorised", "Access refused.")
	m.expectError(m.call("DELETE", "/api/exchanges/"+m.v()+"/amq.direct", ""), 401, "not_authorised", "Access refused.")

	var got map[string]any
	m.expect("GET", "/api/exchanges/"+m.v()+"/plain", "", 200).json(t, &got)
	for k, want := range map[string]any{"name": "plain", "vhost": m.vhost, "type": "direct", "durable": false,
		"auto_delete": false, "internal": false, "arguments": map[string]any{}, "incoming": []any{}, "outgoing": []any{}} {
		if !reflect.DeepEqual(got[k], want) {
			t.Errorf("%s: %#v, want %#v", k, got[k], want)
		}
	}
	m.expect("GET", "/api/exchanges/"+m.v()+"/amq.default", "", 200).json(t, &got)
	if got["name"] != "" || got["type"] != "direct" {
		t.Fatalf("amq.default: %v", got)
	}
	var list []struct{ Name string }
	m.expect("GET", "/api/exchanges/"+m.v(), "", 200).json(t, &list)
	if len(list) < 7 || list[0].Name != "" {
		t.Fatalf("listing: %+v", list)
	}
	m.expectNotFound("GET", "/api/exchanges/"+m.v()+"/nope")
	m.expectNotFound("DELETE", "/api/exchanges/"+m.v()+"/nope")
	m.expectNotFound("GET", "/api/exchanges/no-such-vhost/x")

	// Publish: routed or not, and RabbitMQ's refusals.
	m.expect("PUT", "/api/queues/"+m.v()+"/q", `{}`, 201)
	m.expect("POST", "/api/bindings/"+m.v()+"/e/orders/q/q", `{"routing_key":"eu.#"}`, 201)
	pub := x + "/publish"
	var routed map[string]bool
	m.expect("POST", pub, `{"properties":{},"routing_key":"eu.de","payload":"x","payload_encoding":"string"}`, 200).json(t, &routed)
	if !routed["routed"] {
		t.Fatal("not routed")
	}
	m.expect("POST", pub, `{"properties":{},"routing_key":"us","payload":"x","payload_encoding":"string"}`, 200).json(t, &routed)
	if routed["routed"] {
		t.Fatal("routed without a binding")
	}
	m.expectError(m.call("POST", pub, `{"properties":{},"routing_key":"eu","payload":"x"}`), 400, "bad_request", "[{key_missing,payload_encoding}]")
	if r := m.call("POST", pub, `{"properties":{},"routing_key":"eu","payload":"x","payload_encoding":"hex"}`); r.status != 400 {
		t.Fatalf("payload_encoding hex: %d %s", r.status, r.body)
	}
	if r := m.call("POST", pub, `{"properties":{"delivery_mode":"x"},"routing_key":"eu","payload":"x","payload_encoding":"string"}`); r.status != 400 {
		t.Fatalf("a string delivery_mode: %d %s", r.status, r.body)
	}
	m.expectError(m.call("POST", "/api/exchanges/"+m.v()+"/nope/publish", `{"properties":{},"routing_key":"","payload":"x","payload_encoding":"string"}`),
		400, "bad_request", "404 NOT_FOUND - no exchange 'nope' in vhost '"+m.vhost+"'")
	m.waitReady("q", 1)

	// Bindings by source and destination.
	m.expect("POST", "/api/bindings/"+m.v()+"/e/orders/e/plain", `{"routing_key":"k"}`, 201)
	var bs []struct {
		Source, Destination string
		DestinationType     string `json:"destination_type"`
	}
	m.expect("GET", x+"/bindings/source", "", 200).json(t, &bs)
	if len(bs) != 2 || bs[0].Destination != "plain" || bs[1].Destination != "q" {
		t.Fatalf("bindings/source: %+v", bs)
	}
	bs = nil
	m.expect("GET", "/api/exchanges/"+m.v()+"/plain/bindings/destination", "", 200).json(t, &bs)
	if len(bs) != 1 || bs[0].Source != "orders" || bs[0].DestinationType != "exchange" {
		t.Fatalf("bindings/destination: %+v", bs)
	}
	// RabbitMQ answers an empty list, not a 404, for a missing exchange.
	if r := m.expect("GET", "/api/exchanges/"+m.v()+"/nope/bindings/source", "", 200); r.body != "[]" {
		t.Fatalf("bindings of a missing exchange: %s", r.body)
	}

	m.expectError(m.call("DELETE", x+"?if-unused=true", ""), 400, "bad_request", "exchange 'orders' in vhost '"+m.vhost+"' in use")
	m.expect("DELETE", x, "", 204)
	m.expectNotFound("GET", x)
}
