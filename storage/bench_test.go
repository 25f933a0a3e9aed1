package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Benchmarks run on the real filesystem (b.TempDir, or $WARREN_BENCH_DIR
// when set), so fsync costs what it costs. Reproduce with
//
//	go test -run '^$' -bench . -benchtime 3s ./storage

func benchDir(b *testing.B) string {
	if d := os.Getenv("WARREN_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

func openBench(b *testing.B, dir string, sync SyncMode) *Store {
	s, err := Open(dir, Options{Logger: zerolog.Nop(), Sync: sync})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkCommit measures Txn commit throughput: each goroutine publishes
// one 1 KiB inline message per Txn and keeps up to inflight Txns waiting
// for their callbacks (like a publisher with a confirm window). txns/sync
// shows the group commit at work.
func BenchmarkCommit(b *testing.B) {
	for _, c := range []struct {
		goroutines, inflight int
		durable              bool
	}{
		{1, 1, true},
		{1, 256, true},
		{16, 1, true},
		{16, 256, true},
		{16, 256, false},
	} {
		name := fmt.Sprintf("durable=%v/goroutines=%d/inflight=%d", c.durable, c.goroutines, c.inflight)
		b.Run(name, func(b *testing.B) {
			s := openBench(b, benchDir(b), SyncAlways)
			defer s.Close()
			if _, err := s.Recover(nil); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 1024)
			var acked atomic.Int64
			per := (b.N + c.goroutines - 1) / c.goroutines
			syncs0, commits0 := s.c.stats.syncs.Load(), s.c.stats.commits.Load()
			b.SetBytes(1024)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for g := 0; g < c.goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					q := uint64(g + 1)
					e := &Entry{Persistent: true, Msg: &Message{Exchange: "bench", RoutingKey: "key", Body: body}}
					sem := make(chan struct{}, c.inflight)
					done := func(err error) {
						if err != nil {
							b.Error(err)
						}
						acked.Add(1)
						<-sem
					}
					for i := 0; i < per; i++ {
						sem <- struct{}{}
						txn := s.Begin()
						txn.PutEntry(q, 0, uint64(i), e)
						txn.Commit(c.durable, done)
					}
					for i := 0; i < c.inflight; i++ {
						sem <- struct{}{}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			n := float64(acked.Load())
			syncs := float64(s.c.stats.syncs.Load() - syncs0)
			commits := float64(s.c.stats.commits.Load() - commits0)
			b.ReportMetric(n/elapsed.Seconds(), "txns/s")
			b.ReportMetric(syncs/elapsed.Seconds(), "syncs/s")
			b.ReportMetric(commits/elapsed.Seconds(), "commits/s")
			if syncs > 0 {
				b.ReportMetric(n/syncs, "txns/sync")
			} else {
				b.ReportMetric(n/commits, "txns/commit")
			}
		})
	}
}

// BenchmarkScanQueue reads a queue of 100k entries (1 KiB bodies) from
// Pebble's sstables, and the same queue after its first half was consumed
// (50k point tombstones in the memtable): from the head, the tombstones are
// below the iterator's lower bound; from 0 they are walked.
func BenchmarkScanQueue(b *testing.B) {
	const n = 100_000
	s := openBench(b, benchDir(b), SyncNever)
	defer s.Close()
	if _, err := s.Recover(nil); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for i := 1; i <= n; i += 1000 {
		txn := s.Begin()
		for j := i; j < i+1000; j++ {
			txn.PutEntry(1, 0, uint64(j), &Entry{Persistent: true, Msg: &Message{Exchange: "bench", RoutingKey: "key", Body: body}})
		}
		commit(b, txn)
	}
	flushAndSettle(b, s)
	scan := func(b *testing.B, from uint64, want int) {
		b.SetBytes(int64(want) * 1024)
		for range b.N {
			got := 0
			err := s.ScanQueue(1, 0, from, 0, func(seq uint64, e *Entry) bool { got++; return true })
			if err != nil || got != want {
				b.Fatalf("scanned %d, %v", got, err)
			}
		}
		b.ReportMetric(float64(want)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	}
	b.Run("full", func(b *testing.B) { scan(b, 0, n) })
	// Consume the first half, one delete per entry as acks do.
	for i := 1; i <= n/2; i += 1000 {
		txn := s.Begin()
		for j := i; j < i+1000; j++ {
			txn.DeleteEntry(1, 0, uint64(j), Deleted{})
		}
		commit(b, txn)
	}
	// The tombstones stay in the memtable, as those of recent acks do.
	b.Run("half-consumed/from=head", func(b *testing.B) { scan(b, n/2+1, n/2) })
	b.Run("half-consumed/from=0", func(b *testing.B) { scan(b, 0, n/2) })
}

// flushAndSettle flushes the memtable and waits for background compactions
// to finish, so they do not run during the measurement.
func flushAndSettle(b *testing.B, s *Store) {
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	for quiet := 0; quiet < 5; {
		time.Sleep(20 * time.Millisecond)
		if m := s.db.Metrics(); m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
}

// BenchmarkRecover measures Recover of a store holding 1M persistent
// entries with 1 KiB bodies in 10 queues, one in ten of them a shared
// message referenced from two queues. It only runs with -bench (it writes
// about 1 GiB once).
func BenchmarkRecover(b *testing.B) {
	const n = 1_000_000
	dir := filepath.Join(benchDir(b), "store")
	s := openBench(b, dir, SyncNever)
	if _, err := s.Recover(nil); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	keep := map[uint64]bool{}
	for i := 0; i < n; {
		txn := s.Begin()
		for end := i + 1000; i < end; i++ {
			q := uint64(i%10 + 1)
			keep[q], keep[q+10] = true, true
			if i%10 == 0 {
				id := s.NewID()
				txn.PutMessage(id, &Message{Exchange: "bench", RoutingKey: "key", Body: body}, 0)
				txn.PutEntry(q, 0, uint64(i), &Entry{Persistent: true, MsgID: id, Msg: &Message{Body: body}})
				txn.PutEntry(q+10, 0, uint64(i), &Entry{Persistent: true, MsgID: id, Msg: &Message{Body: body}})
				i++ // the second reference counts toward n
				continue
			}
			txn.PutEntry(q, 0, uint64(i), &Entry{Persistent: true, Delivered: i%7 == 0, Msg: &Message{Exchange: "bench", RoutingKey: "key", Body: body}})
		}
		txn.Commit(false, nil)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var st RecoveryStats
	for range b.N {
		s := openBench(b, dir, SyncAlways)
		var err error
		if st, err = s.Recover(keep); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	if st.Entries != n {
		b.Fatalf("recovered %d entries, want %d", st.Entries, n)
	}
	b.ReportMetric(float64(st.Entries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
