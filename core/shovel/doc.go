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
// # Running, failing, restarting
//
// A Manager runs one worker goroutine per shovel on the node that Sync
// is told runs them (in a cluster, the broker picks one node). A worker
// that loses either end reports terminated with the reason and starts
// again after reconnect-delay (never, when that is 0, as RabbitMQ); its
// URIs are tried in random order, then the others. A shovel with a
// delete-after stops once it moved that many messages (queue-length: the
// source queue's length when it started) and clears its own parameter.
// A changed parameter restarts the shovel; a cleared one stops it.
package shovel
