package vhost

import (
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
)

// The checks below answer "would this declare succeed?" without declaring
// anything, for callers that must validate a whole batch of declares
// before making any (a definitions import). They give the errors
// DeclareExchange and DeclareQueue would give. The answer holds only while
// nobody else changes the vhost: a declare made after a check can still
// fail.

// CheckExchange reports whether DeclareExchange(def, false) would succeed:
// an existing exchange must be equivalent, a new one must have a known
// type, a name names.Check takes, without the reserved prefix, and valid
// arguments. It calls the type's ValidateDeclare, which for a plugin type
// is a plugin call.
func (v *VHost) CheckExchange(def exchange.Definition) error {
	def.VHost = v.Name
	if def.Name == "" {
		return reply.AccessRefused("operation not permitted on the default exchange")
	}
	v.mu.RLock()
	x := v.exchanges[def.Name]
	v.mu.RUnlock()
	if x != nil {
		return topology.EquivalentExchange(x.Definition, def)
	}
	if err := v.checkExchangeName(def); err != nil {
		return err
	}
	_, err := v.checkNewExchange(def)
	return err
}

// CheckQueue reports whether DeclareQueue(def, false) would succeed for a
// named queue: no reserved prefix, a new queue's name and arguments as
// checkNewQueue takes them and its flags as its type takes them, and an
// existing queue of that name must be equivalent and not exclusive to
// another owner.
func (v *VHost) CheckQueue(def topology.QueueDef) error {
	if topology.ReservedName(def.Name) {
		return reply.AccessRefused("queue name '%s' contains reserved prefix 'amq.*'", def.Name)
	}
	t := v.lookup(def.Name)
	if t == nil {
		if err := v.checkNewQueue(def); err != nil {
			return err
		}
		qt, ok := v.queueTypes.Asked(def)
		if !ok {
			return reply.Internal("this node serves no queue of type '%s'", queue.TypeOf(def.Args))
		}
		return qt.Check(v.Host(), def)
	}
	if err := t.CheckArgs(def); err != nil {
		return err
	}
	if err := v.checkOwner(t, def.Owner); err != nil {
		return err
	}
	return t.Equivalent(def)
}
