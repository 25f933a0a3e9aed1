// Package streamproto serves RabbitMQ's stream protocol (port 5552) over
// Warren's streams: the same vhosts, users, permissions and core/stream
// logs that AMQP 0-9-1 reads, so a stream declared over one protocol is
// published to and read over the other, at the same offsets.
// protocol/stream is the codec; this package is the front end.
//
// # A connection
//
// The client speaks first: PeerProperties, SaslHandshake, SaslAuthenticate
// (PLAIN, against the broker's users), then the server tunes (frame max,
// heartbeat) and the client opens a vhost, which needs a permission there.
// Anything else before Open closes the connection. After Open it declares
// publishers and publishes, subscribes and gives credit, creates, deletes
// and asks about streams.
//
// Each connection has a reader goroutine, which runs every command to
// completion in arrival order, and a writer goroutine, which writes what
// anything appended to the connection's outbound buffer (responses,
// chunks, confirms gathered per publisher) and sends heartbeats. The
// chunks a Credit brings are the exception: the reader takes them from
// the stream (stream.Pull) and writes them itself, as far as the socket
// takes them without waiting, leaving the rest to the writer. A drain is
// then one goroutine's work per chunk, as it is one process's in
// RabbitMQ, not three goroutines handing it on; and the reader never
// waits on the socket, so a client that writes before it reads cannot
// stall it. One goroutine at a time writes (outbound.writing).
//
// # Publishing
//
// A published message is appended to the stream as the client encoded it
// (message.FlagAMQP10): a stream-protocol reader gets back the very
// bytes, an AMQP 0-9-1 reader a conversion (protocol/amqp10). A message is
// confirmed once the stream synced it. A publisher declared with a
// reference deduplicates: a publishing id at or below the highest one
// the stream took for that reference is confirmed and dropped. The
// stream itself tracks the references' sequences and the consumers'
// stored offsets (core/stream's tracking.go), stored with its messages
// and replicated with them, so they outlive a restart and a new leader.
// At most Settings.MaxUnconfirmed messages of a connection wait for their
// confirm; the reader stops reading until fewer do.
//
// # Consuming
//
// A subscription is a stream.Reader of the stream's replica on this node.
// One credit is one chunk: a round of reads the stream makes while the
// subscription has credit becomes one chunk (its first offset the chunk's
// id), sent as a Deliver; the client skips the entries of the first chunk
// below the offset it asked for, as it does with RabbitMQ's chunks. A
// chunk of messages the stream protocol published is stored as a Deliver
// carries it (streamqueue's deliverForm), and a subscription takes it
// whole, as it lies in its file, and the writer sends it with sendfile
// (stream.ChunkReader, sendfile_linux.go): nothing is read, decoded or
// encoded. It reads message by message only where it filters, or where
// it read part of the chunk before. A chunk sent this way is not checked
// against the store's checksum: the client checks the chunk's CRC.
//
// A subscription with filter values (filter.N, match-unfiltered) is not
// sent a chunk in which no message has one of them (filter.go); a single
// active consumer reads only while its group has it active, from where
// its client's answer to a ConsumerUpdate says. A group spans the cluster:
// the node leading the stream coordinates it (sac.go, saccoord.go).
//
// # Errors
//
// A command that fails answers with its response code and the connection
// goes on; a frame that does not decode, or one out of place, closes the
// connection with the code protocol/stream gives it. Nothing a client
// sends can take down another connection.
//
// # Locks
//
// sacAgent.mu -> stream.Stream.mu -> subscription.mu (Read runs under
// the stream's lock) -> outbound.mu; sacAgent.mu and sacCoordinator.mu
// -> the outboxes' locks. Server.mu and Conn.mu (the publisher and
// subscription maps, which only the reader changes, held for listings to
// read them) are leaves. LOCKS.md has them in order.
package streamproto
