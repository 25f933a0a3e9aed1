// Package topic matches AMQP topic routing keys against binding patterns.
//
// Keys and patterns are words separated by ".". In a pattern, "*" stands for
// exactly one word and "#" for zero or more. The empty key has no words, so
// only "#" (or "", the empty pattern, which also has no words) matches it.
//
// Patterns live in a trie over words, so a key is matched by walking it once
// rather than testing every binding. A "#" node can absorb any number of
// words, which would make a naive walk exponential on patterns like
// "#.#.#.x"; Match remembers which (node, word position) pairs it has already
// visited so each pair is expanded once, bounding the work by
// nodes × (words+1).
//
// Trie is not safe for concurrent mutation; Match may run concurrently with
// other Match calls when no Add or Remove is in progress (the exchange
// package's routing invariant).
package topic

import "strings"

// Trie maps patterns to the values bound under them. V is compared with ==.
type Trie[V comparable] struct {
	root  *node[V]
	nodes int // live nodes, to size the visit set
}

type node[V comparable] struct {
	id       int
	words    map[string]*node[V]
	star     *node[V]
	hash     *node[V]
	values   []V
	parent   *node[V]
	edge     string // the word leading here from parent
	children int
}

// New returns an empty trie.
func New[V comparable]() *Trie[V] {
	return &Trie[V]{root: &node[V]{}, nodes: 1}
}

// Words splits a key or pattern into its words, the way RabbitMQ does: the
// empty string has none, and empty words between dots are words.
func Words(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ".")
}

// Add binds v under pattern. Adding the same pair twice stores it twice;
// callers that want set semantics check first.
func (t *Trie[V]) Add(pattern string, v V) {
	n := t.root
	for _, w := range Words(pattern) {
		n = t.child(n, w)
	}
	n.values = append(n.values, v)
}

func (t *Trie[V]) child(n *node[V], w string) *node[V] {
	var slot **node[V]
	switch w {
	case "*":
		slot = &n.star
	case "#":
		slot = &n.hash
	default:
		if c := n.words[w]; c != nil {
			return c
		}
		if n.words == nil {
			n.words = make(map[string]*node[V])
		}
		c := &node[V]{id: t.nodes, parent: n, edge: w}
		t.nodes++
		n.words[w] = c
		n.children++
		return c
	}
	if *slot == nil {
		*slot = &node[V]{id: t.nodes, parent: n, edge: w}
		t.nodes++
		n.children++
	}
	return *slot
}

// Remove unbinds one occurrence of v under pattern and prunes nodes left
// empty. It reports whether v was found.
func (t *Trie[V]) Remove(pattern string, v V) bool {
	n := t.root
	for _, w := range Words(pattern) {
		switch w {
		case "*":
			n = n.star
		case "#":
			n = n.hash
		default:
			n = n.words[w]
		}
		if n == nil {
			return false
		}
	}
	i := indexOf(n.values, v)
	if i < 0 {
		return false
	}
	n.values = append(n.values[:i], n.values[i+1:]...)
	t.prune(n)
	return true
}

func indexOf[V comparable](vs []V, v V) int {
	for i, x := range vs {
		if x == v {
			return i
		}
	}
	return -1
}

func (t *Trie[V]) prune(n *node[V]) {
	for n.parent != nil && len(n.values) == 0 && n.children == 0 {
		p := n.parent
		switch n.edge {
		case "*":
			p.star = nil
		case "#":
			p.hash = nil
		default:
			delete(p.words, n.edge)
		}
		p.children--
		t.nodes--
		n = p
	}
	// Node ids must stay below t.nodes for the visit set; renumbering on
	// every prune would be costly, so ids are only compacted when they
	// drift far from the live count.
	if t.maxID() > 2*t.nodes+64 {
		t.renumber()
	}
}

func (t *Trie[V]) maxID() int {
	max := 0
	t.walk(t.root, func(n *node[V]) {
		if n.id > max {
			max = n.id
		}
	})
	return max
}

func (t *Trie[V]) renumber() {
	id := 0
	t.walk(t.root, func(n *node[V]) { n.id = id; id++ })
	t.nodes = id
}

func (t *Trie[V]) walk(n *node[V], f func(*node[V])) {
	f(n)
	for _, c := range n.words {
		t.walk(c, f)
	}
	if n.star != nil {
		t.walk(n.star, f)
	}
	if n.hash != nil {
		t.walk(n.hash, f)
	}
}

// Len reports the number of live trie nodes, root included.
func (t *Trie[V]) Len() int { return t.nodes }

// Matcher holds the scratch state of one Match so repeated matching does not
// allocate. A Matcher must not be shared between goroutines.
type Matcher[V comparable] struct {
	words   []string
	visited map[uint64]struct{}
}

// Match appends to out every value whose pattern matches key. A value bound
// under several matching patterns appears once per pattern.
func (t *Trie[V]) Match(m *Matcher[V], key string, out []V) []V {
	m.words = appendWords(m.words[:0], key)
	if m.visited == nil {
		m.visited = make(map[uint64]struct{})
	} else {
		clear(m.visited)
	}
	return t.match(m, t.root, 0, out)
}

// appendWords splits key like Words without allocating a new slice.
func appendWords(dst []string, key string) []string {
	if key == "" {
		return dst
	}
	for {
		i := strings.IndexByte(key, '.')
		if i < 0 {
			return append(dst, key)
		}
		dst = append(dst, key[:i])
		key = key[i+1:]
	}
}

func (t *Trie[V]) match(m *Matcher[V], n *node[V], i int, out []V) []V {
	words := m.words
	if n.hash != nil {
		// "#" may absorb words[i:k] for every k; each (node, position) pair
		// is expanded once.
		for k := i; k <= len(words); k++ {
			key := uint64(n.hash.id)<<32 | uint64(k)
			if _, seen := m.visited[key]; seen {
				continue
			}
			m.visited[key] = struct{}{}
			out = t.match(m, n.hash, k, out)
		}
	}
	if i == len(words) {
		return append(out, n.values...)
	}
	if n.star != nil {
		out = t.match(m, n.star, i+1, out)
	}
	if c := n.words[words[i]]; c != nil {
		out = t.match(m, c, i+1, out)
	}
	return out
}
