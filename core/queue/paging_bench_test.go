package queue

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// BenchmarkPagedLargeBodies is the cost of paging large messages: a
// queue holds a backlog three times its 64 MiB memory bound, and each op
// enqueues one message (paged out behind the backlog) and takes one (read
// back in batches as memory drains). Transient messages go to the queue's
// spill file; persistent ones, in a durable queue, are in the store from
// the start and come back from it. The store is on disk in the test's
// temporary folder, so the page cache's cost is in it. The backlog neither
// grows nor shrinks.
//
//	go test ./core/queue -run - -bench PagedLargeBodies -benchtime 2000x
func BenchmarkPagedLargeBodies(b *testing.B) {
	for _, tc := range []struct {
		size       int
		persistent bool
	}{{1 << 20, false}, {16 << 20, false}, {1 << 20, true}} {
		size := tc.size
		name := fmt.Sprintf("%dKiB", size>>10)
		if tc.persistent {
			name += "-persistent"
		}
		b.Run(name, func(b *testing.B) {
			st, err := storage.Open(b.TempDir(), storage.Options{Sync: storage.SyncNever, CommitInterval: time.Millisecond, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Recover(nil); err != nil {
				b.Fatal(err)
			}
			const bound = 64 << 20
			s, _ := ParseArgs("q", "/", nil)
			q := New(Config{Name: "q", VHost: "/", Settings: s, Events: &events{}, Store: st, Durable: tc.persistent,
				Memory: MemoryLimit{Bytes: bound}, Bodies: message.NewBodies(64 << 20)})
			body := make([]byte, size)
			rand.Read(body)
			var p protocol.Properties
			if tc.persistent {
				p.Flags, p.DeliveryMode = protocol.FlagDeliveryMode, 2
			}
			props, _ := p.Append(nil)
			m, err := message.New("", "q", p.Flags, props, body)
			if err != nil {
				b.Fatal(err)
			}
			for range 3 * bound / size {
				q.Enqueue(m)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				q.Enqueue(m)
				if _, _, ok := q.Get(true); !ok {
					b.Fatal("empty")
				}
			}
		})
	}
}
