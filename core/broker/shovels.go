package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/shovel"
	"github.com/warrenmq/warren/protocol"
)

// Dynamic shovels (core/shovel) are parameters of component shovel;
// static ones are broker.toml's [[shovels]], run by the node whose file
// names them, from its start. One node runs the dynamic ones: a node of its own, or the metadata group's leader
// in a cluster, so that a shovel moves to another node when its node
// goes (the group elects another leader, whose next look starts them).
// A node that stops leading stops its shovels at its next look; for that
// second two nodes may both run a shovel, which under on-confirm can
// reorder messages but not lose them (each message is delivered to one
// of the two consumers, and acked at the source only once confirmed).

// leaderLook is how often a cluster member asks whether it leads.
const leaderLook = time.Second

func (b *Broker) newShovels() {
	b.shovels = &shovel.Manager{
		Log:         b.log.With().Str("component", "shovel").Logger(),
		Local:       b.srv.DialLocal,
		ClusterName: b.ClusterName,
		Clear: func(vhost, name string) error {
			return b.ClearVHostParameter(vhost, shovel.Component, name)
		},
		Lookup: func(vhost, name string) (protocol.Table, bool) {
			p, ok := b.LookupVHostParameter(vhost, shovel.Component, name)
			t, _ := p.Value.(protocol.Table)
			return t, ok
		},
		MayUseVHost: func(user, vhost string) bool {
			_, ok := b.users.Permission(vhost, user)
			return ok
		},
	}
	b.RegisterParameterComponent(shovel.Component, b.shovels)
}

// staticShovels reads broker.toml's [[shovels]] as the shovel package
// takes them, checking each definition: one it refuses stops start-up
// with an error naming the shovel and the key.
func staticShovels(cfg config.Config) ([]shovel.Param, error) {
	var out []shovel.Param
	for _, sh := range cfg.Shovels {
		vh := sh.VHost
		if vh == "" {
			vh = "/"
		}
		value, _ := tomlValue(sh.Definition).(protocol.Table)
		if _, err := shovel.Parse(value); err != nil {
			return nil, fmt.Errorf("shovels: %q: %s", sh.Name, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		out = append(out, shovel.Param{VHost: vh, Name: sh.Name, Value: value})
	}
	return out, nil
}

// tomlValue is a TOML value as a field table holds it.
func tomlValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		t := protocol.Table{}
		for k, e := range x {
			t[k] = tomlValue(e)
		}
		return t
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tomlValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tomlValue(e)
		}
		return out
	case int64, float64, bool, string:
		return x
	}
	return fmt.Sprint(v)
}

// Shovels is the node's shovel manager.
func (b *Broker) Shovels() *shovel.Manager { return b.shovels }

// startShovels runs the shovels once the broker serves, from one
// goroutine (so that one Sync at a time decides): on every change of the
// parameters, and in a cluster every leaderLook.
func (b *Broker) startShovels() {
	statics, _ := staticShovels(b.cfg) // checked by New
	if err := b.shovels.StartStatic(statics); err != nil {
		b.log.Error().Err(err).Msg("static shovels not started")
	}
	nudge := make(chan struct{}, 1)
	b.WatchVHostParameters(func() {
		select {
		case nudge <- struct{}{}:
		default:
		}
	})
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer b.shovels.Stop()
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
			case <-nudge:
			case <-look:
			}
			b.syncShovels()
		}
	}()
}

func (b *Broker) syncShovels() {
	var params []shovel.Param
	for _, p := range b.VHostParameters("", shovel.Component) {
		t, _ := p.Value.(protocol.Table) // checked when set
		params = append(params, shovel.Param{VHost: p.VHost, Name: p.Name, Value: t})
	}
	n := b.cluster.Load()
	b.shovels.Sync(params, n == nil || n.IsLeader())
}

// ShovelStatus is a shovel's status and the node that runs it.
type ShovelStatus struct {
	Node string
	shovel.Status
}

// ClusterShovels are the shovels every node runs, as RabbitMQ's
// /api/shovels gathers them from each node: this node's, and each
// member's that answers within ctx (one that does not is left out).
func (b *Broker) ClusterShovels(ctx context.Context) []ShovelStatus {
	items, nodes := fromEveryNode(ctx, b, b.shovels.Statuses(), callShovels, "shovels")
	out := make([]ShovelStatus, len(items))
	for i, s := range items {
		out[i] = ShovelStatus{Node: nodes[i], Status: s}
	}
	return out
}

// RestartShovel restarts a shovel on the node that runs it; false when
// no node that answers within ctx runs it.
func (b *Broker) RestartShovel(ctx context.Context, vhost, name string) (bool, error) {
	if b.shovels.Restart(vhost, name) {
		return true, nil
	}
	return askOthers(ctx, b, callShovelRestart, [2]string{vhost, name})
}

func (b *Broker) answerShovelRestart(payload []byte) ([]byte, error) {
	var which [2]string
	if err := json.Unmarshal(payload, &which); err != nil {
		return nil, fmt.Errorf("a shovel restart call: %w", err)
	}
	return json.Marshal(b.shovels.Restart(which[0], which[1]))
}
