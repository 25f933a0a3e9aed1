package lockorder

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestHoldsSeeAnInversion plants inversions in the bookkeeping a checked
// build keeps and sees each reported, naming both locks.
func TestHoldsSeeAnInversion(t *testing.T) {
	for _, c := range []struct {
		name    string
		take    []rankID // in this order, by one goroutine
		refused rankID   // the one refused; numRanks: none
	}{
		{"in order", []rankID{vhostDef, vhostMaps}, numRanks},
		{"a queue under a queue", []rankID{queueQueue, queueQueue, connChannel}, numRanks},
		{"the vhost's maps, then its topology", []rankID{vhostMaps, vhostDef}, vhostDef},
		{"a leaf, then a queue", []rankID{statsMeter, queueQueue}, queueQueue},
		{"two exchanges", []rankID{vhostDef, vhostExchange, vhostExchange}, vhostExchange},
		{"a channel, then its queue", []rankID{connChannel, queueQueue}, queueQueue},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHolds()
			locks := make([]int, len(c.take))
			var refused error
			for i, id := range c.take {
				if err := h.acquire(1, id, unsafe.Pointer(&locks[i])); err != nil {
					refused = err
					var inv *InversionError
					if !errors.As(err, &inv) || inv.Taking != ranks[id].name {
						t.Fatalf("refused %v, want %s named", err, ranks[id].name)
					}
					if id != c.refused {
						t.Fatalf("refused %s: %v", ranks[id].name, err)
					}
					break
				}
			}
			if refused == nil && c.refused != numRanks {
				t.Fatalf("%s was taken out of order and nothing was refused", ranks[c.refused].name)
			}
		})
	}
}

// TestHoldsAreEachGoroutines: what one goroutine holds does not order
// another's locks, and a release by another goroutine finds the hold.
func TestHoldsAreEachGoroutines(t *testing.T) {
	h := newHolds()
	var a, b int
	if err := h.acquire(1, vhostMaps, unsafe.Pointer(&a)); err != nil {
		t.Fatal(err)
	}
	if err := h.acquire(2, vhostDef, unsafe.Pointer(&b)); err != nil {
		t.Fatalf("another goroutine's hold refused a lock: %v", err)
	}
	h.release(3, vhostMaps, unsafe.Pointer(&a)) // unlocked elsewhere
	if err := h.acquire(1, vhostDef, unsafe.Pointer(&b)); err != nil {
		t.Fatalf("a released lock still counts: %v", err)
	}
}

// TestMutexChecksInACheckedBuild takes two real locks out of order: a
// checked build panics naming them, an ordinary one lets it be.
func TestMutexChecksInACheckedBuild(t *testing.T) {
	var maps RWMutex[VHostMaps]
	var def Mutex[VHostDef]
	var got any
	func() {
		defer func() { got = recover() }()
		maps.RLock()
		defer maps.RUnlock()
		def.Lock()
		def.Unlock()
	}()
	switch {
	case Checked && got == nil:
		t.Fatal("a checked build took vhost.VHost.defMu under vhost.VHost.mu without a word")
	case Checked && !strings.Contains(got.(error).Error(), "vhost.VHost.defMu taken while holding vhost.VHost.mu"):
		t.Fatalf("panicked with %v", got)
	case !Checked && got != nil:
		t.Fatalf("an ordinary build panicked: %v", got)
	}
	// In order, and after the inversion was refused, nothing is left held.
	def.Lock()
	maps.Lock()
	maps.Unlock()
	def.Unlock()
}

// TestGoroutinesAreTold: goroutine() is the same within a goroutine and
// differs between live ones.
func TestGoroutinesAreTold(t *testing.T) {
	me := goroutine()
	if goroutine() != me {
		t.Fatal("one goroutine, two identities")
	}
	const n = 8
	ids := make(chan uintptr, n)
	var wg, live sync.WaitGroup
	live.Add(1)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids <- goroutine()
			live.Wait()
		}()
	}
	seen := map[uintptr]bool{me: true}
	for range n {
		id := <-ids
		if seen[id] {
			t.Fatalf("two live goroutines share %x", id)
		}
		seen[id] = true
	}
	live.Done()
	wg.Wait()
}

// notMutexes are names LOCKS.md orders that are not mutexes.
var notMutexes = map[string]string{
	"broker.Broker.defsMu": "a one-slot channel",
}

// TestRanksFollowLOCKS reads LOCKS.md's order and checks ranks.go against
// it: the same locks, and every lock LOCKS.md lists under another ranked
// after it (or with it, where the rank may nest).
func TestRanksFollowLOCKS(t *testing.T) {
	doc, err := os.ReadFile("../../LOCKS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, order, ok := strings.Cut(string(doc), "## The order\n\n```\n")
	if !ok {
		t.Fatal("LOCKS.md has no code block under \"## The order\"")
	}
	order, _, _ = strings.Cut(order, "```")
	byName := map[string]rankID{}
	for id, r := range ranks {
		if r.name == "" {
			t.Fatalf("rank %d has no name", id)
		}
		byName[r.name] = rankID(id)
	}
	name := regexp.MustCompile(`^( *)([a-z]+(?:\.[A-Za-z]+)+)(?: |$)`)
	type entry struct {
		indent int
		name   string
	}
	var stack []entry // the current line's ancestors
	listed := map[string]bool{}
	for _, line := range strings.Split(order, "\n") {
		m := name.FindStringSubmatch(line)
		if m == nil || len(m[1]) > 20 { // a description's continuation
			continue
		}
		e := entry{len(m[1]), m[2]}
		listed[e.name] = true
		for len(stack) > 0 && stack[len(stack)-1].indent >= e.indent {
			stack = stack[:len(stack)-1]
		}
		if _, skip := notMutexes[e.name]; !skip {
			child, ok := byName[e.name]
			if !ok {
				t.Errorf("LOCKS.md orders %s, which ranks.go does not rank", e.name)
			}
			for _, p := range stack {
				parent, known := byName[p.name]
				if !ok || !known {
					continue
				}
				if parent > child || parent == child && !ranks[child].nests {
					t.Errorf("LOCKS.md lets %s be taken under %s, and ranks.go puts it first", e.name, p.name)
				}
			}
		}
		stack = append(stack, e)
	}
	for _, r := range ranks {
		if !listed[r.name] {
			t.Errorf("ranks.go ranks %s, which LOCKS.md does not order", r.name)
		}
	}
}
