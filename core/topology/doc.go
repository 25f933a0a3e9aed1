// Package topology holds what a vhost's objects are, apart from the vhost
// that keeps them: the declarations clients make (QueueDef, exchange
// definitions), how a redeclare is compared with what exists (406 and
// 405, in RabbitMQ's words), the limits and metadata an operator sets on
// a vhost, and the typed records the store keeps and the cluster carries:
// stored exchanges, queues, bindings and policies, the topology commands
// of the metadata group and a vhost's share of its snapshot.
//
// Invariants kept here:
//   - Every record and command is encoded (Table) and decoded (Read...)
//     in records.go and nowhere else, with a version: a record or command
//     of a version or op this node does not know is refused by name, and
//     a field of the wrong type is an error naming it, never a zero value.
//   - The package reads and compares; it holds no state and takes no lock.
//     core/vhost decides, under its locks, what a declaration does.
package topology
