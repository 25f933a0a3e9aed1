package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Broker-wide definitions (users, permissions, vhosts, policies, the
// cluster name, parameters) change through change: on a node of its own a change is
// applied at once, as it always was; in a cluster it is a command of the
// metadata Raft group, applied on every node in the same order and
// answered once this node has applied it. The command is a
// definitionsChange (records.go, carried as a versioned field table with
// an "op"); carryOut is the one place that carries it out, so a node of
// its own and a cluster member run the same code.
//
// What a command does depends only on the command and the state before
// it (the same on every node), so every node gives the same answer: a
// permission for a vhost that does not exist is 404 wherever it lands.
// Checks that need no state (an empty name, a bad regular expression) run
// before proposing, so a bad request costs no round of consensus.
//
// Commands are idempotent (put, set, add, delete of what is gone is a
// 404 and no change): after a crash the node applies again those whose
// applied index did not reach the disk (storage.RaftLog.SetApplied).

// metaGroup is the metadata Raft group's id in the store.
const metaGroup = 0

// The commands' ops.
const (
	opPutUser         = "put_user"
	opDeleteUser      = "delete_user"
	opSetPermission   = "set_permission"
	opClearPermission = "clear_permission"
	// set_topic_permission and clear_topic_permission: a node of an
	// earlier release refuses them by name (readChange).
	opSetTopicPermission   = "set_topic_permission"
	opClearTopicPermission = "clear_topic_permission"
	opAddVHost             = "add_vhost"
	opSetVHostLimits       = "set_vhost_limits"
	opSetVHostMetadata     = "set_vhost_metadata"
	opDeleteVHost          = "delete_vhost"
	opSetPolicy            = "set_policy"
	opClearPolicy          = "clear_policy"
	opSetOperatorPolicy    = "set_operator_policy"
	opClearOperatorPolicy  = "clear_operator_policy"
	opSetClusterName       = "set_cluster_name"
	opSetGlobalParameter   = "set_global_parameter"
	opClearGlobalParameter = "clear_global_parameter"
	opSync                 = "sync" // changes nothing (proposed by earlier versions' Sync)

	// set_vhost_parameter and clear_vhost_parameter: a node of an
	// earlier release refuses them by name (readChange).
	opSetVHostParameter   = "set_vhost_parameter"
	opClearVHostParameter = "clear_vhost_parameter"
)

// errNoQuorum is what a change the cluster could not commit answers.
type errNoQuorum struct{ timeout time.Duration }

func (e errNoQuorum) Error() string {
	return fmt.Sprintf("the change was not made: this node could not reach a majority of the cluster's nodes within %v", e.timeout)
}

func (e errNoQuorum) Unwrap() error { return cluster.ErrNoQuorum }

// change makes a definitions change: at once on a node of its own,
// through the metadata group in a cluster.
func (b *Broker) change(c definitionsChange) error {
	if b.cluster.Load() == nil {
		return b.carryOut(c)
	}
	return b.propose(changeTable(c))
}

// propose makes a change through the metadata group and returns this
// node's result of applying it.
func (b *Broker) propose(cmd protocol.Table) error {
	timeout := time.Duration(b.cfg.Cluster.ChangeTimeout)
	n := b.cluster.Load()
	if n == nil {
		return errNoQuorum{timeout}
	}
	data, err := protocol.AppendTable(nil, cmd)
	if err != nil {
		return reply.Internal("could not encode the change: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = n.Propose(ctx, data)
	if errors.Is(err, cluster.ErrNoQuorum) {
		return errNoQuorum{timeout}
	}
	return err
}

// applyChange carries out one command as the metadata group carries it.
func (b *Broker) applyChange(cmd protocol.Table) error {
	c, err := readChange(cmd)
	if err != nil {
		return err
	}
	return b.carryOut(c)
}

// carryOut carries out one change.
func (b *Broker) carryOut(c definitionsChange) error {
	switch c := c.(type) {
	case putUser:
		return b.applyPutUser(c.User.user(""))
	case deleteUser:
		return b.applyDeleteUser(c.Name)
	case setPermission:
		p := c.Permission
		return b.applySetPermission(p.VHost, p.User, p.Configure, p.Write, p.Read)
	case clearPermission:
		return b.applyClearPermission(c.VHost, c.User)
	case setTopicPermission:
		p := c.Permission
		return b.applySetTopicPermission(p.VHost, p.User, p.Exchange, p.Write, p.Read)
	case clearTopicPermission:
		return b.applyClearTopicPermission(c.VHost, c.User, c.Exchange)
	case addVHost:
		_, err := b.applyAddVHost(c.Name)
		return err
	case setVHostLimits:
		return b.applySetVHostLimits(c.VHost, c.Limits)
	case setVHostMetadata:
		return b.applySetVHostMetadata(c.VHost, topology.Metadata{Description: c.Description, Tags: c.Tags})
	case deleteVHost:
		return b.applyDeleteVHost(c.Name)
	case setPolicy:
		return b.applySetPolicy(c)
	case clearPolicy:
		return b.applyClearPolicy(c)
	case setClusterName:
		return b.applySetClusterName(c.Name)
	case setGlobalParameter:
		return b.applySetGlobalParameter(c.Name, c.Value)
	case clearGlobalParameter:
		return b.applyClearGlobalParameter(c.Name)
	case setVHostParameter:
		return b.applySetVHostParameter(c.Param)
	case clearVHostParameter:
		return b.applyClearVHostParameter(c.VHost, c.Component, c.Name)
	case syncChange:
		return nil
	case enablePlugin:
		b.plugins.follow(pluginChange{name: c.Name, enable: true})
		return nil
	case disablePlugin:
		b.plugins.follow(pluginChange{name: c.Name})
		return nil
	case configurePlugin:
		b.plugins.follow(pluginChange{name: c.Name, settings: map[string]any(nonNil(c.Settings))})
		return nil
	case topologyChange:
		v, ok := b.VHost(c.VHost)
		if !ok {
			return reply.NotFound("no vhost '%s'", c.VHost)
		}
		return v.ApplyCommand(c.Command)
	}
	return reply.Internal("definitions change %T not carried out", c)
}

// metaState is the metadata group's state machine: the broker's
// definitions, with the applied index kept beside the group's log.
type metaState struct {
	b   *Broker
	log *storage.RaftLog
}

func (m metaState) Apply(index uint64, cmd []byte) error {
	m.b.applyMu.Lock()
	defer m.b.applyMu.Unlock()
	if m.b.applyClosed {
		return cluster.ErrStopped
	}
	var err error
	if cmd != nil {
		var t protocol.Table
		if t, _, err = protocol.DecodeTable(cmd); err == nil {
			err = m.b.applyChange(t)
			// A refusal (404, 406) is the same on every node; a failure
			// of this node's own (its store) is not, and leaves it behind
			// the others until it is restarted from a snapshot: say so.
			if e := reply.As(err); e != nil && e.Code == protocol.InternalError {
				m.b.log.Error().Err(err).Uint64("index", index).Str("op", fmt.Sprint(t["op"])).
					Msg("a replicated definitions change failed on this node only; its definitions differ from the cluster's")
			}
		} else {
			err = reply.Internal("undecodable definitions change at %d: %v", index, err)
		}
	}
	m.log.SetApplied(index)
	return err
}

func (m metaState) Applied() uint64 { return m.log.Applied() }

// Snapshot is every broker-wide definition, as one field table
// (metaSnapshot).
func (m metaState) Snapshot() ([]byte, error) {
	b := m.b
	snap := metaSnapshot{Topology: map[string]protocol.Table{}, Plugins: b.storedPlugins()}
	for _, u := range b.users.Users() {
		snap.Users = append(snap.Users, userRecordOf(u))
	}
	for _, p := range b.users.Permissions() {
		snap.Permissions = append(snap.Permissions, permissionRecord{VHost: p.VHost, User: p.User,
			Configure: p.Permission.Configure, Write: p.Permission.Write, Read: p.Permission.Read})
	}
	for _, p := range b.users.TopicPermissions() {
		snap.TopicPermissions = append(snap.TopicPermissions, topicPermissionRecordOf(p))
	}
	for _, name := range b.VHosts() {
		snap.VHosts = append(snap.VHosts, name)
		if v, ok := b.VHost(name); ok {
			for _, p := range append(v.Policies(), v.OperatorPolicies()...) {
				snap.Policies = append(snap.Policies, policyChange(name, p))
			}
			snap.Topology[name] = v.Topology().Table()
		}
	}
	if n := b.clusterName.Load(); n != nil {
		snap.ClusterName = *n
	}
	snap.GlobalParameters = b.GlobalParameters()
	for _, p := range b.VHostParameters("", "") {
		snap.VHostParameters = append(snap.VHostParameters, vhostParameterRecord{VHost: p.VHost, Component: p.Component, Name: p.Name, Value: p.Value})
	}
	for _, name := range snap.VHosts {
		if v, ok := b.VHost(name); ok {
			if l := v.Limits(); len(l) > 0 {
				if snap.VHostLimits == nil {
					snap.VHostLimits = map[string]topology.Limits{}
				}
				snap.VHostLimits[name] = l
			}
			if m := v.Metadata(); m.Description != "" || len(m.Tags) > 0 {
				if snap.VHostMeta == nil {
					snap.VHostMeta = map[string]topology.Metadata{}
				}
				snap.VHostMeta[name] = m
			}
		}
	}
	return protocol.AppendTable(nil, snap.Table())
}

// Restore makes the broker's definitions a snapshot's: what the snapshot
// has is put, what it lacks is deleted. A snapshot it cannot read changes
// nothing.
func (m metaState) Restore(index uint64, data []byte) error {
	b := m.b
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	if b.applyClosed {
		return cluster.ErrStopped
	}
	t, _, err := protocol.DecodeTable(data)
	if err != nil {
		return err
	}
	snap, err := readMetaSnapshot(t)
	if err != nil {
		return err
	}
	keepVHosts := map[string]bool{}
	for _, name := range snap.VHosts {
		keepVHosts[name] = true
		if _, err := b.applyAddVHost(name); err != nil {
			return err
		}
	}
	for _, name := range b.VHosts() {
		if !keepVHosts[name] {
			if err := b.applyDeleteVHost(name); err != nil {
				return err
			}
		}
	}
	for _, name := range snap.VHosts {
		v, ok := b.VHost(name)
		if !ok {
			continue
		}
		if !maps.Equal(v.Limits(), snap.VHostLimits[name]) {
			if err := b.applySetVHostLimits(name, snap.VHostLimits[name]); err != nil {
				return err
			}
		}
		if m := v.Metadata(); m.Description != snap.VHostMeta[name].Description || !slices.Equal(m.Tags, snap.VHostMeta[name].Tags) {
			if err := b.applySetVHostMetadata(name, snap.VHostMeta[name]); err != nil {
				return err
			}
		}
	}
	keepUsers := map[string]bool{}
	for _, u := range snap.Users {
		keepUsers[u.Name] = true
		if err := b.applyPutUser(u.user("")); err != nil {
			return err
		}
	}
	for _, u := range b.users.Users() {
		if !keepUsers[u.Name] {
			if err := b.applyDeleteUser(u.Name); err != nil {
				return err
			}
		}
	}
	keepPerms := map[[2]string]bool{}
	for _, p := range snap.Permissions {
		keepPerms[[2]string{p.VHost, p.User}] = true
		if err := b.applySetPermission(p.VHost, p.User, p.Configure, p.Write, p.Read); err != nil {
			return err
		}
	}
	for _, p := range b.users.Permissions() {
		if !keepPerms[[2]string{p.VHost, p.User}] {
			if err := b.applyClearPermission(p.VHost, p.User); err != nil {
				return err
			}
		}
	}
	keepTopics := map[[3]string]bool{}
	for _, p := range snap.TopicPermissions {
		keepTopics[[3]string{p.VHost, p.User, p.Exchange}] = true
		if err := b.applySetTopicPermission(p.VHost, p.User, p.Exchange, p.Write, p.Read); err != nil {
			return err
		}
	}
	for _, p := range b.users.TopicPermissions() {
		if !keepTopics[[3]string{p.VHost, p.User, p.Exchange}] {
			if err := b.applyClearTopicPermission(p.VHost, p.User, p.Exchange); err != nil {
				return err
			}
		}
	}
	keepPols := map[clearPolicy]bool{}
	for _, p := range snap.Policies {
		keepPols[clearPolicy{VHost: p.VHost, Name: p.Name, Operator: p.Operator}] = true
		if err := b.carryOut(p); err != nil {
			return err
		}
	}
	for _, vh := range b.VHosts() {
		if v, ok := b.VHost(vh); ok {
			for _, p := range append(v.Policies(), v.OperatorPolicies()...) {
				if c := (clearPolicy{VHost: vh, Name: p.Name, Operator: p.Operator}); !keepPols[c] {
					if err := b.applyClearPolicy(c); err != nil {
						return err
					}
				}
			}
		}
	}
	keepParams := map[vparamKey]bool{}
	for _, p := range snap.VHostParameters {
		keepParams[vparamKey{p.VHost, p.Component, p.Name}] = true
		if err := b.applySetVHostParameter(p); err != nil {
			return err
		}
	}
	for _, p := range b.VHostParameters("", "") {
		if !keepParams[vparamKey{p.VHost, p.Component, p.Name}] {
			if err := b.applyClearVHostParameter(p.VHost, p.Component, p.Name); err != nil {
				return err
			}
		}
	}
	if snap.Plugins != nil {
		keep := map[string]bool{}
		for _, name := range snap.Plugins {
			keep[name] = true
			b.plugins.follow(pluginChange{name: name, enable: true})
		}
		for _, name := range b.storedPlugins() {
			if !keep[name] {
				b.plugins.follow(pluginChange{name: name})
			}
		}
	}
	for _, vh := range b.VHosts() {
		if v, ok := b.VHost(vh); ok {
			s, err := topology.ReadSnapshot(vh, snap.Topology[vh])
			if err == nil {
				err = v.RestoreTopology(s)
			}
			if err != nil {
				b.log.Warn().Err(err).Str("vhost", vh).Msg("part of a snapshot's topology could not be restored")
			}
		}
	}
	if snap.ClusterName != "" {
		if err := b.applySetClusterName(snap.ClusterName); err != nil {
			return err
		}
	}
	for name, value := range snap.GlobalParameters {
		if err := b.applySetGlobalParameter(name, value); err != nil {
			return err
		}
	}
	for name := range b.GlobalParameters() {
		if _, keep := snap.GlobalParameters[name]; !keep {
			if err := b.applyClearGlobalParameter(name); err != nil {
				return err
			}
		}
	}
	m.log.SetApplied(index)
	return nil
}

// startCluster joins the metadata group when broker.toml has a [cluster]
// section: after the store is restored (the state machine's state is the
// store's metadata), before clients are served. A node waits up to
// cluster.change_timeout for the cluster to take it in and for a leader,
// so that it takes changes as soon as it serves; past that it starts
// anyway (it cannot make changes yet) and keeps trying.
func (b *Broker) startCluster(seeds []string) error {
	cc := b.cfg.Cluster
	if !cc.Enabled() {
		return nil
	}
	log, err := b.store.RaftLog(metaGroup)
	if err != nil {
		return err
	}
	var tlsConfig *tls.Config
	if cc.TLS {
		cert, err := tls.LoadX509KeyPair(b.cfg.AMQPS.CertFile, b.cfg.AMQPS.KeyFile)
		if err != nil {
			return fmt.Errorf("cluster.tls: loading %s and %s: %w", b.cfg.AMQPS.CertFile, b.cfg.AMQPS.KeyFile, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	n, err := cluster.Start(cluster.Config{
		Name: cc.NodeName, ID: b.store.NodeID(), Listen: cc.Listen, Advertise: cc.Advertise, Seeds: seeds, Secret: []byte(cc.Secret), TLS: tlsConfig,
		Log: log, State: metaState{b: b, log: log}, Logger: b.log, OnCall: b.handleCall, Groups: b.groups.Load(),
	})
	if err != nil {
		return err
	}
	b.cluster.Store(n)
	for _, name := range b.VHosts() {
		if v, ok := b.VHost(name); ok {
			v.DropLost()
		}
	}
	b.wg.Add(1)
	go b.watchConsumers(n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cc.ChangeTimeout))
	defer cancel()
	err = n.WaitJoined(ctx)
	if err == nil {
		err = n.WaitLeader(ctx)
	}
	if err != nil {
		b.log.Warn().Err(err).Strs("seeds", seeds).Msg("not a member of the cluster yet; still trying")
	} else {
		b.log.Info().Str("node", cc.NodeName).Str("listen", n.Addr()).Msg("cluster member")
	}
	return nil
}

// watchConsumers ends, every second, the consumers other nodes had on
// this node's queues once those nodes cannot be reached, so that their
// unacked messages go back; and tells each other node, once, that this
// one has none of the consumers its previous run had there.
func (b *Broker) watchConsumers(n *cluster.Node) {
	defer b.wg.Done()
	self := b.cfg.Cluster.NodeName
	forgotten := map[string]bool{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		if b.cluster.Load() != n {
			return
		}
		link := topologyLink{b: b}
		for _, m := range n.Members() {
			if m.Name == self || forgotten[m.Name] || !n.Alive(m.Name) {
				continue
			}
			ok := true
			for _, name := range b.VHosts() {
				v, found := b.VHost(name)
				if !found {
					continue
				}
				req := protocol.Table{"op": "consumers.forget", "vhost": name, "from": self, "before": int64(v.SourceBase())}
				if _, err := link.Call(m.Name, req); err != nil {
					ok = false
				}
			}
			forgotten[m.Name] = ok
		}
		for _, name := range b.VHosts() {
			if v, ok := b.VHost(name); ok {
				v.CheckConsumers()
				v.CheckMembers()
			}
		}
	}
}

func (b *Broker) stopCluster() {
	if n := b.cluster.Swap(nil); n != nil {
		n.Stop()
	}
}

// CatchUp waits, in a cluster, until this node has applied what the
// leader had committed (a read index); it reports whether it did, so that
// a lookup that missed may look again. On a node of its own it does
// nothing and reports false.
func (b *Broker) CatchUp() bool {
	n := b.cluster.Load()
	if n == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(b.cfg.Cluster.ChangeTimeout))
	defer cancel()
	return n.Barrier(ctx) == nil
}

// Cluster is this node's member of the metadata group, nil on a node of
// its own (or while it is joining another cluster).
func (b *Broker) Cluster() *cluster.Node { return b.cluster.Load() }
