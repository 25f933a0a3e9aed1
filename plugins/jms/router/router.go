// Package router is the jms plugin's two exchange types, a plain package so
// their logic runs natively in tests.
//
// x-jms-queue routes like a direct exchange: a binding matches when its key
// equals the routing key. Selectors are not taken there (JMS selects on a
// queue at the consumer, not at the exchange); a binding that carries one
// is refused rather than ignored.
//
// x-jms-topic routes like a topic exchange (binding keys are patterns,
// '*' one word, '#' zero or more) and, for a binding with a selector,
// only when the selector is also true of the message's headers. The
// selector is given in one of two binding arguments:
//
//   - rjms_erlang_selector: the Erlang term RabbitMQ's JMS client
//     compiles a JMS selector into, e.g. {'>', {'ident', <<"weight">>}, 10}.
//   - x-selector: the selector as JMS writes it, e.g.
//     weight > 10 AND color IN ('red', 'blue').
//
// Both are parsed when the binding is made (a selector that does not parse
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
const Version = "1.0.0"

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

// ParseSelector reads a binding's selector argument: nil when it has none
// (or an empty one, which JMS takes as none). A selector that does not
// parse, both arguments at once, or an argument that is not a string is a
// 406 naming the problem.
func ParseSelector(args sdk.Table) (*selector.Selector, error) {
	ev, hasErl := args.Get(ArgErlangSelector)
	sv, hasSQL := args.Get(ArgSQLSelector)
	if hasErl && hasSQL {
		return nil, sdk.Errorf(sdk.PreconditionFailed, "a binding takes one selector, %s or %s, not both", ArgSQLSelector, ArgErlangSelector)
	}
	name, v, parse := ArgSQLSelector, sv, selector.ParseSQL
	if hasErl {
		name, v, parse = ArgErlangSelector, ev, selector.ParseErlang
	} else if !hasSQL {
		return nil, nil
	}
	src, ok := v.AsString()
	if !ok {
		return nil, sdk.Errorf(sdk.PreconditionFailed, "binding argument %s must be a string", name)
	}
	if strings.TrimSpace(src) == "" {
		return nil, nil
	}
	s, err := parse(src)
	if err != nil {
		return nil, sdk.Errorf(sdk.PreconditionFailed, "invalid selector in binding argument %s: %v", name, err)
	}
	return s, nil
}

// topicBinding is one binding of an x-jms-topic exchange.
type topicBinding struct {
	id  sdk.BindingID
	pat int                // index into Topic.patterns
	sel *selector.Selector // nil: no selector
}

// Topic is one x-jms-topic exchange. Identical binding keys share one
// compiled pattern, matched at most once per message.
type Topic struct {
	bindings     []topicBinding
	patterns     []pattern
	patternRefs  []int
	patternIndex map[string]int
	selectors    int
	identIndex   map[string]int // the selectors' identifiers, by slot

	// Per-message scratch, reused.
	words   []int32
	matched []uint8 // per pattern: 0 not tried, 1 matches, 2 does not
	env     headerEnv
}

func (x *Topic) ValidateBinding(b *sdk.Binding) error {
	_, err := ParseSelector(b.Args)
	return err
}

func (x *Topic) AddBinding(b *sdk.Binding) error {
	sel, err := ParseSelector(b.Args)
	if err != nil {
		return err
	}
	i, ok := x.patternIndex[b.Key]
	if !ok {
		i = len(x.patterns)
		x.patternIndex[b.Key] = i
		x.patterns = append(x.patterns, compilePattern(b.Key))
		x.patternRefs = append(x.patternRefs, 0)
		x.matched = append(x.matched, 0)
	}
	x.patternRefs[i]++
	x.bindings = append(x.bindings, topicBinding{id: b.ID, pat: i, sel: sel})
	if sel != nil {
		x.selectors++
		sel.SetSlots(x.slot)
	}
	return nil
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
		x.patternRefs[b.pat]-- // the slot stays (indexes hold); Route skips it
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

// Route adds every binding whose pattern matches the routing key and whose
// selector, if any, is true.
func (x *Topic) Route(m *sdk.Message, r *sdk.Result) error {
	key := m.RoutingKey()
	x.words = splitKey(x.words, key)
	clear(x.matched)
	x.env.reset(m)
	for i := range x.bindings {
		b := &x.bindings[i]
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
	return map[string]any{"bindings": len(x.bindings), "patterns": used, "selectors": x.selectors}
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
