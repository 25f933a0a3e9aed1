package topology

import (
	"maps"
	"slices"

	"github.com/warrenmq/warren/core/reply"
)

// A vhost's limits are RabbitMQ's vhost-limits parameter: at most
// max-connections connections open to it (counted by the connection
// layer) and max-queues queues in it (refused at a new queue's declare).
// A limit that is not set, or negative, is none; 0 allows nothing.

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

// Metadata is what an operator says of a vhost: a description and tags
// (RabbitMQ's vhost metadata), shown by the management API.
type Metadata struct {
	Description string
	Tags        []string
}
