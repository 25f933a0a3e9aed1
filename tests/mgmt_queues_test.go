package tests

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A queue's life through the API, with RabbitMQ 3.10.8's status codes and
// bodies at every step.
func TestMgmtQueueLifecycle(t *testing.T) {
	m := startMgmt(t)
	q := "/api/queues/" + m.v() + "/orders"
	// Unknown fields are ignored; defaults are RabbitMQ's (not durable).
	m.expect("PUT", q, `{"durable":true,"arguments":{"x-max-length":100},"bogus":1}`, 201)
	m.expect("PUT", q, `{"durable":true,"arguments":{"x-max-length":100}}`, 204)
	m.expectError(m.call("PUT", q, `{"durable":false,"arguments":{"x-max-length":100}}`), 400, "bad_request",
		"inequivalent arg 'durable' for queue 'orders' in vhost '"+m.vhost+"': received 'false' but current is 'true'")
	m.expectError(m.call("PUT", q, `{"durable":tru`), 400, "bad_request", "not_json")
	if r := m.call("PUT", "/api/queues/"+m.v()+"/typed", `{"durable":"yes"}`); r.status != 400 {
		t.Fatalf("a string for durable: %d %s", r.status, r.body)
	} else if m.isWarren() && !strings.Contains(r.body, "durable") {
		t.Fatalf("the reason does not name the field: %s", r.body)
	}
	m.expectError(m.call("PUT", "/api/queues/"+m.v()+"/amq.mine", `{}`), 401, "not_authorised", "Access refused.")
	m.expectError(m.call("PUT", "/api/queues/no-such-vhost/q", `{}`), 404, "not_found", "vhost_not_found")

	// RabbitMQ shows a queue's figures once its statistics were emitted.
	m.waitReady("orders", 0)
	var got map[string]any
	m.expect("GET", q, "", 200).json(t, &got)
	for k, want := range map[string]any{"name": "orders", "vhost": m.vhost, "durable": true, "auto_delete": false,
		"exclusive": false, "messages": 0.0, "messages_ready": 0.0, "messages_unacknowledged": 0.0,
		"arguments": map[string]any{"x-max-length": 100.0}, "policy": nil, "type": "classic"} {
		if !reflect.DeepEqual(got[k], want) {
			t.Errorf("%s: %#v, want %#v", k, got[k], want)
		}
	}
	if _, ok := got["consumer_details"]; !ok {
		t.Error("no consumer_details on a single queue")
	}
	m.expectNotFound("GET", "/api/queues/"+m.v()+"/nope")
	m.expectNotFound("GET", "/api/queues/no-such-vhost")

	_, ch := m.channel()
	for i := range 3 {
		publish(t, ch, "", "orders", body(fmt.Sprint("m", i)))
	}
	m.waitReady("orders", 3)
	m.expectError(m.call("DELETE", q+"?if-empty=true", ""), 400, "bad_request", "queue 'orders' in vhost '"+m.vhost+"' not empty")
	msgs, err := ch.Consume("orders", "c1", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, msgs)
	m.expectError(m.call("DELETE", q+"?if-unused=true", ""), 400, "bad_request", "queue 'orders' in vhost '"+m.vhost+"' in use")
	m.expect("DELETE", q+"/contents", "", 204)
	m.expectNotFound("DELETE", "/api/queues/"+m.v()+"/nope/contents")
	m.waitReady("orders", 0)
	m.expect("DELETE", q, "", 204)
	m.expectNotFound("DELETE", q)
}

// POST .../get with each ackmode and encoding, as RabbitMQ answers.
func TestMgmtQueueGet(t *testing.T) {
	m := startMgmt(t)
	m.expect("PUT", "/api/queues/"+m.v()+"/gq", `{}`, 201)
	pub := "/api/exchanges/" + m.v() + "/amq.default/publish"
	var routed map[string]bool
	m.expect("POST", pub, `{"properties":{"headers":{"h":1},"delivery_mode":2,"content_type":"text/plain"},"routing_key":"gq","payload":"hello","payload_encoding":"string"}`, 200).json(t, &routed)
	if !routed["routed"] {
		t.Fatalf("not routed: %v", routed)
	}
	m.expect("POST", pub, `{"properties":{},"routing_key":"gq","payload":"AAEC/w==","payload_encoding":"base64"}`, 200)
	get := "/api/queues/" + m.v() + "/gq/get"

	type message struct {
		PayloadBytes    int    `json:"payload_bytes"`
		Redelivered     bool   `json:"redelivered"`
		Exchange        string `json:"exchange"`
		RoutingKey      string `json:"routing_key"`
		MessageCount    int    `json:"message_count"`
		Properties      any    `json:"properties"`
		Payload         string `json:"payload"`
		PayloadEncoding string `json:"payload_encoding"`
	}
	var got []message
	m.expect("POST", get, `{"count":5,"ackmode":"ack_requeue_true","encoding":"auto","truncate":3}`, 200).json(t, &got)
	if len(got) != 2 || got[0].Payload != "hel" || got[0].PayloadBytes != 5 || got[0].PayloadEncoding != "string" ||
		got[0].MessageCount != 1 || got[0].Redelivered || got[0].RoutingKey != "gq" || got[1].MessageCount != 0 {
		t.Fatalf("get with requeue: %+v", got)
	}
	props, _ := got[0].Properties.(map[string]any)
	if props["content_type"] != "text/plain" || props["delivery_mode"] != 2.0 || !reflect.DeepEqual(props["headers"], map[string]any{"h": 1.0}) {
		t.Fatalf("properties: %#v", got[0].Properties)
	}
	// The second message is bytes 0 1 2 255, cut to 0 1 2: valid UTF-8,
	// so a string with auto, as RabbitMQ shows it.
	if got[1].PayloadEncoding != "string" || got[1].Payload != "\x00\x01\x02" || got[1].PayloadBytes != 4 {
		t.Fatalf("binary payload: %+v", got[1])
	}
	got = nil
	m.expect("POST", get, `{"count":1,"ackmode":"ack_requeue_false","encoding":"base64"}`, 200).json(t, &got)
	if len(got) != 1 || got[0].Payload != "aGVsbG8=" || !got[0].Redelivered {
		t.Fatalf("second get: %+v", got)
	}
	m.expectError(m.call("POST", get, `{"count":1,"ackmode":"ack_requeue_false","encoding":"bogus"}`), 400, "bad_request",
		"Unsupported encoding. Please use auto or base64.")
	m.expectError(m.call("POST", get, `{"ackmode":"ack_requeue_false","encoding":"auto"}`), 400, "bad_request", "[{key_missing,count}]")
	m.expectError(m.call("POST", "/api/queues/"+m.v()+"/nope/get", `{"count":1,"ackmode":"ack_requeue_false","encoding":"auto"}`),
		404, "not_found", "NOT_FOUND - no queue 'nope' in vhost '"+m.vhost+"'")
	got = nil
	m.expect("POST", get, `{"count":1,"ackmode":"reject_requeue_false","encoding":"auto"}`, 200).json(t, &got)
	got = nil
	m.expect("POST", get, `{"count":1,"ackmode":"ack_requeue_false","encoding":"auto"}`, 200).json(t, &got)
	if len(got) != 0 {
		t.Fatalf("the queue should be empty: %+v", got)
	}
}

// Pagination, filtering and sorting answer exactly as RabbitMQ's.
func TestMgmtQueuePaging(t *testing.T) {
	m := startMgmt(t)
	for _, n := range []string{"b10", "a2", "C3", "a10", "zz", "aliveness"} {
		m.expect("PUT", "/api/queues/"+m.v()+"/"+n, `{}`, 201)
	}
	base := "/api/queues/" + m.v()
	type page struct {
		FilteredCount int `json:"filtered_count"`
		ItemCount     int `json:"item_count"`
		Items         []struct{ Name string }
		Page          int `json:"page"`
		PageCount     int `json:"page_count"`
		PageSize      int `json:"page_size"`
		TotalCount    int `json:"total_count"`
	}
	names := func(p page) string {
		var out []string
		for _, i := range p.Items {
			out = append(out, i.Name)
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		query string
		want  page
		names string
	}{
		{"?page=1", page{FilteredCount: 6, ItemCount: 6, Page: 1, PageCount: 1, PageSize: 100, TotalCount: 6}, "C3,a10,a2,aliveness,b10,zz"},
		{"?page=2&page_size=4", page{FilteredCount: 6, ItemCount: 2, Page: 2, PageCount: 2, PageSize: 4, TotalCount: 6}, "b10,zz"},
		{"?page=1&name=A", page{FilteredCount: 3, ItemCount: 3, Page: 1, PageCount: 1, PageSize: 100, TotalCount: 6}, "a10,a2,aliveness"},
		{"?page=1&name=%5Ea.0$&use_regex=true", page{FilteredCount: 1, ItemCount: 1, Page: 1, PageCount: 1, PageSize: 100, TotalCount: 6}, "a10"},
		{"?page=1&page_size=2&sort=name&sort_reverse=true", page{FilteredCount: 6, ItemCount: 2, Page: 1, PageCount: 3, PageSize: 2, TotalCount: 6}, "zz,b10"},
		{"?page=1&name=nomatch", page{FilteredCount: 0, ItemCount: 0, Page: 1, PageCount: 0, PageSize: 100, TotalCount: 6}, ""},
	}
	for _, c := range cases {
		var p page
		m.expect("GET", base+c.query, "", 200).json(t, &p)
		if got := names(p); got != c.names {
			t.Errorf("%s: items %s, want %s", c.query, got, c.names)
		}
		p.Items = nil
		if !reflect.DeepEqual(p, c.want) {
			t.Errorf("%s: %+v, want %+v", c.query, p, c.want)
		}
	}
	// Without page: the bare array, sorted by name, name ignored.
	var all []struct{ Name string }
	m.expect("GET", base+"?name=a&sort=name", "", 200).json(t, &all)
	if len(all) != 6 || all[0].Name != "C3" {
		t.Fatalf("unpaged: %+v", all)
	}
	m.expectError(m.call("GET", base+"?page=9&page_size=3", ""), 400, "page_out_of_range", "Page out of range, page: 9 page size: 3, len: 6")
	m.expectError(m.call("GET", base+"?page=0&page_size=3", ""), 400, "invalid_pagination_parameters",
		"Invalid pagination parameters: page number 0, page size 3")
	m.expectError(m.call("GET", base+"?page=1&page_size=501", ""), 400, "invalid_pagination_parameters",
		"Invalid pagination parameters: page number 1, page size 501")
	m.expectError(m.call("GET", base+"?page=x", ""), 400, "bad_request", "Pagination parameters are invalid")
	m.expectError(m.call("GET", base+"?page=1&name=(&use_regex=true", ""), 400, "bad_request", "Pagination parameters are invalid")

	// Sorting by a figure: the queue with messages last.
	_, ch := m.channel()
	publish(t, ch, "", "a2", body("x"))
	eventually(t, "a2 counted", func() bool {
		all = nil
		m.expect("GET", base+"?sort=messages", "", 200).json(t, &all)
		return len(all) == 6 && all[5].Name == "a2"
	})
}

// A client's exclusive queue is listed as exclusive, and the API may not
// delete or purge it, as RabbitMQ's may not.
func TestMgmtExclusiveQueueByOperator(t *testing.T) {
	m := startMgmt(t)
	_, ch := m.channel()
	q, err := ch.QueueDeclare("mine", false, false, true, false, amqp.Table{})
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Exclusive bool }
	m.expect("GET", "/api/queues/"+m.v()+"/"+q.Name, "", 200).json(t, &got)
	if !got.Exclusive {
		t.Fatal("not shown exclusive")
	}
	locked := "cannot obtain exclusive access to locked queue 'mine' in vhost '" + m.vhost + "'. " +
		"It could be originally declared on another connection or the exclusive property value does not match that of the original declaration."
	m.expectError(m.call("DELETE", "/api/queues/"+m.v()+"/"+q.Name, ""), 400, "bad_request", locked)
}

// A stream declared through the API is listed with type stream, and its
// DELETE deletes it.
func TestMgmtStreamQueue(t *testing.T) {
	m := startMgmt(t)
	q := "/api/queues/" + m.v() + "/events"
	m.expect("PUT", q, `{"durable":true,"arguments":{"x-queue-type":"stream","x-max-age":"1D"}}`, 201)
	var got map[string]any
	m.expect("GET", q, "", 200).json(t, &got)
	if got["type"] != "stream" || got["durable"] != true {
		t.Fatalf("a stream is listed as %v (durable %v)", got["type"], got["durable"])
	}
	m.expect("DELETE", q, "", 204)
	m.expectNotFound("GET", q)
}
