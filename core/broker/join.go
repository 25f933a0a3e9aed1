package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warrenmq/warren/core/cluster"
)

// JoinCluster makes this node leave its cluster of one and join the
// cluster a node at seed belongs to, as rabbitmqctl join_cluster does
// after stop_app: the node is reset first. Its broker-wide definitions,
// vhosts (with their exchanges, queues and messages) and users are
// deleted and the defaults of a new data directory made again; then it
// joins through seed and gets the cluster's definitions from it. As with
// RabbitMQ, clients must be gone first (RabbitMQ's stop_app closes them),
// and a node that is clustered with others must be forgotten by them
// instead.
//
// The reset makes the node a new incarnation (a new Raft id, as a node on
// an empty data directory has): a cluster that has a member of its name,
// one whose data was lost, takes it in that member's place, and its
// quorum queues and streams add it back (core/cluster's doc, "Node ids,
// and replacing a node"); RabbitMQ 3.10 refuses such a join
// (inconsistent_cluster) until forget_cluster_node.
//
// The new membership lasts: at a restart the node comes back from its
// Raft log, whatever cluster.seeds says.
func (b *Broker) JoinCluster(seed string) error {
	b.joinMu.Lock()
	defer b.joinMu.Unlock()
	n := b.cluster.Load()
	if n == nil {
		return errors.New("this node has no [cluster] section in broker.toml (node_name, listen, secret)")
	}
	if members := n.Members(); len(members) > 1 {
		return fmt.Errorf("this node is already clustered with %d other nodes; remove it from them with forget_cluster_node first", len(members)-1)
	}
	if conns := len(b.srv.Connections()); conns > 0 {
		return fmt.Errorf("%d client connections are open; close them first (rabbitmqctl join_cluster needs stop_app)", conns)
	}
	b.log.Warn().Str("seed", seed).Msg("join_cluster: resetting this node and joining another cluster")
	b.stopCluster() // stops the node's groups too
	id, err := b.store.RenewNodeID()
	if err != nil {
		return fmt.Errorf("join_cluster: giving this node a new id: %w", err)
	}
	b.groups.Store(cluster.NewNodeGroups(id, b.log))
	if err := b.reset(); err != nil {
		return fmt.Errorf("join_cluster: resetting this node: %w", err)
	}
	return b.startCluster([]string{seed})
}

// reset deletes every broker-wide definition and the metadata Raft log,
// then makes the defaults of a new data directory again. No cluster
// member runs meanwhile, so every change applies here only.
func (b *Broker) reset() error {
	for _, name := range b.VHosts() {
		if err := b.applyDeleteVHost(name); err != nil {
			return err
		}
	}
	for _, u := range b.users.Users() {
		if err := b.applyDeleteUser(u.Name); err != nil {
			return err
		}
	}
	for name := range b.GlobalParameters() {
		if err := b.applyClearGlobalParameter(name); err != nil {
			return err
		}
	}
	if err := b.applyClearGlobalParameter(ParamClusterName); err != nil {
		return err
	}
	// Deleting their vhosts dropped the vhosts' parameters; this is for
	// any left over.
	for _, p := range b.VHostParameters("", "") {
		if err := b.applyClearVHostParameter(p.VHost, p.Component, p.Name); err != nil {
			return err
		}
	}
	if err := b.store.DeleteRaftLog(metaGroup); err != nil {
		return err
	}
	return b.firstBoot()
}

// ForgetClusterNode removes the node named name from the cluster, as
// rabbitmqctl forget_cluster_node does: a node that is running is
// refused (RabbitMQ: "must be stopped ... before it can be removed"). It
// is first removed from every quorum queue and stream it is a member of
// (RabbitMQ 3.10 shrinks the quorum queues alone; later versions the
// streams too), which recomputes their majorities; one whose only member
// it is keeps it, and that failure is logged as RabbitMQ logs it, as is
// any other, without stopping the rest. Then it leaves the metadata
// group, within cluster.change_timeout (ctx ends it sooner: the caller
// gone). It answers each queue's outcome.
func (b *Broker) ForgetClusterNode(ctx context.Context, name string) ([]QuorumChange, error) {
	n := b.cluster.Load()
	if n == nil {
		return nil, errors.New("this node is not clustered")
	}
	if name == b.NodeName() {
		return nil, errors.New("a node cannot forget itself; ask another node")
	}
	if _, ok := n.MemberID(name); !ok {
		return nil, fmt.Errorf("no node %q in the cluster", name)
	}
	if n.Alive(name) {
		return nil, fmt.Errorf("%w: node %s must be stopped before it can be removed", cluster.ErrMemberRunning, name)
	}
	changes := b.ShrinkQuorum(name)
	for _, ch := range changes {
		if ch.Err != nil {
			b.log.Warn().Err(ch.Err).Str("vhost", ch.VHost).Str("queue", ch.Name).Str("node", name).
				Msg("forget_cluster_node: failed to remove the node's member (replica) of the queue")
		} else {
			b.log.Info().Str("vhost", ch.VHost).Str("queue", ch.Name).Str("node", name).
				Msg("forget_cluster_node: removed the node's member (replica) of the queue")
		}
	}
	// Timed from here: each queue's change had a timeout of its own.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(b.cfg.Cluster.ChangeTimeout))
	defer cancel()
	return changes, n.Forget(ctx, name)
}
