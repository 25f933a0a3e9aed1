package vhost_test

import (
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/storage"
)

// BenchmarkDeleteQueueOnBigTopic deletes one queue with 100 literal
// bindings from a topic exchange that has N such queues (issue 29), then,
// untimed, declares and binds it again so the exchange keeps its size:
//
//	go test ./core/vhost -run '^$' -bench DeleteQueueOnBigTopic -benchtime 20x
func BenchmarkDeleteQueueOnBigTopic(b *testing.B) {
	const perQueue = 100
	for _, queues := range []int{10, 100, 1_000, 10_000} {
		v := newTestVHost(b, false)
		built := false
		b.Run(fmt.Sprintf("bindings=%d", queues*perQueue), func(b *testing.B) {
			name := func(i int) string { return fmt.Sprint("q", i) }
			bindQueue := func(i int) {
				if _, _, err := v.DeclareQueue(topology.QueueDef{Name: name(i)}, false); err != nil {
					b.Fatal(err)
				}
				bs := make([]vhost.Binding, perQueue)
				for j := range bs {
					bs[j] = vhost.Binding{Source: "big", Dest: exchange.Destination{Kind: exchange.ToQueue, Name: name(i)}, Key: fmt.Sprintf("%s.key.%d", name(i), j)}
				}
				if _, err := v.BindAll(bs); err != nil {
					b.Fatal(err)
				}
			}
			if !built { // once: each run leaves it as it found it
				built = true
				if _, err := v.DeclareExchange(exchange.Definition{Name: "big", Type: "topic"}, false); err != nil {
					b.Fatal(err)
				}
				for i := range queues {
					bindQueue(i)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q := (i * 7919) % queues
				if _, err := v.DeleteQueue(name(q), nil, false, false); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				bindQueue(q)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkDeleteDurableQueue deletes a durable queue with 100 durable
// bindings to a durable topic exchange, from a store on disk (t.TempDir),
// then, untimed, declares and binds it again: the cost is the stored
// bindings' deletion, synced.
//
//	go test ./core/vhost -run '^$' -bench DeleteDurableQueue -benchtime 50x
func BenchmarkDeleteDurableQueue(b *testing.B) {
	st, err := storage.Open(b.TempDir(), storage.Options{Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	// Closed after the vhost: cleanups run last registered first.
	b.Cleanup(func() { st.Close() })
	if _, err := st.Recover(nil); err != nil {
		b.Fatal(err)
	}
	v := newVHost(b, vhost.Config{Store: st})
	mustExchange(b, v, "durable", "topic", nil)
	bs := make([]vhost.Binding, 100)
	for j := range bs {
		bs[j] = vhost.Binding{Source: "durable", Dest: exchange.Destination{Kind: exchange.ToQueue, Name: "q"}, Key: fmt.Sprint("q.key.", j)}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		mustQueue(b, v, "q", nil)
		if _, err := v.BindAll(bs); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := v.DeleteQueue("q", nil, false, false); err != nil {
			b.Fatal(err)
		}
	}
}
