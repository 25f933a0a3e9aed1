package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Broker-wide definitions (users, permissions, vhosts, policies, the
// cluster name) change through change: on a node of its own a change is
// applied at once, as it always was; in a cluster it is a command of the
// metadata Raft group, applied on every node in the same order and
// answered once this node has applied it. The command is an AMQP field
// table with an "op"; applyChange is the one place that carries it out,
// so a node of its own and a cluster member run the same code.
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
	opAddVHost        = "add_vhost"
	opDeleteVHost     = "delete_vhost"
	opSetPolicy       = "set_policy"
	opClearPolicy     = "clear_policy"
	opSetClusterName  = "set_cluster_name"
	opSync            = "sync" // changes nothing (proposed by earlier versions' Sync)
)

// errNoQuorum is what a change the cluster could not commit answers.
type errNoQuorum struct{ timeout time.Duration }

func (e errNoQuorum) Error() string {
	return fmt.Sprintf("the change was not made: this node could not reach a majority of the cluster's nodes within %v", e.timeout)
}

func (e errNoQuorum) Unwrap() error { return cluster.ErrNoQuorum }

// change makes a definitions change: at once on a node of its own,
// through the metadata group in a cluster.
func (b *Broker) change(cmd protocol.Table) error {
	if b.cluster.Load() == nil {
		return b.applyChange(cmd)
	}
	return b.propose(cmd)
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

// applyChange carries out one command.
func (b *Broker) applyChange(cmd protocol.Table) error {
	str := func(k string) string { s, _ := cmd[k].(string); return s }
	switch op := str("op"); op {
	case opPutUser:
		return b.applyPutUser(userFromRecord(str("name"), cmd))
	case opDeleteUser:
		return b.applyDeleteUser(str("name"))
	case opSetPermission:
		return b.applySetPermission(str("vhost"), str("user"), str("configure"), str("write"), str("read"))
	case opClearPermission:
		return b.applyClearPermission(str("vhost"), str("user"))
	case opAddVHost:
		_, err := b.applyAddVHost(str("name"))
		return err
	case opDeleteVHost:
		return b.applyDeleteVHost(str("name"))
	case opSetPolicy:
		prio, _ := cmd["priority"].(int64)
		def, _ := cmd["definition"].(protocol.Table)
		return b.applySetPolicy(str("vhost"), str("name"), str("pattern"), policy.ApplyTo(str("apply_to")), int(prio), def)
	case opClearPolicy:
		return b.applyClearPolicy(str("vhost"), str("name"))
	case opSetClusterName:
		return b.applySetClusterName(str("name"))
	case opSync:
		return nil
	case opEnablePlugin, opDisablePlugin:
		b.plugins.follow(pluginChange{name: str("name"), enable: op == opEnablePlugin})
		return nil
	case opConfigurePlugin:
		settings, _ := cmd["settings"].(protocol.Table)
		if settings == nil {
			settings = protocol.Table{}
		}
		b.plugins.follow(pluginChange{name: str("name"), settings: map[string]any(settings)})
		return nil
	default:
		if vhost.IsCommand(op) {
			v, ok := b.VHost(str("vhost"))
			if !ok {
				return reply.NotFound("no vhost '%s'", str("vhost"))
			}
			return v.Apply(cmd)
		}
		return reply.Internal("unknown definitions change %q (a node of a newer version?)", op)
	}
}

// userFromRecord reads a user as userRecord writes it.
func userFromRecord(name string, rec protocol.Table) *auth.User {
	tags := []string{}
	if list, ok := rec["tags"].([]any); ok {
		for _, t := range list {
			if s, ok := t.(string); ok {
				tags = append(tags, s)
			}
		}
	}
	hash, _ := rec["password_hash"].(string)
	// Stores written before Warren recorded the algorithm hold SHA-256
	// hashes only: the zero Hashing means that.
	alg, _ := rec["hashing_algorithm"].(string)
	return &auth.User{Name: name, PasswordHash: hash, Hashing: auth.Hashing(alg), Tags: tags}
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

// Snapshot is every broker-wide definition, as one field table.
func (m metaState) Snapshot() ([]byte, error) {
	b := m.b
	var users, perms, vhosts, pols []any
	topology := protocol.Table{}
	for _, u := range b.users.Users() {
		rec := userRecord(u)
		rec["name"] = u.Name
		users = append(users, rec)
	}
	for _, p := range b.users.Permissions() {
		rec := permissionRecord(p.Permission)
		rec["vhost"], rec["user"] = p.VHost, p.User
		perms = append(perms, rec)
	}
	for _, name := range b.VHosts() {
		vhosts = append(vhosts, name)
		if v, ok := b.VHost(name); ok {
			for _, p := range v.Policies() {
				pols = append(pols, policyCommand(name, p))
			}
			topology[name] = v.Topology()
		}
	}
	var enabled []any
	for _, name := range b.storedPlugins() {
		enabled = append(enabled, name)
	}
	snap := protocol.Table{"users": users, "permissions": perms, "vhosts": vhosts, "policies": pols, "topology": topology,
		"plugins": enabled}
	if n := b.clusterName.Load(); n != nil {
		snap["cluster_name"] = *n
	}
	return protocol.AppendTable(nil, snap)
}

// Restore makes the broker's definitions a snapshot's: what the snapshot
// has is put, what it lacks is deleted.
func (m metaState) Restore(index uint64, data []byte) error {
	b := m.b
	b.applyMu.Lock()
	defer b.applyMu.Unlock()
	if b.applyClosed {
		return cluster.ErrStopped
	}
	snap, _, err := protocol.DecodeTable(data)
	if err != nil {
		return err
	}
	list := func(k string) []protocol.Table {
		var out []protocol.Table
		items, _ := snap[k].([]any)
		for _, it := range items {
			if t, ok := it.(protocol.Table); ok {
				out = append(out, t)
			}
		}
		return out
	}
	keepVHosts := map[string]bool{}
	if names, ok := snap["vhosts"].([]any); ok {
		for _, n := range names {
			if s, ok := n.(string); ok {
				keepVHosts[s] = true
				if _, err := b.applyAddVHost(s); err != nil {
					return err
				}
			}
		}
	}
	for _, name := range b.VHosts() {
		if !keepVHosts[name] {
			if err := b.applyDeleteVHost(name); err != nil {
				return err
			}
		}
	}
	keepUsers := map[string]bool{}
	for _, u := range list("users") {
		name, _ := u["name"].(string)
		keepUsers[name] = true
		if err := b.applyPutUser(userFromRecord(name, u)); err != nil {
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
	for _, p := range list("permissions") {
		str := func(k string) string { s, _ := p[k].(string); return s }
		keepPerms[[2]string{str("vhost"), str("user")}] = true
		if err := b.applySetPermission(str("vhost"), str("user"), str("configure"), str("write"), str("read")); err != nil {
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
	keepPols := map[[2]string]bool{}
	for _, p := range list("policies") {
		vh, _ := p["vhost"].(string)
		name, _ := p["name"].(string)
		keepPols[[2]string{vh, name}] = true
		if err := b.applyChange(p); err != nil {
			return err
		}
	}
	for _, vh := range b.VHosts() {
		if v, ok := b.VHost(vh); ok {
			for _, p := range v.Policies() {
				if !keepPols[[2]string{vh, p.Name}] {
					if err := b.applyClearPolicy(vh, p.Name); err != nil {
						return err
					}
				}
			}
		}
	}
	if names, ok := snap["plugins"].([]any); ok {
		keep := map[string]bool{}
		for _, n := range names {
			if s, ok := n.(string); ok {
				keep[s] = true
				b.plugins.follow(pluginChange{name: s, enable: true})
			}
		}
		for _, name := range b.storedPlugins() {
			if !keep[name] {
				b.plugins.follow(pluginChange{name: name})
			}
		}
	}
	topology, _ := snap["topology"].(protocol.Table)
	for _, vh := range b.VHosts() {
		if v, ok := b.VHost(vh); ok {
			t, _ := topology[vh].(protocol.Table)
			if err := v.RestoreTopology(t); err != nil {
				b.log.Warn().Err(err).Str("vhost", vh).Msg("part of a snapshot's topology could not be restored")
			}
		}
	}
	if name, ok := snap["cluster_name"].(string); ok && name != "" {
		if err := b.applySetClusterName(name); err != nil {
			return err
		}
	}
	m.log.SetApplied(index)
	return nil
}

// policyCommand is the set_policy command for p in vhost.
func policyCommand(vhost string, p *policy.Policy) protocol.Table {
	return protocol.Table{"op": opSetPolicy, "vhost": vhost, "name": p.Name, "pattern": p.Pattern,
		"apply_to": string(p.ApplyTo), "priority": int64(p.Priority), "definition": p.Definition}
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
