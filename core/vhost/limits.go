package vhost

import (
	"maps"
	"slices"

	"github.com/warrenmq/warren/core/reply"
)

// A vhost's limits and metadata, as an operator sets them.
//
// A vhost's limits are RabbitMQ's vhost-limits parameter: at most
// max-connections connections open to it (counted by the connection
// layer, which asks Limit) and max-queues queues in it (refused at a new
// queue's declare). A limit that is not set, or negative, is none; 0
// allows nothing.

// The limits a vhost takes.
const (
	LimitMaxConnections = "max-connections"
	LimitMaxQueues      = "max-queues"
)

// Limits are the limits set on a vhost, by name.
type Limits map[string]int64

// CheckLimits refuses a name a vhost has no limit of, in RabbitMQ
// 3.10.8's words.
func CheckLimits(l Limits) error {
	for _, name := range slices.Sorted(maps.Keys(l)) {
		if name != LimitMaxConnections && name != LimitMaxQueues {
			return reply.PreconditionFailed("Validation failed\n\nUnrecognised terms [{<<%q>>,%d}] in limits\n", name, l[name])
		}
	}
	return nil
}

// SetLimits replaces the vhost's limits (nil or empty: none).
func (v *VHost) SetLimits(l Limits) {
	if len(l) == 0 {
		v.limits.Store(nil)
		return
	}
	c := maps.Clone(l)
	v.limits.Store(&c)
}

// Limits are the vhost's limits, a copy; nil when none is set.
func (v *VHost) Limits() Limits {
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
	max, ok := v.Limit(LimitMaxQueues)
	if !ok {
		return nil
	}
	if n := len(v.QueueNames()); int64(n) >= max {
		return reply.PreconditionFailed("cannot declare queue '%s': queue limit in vhost '%s' (%d) is reached", name, v.Name, max)
	}
	return nil
}

// Metadata is what an operator says of a vhost: a description and tags
// (RabbitMQ's vhost metadata), shown by the management API.
type Metadata struct {
	Description string
	Tags        []string
}

// SetMetadata replaces the vhost's metadata.
func (v *VHost) SetMetadata(m Metadata) {
	m.Tags = slices.Clone(m.Tags)
	v.meta.Store(&m)
}

// Metadata is the vhost's metadata; the zero value when none was set.
func (v *VHost) Metadata() Metadata {
	if m := v.meta.Load(); m != nil {
		return Metadata{Description: m.Description, Tags: slices.Clone(m.Tags)}
	}
	return Metadata{}
}
