package stream

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/storage"
)

// testForm is a Config.Form for tests: the chunk's offsets, then each
// body after its length (one byte).
func testForm(dst []byte, recs []storage.StreamRecord, bodies []int) ([]byte, bool) {
	start := len(dst)
	dst = fmt.Appendf(dst, "%d-%d|", recs[0].Offset, recs[len(recs)-1].Offset)
	for i, r := range recs {
		dst = append(dst, byte(len(r.Msg.Body)))
		bodies[i] = len(dst) - start
		dst = append(dst, r.Msg.Body...)
	}
	return dst, true
}

// openFormed opens stream 1 of a store in memory with testForm; both
// close when the test ends.
func openFormed(t *testing.T) (*Stream, *storage.Store) {
	t.Helper()
	st := openStore(t, vfs.NewMem())
	s, err := Open(Config{Name: "s", VHost: "/", ID: 1, Store: st, Form: testForm})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		st.Close()
	})
	return s, st
}

// appendWait appends ms as one write and waits until it is stored, for
// at most 10 s.
func appendWait(s *Stream, ms []*message.Message) error {
	done := make(chan error, 1)
	s.AppendAll([]Append{{Msgs: ms, Done: func(err error) { done <- err }}})
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		return errors.New("the append was not stored within 10 s")
	}
}

// chunkSink is a ChunkReader with a credit of chunks (or Read rounds),
// which logs what it takes; declining, it takes messages one by one.
type chunkSink struct {
	mu        sync.Mutex
	credit    int
	declining bool
	log       []string // "chunk first from last" or "read offset"
	forms     [][]byte
	taken     bool // this round took something
}

func (k *chunkSink) ReadFormed(fc *Formed, from uint64) ChunkRead {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.declining {
		return ChunkDeclined
	}
	if k.credit == 0 {
		return ChunkRefused
	}
	k.credit--
	k.log = append(k.log, fmt.Sprintf("chunk %d %d %d", fc.First, from, fc.First+uint64(fc.Count)-1))
	form := make([]byte, fc.Len)
	if err := fc.ReadAt(form); err != nil {
		form = []byte(err.Error())
	}
	fc.Release()
	k.forms = append(k.forms, form)
	return ChunkTaken
}

func (k *chunkSink) Read(offset uint64, _ int64, _ *message.Message) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.credit == 0 {
		return false
	}
	k.taken = true
	k.log = append(k.log, fmt.Sprintf("read %d", offset))
	return true
}

func (k *chunkSink) RoundDone() {
	k.mu.Lock()
	if k.taken {
		k.credit--
		k.taken = false
	}
	k.mu.Unlock()
}

func (k *chunkSink) Deliver(queue.Delivery) bool { return false }
func (k *chunkSink) Cancelled()                  {}
func (k *chunkSink) NoAck() bool                 { return false }
func (k *chunkSink) Exclusive() bool             { return false }

func (k *chunkSink) give(n int) {
	k.mu.Lock()
	k.credit += n
	k.mu.Unlock()
}

func (k *chunkSink) lines() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.log...)
}

// A stream with a Form stores its chunks of at most 256 messages in it,
// and a ChunkReader takes each whole, in its form, as it lies in its file,
// from the chunk's start or, fresh, from inside it; with no credit it
// waits for a Kick; declining, it reads the messages one by one, as a
// stream without a Form offers them.
func TestStreamChunkReaders(t *testing.T) {
	s, st := openFormed(t)
	var as []Append
	var wg sync.WaitGroup
	var ms []*message.Message
	for i := range 600 {
		ms = append(ms, message.NewAMQP10("s", "", []byte(fmt.Sprint("m", i))))
	}
	wg.Add(1)
	as = append(as, Append{Msgs: ms, Done: func(err error) {
		if err != nil {
			t.Error(err)
		}
		wg.Done()
	}})
	s.AppendAll(as)
	wg.Wait()

	consume := func(k *chunkSink, at uint64) {
		t.Helper()
		if err := s.Consume(k, Offset{Kind: At, N: at}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// From the start: three chunks, whole, in their stored form.
	whole := &chunkSink{credit: 10}
	consume(whole, 0)
	waitFor(t, "three chunks", func() bool { return len(whole.lines()) == 3 })
	if got, want := fmt.Sprint(whole.lines()), "[chunk 0 0 255 chunk 256 256 511 chunk 512 512 599]"; got != want {
		t.Fatalf("took %s, want %s", got, want)
	}
	for i, first := range []uint64{0, 256, 512} {
		recs, err := st.StreamChunk(1, first)
		if err != nil {
			t.Fatal(err)
		}
		form, _ := testForm(nil, recs, make([]int, len(recs)))
		if !bytes.Equal(whole.forms[i], form) || !bytes.HasPrefix(form, fmt.Appendf(nil, "%d-", first)) {
			t.Fatalf("chunk %d's form %.12q, its messages' %.12q", i, whole.forms[i], form)
		}
	}

	// Fresh from inside a chunk: all of it, then the next; one credit at
	// a time, each after a Kick.
	inside := &chunkSink{credit: 1}
	consume(inside, 300)
	waitFor(t, "the chunk holding 300", func() bool { return len(inside.lines()) == 1 })
	inside.give(1)
	s.Kick()
	waitFor(t, "the next chunk", func() bool { return len(inside.lines()) == 2 })
	if got, want := fmt.Sprint(inside.lines()), "[chunk 256 300 511 chunk 512 512 599]"; got != want {
		t.Fatalf("took %s, want %s", got, want)
	}

	// Declining: message by message, from 590.
	declining := &chunkSink{credit: 100, declining: true}
	consume(declining, 590)
	waitFor(t, "ten reads", func() bool { return len(declining.lines()) == 10 })
	for i, l := range declining.lines() {
		if l != fmt.Sprint("read ", 590+i) {
			t.Fatalf("read %d: %s", i, l)
		}
	}
}

// Pulls from one goroutine, Kicks from another and appends from a third
// race to serve one reader, a credit at a time: every offset reaches it
// once, in order, whichever goroutine served it (run with -race: the
// reader's place is one goroutine's at a time).
func TestStreamPullRacesDelivery(t *testing.T) {
	s, _ := openFormed(t)
	const batches, batch = 40, 50
	k := &chunkSink{}
	if err := s.Consume(k, Offset{Kind: First}, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // appends
		defer wg.Done()
		for b := range batches {
			var ms []*message.Message
			for i := range batch {
				ms = append(ms, message.NewAMQP10("s", "", []byte(fmt.Sprint("m", b*batch+i))))
			}
			if err := appendWait(s, ms); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() { // kicks
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				s.Kick()
			}
		}
	}()
	taken := func() uint64 {
		lines := k.lines()
		if len(lines) == 0 {
			return 0
		}
		var first, from, last uint64
		fmt.Sscanf(lines[len(lines)-1], "chunk %d %d %d", &first, &from, &last)
		return last + 1
	}
	waitFor(t, "every offset taken", func() bool {
		k.give(1)
		s.Pull(k)
		return taken() == batches*batch
	})
	close(stop)
	wg.Wait()
	next := uint64(0)
	for _, l := range k.lines() {
		var first, from, last uint64
		if _, err := fmt.Sscanf(l, "chunk %d %d %d", &first, &from, &last); err != nil || from != next {
			t.Fatalf("took %q after offset %d; all: %v", l, next, k.lines())
		}
		next = last + 1
	}
}

// The formed-chunk limit doubles after a write cut at it and halves
// after one of under half of it, within storage's bounds.
func TestFormedLimit(t *testing.T) {
	for _, c := range []struct{ limit, wrote, want int }{
		{256, 1, 256},      // at the floor
		{256, 256, 256},    // filled, not cut
		{256, 257, 512},    // cut: doubles
		{512, 300, 512},    // over half: kept
		{512, 255, 256},    // under half: halves
		{1024, 10, 512},    // one step at a time
		{4096, 9000, 4096}, // at the ceiling
		{2048, 5000, 4096},
	} {
		if got := formedLimit(c.limit, c.wrote); got != c.want {
			t.Errorf("formedLimit(%d, %d) = %d, want %d", c.limit, c.wrote, got, c.want)
		}
	}
}

// Under sustained writes a stream's formed chunks grow, and shrink back
// when the writes do: a quiet stream's first batch of 500 is cut at 256
// (a credit's chunk stays small), the next write of 600 goes in chunks of
// up to 512, a small write shrinks the limit again, one step. A replica
// does the same with the entries it applies.
func TestStreamFormedChunksGrowWithWrites(t *testing.T) {
	t.Run("one node", func(t *testing.T) {
		s, _ := openFormed(t)
		checkFormedChunksGrow(t, s)
	})
	t.Run("replica", func(t *testing.T) {
		g, _ := newReplicas(t, 1, Config{Form: testForm})
		checkFormedChunksGrow(t, g.replicas[0])
	})
}

func checkFormedChunksGrow(t *testing.T, s *Stream) {
	n := 0
	write := func(count int) {
		t.Helper()
		var ms []*message.Message
		for range count {
			ms = append(ms, message.NewAMQP10("s", "", []byte(fmt.Sprint("m", n))))
			n++
		}
		if err := appendWait(s, ms); err != nil {
			t.Fatal(err)
		}
	}
	for _, count := range []int{500, 600, 100, 400} {
		write(count)
	}
	k := &chunkSink{credit: 100}
	if err := s.Consume(k, Offset{Kind: First}, nil); err != nil {
		t.Fatal(err)
	}
	// 500 at 256: 256 and 244, the limit 512; 600: 512 and 88, 1024;
	// 100: 100, 512; 400: 400, 512.
	want := "[chunk 0 0 255 chunk 256 256 499 chunk 500 500 1011 chunk 1012 1012 1099 chunk 1100 1100 1199 chunk 1200 1200 1599]"
	waitFor(t, "every chunk", func() bool { return len(k.lines()) == 6 })
	if got := fmt.Sprint(k.lines()); got != want {
		t.Fatalf("chunks %s, want %s", got, want)
	}
}
