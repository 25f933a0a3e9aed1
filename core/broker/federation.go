package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/federation"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// FederationLink is a federation link's status and the node that runs it.
type FederationLink struct {
	Node string
	federation.Status
}

// ClusterFederationLinks are the links every node runs, as RabbitMQ's
// /api/federation-links gathers them: this node's, and each member's
// that answers within ctx (one that does not is left out).
func (b *Broker) ClusterFederationLinks(ctx context.Context) []FederationLink {
	items, nodes := fromEveryNode(ctx, b, b.federation.Statuses(), callFederationLinks, "federation links")
	out := make([]FederationLink, len(items))
	for i, s := range items {
		out[i] = FederationLink{Node: nodes[i], Status: s}
	}
	return out
}

// RestartFederationLink restarts the link of that id in vhost on the
// named node (this one or a member); false when that node runs no such
// link or does not answer within ctx.
func (b *Broker) RestartFederationLink(ctx context.Context, vhost, id, node string) (bool, error) {
	if node == b.NodeName() {
		return b.federation.Restart(vhost, id), nil
	}
	n := b.cluster.Load()
	if n == nil {
		return false, nil
	}
	payload, err := json.Marshal([2]string{vhost, id})
	if err != nil {
		return false, err
	}
	answer, err := n.Call(ctx, node, append([]byte{callFederationRestart}, payload...))
	if err != nil {
		return false, nil
	}
	return string(answer) == "true", nil
}

func (b *Broker) answerFederationRestart(payload []byte) ([]byte, error) {
	var which [2]string
	if err := json.Unmarshal(payload, &which); err != nil {
		return nil, fmt.Errorf("a federation link restart call: %w", err)
	}
	return json.Marshal(b.federation.Restart(which[0], which[1]))
}

// Federation (core/federation): the components federation-upstream and
// federation-upstream-set, the exchange type x-federation-upstream that
// other brokers' links declare here, and the links this broker runs for
// its federated exchanges and queues (those a policy with
// federation-upstream, federation-upstream-set or
// federation-upstream-pattern applies to). One goroutine decides which
// links run, after any change of the parameters or of a vhost's
// topology (vhost.Config.Changed), and in a cluster every leaderLook:
// the links run on one node, as shovels do (shovels.go).

func (b *Broker) newFederation() error {
	b.federation = &federation.Manager{
		Log:         b.log.With().Str("component", "federation").Logger(),
		Local:       b.srv.DialLocal,
		ClusterName: b.ClusterName,
		Downstream:  downstream{b},
	}
	b.federationNudge = make(chan struct{}, 1)
	b.RegisterParameterComponent(federation.UpstreamComponent, upstreamComponent{b})
	b.RegisterParameterComponent(federation.SetComponent, setComponent{})
	return b.types.Register(federation.UpstreamExchangeType{})
}

// upstreamComponent checks federation-upstream parameters: RabbitMQ's
// checks, and, as for shovels, that whoever sets one may use the vhost a
// URI with no host names (such a link connects as the broker itself).
type upstreamComponent struct{ b *Broker }

func (c upstreamComponent) Check(vhost, name string, value any, user string) error {
	if err := federation.CheckUpstream(name, value); err != nil {
		return err
	}
	if user == "" {
		return nil
	}
	for _, s := range amqpclient.URIs(value.(protocol.Table)["uri"]) {
		u, _ := amqpclient.ParseURI(s)
		u = u.OrVHost(vhost)
		if _, ok := c.b.users.Permission(u.VHost(), user); u.Local() && !u.HasUser() && !ok {
			return fmt.Errorf("user %q may not connect to vhost %q", user, u.VHost())
		}
	}
	return nil
}

// setComponent checks federation-upstream-set parameters.
type setComponent struct{}

func (setComponent) Check(vhost, name string, value any, user string) error {
	return federation.CheckSet(name, value)
}

// topologyChanged is every vhost's Config.Changed: it wakes the
// federation goroutine, never blocking (it runs under vhost locks).
func (b *Broker) topologyChanged() {
	select {
	case b.federationNudge <- struct{}{}:
	default:
	}
}

func (b *Broker) startFederation() {
	b.WatchVHostParameters(b.topologyChanged)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		var look <-chan time.Time
		if b.cluster.Load() != nil {
			t := time.NewTicker(leaderLook)
			defer t.Stop()
			look = t.C
		}
		for {
			select {
			case <-b.stop:
				return
			case <-b.federationNudge:
			case <-look:
			}
			specs := b.federationLinks()
			b.nameClusterForFederation(len(specs) > 0)
			b.federation.Sync(specs)
		}
	}()
}

// federationLinks are the links this node runs: every federated exchange
// and queue's, to each of its upstreams, on a node of its own or the
// metadata group's leader; none on another member.
func (b *Broker) federationLinks() []federation.Spec {
	if n := b.cluster.Load(); n != nil && !n.IsLeader() {
		return nil
	}
	var specs []federation.Spec
	for _, name := range b.VHosts() {
		v, ok := b.VHost(name)
		if !ok {
			continue
		}
		exchanges, queues := v.PolicyTargets(federation.Federates)
		if len(exchanges) == 0 && len(queues) == 0 {
			continue
		}
		params := federation.Params{Upstreams: map[string]protocol.Table{}, Sets: map[string][]any{}}
		for _, p := range b.VHostParameters(name, federation.UpstreamComponent) {
			if t, ok := p.Value.(protocol.Table); ok {
				params.Upstreams[p.Name] = t
			}
		}
		for _, p := range b.VHostParameters(name, federation.SetComponent) {
			if l, ok := p.Value.([]any); ok {
				params.Sets[p.Name] = l
			}
		}
		for _, kind := range []struct {
			typ     string
			targets []vhost.PolicyTarget
		}{{federation.ExchangeLink, exchanges}, {federation.QueueLink, queues}} {
			for _, t := range kind.targets {
				for _, u := range params.For(t.Policy.Definition) {
					specs = append(specs, federation.Spec{Type: kind.typ, VHost: name, Name: t.Name, Policy: t.Policy.Name, Upstream: u})
				}
			}
		}
	}
	return specs
}

// nameClusterForFederation gives a cluster whose operator named it not
// the name of the node that first runs its links: links name their queues
// upstream after the cluster, and a member that took them over under
// its own node name would start new ones, leaving what waits in the old
// ones behind. (RabbitMQ's default name is each node's own.)
func (b *Broker) nameClusterForFederation(links bool) {
	if !links || b.cluster.Load() == nil || b.clusterName.Load() != nil {
		return
	}
	if err := b.SetClusterName(b.NodeName()); err != nil {
		b.log.Warn().Err(err).Msg("could not name the cluster for its federation links")
	}
}

// downstream is the broker's topology as federation links read it.
type downstream struct{ b *Broker }

func (d downstream) Exchange(vh, name string) (exchange.Definition, bool) {
	v, ok := d.b.VHost(vh)
	if !ok {
		return exchange.Definition{}, false
	}
	x, err := v.Exchange(name)
	if err != nil {
		return exchange.Definition{}, false
	}
	return x.Definition, true
}

func (d downstream) Bindings(vh, name string) []federation.Binding {
	v, ok := d.b.VHost(vh)
	if !ok {
		return nil
	}
	var out []federation.Binding
	for _, bi := range v.BindingsFrom(name) {
		out = append(out, federation.Binding{Key: bi.Key, Args: bi.Args})
	}
	return out
}

func (d downstream) Queue(vh, name string) (federation.QueueState, bool) {
	v, ok := d.b.VHost(vh)
	if !ok {
		return federation.QueueState{}, false
	}
	info, ok := v.QueueInfo(name)
	if !ok {
		return federation.QueueState{}, false
	}
	return federation.QueueState{Durable: info.Durable, AutoDelete: info.AutoDelete, Args: info.Args,
		Ready: info.Ready, Consumers: info.Consumers, MaxPriority: info.MaxPriority}, true
}
