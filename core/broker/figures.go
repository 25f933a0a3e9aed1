package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
const callFigures byte = 1

// MemberFigures asks a cluster member for its figures, as RabbitMQ's
// management API asks each node; this node's own need no call.
func (b *Broker) MemberFigures(ctx context.Context, name string) (NodeFigures, error) {
	if name == b.NodeName() {
		return b.Figures(), nil
	}
	n := b.cluster.Load()
	if n == nil {
		return NodeFigures{}, fmt.Errorf("no node %q", name)
	}
	answer, err := n.Call(ctx, name, []byte{callFigures})
	if err != nil {
		return NodeFigures{}, err
	}
	var f NodeFigures
	if err := json.Unmarshal(answer, &f); err != nil {
		return NodeFigures{}, fmt.Errorf("node %q answered figures that do not decode: %w", name, err)
	}
	return f, nil
}

// handleCall answers another node's call.
func (b *Broker) handleCall(_ uint64, payload []byte) ([]byte, error) {
	if len(payload) == 0 {
		return nil, errors.New("an empty call")
	}
	switch payload[0] {
	case callFigures:
		return json.Marshal(b.Figures())
	case callTopology:
		return b.answerTopology(payload[1:])
	case callDeliver:
		return b.answerDeliver(payload[1:])
	}
	return nil, fmt.Errorf("unknown call %d (a node of a newer version?)", payload[0])
}
