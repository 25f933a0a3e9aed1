package exchange

import (
	"sync"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/topic"
	"github.com/warrenmq/warren/protocol"
)

// Topic routes by pattern: binding keys are dot-separated words where "*"
// matches one word and "#" zero or more (see package topic).
type Topic struct{}

// TypeTopic is the topic type's name: topic permissions narrow the
// routing keys of exchanges of this type only.
const TypeTopic = "topic"

func (Topic) Name() string                     { return TypeTopic }
func (Topic) ValidateDeclare(Definition) error { return nil }
func (Topic) Create(Definition) (Router, error) {
	r := &topicRouter{trie: topic.New[*Binding](), cache: make(map[string][]*Binding)}
	r.matchers.New = func() any { return new(topic.Matcher[*Binding]) }
	return r, nil
}

// topicCacheSize bounds the cache of recent routing keys. Publishers tend to
// reuse a small set of keys, and a cached answer skips the trie walk; when
// the cache fills it is simply emptied, which costs less than tracking age.
const topicCacheSize = 4096

type topicRouter struct {
	trie     *topic.Trie[*Binding]
	matchers sync.Pool // *topic.Matcher: scratch for concurrent Route calls

	mu    lockorder.Mutex[lockorder.ExchangeTopicCache] // guards cache; Route runs concurrently
	cache map[string][]*Binding
}

func (r *topicRouter) ValidateBinding(*Binding) error { return nil }

func (r *topicRouter) AddBinding(b *Binding) error {
	r.trie.Add(b.Key, b)
	r.flush()
	return nil
}

func (r *topicRouter) RemoveBindings(bs []*Binding) error {
	for _, b := range bs {
		r.trie.Remove(b.Key, b)
	}
	r.flush()
	return nil
}

func (r *topicRouter) flush() {
	r.mu.Lock()
	clear(r.cache)
	r.mu.Unlock()
}

func (r *topicRouter) Route(m *message.Message, res *Result) error {
	r.mu.Lock()
	hit, ok := r.cache[m.RoutingKey]
	r.mu.Unlock()
	if ok {
		res.Bindings = append(res.Bindings, hit...)
		return nil
	}
	matcher := r.matchers.Get().(*topic.Matcher[*Binding])
	start := len(res.Bindings)
	res.Bindings = r.trie.Match(matcher, m.RoutingKey, res.Bindings)
	r.matchers.Put(matcher)

	matched := make([]*Binding, len(res.Bindings)-start)
	copy(matched, res.Bindings[start:])
	r.mu.Lock()
	if len(r.cache) >= topicCacheSize {
		clear(r.cache)
	}
	r.cache[m.RoutingKey] = matched
	r.mu.Unlock()
	return nil
}

func (r *topicRouter) PolicyChanged(protocol.Table) error { return nil }
func (r *topicRouter) Delete()                            {}

func (r *topicRouter) Info() map[string]any {
	return map[string]any{"trie_nodes": r.trie.Len()}
}
