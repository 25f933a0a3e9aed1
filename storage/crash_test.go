package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The crash test: a child process (this test binary, re-executed with
// crashEnv set) writes durable Txns as fast as it can and prints what each
// acknowledged; the parent kills it with SIGKILL at a random moment, opens
// the store, and checks that every acknowledged write is there.
//
// Each of the child's workers owns queue q (1..8). Per message id:
//
//	inline:  PutEntry(q, id)                              ack line "P q id"
//	shared:  PutMessage(id) + PutEntry(q, id) + PutEntry(100+q, id)
//	                                                      ack line "S q id"
//
// Later, for some acknowledged messages, it prints an intent line (written
// straight to stdout, before the commit) and then commits
//
//	delete: DeleteEntry(q, id)                            "d q id", ack "D q id"
//	move:   DeleteEntry(q, id) + PutEntry(200+q, id)      "m q id", ack "M q id"
//
// The parent checks: an acknowledged put is present (body intact, shared
// message readable) unless a delete or move of it was started; an
// acknowledged delete is absent; an acknowledged move is in 200+q and not in
// q; a started move is in exactly one of the two (moves are atomic); no
// entry points at a missing message.

const crashEnv = "WARREN_STORAGE_CRASH_DIR"

const crashWorkers = 8

func crashKeep() map[uint64]bool {
	keep := map[uint64]bool{}
	for q := uint64(1); q <= crashWorkers; q++ {
		keep[q], keep[100+q], keep[200+q] = true, true, true
	}
	return keep
}

// crashBody is id's body: mostly small, one in five from 8 to 64 KiB,
// which the store keeps in blob files once flushed, and among them one in
// 25 from 256 KiB to 1.25 MiB and one in 200 of 16 MiB, which inline
// entries keep in the body log.
func crashBody(id uint64) []byte {
	b := bytes.Repeat([]byte{byte('a' + id%26)}, crashBodyLen(id))
	copy(b, fmt.Sprintf("msg-%d-", id))
	return b
}

func crashBodyLen(id uint64) int {
	switch {
	case id%200 == 0:
		return 16 << 20
	case id%25 == 0:
		return DefaultBodyLogMin + int(id*7919%(1<<20))
	case id%5 == 0:
		return separateValuesFrom + int(id*7919%(56<<10))
	}
	return 16 + int(id*7919%900)
}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("run by TestCrash")
	}
	// Small memtables, so that a round flushes and compacts, and the kill
	// can land in either.
	s, err := Open(dir, Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	if _, err := s.Recover(crashKeep()); err != nil {
		fmt.Println("recover:", err)
		os.Exit(2)
	}

	var out struct {
		sync.Mutex
		buf bytes.Buffer
	}
	ack := func(format string, args ...any) {
		out.Lock()
		fmt.Fprintf(&out.buf, format+"\n", args...)
		out.Unlock()
	}
	// Intent lines must reach the pipe before the commit they announce.
	intent := func(format string, args ...any) {
		out.Lock()
		out.buf.WriteTo(os.Stdout)
		fmt.Fprintf(os.Stdout, format+"\n", args...)
		out.Unlock()
	}
	go func() {
		for {
			time.Sleep(time.Millisecond)
			out.Lock()
			out.buf.WriteTo(os.Stdout)
			out.Unlock()
		}
	}()
	fmt.Println("ready")

	for w := 0; w < crashWorkers; w++ {
		go func() {
			q := uint64(w + 1)
			r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), q))
			sem := make(chan struct{}, 64) // Txns in flight
			var mu sync.Mutex
			var acked []uint64          // acknowledged puts still in q
			shared := map[uint64]bool{} // which of them are shared
			for {
				sem <- struct{}{}
				id := s.NewID()
				body := crashBody(id)
				txn := s.Begin()
				isShared := r.IntN(3) == 0
				if isShared {
					txn.PutMessage(id, &Message{Exchange: "x", RoutingKey: "k", Body: body}, 0)
					txn.PutEntry(q, 0, id, &Entry{Persistent: true, MsgID: id})
					txn.PutEntry(100+q, 0, id, &Entry{Persistent: true, MsgID: id})
				} else {
					txn.PutEntry(q, 0, id, &Entry{Persistent: true, Msg: &Message{Exchange: "x", RoutingKey: "k", Body: body}})
				}
				txn.Commit(true, func(err error) {
					<-sem
					if err != nil {
						return
					}
					if isShared {
						ack("S %d %d", q, id)
					} else {
						ack("P %d %d", q, id)
					}
					mu.Lock()
					acked = append(acked, id)
					shared[id] = isShared
					mu.Unlock()
				})

				if r.IntN(3) != 0 {
					continue
				}
				mu.Lock()
				if len(acked) == 0 {
					mu.Unlock()
					continue
				}
				i := r.IntN(len(acked))
				old := acked[i]
				acked[i] = acked[len(acked)-1]
				acked = acked[:len(acked)-1]
				var msgID uint64
				if shared[old] {
					msgID = old
				}
				delete(shared, old)
				mu.Unlock()

				sem <- struct{}{}
				txn = s.Begin()
				txn.DeleteEntry(q, 0, old, Deleted{MsgID: msgID, Size: crashBodyLen(old)})
				if r.IntN(2) == 0 {
					intent("d %d %d", q, old)
					txn.Commit(true, func(err error) {
						<-sem
						if err == nil {
							ack("D %d %d", q, old)
						}
					})
				} else {
					e := &Entry{Persistent: true, Deliveries: 1, MsgID: msgID}
					if msgID == 0 {
						e.Msg = &Message{Exchange: "x", RoutingKey: "k", Body: crashBody(old)}
					}
					txn.PutEntry(200+q, 0, old, e)
					intent("m %d %d", q, old)
					txn.Commit(true, func(err error) {
						<-sem
						if err == nil {
							ack("M %d %d", q, old)
						}
					})
				}
			}
		}()
	}
	select {}
}

// crashState is what the parent knows about one message id.
type crashState struct {
	q        uint64
	shared   bool
	acked    bool // put acknowledged
	deleting bool // delete started
	deleted  bool // delete acknowledged
	moving   bool // move started
	moved    bool // move acknowledged
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	msgs := map[uint64]*crashState{}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	const rounds = 6
	var blobs uint64
	var logged int
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		cmd.Stderr = os.Stderr
		must(t, cmd.Start())

		ready := make(chan struct{})
		lines := make(chan []string, 1)
		go func() {
			var got []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "ready" {
					close(ready)
					continue
				}
				got = append(got, sc.Text())
			}
			lines <- got
		}()
		// Most rounds kill during the load; the first kills early, maybe
		// during Open or Recover.
		var delay time.Duration
		if round == 1 {
			delay = time.Duration(r.IntN(30)) * time.Millisecond
		} else {
			select {
			case <-ready:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the child did not start")
			}
			delay = time.Duration(100+r.IntN(500)) * time.Millisecond
		}
		time.Sleep(delay)
		must(t, cmd.Process.Signal(syscall.SIGKILL))
		cmd.Wait()

		var puts, dels, moves int
		for _, l := range <-lines {
			f := strings.Fields(l)
			if len(f) != 3 {
				t.Fatalf("child said %q", l)
			}
			q, _ := strconv.ParseUint(f[1], 10, 64)
			id, _ := strconv.ParseUint(f[2], 10, 64)
			m := msgs[id]
			if m == nil {
				m = &crashState{q: q}
				msgs[id] = m
			}
			switch f[0] {
			case "P", "S":
				m.acked, m.shared = true, f[0] == "S"
				puts++
			case "d":
				m.deleting = true
			case "D":
				m.deleted = true
				dels++
			case "m":
				m.moving = true
			case "M":
				m.moved = true
				moves++
			}
		}
		t.Logf("round %d: killed after %v; acknowledged %d puts, %d deletes, %d moves", round, delay, puts, dels, moves)
		b, l := crashCheck(t, dir, msgs)
		blobs += b
		logged += l
	}
	if blobs == 0 {
		t.Error("no round left a blob file: the large bodies were not flushed")
	}
	if logged == 0 {
		t.Error("no round left a logged entry: the body log was not exercised")
	}
}

// crashCheck opens the store the child left and checks it against msgs. It
// returns how many blob files the store holds, and how many logged entries.
func crashCheck(t *testing.T, dir string, msgs map[uint64]*crashState) (blobs uint64, logged int) {
	t.Helper()
	s, err := Open(dir, Options{Logger: zerolog.Nop()})
	must(t, err)
	defer s.Close()
	st, err := s.Recover(crashKeep())
	must(t, err)
	if st.MissingMessages != 0 {
		t.Errorf("%d entries point at missing messages", st.MissingMessages)
	}
	// A process crash never damages the body log, and Recover leaves no
	// segment nothing refers to.
	if st.DamagedBodies != 0 {
		t.Errorf("%d logged entries lost their bodies", st.DamagedBodies)
	}
	s.bodies.mu.Lock()
	for _, seg := range s.bodies.segs {
		if seg.live == 0 {
			t.Errorf("body log segment %s is kept with no entry referring to it", seg.name)
		}
	}
	s.bodies.mu.Unlock()
	s.c.mu.Lock()
	for _, q := range s.c.logged {
		logged += len(q)
	}
	s.c.mu.Unlock()
	// where[id] lists the queues holding id.
	where := map[uint64][]uint64{}
	for q := range crashKeep() {
		err := s.ScanQueue(q, 0, 0, 0, func(seq uint64, e *Entry) bool {
			if e.Msg == nil || !bytes.Equal(e.Msg.Body, crashBody(seq)) || e.Msg.Exchange != "x" || e.Msg.RoutingKey != "k" {
				t.Errorf("queue %d entry %d: wrong message %+v", q, seq, e.Msg)
			}
			where[seq] = append(where[seq], q)
			return true
		})
		if err != nil {
			t.Errorf("scan queue %d: %v", q, err)
		}
	}
	in := func(id, q uint64) bool {
		for _, x := range where[id] {
			if x == q {
				return true
			}
		}
		return false
	}
	var checked int
	for id, m := range msgs {
		if !m.acked {
			continue
		}
		checked++
		src, dst, other := m.q, 200+m.q, 100+m.q
		switch {
		case m.deleted && in(id, src):
			t.Errorf("message %d: delete acknowledged, still in queue %d", id, src)
		case m.moved && (in(id, src) || !in(id, dst)):
			t.Errorf("message %d: move acknowledged, found in %v", id, where[id])
		case m.moving && in(id, src) == in(id, dst):
			t.Errorf("message %d: move not atomic, found in %v", id, where[id])
		case !m.deleting && !m.moving && !in(id, src):
			t.Errorf("message %d: put acknowledged, missing from queue %d (found in %v)", id, src, where[id])
		}
		if m.shared && !in(id, other) {
			t.Errorf("message %d: shared put acknowledged, missing from queue %d", id, other)
		}
	}
	if checked == 0 {
		t.Log("nothing acknowledged yet")
	}
	return s.db.Metrics().BlobFiles.LiveCount, logged
}
