package tests

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/exchange"
)

// RabbitMQ's default management.http.max_body_size, and its answer to a
// body over it (3.10.8 as Debian ships it, with the fix for
// CVE-2023-46118; upstream since 3.11.24 and 3.12.7).
const (
	rabbitMaxBody   = 10_000_000
	bodyTooLargeRes = `{"error":"bad_request","reason":"Exceeded HTTP request body size limit"}`
)

// paddedJSON is the JSON object obj followed by spaces up to n bytes.
func paddedJSON(obj string, n int) string { return obj + strings.Repeat(" ", n-len(obj)) }

// rawRequest sends a request over a connection of its own, its body
// (sent bytes of it, of a declared length; -1 for chunked) written beside
// the reading, and returns the answer: a server may answer, and close,
// before it has read a body it refuses, and a client that waits to have
// written it all may see only the closed connection.
func rawRequest(t *testing.T, base, method, path string, length int, sent string) (int, string, bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\nContent-Type: application/json\r\n", method, path)
	body := sent
	if length < 0 {
		head += "Transfer-Encoding: chunked\r\n"
		body = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(sent), sent)
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n", length)
	}
	go func() { _, _ = io.WriteString(c, head+"\r\n"+body) }() // fails once the server closes: no matter
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: no answer: %v", method, path, err)
	}
	got, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got), resp.Close
}

func TestMgmtBodyLimit(t *testing.T) {
	m := startMgmt(t)
	over := rabbitMaxBody + 1
	type row struct {
		method, path string
		length       int // -1: chunked
		body         string
	}
	rows := []row{
		{"POST", "/api/definitions", over, paddedJSON(`{"vhosts": []}`, over)},
		{"POST", "/api/definitions", -1, paddedJSON(`{"vhosts": []}`, over)},
	}
	if m.isWarren() {
		// RabbitMQ 3.10.8 as Debian ships it refuses these too, but
		// past some 8 MB read, and closes the connection while the
		// client still writes, so what a client sees is a matter of
		// timing: they are checked against Warren only.
		rows = append(rows,
			row{"PUT", "/api/vhosts/" + esc(m.vhost+".big"), over, paddedJSON(`{}`, over)},
			row{"PUT", "/api/queues/" + m.v() + "/big", over, paddedJSON(`{"durable": true}`, over)},
			// Declared too long, one byte sent and no more: refused
			// unread.
			row{"POST", "/api/definitions", over, "{"},
		)
	}
	for _, r := range rows {
		status, body, _ := rawRequest(t, m.base, r.method, r.path, r.length, r.body)
		if status != 400 || body != bodyTooLargeRes {
			t.Errorf("%s %s (length %d, %d bytes sent): %d %s, want 400 %s", r.method, r.path, r.length, len(r.body), status, body, bodyTooLargeRes)
		}
	}
	m.expectNotFound("GET", "/api/vhosts/"+esc(m.vhost+".big"))
	m.expectNotFound("GET", "/api/queues/"+m.v()+"/big")

	// A megabyte is well within the bound.
	m.expect("PUT", "/api/vhosts/"+esc(m.vhost+".padded"), paddedJSON(`{}`, 1<<20), 201)
	m.expect("DELETE", "/api/vhosts/"+esc(m.vhost+".padded"), "", 204)
}

// An import of 100,000 bindings (some 12 MB, so admin.max_body_size is
// raised for it, as RabbitMQ's docs say to) is answered: its stored
// records are written together rather than one synced write each, which
// took longer than the listener's 60 s write timeout, so the client got
// no answer while the import went on. The client's own timeout bounds
// the wait; no time is asserted.
func TestMgmtImportOf100kBindingsIsAnswered(t *testing.T) {
	s := startWarren(t, func(c *config.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Admin.MaxBodySize = 32 << 20
	})
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	const n, queues = 100_000, 100
	var doc strings.Builder
	doc.WriteString(`{"exchanges": [{"name": "src", "vhost": "/", "type": "direct", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}], "queues": [`)
	for i := range queues {
		if i > 0 {
			doc.WriteString(", ")
		}
		fmt.Fprintf(&doc, `{"name": "q%d", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {}}`, i)
	}
	doc.WriteString(`], "bindings": [`)
	for i := range n {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `{"source":"src","vhost":"/","destination":"q%d","destination_type":"queue","routing_key":"key.%d","arguments":{}}`, i%queues, i)
	}
	doc.WriteString("]}")

	req, err := http.NewRequest("POST", "http://"+s.b.AdminAddr()+"/api/definitions", strings.NewReader(doc.String()))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	before, _ := s.b.StoreFigures()
	// As long as the listener's write timeout: past it, no answer can come.
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("import of %d bindings (%d bytes): no answer: %v", n, doc.Len(), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("import of %d bindings: %d %s", n, resp.StatusCode, body)
	}
	v, _ := s.b.VHost("/")
	bound := 0
	for _, b := range v.Bindings() {
		if b.Source == "src" && b.Destination.Kind == exchange.ToQueue {
			bound++
		}
	}
	if bound != n {
		t.Fatalf("%d bindings from src, want %d", bound, n)
	}
	// What made it slow, counted rather than timed: an fsync a binding.
	after, _ := s.b.StoreFigures()
	if syncs := after.Syncs - before.Syncs; syncs > n/16 {
		t.Fatalf("the import made %d fsyncs for %d bindings", syncs, n)
	}
}
