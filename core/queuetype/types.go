package queuetype

import (
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/topology"
)

// Types are the queue types a broker serves, by name.
type Types struct {
	byName map[string]Type
	// untyped takes a replicated declaration that names no type: written
	// before a second replicated type came.
	untyped Type
}

// NewTypes registers types by name; untyped names the one a replicated
// declaration without an x-queue-type is (older records). A declaration
// that names no type is a classic queue's (queue.Classic).
func NewTypes(untyped string, types ...Type) *Types {
	ts := &Types{byName: make(map[string]Type, len(types))}
	for _, t := range types {
		ts.byName[t.Name()] = t
	}
	ts.untyped = ts.byName[untyped]
	return ts
}

// Named is the type of that x-queue-type; a nil Types has none.
func (ts *Types) Named(name string) (Type, bool) {
	if ts == nil {
		return nil, false
	}
	t, ok := ts.byName[name]
	return t, ok
}

// Asked is the type a declare of def asks for: classic when its
// arguments name none.
func (ts *Types) Asked(def topology.QueueDef) (Type, bool) { return ts.Named(queue.TypeOf(def.Args)) }

// Restored is the type of a stored or replicated declaration: one of a
// group (def.Members set) that names no type is the untyped one.
func (ts *Types) Restored(def topology.QueueDef) (Type, bool) {
	if _, named := def.Args["x-queue-type"]; def.Members == nil || named || ts == nil {
		return ts.Asked(def)
	}
	return ts.untyped, ts.untyped != nil
}
