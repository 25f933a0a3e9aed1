package topic

import (
	"fmt"
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
