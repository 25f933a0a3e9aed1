package queuetype

import "github.com/warrenmq/warren/core/remote"

// Source is what a channel consumes from and settles with: a queue of this
// node, a replicated queue's member, or a remote.Source for one on another
// node.
type Source = remote.Queue

// Asked is what a channel may ask of a Source that some types refuse.
type Asked int

const (
	AskGet            Asked = iota // basic.get
	AskNackOrReject                // basic.nack or basic.reject of its delivery
	AskGlobalPrefetch              // a consumer under the channel's global prefetch
)

// A Refuser is a Source that refuses some of what a channel may ask (a
// stream refuses basic.get and a nack or reject; a quorum queue, a global
// prefetch), with RabbitMQ's reply.
type Refuser interface {
	Refuses(what Asked) error
}

// Refused is src's reply to what: nil when it takes it.
func Refused(src Source, what Asked) error {
	if r, ok := src.(Refuser); ok {
		return r.Refuses(what)
	}
	return nil
}
