// Package lockorder holds Warren's broker locks in the order LOCKS.md
// gives them, and, in a build with the warren_lockorder tag, checks it.
//
// A lock is a Mutex or RWMutex whose type argument names its place in the
// order (ranks.go): vhost.VHost's defMu is a Mutex[VHostDef]. In an
// ordinary build the wrappers are sync's mutexes and nothing more: the
// methods inline to sync's, and the rank costs nothing.
//
// Built with -tags warren_lockorder (Pebble's invariants tag is the
// model), every Lock, RLock and TryLock records, per goroutine, the locks
// it holds, and a Lock or RLock that would take a lock while holding one
// of the same rank or a later one panics, naming both, before it blocks:
// an inversion is reported where it happens, not only when two goroutines
// happen to deadlock on it. CI's race pass runs with the tag.
//
// # Invariants
//
//   - ranks.go lists every lock of LOCKS.md's order, in an order that
//     puts each lock before every lock LOCKS.md lets it be held around;
//     TestRanksFollowLOCKS reads LOCKS.md and fails when the two differ.
//   - A rank is taken twice by one goroutine only where LOCKS.md allows it
//     (queue.Queue.mu, by increasing Queue.Order; wasmhost.Plugin.stateMu,
//     an upgrade's old version's then the new one's); the checker does not
//     check that order, only that the rank may nest.
//   - The checker's own bookkeeping uses sync's mutexes, outside the order.
package lockorder
