// Package queuetype is the contract between a vhost and its queue types,
// as RabbitMQ's rabbit_queue_type is: core/vhost holds every queue as a
// Queue, and each type (core/classicqueue, core/quorumqueue,
// core/streamqueue, and classicqueue.Remote for a classic queue homed on
// another node of a cluster) implements it in its own package, importing
// this one and not the vhost.
//
// A type is a Type, registered by name in the broker's Types; the vhost
// asks it to declare and restore queues, and offers it a Host: the vhost's
// services (the store, the cluster, routing a dead letter, calls to other
// nodes) without its internals. What only some queues do is a capability,
// an interface of its own that the vhost asks for by assertion: Local (a
// classic queue, which takes a publisher's message in the publisher's own
// goroutine), GroupQueue (a queue of a Raft group), Refuser (a Source that
// refuses some of what a channel asks).
//
// Invariants kept here: no package of a type names another type, and the
// vhost names none (a new type is one package and one registration); every
// method says which of the vhost's locks its caller holds (LOCKS.md).
package queuetype
