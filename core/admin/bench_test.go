package admin

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/warrenmq/warren/core/topology"
)

// BenchmarkListQueues times GET /api/queues with 10,000 queues, as the
// web UI and rabbitmqadmin ask for them: the whole list, the first page,
// a late page, and a filtered page. Each listing takes every queue's lock
// once, briefly, and no other lock while it does.
//
//	go test ./core/admin -run '^$' -bench ListQueues -benchmem
func BenchmarkListQueues(b *testing.B) {
	const n = 10_000
	br := newBroker(b)
	v, _ := br.VHost("/")
	for i := range n {
		if _, _, err := v.DeclareQueue(topology.QueueDef{Name: fmt.Sprintf("q-%05d", i), Durable: i%2 == 0}, false); err != nil {
			b.Fatal(err)
		}
	}
	h := Handler(br)
	for _, c := range []struct{ name, path string }{
		{"unpaged", "/api/queues"},
		{"page1", "/api/queues?page=1&page_size=100"},
		{"page100", "/api/queues/%2F?page=100&page_size=100"},
		{"filtered", "/api/queues?page=1&page_size=100&name=q-09"},
		{"sorted", "/api/queues?page=1&page_size=100&sort=messages&sort_reverse=true"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if w := asGuest(c.path).serve(h); w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
