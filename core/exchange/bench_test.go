package exchange

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/core/message"
)

// topicWith10k builds a topic exchange with 10,000 bindings of mixed shapes:
// exact words, "*" and "#" in several positions.
func topicWith10k(b *testing.B) Router {
	r, _ := Topic{}.Create(Definition{Name: "bench", Type: "topic"})
	for i := 0; i < 10000; i++ {
		var key string
		switch i % 5 {
		case 0:
			key = fmt.Sprintf("stock.%d.nyse", i)
		case 1:
			key = fmt.Sprintf("stock.*.%d", i)
		case 2:
			key = fmt.Sprintf("#.%d", i)
		case 3:
			key = fmt.Sprintf("news.%d.#", i)
		default:
			key = fmt.Sprintf("*.%d.*", i)
		}
		if err := r.AddBinding(&Binding{Destination: Destination{Name: fmt.Sprint("q", i)}, Key: key}); err != nil {
			b.Fatal(err)
		}
	}
	return r
}

// BenchmarkTopicRoute10k routes a repeating set of keys: the common case,
// mostly answered by the cache of recent keys.
func BenchmarkTopicRoute10k(b *testing.B) {
	r := topicWith10k(b)
	msgs := make([]*message.Message, 64)
	for i := range msgs {
		msgs[i] = &message.Message{RoutingKey: fmt.Sprintf("stock.%d.nyse", i*5)}
	}
	var res Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res.Reset()
		_ = r.Route(msgs[i%len(msgs)], &res)
	}
}

// BenchmarkTopicRoute10kUncached routes a new key every time, so every
// message walks the trie (and fills the cache, which is emptied when full).
func BenchmarkTopicRoute10kUncached(b *testing.B) {
	r := topicWith10k(b)
	msgs := make([]*message.Message, 100000)
	for i := range msgs {
		msgs[i] = &message.Message{RoutingKey: fmt.Sprintf("stock.%d.%d", i%10000, i)}
	}
	var res Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res.Reset()
		_ = r.Route(msgs[i%len(msgs)], &res)
	}
}

func BenchmarkDirectRoute(b *testing.B) {
	r, _ := Direct{}.Create(Definition{Name: "bench", Type: "direct"})
	for i := 0; i < 10000; i++ {
		_ = r.AddBinding(&Binding{Destination: Destination{Name: fmt.Sprint("q", i)}, Key: fmt.Sprint("key", i)})
	}
	m := &message.Message{RoutingKey: "key42"}
	var res Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res.Reset()
		_ = r.Route(m, &res)
	}
}
