package vhost

import (
	"maps"
	"slices"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
)

// A vhost's limits and metadata, as an operator sets them
// (topology.Limits, topology.Metadata).

// SetLimits replaces the vhost's limits (nil or empty: none).
func (v *VHost) SetLimits(l topology.Limits) {
	if len(l) == 0 {
		v.limits.Store(nil)
		return
	}
	c := maps.Clone(l)
	v.limits.Store(&c)
}

// Limits are the vhost's limits, a copy; nil when none is set.
func (v *VHost) Limits() topology.Limits {
	if l := v.limits.Load(); l != nil {
		return maps.Clone(*l)
	}
	return nil
}

// Limit is the named limit when it is set and not negative.
func (v *VHost) Limit(name string) (int64, bool) {
	l := v.limits.Load()
	if l == nil {
		return 0, false
	}
	n, ok := (*l)[name]
	return n, ok && n >= 0
}

// checkQueueLimit refuses a new queue once the vhost holds max-queues,
// in RabbitMQ's words.
func (v *VHost) checkQueueLimit(name string) error {
	max, ok := v.Limit(topology.LimitMaxQueues)
	if !ok {
		return nil
	}
	if n := len(v.QueueNames()); int64(n) >= max {
		return reply.PreconditionFailed("cannot declare queue '%s': queue limit in vhost '%s' (%d) is reached", name, v.Name, max)
	}
	return nil
}

// SetMetadata replaces the vhost's metadata.
func (v *VHost) SetMetadata(m topology.Metadata) {
	m.Tags = slices.Clone(m.Tags)
	v.meta.Store(&m)
}

// Metadata is the vhost's metadata; the zero value when none was set.
func (v *VHost) Metadata() topology.Metadata {
	if m := v.meta.Load(); m != nil {
		return topology.Metadata{Description: m.Description, Tags: slices.Clone(m.Tags)}
	}
	return topology.Metadata{}
}
