// Package storage is Warren's persistent state: one Pebble DB in the data
// directory holding the metadata (vhosts, users, permissions, exchanges,
// queues, bindings, policies, enabled plugins), the messages, one index per
// queue, the delay store of held messages, and the Raft logs of clustered
// groups. The broker core calls it through Store, Txn and RaftLog; this
// comment describes what is on disk and the rules that keep it consistent,
// so that someone new can read the store with a debugger (Store.Dump prints
// every key decoded, in this notation).
//
// # Key layout
//
// The first byte of a key names its keyspace. Every number in a key is
// fixed-width big-endian, so byte order is numeric order: queue 2's entries
// sort before queue 10's, seq 9 before seq 10 (GarageMQ's decimal-string
// keys got this wrong). Names are escaped, never delimited, so no name can
// collide with another whatever bytes it holds.
//
//	0x01 name                          system value
//	     0x01 "format-version"         uint32: FormatVersion of the store
//	     0x01 "next-id"                uint64: ids below it may be in use
//	     0x01 "node-id"                uint64: the node id of the data
//	                                   directory: random, not 0, made with
//	                                   the store; renewed by a reset
//	                                   (join_cluster); a store made before
//	                                   it has none until the cluster records
//	                                   the hash of the node's name, the id
//	                                   its node had (core/cluster's doc)
//	0x02 kind esc(name)                metadata record, global kinds:
//	                                   kind 1 vhost, 2 user, 8 plugin
//	0x02 kind esc(vhost) esc(name)     metadata record, per-vhost kinds:
//	                                   3 permission (name = user), 4 exchange,
//	                                   5 queue, 7 policy, 10 topic permissions
//	                                   (name = user), 11 operator policy,
//	                                   12 vhost parameter (name =
//	                                   component/name), 13 MQTT retained
//	                                   message (name = topic)
//	0x02 0x06 esc(vhost) seq(8)        binding, in creation (seq) order
//	0x03 msgID(8)                      a message shared by several queues
//	0x04 qid(8) prio(1) seq(8)         queue index entry
//	0x04 qid(8) prio(1) seq(8) 0x01    its delivery mark: uvarint deliveries
//	                                   (format 2), right after the entry
//	0x05 qid(8) prio(1) seq(8)         reference: the msgID(8) of a shared entry
//	0x06 due(8) seq(8)                 held message, first format: read
//	                                   only to be moved to 0x09 (held.go)
//	0x07 group(8) 0x01 index(8)        Raft log entry of a group
//	0x07 group(8) 0x02                 the group's Raft hard state
//	0x07 group(8) 0x03                 the group's Raft snapshot
//	0x07 group(8) 0x04                 uint64: the index its state machine
//	                                   applied last (RaftLog.SetApplied)
//	0x08 sid(8) 0x01 offset(8)         a stream's message in format 4:
//	                                   timestamp(8) then the message; Open
//	                                   rewrites them into chunks
//	0x08 sid(8) 0x02 first(8)          a stream's segment record
//	0x08 sid(8) 0x03 0(8)              a replicated stream's state
//	0x08 sid(8) 0x04 kind(1) name      a publisher's last sequence (kind
//	                                   1) or a consumer's offset (kind 2)
//	                                   the stream protocol tracks by name
//	0x08 sid(8) 0x05 first(8)          a stream's chunk: where its record
//	                                   is in the stream's files (below),
//	                                   its count and timestamp (stream.go)
//	0x09 esc(vhost) esc(exchange)      held message (the delay store), per
//	     kind(1) due(8) seq(8)         exchange and kind (1 durable, 2
//	                                   transient), in due order (held.go)
//	0x0A msgID(8)                      a shared message whose body is in
//	                                   the body log (below), instead of
//	                                   0x03: never both
//
// esc(s) is s with every 0x00 byte written as 0x00 0xFF, followed by the
// terminator 0x00 0x01. It keeps names in byte order, and an escaped name is
// never a prefix of another, so all of a vhost's queues are exactly the keys
// starting with 0x02 0x05 esc(vhost). For example the queue "a/b" of vhost
// "/" is
//
//	02 05 2f 00 01 61 2f 62 00 01
//
// and entry seq 300 of queue id 7 at priority 0 is
//
//	04 00 00 00 00 00 00 00 07 00 00 00 00 00 00 00 01 2c
//
// and entry 5 of Raft group 3 is
//
//	07 00 00 00 00 00 00 00 03 01 00 00 00 00 00 00 00 05
//
// due in a held key is unix milliseconds with the sign bit flipped (so that
// a negative time would still sort first); held messages are read in due
// order, ties in seq order.
//
// Queue ids and message ids come from one counter (Store.NewID) and are
// never reused in the life of a data directory: "next-id" is raised a block
// of 1<<20 ids at a time, durably, before any id of the block is handed out.
//
// A Raft group's keys are contiguous (all of them start with 0x07 group),
// so DeleteRaftLog is one range deletion, and its entries are in index
// order, so a read of [lo, hi) is one iterator over adjacent keys.
//
// # Values
//
// Metadata records are AMQP field tables (protocol.AppendTable), which keep
// every AMQP type exact where JSON would not (int8 versus int64, decimals,
// timestamps, byte arrays).
//
// A message (under 0x03, or inline in an entry) is
//
//	uvarint len | exchange | uvarint len | routing key |
//	flags (2 bytes, big-endian: the content header's property flags) |
//	uvarint len | properties | body (the rest of the value)
//
// An entry is
//
//	flags (1 byte): 0x01 persistent, 0x02 delivered, 0x04 shared, 0x08 expires,
//	                0x10 spilled, 0x20 logged
//	uvarint deliveries
//	expires-at (8 bytes, big-endian unix ms)       if flag 0x08
//	shared:  msgID (8 bytes) | uvarint body length if flag 0x04
//	spilled: uvarint segment | uvarint offset |    if flag 0x10 (never with 0x04)
//	         uvarint body length | message without its body
//	logged:  uvarint segment | uvarint offset |    if flag 0x20 (never with 0x04
//	         uvarint body length | message         or 0x10)
//	         without its body
//	inline:  message                               otherwise
//
// A logged message (0x0A) is uvarint segment | uvarint offset | uvarint
// body length | message without its body.
//
// A shared entry records its body length so that QueueLevels and Recover
// count bytes without reading the message. A spilled entry's body is in
// its queue's spill file (below), never in the DB. A reference (0x05) value is the
// msgID, 8 bytes. A held value is the caller's bytes.
//
// Raft values are raft's own messages marshalled with protobuf: a
// raftpb.Entry, a raftpb.HardState, a raftpb.Snapshot (metadata and data).
//
// # Invariants
//
// Every Txn is written whole into one Pebble batch, after the Txns committed
// before it. Upon that:
//
//   - An entry of a shared message and its reference key are put and
//     deleted together (PutEntry, DeleteEntry, and DeleteQueue's two range
//     deletions), so the reference keys are exactly the shared entries.
//   - A shared message is put in the same Txn as its first entry or an
//     earlier one (the caller's part), and deleted in the same batch as its
//     last reference or a later one, never earlier: no entry on disk ever
//     points at a missing message, whatever the moment of a crash.
//     (Should one ever do, Recover deletes it and counts it in
//     MissingMessages, rather than leave its queue stuck.)
//   - A move between queues (dead-lettering) is one Txn: DeleteEntry from
//     one queue, PutEntry into the other. It lands in one batch, so a crash
//     leaves the message in exactly one of the queues. The message's count
//     is judged at the end of the Txn, so the move never deletes it.
//   - DeleteVHost deletes the vhost record, the vhost's permissions and
//     topic permissions, exchanges, queues, bindings, policies, operator
//     policies and held messages (range
//     deletions), and its queues' entries, in one batch.
//   - Metadata writes are ordinary keys: nothing ties a queue record to its
//     entries; the broker deletes both (DeleteMeta, then DeleteQueue or in
//     DeleteVHost), and Recover removes the entries of queue ids it is not
//     told to keep.
//
// # Commit pipeline
//
// Publishers call Begin, PutEntry and Commit on the hot path, and many of
// them must share one fsync. It goes like this (see txn.go):
//
//  1. Begin takes a pooled Txn with its own small Pebble batch. Its writes
//     encode straight into that batch (SetDeferred: no extra copy, no
//     allocation in the steady state). An open Txn holds no lock, so a slow
//     or abandoned Txn delays no one.
//  2. Commit takes the committer mutex for a moment: it appends the Txn's
//     batch to the open commit batch (one memcpy), applies the Txn's
//     reference-count changes, registers the callback, and wakes the
//     committer if the batch just became non-empty, durable, or large. So
//     Txns are applied in Commit-call order: a later delete never precedes
//     the put it deletes, and every Txn lands whole in one batch. A Txn
//     of 256 KiB or more (a large message) is not copied: the open batch
//     is sealed and the Txn's own batch becomes the next one.
//  3. One committer goroutine takes the open batch (swapping in an empty
//     one) as soon as it holds a durable Txn, or reaches MaxBatchBytes, or
//     a reader waits for it, or CommitInterval after its first non-durable
//     Txn. It applies it to Pebble, written through to the OS and with an
//     fsync of the WAL if a durable Txn is in it (and Sync is SyncAlways)
//     or the SyncInterval is up (see Durability below), then hands it to
//     the callback goroutine and takes the next one. Once the entries
//     deleted since the last flush add up to 16 MiB, it asks Pebble to
//     flush the memtable, so that compactions give a drained queue's space
//     back without waiting for other writes (reclaim). While it waits for the
//     disk, new Commits fill the next batch: under load one fsync covers
//     every Txn committed during the previous one. That is the group commit.
//  4. The callback goroutine runs the batches' callbacks, one at a time, in
//     Commit-call order. The committer never waits for it.
//
// A callback may call any method of the store (reads, Commit, even the
// metadata writes, whose completion the committer signals directly rather
// than through a callback). It should not block for long: the callbacks
// behind it wait (commits do not). Durable and non-durable Txns share
// batches: a non-durable Txn in a synced batch is synced too, and a synced
// batch also makes every earlier batch durable (the WAL is sequential).
//
// Commit never waits for the disk, except as backpressure: while the open
// batch holds more than 4*MaxBatchBytes (the committer is behind because
// the disk is slower than the writers) Commit waits until the committer
// takes it. That wait depends only on Pebble, never on a callback or a
// caller, so it cannot deadlock whatever locks the caller holds.
//
// A Txn that deletes queues (DeleteQueue, DeleteVHost) starts a batch of its
// own. Before applying it, the committer reads the queues' reference keys
// from the DB, which then holds exactly the state before that Txn, and
// drops one reference per key; messages left unreferenced are deleted in
// the open batch, which comes after every Txn whose changes are counted.
//
// If Pebble fails to apply a batch, or a write or fsync of the WAL under it
// failed (walFS hides those from Pebble, which cannot survive them, and
// reports them to the committer), its callbacks and those of every later
// Txn get the error: the store takes no more writes until it is reopened
// (the in-memory counts may no longer match the disk; Recover rebuilds
// them), and Health says why. Before that point the committer holds batches
// while the disk is short of space (space.go). Close commits everything
// pending, syncs and closes; a Commit after Close runs its callback with
// ErrClosed.
//
// The metadata writes (PutMeta, DeleteMeta, PutBinding, DeleteBinding,
// DeleteVHost) are durable Txns whose completion the committer reports
// directly, so they return once the change is synced and are ordered with
// the Txns committed before them.
//
// # Durability: write-through and the sync interval
//
// Pebble's WAL writer (record.LogWriter in pebble/v2 v2.1.7) appends each
// batch to its current 32 KiB block in process memory; its flush loop writes
// a partial block to the file only when a sync is requested or the block
// fills. A batch applied with pebble.NoSync can therefore stay in memory
// indefinitely, and a kill -9 undoes it: acks and delivery marks sent a
// minute earlier came back. So the committer applies every batch with
// pebble.Sync, and the filesystem Pebble writes through (walFS) decides
// what that sync is:
//
//   - A batch holding a durable Txn, under SyncAlways: a real fsync
//     (fdatasync) before the callbacks run.
//   - Any other batch: only the write. The WAL file's Sync returns once the
//     flush loop has written the block, so the data is in the OS's page
//     cache when Apply returns. Non-durable Txns thus reach the OS within
//     CommitInterval; durable ones under SyncNever before their callback.
//   - Under SyncAlways the committer fsyncs at the latest SyncInterval after
//     the first write it left unsynced: the next batch carries the fsync,
//     or, if none comes, a timer applies an empty one (LogData). A machine
//     crash can lose at most the non-durable writes of the last SyncInterval;
//     a process crash loses nothing that was applied.
//
// walFS tells one Apply from the next by a flag the committer sets around
// each Apply: the committer is the only writer after Open (Recover's own
// writes finish with a durable Txn through it), applies one batch at a
// time, and Apply returns only after its sync, so every WAL sync in that
// window belongs to that Apply. Outside it the flag says fsync, so a sync
// Pebble makes on its own (closing the DB) is real. A WAL closed while it
// holds data only written through is fsynced on Close: Pebble closes the
// old WAL before creating the next (rotateWAL), so no fsync of a newer log
// can leave a hole in an older one.
//
// One consequence: the WAL's sync chunks record as synced offsets what was
// only written through, so after a machine crash (never a process crash)
// that lost a page in the middle of unsynced data, Pebble could take it
// for corruption. Open looks at the newest log first (below) and reports
// such a hole as WAL damage either way.
//
// # Reference counts
//
// The store keeps, in memory, a count per shared message: the entries that
// reference it plus the references PutMessage promised and no PutEntry has
// added yet (so a message routed to three queues, enqueued by each in its
// own Txn, survives an early ack in the first). PutEntry with a MsgID adds
// one (or fulfils a promise); DeleteEntry, ReleaseRef and DeleteQueue drop
// one each; at zero the message is deleted, in the batch of the Txn that
// dropped the last reference. A count is judged at the end of each Txn, so
// PutMessage with refs == 0 followed by its PutEntry calls in the same Txn
// is the simple case; a PutMessage whose references are neither promised
// nor added in its Txn is deleted at once. The counts are rebuilt from the
// entries by Recover; promises do not survive a restart, which is right,
// since neither do the unfinished publishes that made them.
//
// UpdateEntry rewrites an entry whole: for a shared entry pass Msg (or
// at least its Body) again, or the body length it records becomes 0.
//
// # Recovery
//
// Recover runs once after Open, before any Txn that touches entries or
// messages (those fail with ErrNotRecovered until it has). In one pass over
// the index (0x04) it range-deletes the entries and references of every
// queue id the caller does not keep (transient and exclusive queues of the
// last run), deletes every entry with Persistent == false (transient
// messages paged out of memory) with its reference, counts the rest per
// queue and priority level (count, body bytes, first and last seq: the
// broker continues its seqs from there), and counts the references to each
// shared message. Then it deletes the shared messages (0x03) nothing
// references. It syncs its deletions before returning, and logs progress
// at info level every few seconds when it runs longer than a second.
//
// Recover leaves the Raft keys (0x07) alone: a Raft log is whole by
// construction (below), and only DeleteRaftLog removes a group.
//
// # Raft logs
//
// A RaftLog is one Raft group's raft.Storage, with raft.MemoryStorage's
// semantics. Its entries on disk are the indices offset..last with no gap.
// The one at offset is MemoryStorage's dummy entry: the snapshot's index,
// or the last compacted one, with its term and nothing else. A new group's
// dummy (index 0, term 0) is written with its first entries, since without
// it a log starting at 1 could not be told from one compacted up to 1.
// Opening a group reads offset and last from its first and last key.
//
// Each write is one durable Txn, landing whole in one batch, ordered with
// every other Txn:
//
//   - Save: for a snapshot, a range deletion of all the group's entries,
//     the dummy at the snapshot's index and the snapshot; for entries that
//     overwrite a suffix (a new leader's), a range deletion from the first
//     of them to the end of the log; the entries; the hard state.
//   - Compact: a range deletion of the entries below the new dummy, and the
//     dummy rewritten with only its index and term.
//   - CreateSnapshot: the snapshot key.
//   - DeleteRaftLog: one range deletion of the group.
//
// So a crash leaves a group as it was before or after each write, never in
// between: no gap in the log, no hard state without the entries saved with
// it, no snapshot without its dummy. A crash between two Saves keeps every
// Save that returned (under SyncAlways; raft's safety needs it, as under
// SyncNever a machine crash can lose a vote) and the one under way whole or
// not at all. raft copes with losing that one because it persists before
// it acts: a Ready's messages are sent, and its entries applied, only after
// Save returns, so no other node relies on what was lost; on restart raft
// takes the log and hard state it finds, and the leader sends again what
// the follower lacks. A crash between CreateSnapshot and Compact leaves a
// snapshot over a log not yet compacted, which costs only space.
//
// One exception: a Save whose hard state moves only the commit index, with
// nothing else to save, writes nothing; the state waits in memory and goes
// with the log's next write (or Flush), as etcd leaves such a state
// unsynced (raft.MustSync). Otherwise a group that commits what it has
// just appended would sync twice per round. A crash can so leave a commit
// index behind the truth, which Raft tolerates (the leader, or a sole
// member's next election, commits it again); one below the snapshot's
// index, which Raft would refuse, is raised to it when the log is opened.
//
// The first and last index and their terms, the hard state, the
// snapshot's index and conf state and the log's size are kept in memory, so
// raft's most frequent calls read no disk; Entries, the other terms and the
// snapshot itself are read from Pebble. A writer publishes the new state
// after its Txn is applied; readers need not wait for the committer, since
// every raft write is waited for (see RaftLog for the locking).
//
// # Damage in the write-ahead log
//
// Pebble replays the newest WAL up to the first record it cannot read. If
// nothing valid follows, that is the torn tail a crash leaves, and nothing
// is lost that the sync rules above did not allow to be lost. If valid
// chunks of the same log follow (bit rot, a bad disk, a machine crash that
// lost a page in the middle of unsynced data), the records from the bad
// one on are lost: Pebble either refuses to open or drops them with only a
// line at info level. So Open first reads the newest log itself, as Pebble
// will (Pebble's wal reader, then a walk over the raw 32 KiB blocks past
// the bad record counting chunks whose log number and checksum are right),
// and when it finds such chunks it logs at error level the file, the
// offset and the records and bytes lost, then per Options.WALDamage either
// refuses to open (ErrWALDamaged) or keeps the damaged file as
// damaged-NNNNNN.log-UNIXTIME, writes the log again up to the bad record,
// and lets Pebble open that. Older WALs were closed cleanly; Pebble refuses
// any damage in them, and Open says the directory is damaged.
//
// # Reads and tombstones
//
// ScanQueue, QueueLevels, ScanHeld, Meta and Dump first wait until every
// Txn committed before the call is applied (not synced), so a reader sees
// its own writes. A queue consumed from the head leaves tombstones behind
// it until compaction removes them; ScanQueue's from is the iterator's
// lower bound, so scanning from the queue's head never walks them. Purges
// and queue deletions are range deletions, which Pebble skips in one step.
// ScanQueueInto reads bodies into buffers its caller lends (a queue's
// pooled buffers), so a large body read back is copied once, out of
// Pebble's block, and never left for the GC. ScanQueueDeletes, for a
// caller that deletes what it scans, reads no body from the body log: an
// entry's reference says its length.
//
// # Pebble settings
//
// The DB uses Pebble's newest format (FormatNewest of pebble/v2 v2.1.7),
// the default bytewise comparer, 32 KiB data blocks (queue scans read 1.5
// to 2 times faster than with the default 4 KiB), a 64 MiB block cache and
// memtables of a 64th of the disk between 4 and 32 MiB (32 MiB on any disk
// of 2 GiB or more; see "Disk space" in space.go). An L0 sstable's target
// size is half the memtable, doubling at each level below. Values of 8 KiB
// and more go to blob files (Pebble's value separation, valueSeparation in
// store.go): written once at flush, never copied by compactions, deleted
// when no sstable refers to them. A blob file that a few live values keep
// alive is rewritten once it is five minutes old while over a fifth of all
// blob bytes are garbage. Pebble decides what to compact only when
// something happens in the DB, so the store nudges it once a minute, and
// once the store has been quiet for a minute (under 1 MiB committed) it
// flushes the memtable and compacts the ranges of the tables holding
// deletions above the bottom level, again every ten minutes while a
// trickle of writes goes on (reclaim.go): a quiet store gives back the
// space of consumed messages too. Pebble's own tools read the directory;
// its info-level log lines go to the store's logger at debug level.
//
// # Spill files
//
// A queue past its memory bound pages its newest messages out. The
// persistent messages of a durable queue are in the index already; the
// others get an entry with Persistent == false, which Recover deletes. When
// such an entry's body is large (message.PooledMin, 64 KiB, or more) the
// queue writes the body to its Spill, files of its own in the data
// directory's spill folder, and the entry refers to it. Through Pebble a
// paged body was copied into a batch, the WAL and a memtable, compressed
// into a blob file at the flush and decompressed on the way back, for a
// body that lives only until the queue reads it back: half of the broker's
// CPU for 16 MiB transient messages past the bound (BENCHMARKS.md, "Large
// transient messages past the memory bound"). A spill costs one write and
// one read.
//
// The invariants: a Spill's live bodies are exactly the spilled bodies of
// its queue's paged entries, so the queue releases a body when it reads
// the entry back and resets the Spill when it drops its paged entries all
// at once (purge, delete); a spill file is deleted with its last live
// body. Spill files are never synced and never read after a restart: Open
// deletes the spill folder before anything reads the index, and Recover
// deletes the entries that referred to it. A Spill has no lock of its own;
// its queue's lock serializes it, and the reads happen under that lock, as
// the queue's other reads of the store do. The writes do not: Reserve
// places a body under the lock, and the queue writes it once it has
// released the lock (SpillWrite); a read before that takes the body from
// memory and cancels the write.
//
// # The body log
//
// A persistent inline entry's body of Options.BodyLogMin bytes or more
// (256 KiB by default), and a shared message's, is not in Pebble: it is a
// record in a segment file of the data directory's bodies folder
// (00000001.body, ...), and the entry (flag 0x20) or message (0x0A) says
// where: segment, offset, length. A record is the body's CRC-32C and
// length (4 bytes each, big-endian) and the body. Through Pebble such a
// body was written twice (the WAL, then a blob file at the flush) and
// copied some six times; here it is written once, by the committer, just
// before the batch holding its entry is applied, and not at all when the
// entry is deleted in that same batch (a message acked before its write
// was due). See bodylog.go for the steps.
//
// The invariants, and what a crash can leave:
//
//   - A record is written before its entry is applied, and fsynced before
//     the WAL fsync that makes its entry durable: no durable entry refers
//     to a body that is not. A process crash can leave records with no
//     entry (written, the batch not applied): Recover deletes the segments
//     nothing refers to, and a segment some entry still refers to keeps
//     that garbage until its last body goes.
//   - Each segment counts its live bodies (reserved and not deleted); one
//     other than the segment being appended to is deleted once it has none
//     and the batch holding its last delete is fsynced (under SyncNever,
//     applied), so no crash brings back an entry whose body is gone.
//   - A new run never appends to an old segment.
//   - A machine crash can lose a record whose entry was only written
//     through (a persistent message that nobody waited for); Recover
//     checks each logged entry's record header (the file, its length, the
//     recorded length), deletes the entries whose record is not in place
//     and logs each segment's loss at error level by its file name
//     (RecoveryStats.DamagedBodies). A read checks the CRC: a body damaged
//     on disk is refused with ErrBodyDamaged naming the file and offset,
//     never delivered.
//   - Transient entries (paged out of memory) never use the body log: they
//     go to spill files (below), which never survive a restart.
//
// # Stream files
//
// A stream's messages are not in Pebble either: each write of a stream
// (the messages appended meanwhile, at consecutive offsets) is a chunk
// record in a file of the stream's folder, streams/<sid in hex>/<first
// offset>.chunks, and Pebble holds the chunk's index record (0x05) and
// the segment records retention works by. A file holds the chunks whose
// offsets lie between its name and the next file's; a new one starts
// where a segment starts. A record is a header (payload CRC-32C, payload
// length, first offset) and the messages, each with its timestamp; or,
// for a formed chunk (format 6), the form its readers take whole (the
// stream protocol's chunk, made by the writer: StreamForm), then what
// the form does not hold of the messages; a formed chunk holds at most
// FormedMessages, or as many as its writer asks for up to
// MaxFormedMessages (PutStreamChunkOf). See streamlog.go for the
// layouts and the steps; the invariants are the body log's:
//
//   - A chunk is written before its index record is applied, and fsynced
//     (with a new file's folder) before the WAL fsync that makes the index
//     durable. A process crash can leave chunks past the last indexed one
//     and files with no index record: Open deletes the files (and folders)
//     nothing refers to; a tail of garbage stays, unread, in a file that
//     is still referred to.
//   - Retention and deletion drop index records first; the files wholly
//     below the cut (or all of a deleted stream's) are deleted once that
//     Txn is fsynced, and closed once no read uses them.
//   - A read checks the header against the index and the CRC: a chunk
//     damaged or missing on disk is refused with ErrChunkDamaged naming
//     the file and the offsets, never delivered. The one exception is a
//     formed chunk sent from its file unread (StreamFormed, for
//     sendfile): its form carries its own checksum (the stream protocol's
//     chunk CRC), which its reader checks, as RabbitMQ's clients check the
//     chunks RabbitMQ sends unread.
//
// # Memory
//
// Beyond Pebble's block cache (CacheSize) and memtables (up to two of
// MemTableSize), the store holds the open commit batch (at most about
// 4*MaxBatchBytes, by the backpressure above, plus one Txn; the logged
// bodies waiting in the batches count in that bound, and are held until
// written), the batch being committed, batches whose callbacks have not
// run yet, pooled Txn batches (each trimmed to 1 MiB when reused), about
// 40 bytes per shared message for its count, about 100 bytes per logged
// entry or message (where its body is), and per Raft group opened a few
// hundred bytes (its bounds, hard state and conf state).
package storage
