package topic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// match is the reference matcher: a direct recursive reading of the topic
// rules, exponential in the worst case but obviously right.
func match(pattern, key []string) bool {
	if len(pattern) == 0 {
		return len(key) == 0
	}
	switch pattern[0] {
	case "#":
		for i := 0; i <= len(key); i++ {
			if match(pattern[1:], key[i:]) {
				return true
			}
		}
		return false
	case "*":
		return len(key) > 0 && match(pattern[1:], key[1:])
	}
	return len(key) > 0 && key[0] == pattern[0] && match(pattern[1:], key[1:])
}

func TestTopicRules(t *testing.T) {
	cases := []struct {
		pattern string
		matches []string
		misses  []string
	}{
		// The example every AMQP text gives (seeds 000 and 001).
		{"*.stock.#", []string{"usd.stock", "eur.stock.db", "usd.stock.a.b"}, []string{"stock.nasdaq", "stock", "usd.bond"}},
		{"#", []string{"", "a", "a.b", "a..b", "."}, nil},
		{"*", []string{"a", "x"}, []string{"", "a.b"}},
		{"a.#", []string{"a", "a.b", "a.b.c"}, []string{"b", "ab", "b.a"}},
		{"#.a", []string{"a", "x.a", "x.y.a"}, []string{"a.x", ""}},
		{"a.*.c", []string{"a.b.c", "a..c"}, []string{"a.c", "a.b.b.c"}},
		{"#.#", []string{"", "a", "a.b.c"}, nil},
		{"a.#.b.#.c", []string{"a.b.c", "a.x.b.y.c", "a.b.b.c.c"}, []string{"a.c", "a.b"}},
		{"", []string{""}, []string{"a", "."}},
		{"a..b", []string{"a..b"}, []string{"a.b", "a.x.b"}},
		{"*.*", []string{"a.b", ".", "a."}, []string{"a", "a.b.c"}},
	}
	for _, c := range cases {
		tr := New[string]()
		tr.Add(c.pattern, "q")
		var m Matcher[string]
		check := func(key string, want bool) {
			t.Helper()
			if got := len(tr.Match(&m, key, nil)) == 1; got != want {
				t.Errorf("pattern %q key %q: matched %v, want %v", c.pattern, key, got, want)
			}
			if ref := match(Words(c.pattern), Words(key)); ref != want {
				t.Errorf("pattern %q key %q: the reference matcher disagrees with the table", c.pattern, key)
			}
		}
		for _, key := range c.matches {
			check(key, true)
		}
		for _, key := range c.misses {
			check(key, false)
		}
	}
}

func TestTrieManyPatternsAgreeWithReference(t *testing.T) {
	patterns := []string{"#", "*", "a", "a.*", "a.#", "*.b", "#.b", "a.*.c", "a.#.c", "#.#", "*.#.*", "", "a..c", "*.*.*"}
	keys := []string{"", "a", "b", "a.b", "a.c", "a.b.c", "x.b", "a..c", "a.b.b.c", ".", "a.b.c.d"}
	tr := New[string]()
	for _, p := range patterns {
		tr.Add(p, p)
	}
	var m Matcher[string]
	for _, key := range keys {
		var want []string
		for _, p := range patterns {
			if match(Words(p), Words(key)) {
				want = append(want, p)
			}
		}
		got := tr.Match(&m, key, nil)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("key %q: got %q, want %q", key, got, want)
		}
	}
}

func TestRemovePrunes(t *testing.T) {
	tr := New[int]()
	tr.Add("a.b.c", 1)
	tr.Add("a.b.c", 2)
	tr.Add("a.#", 3)
	if !tr.Remove("a.b.c", 1) || tr.Remove("a.b.c", 1) {
		t.Fatal("remove should find the value once")
	}
	var m Matcher[int]
	if got := tr.Match(&m, "a.b.c", nil); !slices.Equal(sortInts(got), []int{2, 3}) {
		t.Fatalf("got %v", got)
	}
	tr.Remove("a.b.c", 2)
	tr.Remove("a.#", 3)
	if tr.Len() != 1 {
		t.Fatalf("trie should be back to its root, has %d nodes", tr.Len())
	}
}

func sortInts(v []int) []int { slices.Sort(v); return v }

// TestHashStormIsBounded checks that patterns of many '#' against a long key
// finish: the visited set keeps the walk polynomial.
func TestHashStormIsBounded(t *testing.T) {
	tr := New[int]()
	tr.Add(strings.Repeat("#.", 30)+"z", 1)
	key := strings.Repeat("a.", 60) + "b"
	var m Matcher[int]
	if got := tr.Match(&m, key, nil); len(got) != 0 {
		t.Fatalf("got %v", got)
	}
}

func FuzzTopicMatch(f *testing.F) {
	f.Add("*.stock.#", "usd.stock")
	f.Add("#.a.#", "b.a.c")
	f.Add("a..*", "a..")
	f.Fuzz(func(t *testing.T, pattern, key string) {
		if len(pattern) > 64 || len(key) > 64 {
			return
		}
		tr := New[int]()
		tr.Add(pattern, 1)
		var m Matcher[int]
		got := len(tr.Match(&m, key, nil)) == 1
		if want := match(Words(pattern), Words(key)); got != want {
			t.Fatalf("pattern %q key %q: trie %v, rules %v", pattern, key, got, want)
		}
		if !tr.Remove(pattern, 1) || tr.Len() != 1 {
			t.Fatalf("pattern %q did not remove cleanly", pattern)
		}
	})
}

func BenchmarkMatch10kBindings(b *testing.B) {
	tr := New[int]()
	for i := 0; i < 10000; i++ {
		switch i % 4 {
		case 0:
			tr.Add(fmt.Sprintf("stock.%d.*", i), i)
		case 1:
			tr.Add(fmt.Sprintf("stock.*.%d", i), i)
		case 2:
			tr.Add(fmt.Sprintf("#.%d", i), i)
		default:
			tr.Add(fmt.Sprintf("news.%d.#", i), i)
		}
	}
	var m Matcher[int]
	out := make([]int, 0, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out = tr.Match(&m, "stock.4.nyse", out[:0])
	}
	_ = out
}

// checkTrie walks t and fails unless its node ids are exactly 0 to
// Len()-1, each node is where byID says, and each node's child count and
// parent link agree with its children.
func checkTrie[V comparable](t *testing.T, tr *Trie[V]) {
	t.Helper()
	seen := make([]bool, tr.Len())
	var walk func(n *node[V])
	walk = func(n *node[V]) {
		if n.id < 0 || n.id >= len(seen) || seen[n.id] {
			t.Fatalf("node %q has id %d, out of 0..%d or taken", n.edge, n.id, len(seen)-1)
		}
		seen[n.id] = true
		if tr.byID[n.id] != n {
			t.Fatalf("byID[%d] is not the node with that id", n.id)
		}
		children := 0
		for _, c := range []*node[V]{n.star, n.hash} {
			if c != nil {
				children++
				if c.parent != n {
					t.Fatalf("node %q has the wrong parent", c.edge)
				}
				walk(c)
			}
		}
		for _, c := range n.words {
			children++
			if c.parent != n {
				t.Fatalf("node %q has the wrong parent", c.edge)
			}
			walk(c)
		}
		if children != n.children {
			t.Fatalf("node %q counts %d children, has %d", n.edge, n.children, children)
		}
		if n.parent != nil && children == 0 && n.values.Len() == 0 {
			t.Fatalf("node %q is empty and was not pruned", n.edge)
		}
	}
	walk(tr.root)
	for id, ok := range seen {
		if !ok {
			t.Fatalf("id %d is in no node: %d nodes reachable, Len %d", id, len(seen), tr.Len())
		}
	}
}

// TestReusedIDsDoNotHideBindings is the case that ids reused after a
// removal broke: "#.#" added after "x.#" went took the id of "z.#"'s "#",
// so Match skipped that node as visited and "z.a" missed "z.#".
func TestReusedIDsDoNotHideBindings(t *testing.T) {
	tr := New[string]()
	tr.Add("x.#", "x")
	tr.Add("y", "y")
	tr.Add("z.#", "z")
	tr.Remove("x.#", "x")
	tr.Add("#.#", "any")
	checkTrie(t, tr)
	var m Matcher[string]
	if got := sortStrings(tr.Match(&m, "z.a", nil)); !slices.Equal(got, []string{"any", "z"}) {
		t.Fatalf("z.a matched %q, want [any z]", got)
	}
}

func sortStrings(v []string) []string { slices.Sort(v); return v }

// TestAddIsASet checks that a pattern holds a value once.
func TestAddIsASet(t *testing.T) {
	tr := New[int]()
	if !tr.Add("a.b", 1) || tr.Add("a.b", 1) || !tr.Add("a.b", 2) {
		t.Fatal("Add should report a new value only")
	}
	var m Matcher[int]
	if got := sortInts(tr.Match(&m, "a.b", nil)); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("got %v", got)
	}
	if !tr.Remove("a.b", 1) || tr.Remove("a.b", 1) {
		t.Fatal("Remove should find the value once")
	}
}

// TestAgainstReferenceUnderChurn binds and unbinds at random, many times
// over, patterns of a few words (literal, "*", "#" and empty ones) shared
// by several values, and checks after each change that the ids stay dense
// and, every few changes, that Match agrees with the reference matcher on
// a set of keys. It ends by removing everything: the trie is its root
// again.
func TestAgainstReferenceUnderChurn(t *testing.T) {
	words := []string{"a", "b", "c", "", "*", "#"}
	keyWords := []string{"a", "b", "c", "", "d"}
	randomWords := func(rng *rand.Rand, from []string) string {
		n := rng.IntN(5)
		ws := make([]string, n)
		for i := range ws {
			ws[i] = from[rng.IntN(len(from))]
		}
		return strings.Join(ws, ".")
	}
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 29))
		tr := New[int]()
		type bound struct {
			pattern string
			v       int
		}
		model := map[bound]bool{}
		var list []bound // model's members, for picking one to remove
		keys := make([]string, 40)
		for i := range keys {
			keys[i] = randomWords(rng, keyWords)
		}
		var m Matcher[int]
		for step := range 6000 {
			// Grow for a while, then shrink, several times over.
			grow := rng.IntN(100) < 65
			if step%1000 >= 500 {
				grow = !grow
			}
			if grow || len(list) == 0 {
				b := bound{randomWords(rng, words), rng.IntN(8)}
				if got := tr.Add(b.pattern, b.v); got != !model[b] {
					t.Fatalf("seed %d step %d: Add(%q, %d) = %v", seed, step, b.pattern, b.v, got)
				}
				if !model[b] {
					model[b] = true
					list = append(list, b)
				}
			} else {
				i := rng.IntN(len(list))
				b := list[i]
				list[i] = list[len(list)-1]
				list = list[:len(list)-1]
				delete(model, b)
				if !tr.Remove(b.pattern, b.v) {
					t.Fatalf("seed %d step %d: Remove(%q, %d) did not find it", seed, step, b.pattern, b.v)
				}
			}
			checkTrie(t, tr)
			if step%10 != 0 {
				continue
			}
			for _, key := range keys {
				var want []int
				for b := range model {
					if match(Words(b.pattern), Words(key)) {
						want = append(want, b.v)
					}
				}
				got := sortInts(tr.Match(&m, key, nil))
				if slices.Sort(want); !slices.Equal(got, want) {
					t.Fatalf("seed %d step %d: key %q matched %v, want %v", seed, step, key, got, want)
				}
			}
		}
		for _, b := range list {
			tr.Remove(b.pattern, b.v)
		}
		checkTrie(t, tr)
		if tr.Len() != 1 {
			t.Fatalf("seed %d: %d nodes left with nothing bound", seed, tr.Len())
		}
	}
}
