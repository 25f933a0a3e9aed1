// Package federation links this broker to others as RabbitMQ 3.10.8's
// federation plugin does: a federated exchange receives what its
// upstreams' exchanges route to its bindings, and a federated queue
// takes messages from its upstreams' queues while it has consumers
// waiting. Upstreams are runtime parameters (components
// federation-upstream and federation-upstream-set, CheckUpstream and
// CheckSet); a policy with federation-upstream, federation-upstream-set
// or federation-upstream-pattern federates the exchanges and queues it
// applies to (Params.For). Any AMQP 0-9-1 broker can be an upstream:
// RabbitMQ, with or without its federation plugin, or Warren.
//
// # Links
//
// The broker tells a Manager which links it wants (Sync, with a Spec per
// federated exchange or queue and upstream); the Manager runs one
// goroutine per link. A link is a client of both brokers through
// amqp091-go: of the upstream by its URIs, tried in random order; of
// this broker through a connection it serves in-process
// (conn.Server.DialLocal), as the broker itself, in the link's vhost. A
// link that fails reports the error in its Status and starts again
// after the upstream's reconnect-delay (never, when that is 0); a
// restart (Manager.Restart) starts it again at once.
//
// An exchange link (exchangelink.go) keeps, upstream, a queue named for
// this broker, an internal exchange of type x-federation-upstream bound
// to it, and that exchange bound to the upstream exchange with each key
// and arguments the federated exchange is bound with here: the
// downstream's Bindings are read again whenever the broker says its
// topology changed, and the upstream's bindings made to match. A queue
// link (queuelink.go) consumes the upstream queue at priority -1 while
// the federated queue has a consumer of priority 0 or more and nothing
// ready, looking at it every queueLook.
//
// # What a link guarantees
//
// With ack-mode on-confirm (the default) a message is acked upstream
// only once this broker confirmed it, so the failure of either broker
// loses nothing that reached the link's queue upstream; a message may be
// delivered twice when a confirm is lost with its connection. A nack
// (a full queue that rejects publishes) puts the message back upstream
// and ends the session, to retry after reconnect-delay rather than spin.
//
// # Loops and hops
//
// Each forwarded message carries x-received-from, one entry per link it
// crossed, naming the brokers (cluster names) and vhosts it has been
// at. ShouldForward, applied both by the upstream's x-federation-upstream
// exchange (UpstreamExchangeType, which this broker serves for other
// brokers' links) and by the link, stops a message that has crossed
// max-hops links or has already been at the downstream broker, so a ring
// of brokers delivers each message once at each. Bindings travel the
// other way with x-bound-from and the hops they may still go, so they
// reach as far upstream as messages may come down, and no further.
//
// # Where Warren departs from RabbitMQ
//
// A link that stops because this broker shuts down, or restarts, keeps
// its queue upstream (it buffers what is published meanwhile, bounded
// by the upstream's expires and message-ttl); only a link that is no
// longer wanted (its policy, upstream or exchange gone) deletes it, unless
// resource-cleanup-mode is never. RabbitMQ deletes it on shutdown too.
// An upstream whose URI has no host is this broker, reached as the
// broker itself, so whoever sets it must be allowed the vhost it names
// (checked by the broker, as for shovels; RabbitMQ does not check). The
// keys ha-policy, bind-nowait and channel-use-mode are accepted and
// change nothing.
package federation
