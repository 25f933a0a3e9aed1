package exchange

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
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

// unbindSizes are the exchange sizes the unbind benchmarks run at: the
// cost of removing one binding must not grow along them.
var unbindSizes = []int{1_000, 10_000, 100_000, 1_000_000}

// benchmarkUnbind builds an exchange of type typ with n bindings made by
// bind(i), then unbinds one binding per iteration and binds it again, so
// the exchange keeps its size; the two are timed together.
func benchmarkUnbind(b *testing.B, typ Type, bind func(i int) *Binding) {
	for _, n := range unbindSizes {
		var r Router
		var all []*Binding
		b.Run(fmt.Sprintf("bindings=%d", n), func(b *testing.B) {
			if r == nil { // built once: each run leaves it as it found it
				var err error
				if r, err = typ.Create(Definition{Name: "bench", Type: typ.Name()}); err != nil {
					b.Fatal(err)
				}
				all = make([]*Binding, n)
				for i := range all {
					all[i] = bind(i)
					if err := r.AddBinding(all[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			one := make([]*Binding, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A stride through the bindings, so that no binding is
				// unbound twice in a row.
				one[0] = all[(i*7919)%n]
				if err := r.RemoveBindings(one); err != nil {
					b.Fatal(err)
				}
				if err := r.AddBinding(one[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTopicUnbind unbinds from a topic exchange whose bindings are
// literal keys, 100 to a queue, as in issue 29.
func BenchmarkTopicUnbind(b *testing.B) {
	benchmarkUnbind(b, Topic{}, func(i int) *Binding {
		q := fmt.Sprint("q", i/100)
		return &Binding{Destination: Destination{Name: q}, Key: fmt.Sprintf("%s.key.%d", q, i%100)}
	})
}

// BenchmarkDirectUnbind unbinds from a direct exchange whose queues are
// all bound under one key, the longest list a key can have.
func BenchmarkDirectUnbind(b *testing.B) {
	benchmarkUnbind(b, Direct{}, func(i int) *Binding {
		return &Binding{Destination: Destination{Name: fmt.Sprint("q", i)}, Key: "all"}
	})
}

// BenchmarkFanoutUnbind unbinds from a fanout exchange.
func BenchmarkFanoutUnbind(b *testing.B) {
	benchmarkUnbind(b, Fanout{}, func(i int) *Binding {
		return &Binding{Destination: Destination{Name: fmt.Sprint("q", i)}}
	})
}

// BenchmarkHeadersUnbind unbinds from a headers exchange whose bindings
// all have the same anchor, the longest list an anchor can have.
func BenchmarkHeadersUnbind(b *testing.B) {
	benchmarkUnbind(b, Headers{}, func(i int) *Binding {
		return &Binding{Destination: Destination{Name: fmt.Sprint("q", i)}, Args: protocol.Table{"region": "eu"}}
	})
}
