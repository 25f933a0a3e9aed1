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
// Match's visit set tells nodes apart by their ids, so the live nodes' ids
// are unique, and dense: numbered 0 to Len()-1, a removed node's id going
// to the node that held the highest. Removing a binding thus touches the
// nodes of its own pattern and one renumbered node, and costs the same
// whatever the trie's size (issue 29 found a walk of the whole trie per
// removed binding making one queue.delete take seconds).
//
// A pattern's values are a set: adding a value bound there already
// changes nothing, and Match returns the values in no particular order.
//
// Trie is not safe for concurrent mutation; Match may run concurrently with
// other Match calls when no Add or Remove is in progress (the exchange
// package's routing invariant).
package topic

import (
	"strings"

	"github.com/warrenmq/warren/core/denseset"
)

// Trie maps patterns to the values bound under them. V is compared with ==.
type Trie[V comparable] struct {
	root *node[V]
	byID []*node[V] // byID[n.id] == n for every live node
}

type node[V comparable] struct {
	id       int // dense; see the package doc
	words    map[string]*node[V]
	star     *node[V]
	hash     *node[V]
	values   denseset.Set[V]
	parent   *node[V]
	edge     string // the word leading here from parent
	children int
}

// New returns an empty trie.
func New[V comparable]() *Trie[V] {
	root := &node[V]{}
	return &Trie[V]{root: root, byID: []*node[V]{root}}
}

// Words splits a key or pattern into its words, the way RabbitMQ does: the
// empty string has none, and empty words between dots are words.
func Words(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ".")
}

// Add binds v under pattern and reports whether it was not bound there
// already.
func (t *Trie[V]) Add(pattern string, v V) bool {
	n := t.root
	for _, w := range Words(pattern) {
		n = t.child(n, w)
	}
	return n.values.Add(v)
}

// child returns n's child along word w, made if there is none.
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
		c := t.newNode(n, w)
		n.words[w] = c
		return c
	}
	if *slot == nil {
		*slot = t.newNode(n, w)
	}
	return *slot
}

func (t *Trie[V]) newNode(parent *node[V], edge string) *node[V] {
	c := &node[V]{id: len(t.byID), parent: parent, edge: edge}
	t.byID = append(t.byID, c)
	parent.children++
	return c
}

// Remove unbinds v from pattern and prunes the nodes left empty. It reports
// whether v was bound there.
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
	if !n.values.Remove(v) {
		return false
	}
	t.prune(n)
	return true
}

// prune removes n and its ancestors while they hold neither values nor
// children.
func (t *Trie[V]) prune(n *node[V]) {
	for n.parent != nil && n.values.Len() == 0 && n.children == 0 {
		p := n.parent
		switch n.edge {
		case "*":
			p.star = nil
		case "#":
			p.hash = nil
		default:
			delete(p.words, n.edge)
			if len(p.words) == 0 {
				p.words = nil // a map keeps its size once grown
			}
		}
		p.children--
		t.free(n)
		n = p
	}
}

// free gives n's id to the node with the highest, keeping ids dense. Match
// is not running (see the package doc), so no visit set holds either id.
func (t *Trie[V]) free(n *node[V]) {
	last := len(t.byID) - 1
	moved := t.byID[last]
	moved.id = n.id
	t.byID[n.id] = moved
	t.byID[last] = nil
	t.byID = t.byID[:last]
	// A trie that lost most of its nodes gives the slice back once it is
	// small enough to copy at once (as denseset does): copying a large
	// one would make this one removal slow.
	if cap(t.byID) > 1024 && len(t.byID) < cap(t.byID)/4 && len(t.byID) <= 4096 {
		t.byID = append(make([]*node[V], 0, 2*len(t.byID)), t.byID...)
	}
}

// Len reports the number of live trie nodes, root included.
func (t *Trie[V]) Len() int { return len(t.byID) }

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
		return append(out, n.values.Items()...)
	}
	if n.star != nil {
		out = t.match(m, n.star, i+1, out)
	}
	if c := n.words[words[i]]; c != nil {
		out = t.match(m, c, i+1, out)
	}
	return out
}
