package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// bindingsDoc is a definitions document of one durable direct exchange
// bound n times (key.0, key.1, ...) to queues durable queues, some 117
// bytes a binding.
func bindingsDoc(n, queues int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"vhosts": [{"name": "/"}], "exchanges": [{"name": "src", "vhost": "/", "type": "direct", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}], "queues": [`)
	for i := range queues {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, `{"name": "q%d", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {}}`, i)
	}
	sb.WriteString(`], "bindings": [`)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"source":"src","vhost":"/","destination":"q%d","destination_type":"queue","routing_key":"key.%d","arguments":{}}`, i%queues, i)
	}
	sb.WriteString("]}")
	return []byte(sb.String())
}

// BenchmarkImportBindings imports 100,000 bindings (BENCHMARKS.md), into
// a new broker with its own store each time; the broker's start is not
// counted.
func BenchmarkImportBindings(b *testing.B) {
	doc := bindingsDoc(100_000, 100)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		b.StopTimer()
		br := testBroker(b, b.TempDir())
		b.StartTimer()
		if err := br.ImportDefinitions(context.Background(), doc, ""); err != nil {
			b.Fatal(err)
		}
	}
}
