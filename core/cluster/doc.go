// Package cluster makes several Warren nodes one broker: it runs the
// metadata Raft group (go.etcd.io/raft/v3) over all nodes, carries Raft's
// messages between them (transport.go), and keeps the member table.
//
// What it replicates is a StateMachine of the caller's: commands are
// opaque bytes, applied in log order on every node; Propose returns once
// its command is committed by a majority and applied on the proposing
// node and on every other member it has heard from lately, with the state
// machine's answer. A node never answers a change it has not committed:
// without a majority, Propose returns ErrNoQuorum when its context ends.
// Waiting for the others makes the topology read-your-writes across the
// cluster, as RabbitMQ's changes are: a client that declares through one
// node and publishes through another finds the queue there. Each node
// tells every peer its applied index as it moves (and with every ping);
// a member that is heard from but does not apply a change within
// Config.SeenWithin (5 s) is waited for no longer, and is logged and
// counted (Member.Unseen). A member whose process is known gone (its
// address refuses connections) is not waited for at all. Reads are
// served locally, from what the node has applied; Barrier (Raft's read index, which writes nothing) first brings the node
// up to what the leader had committed, for a read that must see a change
// made through another node a moment ago.
//
// # Small groups
//
// Beside the metadata group, every quorum queue and every replicated
// stream is a Raft group of its own, of the nodes that hold it (Groups,
// groups.go): thousands of RawNodes on one loop per node, whose messages
// share the metadata group's connections. Their proposals are tagged
// with their proposer and applied once, in the order their proposer made
// them, however often a leader change or a loss makes it send them
// (proposals.go); a member that restarted, restored a
// snapshot or saw a new leader tells its machine it is not current until
// it has applied what the leader had committed (resync.go), so a queue
// hands its consumers only what is current.
//
// # Forming a cluster
//
// A node started without seeds and without a log starts a cluster of one.
// A node with seeds asks them, in turn, to add it (a configuration change
// whose context carries its name and address), and waits for the leader
// to send it the log or a snapshot. A node with a log restarts from it,
// whatever its seeds. Snapshots carry the member table (id, name,
// address) beside the state machine's own snapshot, since Raft's
// configuration holds ids only; the table is what maps a node's name to
// its id, everywhere (Node.MemberID, Call, Alive, and the ids of quorum
// queues' and streams' members in core/vhost).
//
// # Node ids, and replacing a node
//
// A node's Raft id is per incarnation, as etcd's member ids are, not a
// function of its name: it is its data directory's node id (Identity),
// a random number storage makes with the store. A node whose data is lost
// and that starts on an empty directory, or that join_cluster resets
// (the store's RenewNodeID), is a new incarnation. Were it to come back
// under the id it had, the leaders of the metadata group and of its
// quorum queues and streams would still count the log it no longer has
// (its match index) and name a commit index past the end of its empty
// log, and Raft panics (commitTo). A data directory from before ids were
// stored keeps the id its node had then, the hash of its name
// (LegacyID), recorded at its first start, so an upgrade changes no id.
//
// A join under the name of a member with another id replaces it: the
// member that receives the join removes the old incarnation from the
// configuration, then adds the new one (two changes, the removal first,
// so that the majority is the nodes that remain, and never counts both);
// it refuses while the old incarnation is heard from (two processes under
// one name), and refuses an incarnation the cluster removed (Removed)
// outright. forget_cluster_node (Forget) removes a node that is down; the
// broker first removes it from its quorum queues and streams. The groups
// those hosted on the node replace its incarnation in the same way, at
// the new incarnation's request (core/membership's Rejoin).
//
// What keeps messages meant for a previous incarnation away from the new
// one: the transport drops every Raft message whose To is not this
// node's id (the old id's address is the new one's), and takes nothing
// from an incarnation the cluster removed, as etcd refuses its removed
// members. Small groups run on RawNodes on one loop, which recovers a
// panic in a member's step, tick or Ready (guard): that member stops,
// with a log line naming the group and the peer, and the node and its
// other groups go on. The metadata group runs on raft.Node, whose
// goroutine cannot be recovered; what remains there is a peer wrong about
// this very incarnation, as when a data directory is restored from an
// old backup, or a machine crash under storage sync "never" loses its
// last writes: a heartbeat whose commit index is past the end of the log
// is dropped and logged (receive), which covers the case above; a
// malformed log that conflicts with entries this node holds committed
// would still panic Raft. The remedy in both is to wipe the data
// directory, which makes a new incarnation.
//
// # Raft settings, and why
//
//   - A tick is 100 ms; a heartbeat every tick, an election after 10
//     ticks without one (randomized by Raft to 10–20). Nodes of a Warren
//     cluster are on one network (RabbitMQ advises against clustering
//     across a WAN): a round trip is well under a millisecond, so a
//     heartbeat every 100 ms costs nothing, and a leader that died is
//     replaced in 1–2 s. A garbage-collection pause or a busy core must
//     not depose a healthy leader, which a timeout below a second would
//     risk on a 2-core machine.
//   - PreVote and CheckQuorum: a node cut off from the others cannot
//     disrupt the cluster when it comes back (it must win a pre-vote
//     first), and a leader that lost its majority steps down after an
//     election timeout, so the minority side of a partition knows it
//     cannot commit and refuses changes instead of holding them.
//   - MaxSizePerMsg 1 MiB and MaxInflightMsgs 256: metadata commands are
//     small (a declare is a few hundred bytes), so a message batches
//     thousands of them; 256 messages in flight let a follower that fell
//     behind catch up at the network's speed without the leader buffering
//     more than a few hundred MiB for it.
//   - A snapshot every 10,000 applied entries, keeping the last 1,000 in
//     the log: a node that was down briefly catches up from the log, one
//     that was down long gets a snapshot, and the log of a broker that
//     declares all day stays bounded. A metadata snapshot is the whole
//     topology, megabytes for a large broker, cheap every 10,000 changes.
//
// # Transport
//
// Nodes authenticate each other with a challenge-response on the shared
// cluster secret (transport.go), over TLS 1.3 when Config.TLS is set (the
// proof is then bound to the TLS session). Each sends to each peer on its
// own connection, dialed from the node's listen IP, from a bounded queue;
// a message that cannot be queued or sent is dropped and reported to Raft,
// which retries. Sending never blocks the node's loop. A sender with
// nothing to send pings every second, so every node knows which others
// are up (Status), followers included. A node tells the others the
// address to reach it at: Config.Advertise, else its listen address.
//
// # Calls
//
// Beside Raft, nodes call each other (Node.Call, SetCallHandler;
// calls.go): a request and its answer, many at once on one connection per
// pair of nodes, kept apart from Raft's so that neither waits behind the
// other. They carry the broker's data plane between nodes: publishes
// forwarded to a queue's home, a remote consumer's credit and
// deliveries, a stream replica's copies. A call broken by a failed link
// may or may not have been acted on (ErrCallBroken), which the caller
// must allow for.
//
// # Invariants
//
//   - The node's loop handles each Ready in the order Raft requires: the
//     hard state, entries and snapshot are durable (LogStore.Save) before
//     its messages are sent and its committed entries applied.
//   - Every committed entry's index reaches StateMachine.Apply, even
//     Raft's empty entries and configuration changes (with a nil
//     command), so Applied is exact. At a restart Raft is told only the
//     snapshot's index as applied: it hands back every entry after the
//     snapshot, rebuilding its configuration from the configuration
//     changes among them; those up to the state machine's Applied go to
//     Raft only. The member table is rebuilt from the snapshot and the
//     configuration changes up to Applied.
//   - A node's id names one incarnation: no Raft message addressed to
//     another id is stepped. An incarnation removed from the
//     configuration is refused when it asks to join again, by a node
//     that knows of its removal (Removed: what it saw since it started,
//     and the log after its snapshot; the snapshot does not carry it).
//   - Lock order: Node.mu and Transport.mu are leaves; neither is held
//     while calling Raft or the state machine.
package cluster
