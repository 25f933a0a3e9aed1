// Package router is the jms plugin's two exchange types, a plain package so
// their logic runs natively in tests.
//
// x-jms-queue routes like a direct exchange: a binding matches when its key
// equals the routing key. Selectors are not taken there (JMS selects on a
// queue at the consumer, not at the exchange); a binding that carries one
// is refused rather than ignored.
//
// x-jms-topic routes each binding in one of two ways, fixed when the
// binding is made by the argument that carries its selector:
//
//   - rjms_erlang_selector: the Erlang term RabbitMQ's JMS client compiles
//     a JMS selector into, e.g. {'>', {'ident', <<"weight">>}, 10}. Such a
//     binding routes on its selector alone and its key plays no part, as
//     in RabbitMQ's x-jms-topic: the JMS client binds this exchange behind
//     a topic exchange, which has already matched the topic, and binds
//     queues to it with the topic's key, which may be a pattern or belong
//     to another topic. An empty selector is refused (RabbitMQ refuses it
//     too, by failing the connection).
//   - x-selector, or no selector: Warren's own kind, for any AMQP client.
//     The key is a topic pattern ('*' one word, '#' zero or more) and the
//     message must match it and, when there is one, the selector, e.g.
//     weight > 10 AND color IN ('red', 'blue'). An empty x-selector is no
//     selector, as in JMS.
//
// Selectors are parsed when the binding is made (one that does not parse
// is refused with 406 naming the problem) and evaluated with JMS's
// three-valued logic by package selector. Identifiers name message
// headers; JMSDeliveryMode, JMSPriority, JMSMessageID, JMSCorrelationID,
// JMSTimestamp and JMSType, when no header has that name, read the AMQP
// properties they correspond to.
package router

import (
	"strings"

	"github.com/warrenmq/warren/plugins/jms/selector"
	"github.com/warrenmq/warren/sdk"
)

// Version is the plugin's version.
const Version = "1.1.0"

// The exchange types and the selector arguments.
const (
	TopicTypeName = "x-jms-topic"
	QueueTypeName = "x-jms-queue"

	ArgErlangSelector = "rjms_erlang_selector"
	ArgSQLSelector    = "x-selector"
)

// TopicType is x-jms-topic; QueueType is x-jms-queue.
type (
	TopicType struct{}
	QueueType struct{}
)

var (
	_ sdk.ExchangeType = TopicType{}
	_ sdk.ExchangeType = QueueType{}
	_ sdk.Exchange     = (*Topic)(nil)
	_ sdk.Exchange     = (*Queue)(nil)
	_ sdk.Informer     = (*Topic)(nil)
	_ sdk.Informer     = (*Queue)(nil)
)

func (TopicType) Name() string                           { return TopicTypeName }
func (TopicType) ValidateDeclare(*sdk.Declaration) error { return nil }
func (TopicType) Create(*sdk.Declaration) (sdk.Exchange, error) {
	return &Topic{patternIndex: make(map[string]int), identIndex: make(map[string]int)}, nil
}

func (QueueType) Name() string                           { return QueueTypeName }
func (QueueType) ValidateDeclare(*sdk.Declaration) error { return nil }
func (QueueType) Create(*sdk.Declaration) (sdk.Exchange, error) {
	return &Queue{byKey: make(map[string][]sdk.BindingID), keyOf: make(map[sdk.BindingID]string)}, nil
}

// ParseSelector reads a binding's selector argument. sel is nil when the
// binding has none (or an empty x-selector, which JMS takes as none).
// selectorOnly is true for a binding made RabbitMQ's JMS client's way,
// with rjms_erlang_selector: it routes on the selector alone, whatever
// its key. A selector that
// does not parse, an empty rjms_erlang_selector, both arguments at once,
// or an argument that is not a string is a 406 naming the problem.
func ParseSelector(args sdk.Table) (sel *selector.Selector, selectorOnly bool, err error) {
	ev, hasErl := args.Get(ArgErlangSelector)
	sv, hasSQL := args.Get(ArgSQLSelector)
	if hasErl && hasSQL {
		return nil, false, sdk.Errorf(sdk.PreconditionFailed, "a binding takes one selector, %s or %s, not both", ArgSQLSelector, ArgErlangSelector)
	}
	name, v, parse := ArgSQLSelector, sv, selector.ParseSQL
	if hasErl {
		name, v, parse = ArgErlangSelector, ev, selector.ParseErlang
	} else if !hasSQL {
		return nil, false, nil
	}
	src, ok := v.AsString()
	if !ok {
		return nil, false, sdk.Errorf(sdk.PreconditionFailed, "binding argument %s must be a string", name)
	}
	if strings.TrimSpace(src) == "" {
		if hasErl {
			// RabbitMQ cannot parse it and fails the connection; the JMS
			// client binds a subscriber without a selector to the topic
			// exchange instead, never with an empty one.
			return nil, false, sdk.Errorf(sdk.PreconditionFailed, "binding argument %s is empty; for no selector, bind without it", name)
		}
		return nil, false, nil
	}
	s, err := parse(src)
	if err != nil {
		return nil, false, sdk.Errorf(sdk.PreconditionFailed, "invalid selector in binding argument %s: %v", name, err)
	}
	return s, hasErl, nil
}

// topicBinding is one binding of an x-jms-topic exchange.
type topicBinding struct {
	id  sdk.BindingID
	pat int                // index into Topic.patterns, or noPattern
	sel *selector.Selector // nil: no selector
}

// noPattern is the pattern index of a binding that routes on its selector
// alone (rjms_erlang_selector): its key is not matched.
const noPattern = -1

// Topic is one x-jms-topic exchange. Identical binding keys share one
// compiled pattern, matched at most once per message; bindings that
// ignore the key have none.
type Topic struct {
	bindings     []topicBinding
	patterns     []pattern
	patternRefs  []int
	patternIndex map[string]int
	selectors    int
	selectorOnly int            // bindings with pat == noPattern
	identIndex   map[string]int // the selectors' identifiers, by slot

	// Per-message scratch, reused.
	words   []int32
	matched []uint8 // per pattern: 0 not tried, 1 matches, 2 does not
	env     headerEnv
}

func (x *Topic) ValidateBinding(b *sdk.Binding) error {
	_, _, err := ParseSelector(b.Args)
	return err
}

func (x *Topic) AddBinding(b *sdk.Binding) error {
	sel, selectorOnly, err := ParseSelector(b.Args)
	if err != nil {
		return err
	}
	pat := noPattern
	if selectorOnly {
		x.selectorOnly++
	} else {
		pat = x.pattern(b.Key)
		x.patternRefs[pat]++
	}
	x.bindings = append(x.bindings, topicBinding{id: b.ID, pat: pat, sel: sel})
	if sel != nil {
		x.selectors++
		sel.SetSlots(x.slot)
	}
	return nil
}

// pattern returns the index of key's compiled pattern, compiling it the
// first time.
func (x *Topic) pattern(key string) int {
	i, ok := x.patternIndex[key]
	if !ok {
		i = len(x.patterns)
		x.patternIndex[key] = i
		x.patterns = append(x.patterns, compilePattern(key))
		x.patternRefs = append(x.patternRefs, 0)
		x.matched = append(x.matched, 0)
	}
	return i
}

// slot numbers an identifier for the per-message cache of header values;
// the same name always gets the same slot (a slot outlives its bindings,
// like a pattern's).
func (x *Topic) slot(name string) int {
	i, ok := x.identIndex[name]
	if !ok {
		i = len(x.identIndex)
		x.identIndex[strings.Clone(name)] = i
		x.env.grow(i + 1)
	}
	return i
}

func (x *Topic) RemoveBindings(ids []sdk.BindingID) error {
	kept := x.bindings[:0]
	for _, b := range x.bindings {
		if !contains(ids, b.id) {
			kept = append(kept, b)
			continue
		}
		if b.pat == noPattern {
			x.selectorOnly--
		} else {
			x.patternRefs[b.pat]-- // the slot stays (indexes hold); Route skips it
		}
		if b.sel != nil {
			x.selectors--
		}
	}
	clear(x.bindings[len(kept):])
	x.bindings = kept
	return nil
}

func contains(ids []sdk.BindingID, id sdk.BindingID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Route adds every binding whose selector, if any, is true and whose
// pattern, unless it ignores the key, matches the routing key.
func (x *Topic) Route(m *sdk.Message, r *sdk.Result) error {
	key := m.RoutingKey()
	x.words = splitKey(x.words, key)
	clear(x.matched)
	x.env.reset(m)
	for i := range x.bindings {
		b := &x.bindings[i]
		if b.pat != noPattern {
			switch x.matched[b.pat] {
			case 0:
				if x.patterns[b.pat].match(key, x.words) {
					x.matched[b.pat] = 1
				} else {
					x.matched[b.pat] = 2
					continue
				}
			case 2:
				continue
			}
		}
		if b.sel == nil || b.sel.Matches(&x.env) {
			r.Add(b.id)
		}
	}
	x.env.m = nil
	return nil
}

// Info reports the exchange's figures for the admin API.
func (x *Topic) Info() map[string]any {
	used := 0
	for _, n := range x.patternRefs {
		if n > 0 {
			used++
		}
	}
	return map[string]any{"bindings": len(x.bindings), "patterns": used, "selectors": x.selectors, "selector_only": x.selectorOnly}
}

// Queue is one x-jms-queue exchange: direct routing.
type Queue struct {
	byKey map[string][]sdk.BindingID
	keyOf map[sdk.BindingID]string
}

func (x *Queue) ValidateBinding(b *sdk.Binding) error {
	for _, name := range []string{ArgSQLSelector, ArgErlangSelector} {
		if _, ok := b.Args.Get(name); ok {
			return sdk.Errorf(sdk.PreconditionFailed, "x-jms-queue bindings take no selector (binding argument %s); select through an x-jms-topic exchange", name)
		}
	}
	return nil
}

func (x *Queue) AddBinding(b *sdk.Binding) error {
	if err := x.ValidateBinding(b); err != nil {
		return err
	}
	x.byKey[b.Key] = append(x.byKey[b.Key], b.ID)
	x.keyOf[b.ID] = b.Key
	return nil
}

func (x *Queue) RemoveBindings(ids []sdk.BindingID) error {
	for _, id := range ids {
		key, ok := x.keyOf[id]
		if !ok {
			continue
		}
		delete(x.keyOf, id)
		list := x.byKey[key]
		for i, y := range list {
			if y == id {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(x.byKey, key)
		} else {
			x.byKey[key] = list
		}
	}
	return nil
}

// Route adds the bindings whose key is the routing key.
func (x *Queue) Route(m *sdk.Message, r *sdk.Result) error {
	r.AddAll(x.byKey[m.RoutingKey()])
	return nil
}

// Info reports the exchange's figures for the admin API.
func (x *Queue) Info() map[string]any {
	return map[string]any{"bindings": len(x.keyOf), "keys": len(x.byKey)}
}
