package federation

import (
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/protocol"
)

// The headers and arguments that carry a message's and a binding's path
// between brokers, as RabbitMQ's federation names them.
const (
	// ReceivedFrom is the message header a link prepends an entry to
	// each time it forwards a message: uri, exchange (or queue),
	// redelivered, cluster-name and vhost of the broker it came from.
	ReceivedFrom = "x-received-from"
	// BoundFrom is the binding argument that carries a binding's path
	// the other way, with the hops it may still travel.
	BoundFrom = "x-bound-from"
	// The arguments of the upstream's internal exchange: how many links a
	// message may have crossed, and which broker (cluster name and vhost)
	// it is for, so that one that has already been there is not sent.
	MaxHopsArg         = "x-max-hops"
	DownstreamNameArg  = "x-downstream-name"
	DownstreamVHostArg = "x-downstream-vhost"
	// internalPurpose marks the queues and exchanges a link declares.
	internalPurpose = "x-internal-purpose"
)

// ShouldForward says whether a message with these headers goes on to the
// broker named downstream (its cluster name) and vhost: fewer than
// maxHops links crossed, and not been there before. This is the rule of
// both the upstream's internal exchange and the link, which applies it
// again for an upstream without federation (whose internal exchange is a
// plain fanout).
func ShouldForward(headers protocol.Table, maxHops int64, downstream, vhost string) bool {
	path, ok := headers[ReceivedFrom].([]any)
	if !ok {
		return true
	}
	return int64(len(path)) < maxHops && !alreadySeen(downstream, vhost, path)
}

// alreadySeen says whether a path names the broker and vhost.
func alreadySeen(cluster, vhost string, path []any) bool {
	for _, e := range path {
		t, ok := e.(protocol.Table)
		if ok && t["cluster-name"] == cluster && t["vhost"] == vhost {
			return true
		}
	}
	return false
}

// prepend is a header's array with entry put first: a header that is
// not an array (a client's) is replaced, as RabbitMQ's
// prepend_table_header does.
func prepend(headers protocol.Table, name string, entry protocol.Table) protocol.Table {
	out := make(protocol.Table, len(headers)+1)
	for k, v := range headers {
		out[k] = v
	}
	old, _ := headers[name].([]any)
	path := make([]any, 0, len(old)+1)
	out[name] = append(append(path, entry), old...)
	return out
}

// hopsOf reads a path entry's hops.
func hopsOf(t protocol.Table) int64 {
	n, _ := queue.Integer(t["hops"])
	return n
}
