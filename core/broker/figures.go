package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/warrenmq/warren/core/conn"
)

// NodeFigures is what /api/nodes shows of a node: its status, uptime,
// client connections and enabled plugins.
type NodeFigures struct {
	NodeStatus
	UptimeMS       int64
	Sockets        int
	EnabledPlugins []string
}

// Figures are this node's figures now.
func (b *Broker) Figures() NodeFigures {
	return NodeFigures{NodeStatus: b.Status(), UptimeMS: b.Uptime().Milliseconds(),
		Sockets: len(b.srv.Connections()), EnabledPlugins: b.EnabledPlugins()}
}

// The calls a node answers for the others (cluster.Node.Call); the first
// byte of a call names it.
const (
	callFigures byte = 1
	callMemory  byte = 4 // after callTopology and callDeliver (topology.go)
	callClients byte = 5
	callStream  byte = 6 // the stream protocol's advertised host and port (streams.go)
	callSAC     byte = 7 // a single-active-consumer message (streams.go)
	// callShovels asks for the shovels a node runs, callShovelRestart
	// restarts one there (shovels.go).
	callShovels       byte = 8
	callShovelRestart byte = 9
	// callFederationLinks asks for the federation links a node runs,
	// callFederationRestart restarts one there (federation.go).
	callFederationLinks   byte = 10
	callFederationRestart byte = 11
)

// MemberFigures asks a cluster member for its figures, as RabbitMQ's
// management API asks each node; this node's own need no call.
func (b *Broker) MemberFigures(ctx context.Context, name string) (NodeFigures, error) {
	if name == b.NodeName() {
		return b.Figures(), nil
	}
	return askMember[NodeFigures](ctx, b, name, callFigures, "figures")
}

// ClusterClientCounts are the client connections, channels and consumers
// open on every node of the cluster, by node, user and vhost, as
// RabbitMQ's overview counts them: this node's, and each member's that
// answers within ctx (one that does not is left out, and named in down).
func (b *Broker) ClusterClientCounts(ctx context.Context) (counts []conn.ClientCount, down []string) {
	counts = b.srv.ClientCounts()
	n := b.cluster.Load()
	if n == nil {
		return counts, nil
	}
	var others []string
	for _, m := range n.Members() {
		if m.Name != b.NodeName() {
			others = append(others, m.Name)
		}
	}
	answers := make([][]conn.ClientCount, len(others))
	failed := make([]bool, len(others))
	var wg sync.WaitGroup
	for i, name := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			answers[i], err = askMember[[]conn.ClientCount](ctx, b, name, callClients, "client counts")
			failed[i] = err != nil
		}()
	}
	wg.Wait()
	for i, name := range others {
		if failed[i] {
			down = append(down, name)
		}
		counts = append(counts, answers[i]...)
	}
	return counts, down
}

// askMember makes call of the member named name and decodes its JSON
// answer; what names the answer in an error.
func askMember[T any](ctx context.Context, b *Broker, name string, call byte, what string) (T, error) {
	var v T
	n := b.cluster.Load()
	if n == nil {
		return v, fmt.Errorf("no node %q", name)
	}
	answer, err := n.Call(ctx, name, []byte{call})
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(answer, &v); err != nil {
		return v, fmt.Errorf("node %q's answer (%s) does not decode: %w", name, what, err)
	}
	return v, nil
}

// fromEveryNode is a list every node holds (a node's shovels, its
// federation links): here, this node's (mine); from each other member,
// its answer to call within ctx (one that does not answer is left out).
// Each item comes with the name of the node that gave it.
func fromEveryNode[T any](ctx context.Context, b *Broker, mine []T, call byte, what string) (items []T, nodes []string) {
	for _, x := range mine {
		items, nodes = append(items, x), append(nodes, b.NodeName())
	}
	n := b.cluster.Load()
	if n == nil {
		return items, nodes
	}
	var others []string
	for _, m := range n.Members() {
		if m.Name != b.NodeName() {
			others = append(others, m.Name)
		}
	}
	answers := make([][]T, len(others))
	var wg sync.WaitGroup
	for i, name := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], _ = askMember[[]T](ctx, b, name, call, what)
		}()
	}
	wg.Wait()
	for i, name := range others {
		for _, x := range answers[i] {
			items, nodes = append(items, x), append(nodes, name)
		}
	}
	return items, nodes
}

// askOthers sends call with payload to each other member in turn until
// one answers "true" (it did what was asked): false when none did.
func askOthers(ctx context.Context, b *Broker, call byte, payload any) (bool, error) {
	n := b.cluster.Load()
	if n == nil {
		return false, nil
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return false, err
	}
	for _, m := range n.Members() {
		if m.Name == b.NodeName() {
			continue
		}
		answer, err := n.Call(ctx, m.Name, append([]byte{call}, body...))
		if err == nil && string(answer) == "true" {
			return true, nil
		}
	}
	return false, nil
}

// handleCall answers another node's call.
func (b *Broker) handleCall(_ uint64, payload []byte) ([]byte, error) {
	if len(payload) == 0 {
		return nil, errors.New("an empty call")
	}
	switch payload[0] {
	case callFigures:
		return json.Marshal(b.Figures())
	case callMemory:
		return json.Marshal(b.Memory())
	case callClients:
		return json.Marshal(b.srv.ClientCounts())
	case callStream:
		return json.Marshal(b.streamEndpointHere())
	case callSAC:
		return nil, b.streams.HandleSAC(payload[1:])
	case callShovels:
		return json.Marshal(b.shovels.Statuses())
	case callShovelRestart:
		return b.answerShovelRestart(payload[1:])
	case callFederationLinks:
		return json.Marshal(b.federation.Statuses())
	case callFederationRestart:
		return b.answerFederationRestart(payload[1:])
	case callTopology:
		return b.answerTopology(payload[1:])
	case callDeliver:
		return b.answerDeliver(payload[1:])
	}
	return nil, fmt.Errorf("unknown call %d (a node of a newer version?)", payload[0])
}
