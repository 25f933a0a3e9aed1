// Package shovel runs dynamic shovels: runtime parameters of component
// "shovel" that each move messages from a queue (or an exchange) of one
// AMQP 0-9-1 broker to an exchange or queue of another, as RabbitMQ
// 3.10.8's shovel plugin does, with its definition keys, defaults and
// validation messages (Parse).
//
// A shovel is a client of both brokers, through amqp091-go. A URI with no
// host is this broker, reached through a socket pair served by core/conn
// (conn.Server.DialLocal) rather than its listener: without credentials
// the connection acts as the broker itself (user "none", every right in
// the vhost), as RabbitMQ's direct connections do, which is why Check
// asks that whoever sets a shovel may use the vhosts its local URIs name.
//
// # What a shovel guarantees
//
// With ack-mode on-confirm (the default) a message is acked at the source
// only once the destination confirmed it, so a failure of either end
// loses nothing: what was unacked is redelivered by the source when the
// shovel's connection to it ends, and published again (a duplicate at
// the destination only if the confirm was lost with the connection).
// on-publish acks once the message was written to the destination's
// connection; no-ack consumes without acks. Confirms arrive in publish
// order, so the worker keeps its unconfirmed publishes in a FIFO and
// settles from its head.
//
// A shovel stopped on purpose (a changed or cleared parameter, a
// restart, the broker's shutdown) first cancels its consumer and acks
// what the destination confirms within a moment, so it copies nothing;
// only a failure of the source after the destination confirmed (a kill
// before the source stored the ack) can make a copy. A destination that
// nacks (a full queue that rejects publishes) stops the shovel rather
// than have it publish the same messages again and again.
//
// # Running, failing, restarting
//
// A Manager runs one worker goroutine per shovel: the dynamic ones on
// the node that Sync is told runs them (in a cluster, the broker picks
// one node), the static ones (broker.toml's, StartStatic) on the node
// whose configuration names them. A worker that loses either end reports
// terminated with the reason and starts again after reconnect-delay
// (never, when that is 0, as RabbitMQ); its URIs are tried in random
// order, then the others. A destination's connection.blocked shows in
// the status while it lasts. A shovel with a delete-after stops once it
// moved that many messages (queue-length: the source queue's length when
// it started) and clears its own parameter. A changed parameter restarts
// the shovel, stopped first; a cleared one stops it, and it is listed
// until it has stopped.
package shovel
