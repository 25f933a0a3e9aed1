package admin

import (
	"context"
	"slices"
	"time"

	"github.com/warrenmq/warren/core/broker"
)

// A node's memory breakdown, as RabbitMQ's management API has it:
//
//	GET /api/nodes/{node}/memory       {"memory": {category: bytes, ..., "total": ..., "strategy": "rss"}}
//	GET /api/nodes/{node}?memory=true  the node with the same "memory" field
//
// The categories are Warren's (broker.Memory); a member that does not
// answer has "memory": "not_available", as RabbitMQ says of a node down.
func (a *api) routeMemory(mux *router) {
	a.handle(mux, "GET /api/nodes/{node}/memory", monitoring, a.nodeMemory)
}

func (a *api) nodeMemory(c *call) (any, error) {
	m, err := a.memoryOf(c.path("node"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"memory": m}, nil
}

// memoryOf is the "memory" field of a node: its breakdown, or
// "not_available" when it did not answer.
func (a *api) memoryOf(node string) (any, error) {
	if node != a.b.NodeName() && !slices.Contains(a.memberNames(), node) {
		return nil, errNotFound
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	m, err := a.b.MemberMemory(ctx, node)
	if err != nil {
		return "not_available", nil
	}
	return memoryJSON(m), nil
}

// memoryJSON is a breakdown as RabbitMQ shapes it: each category's bytes,
// "total" by strategy and the strategy the node's alarm uses.
func memoryJSON(m broker.Memory) map[string]any {
	out := map[string]any{"strategy": "rss", "total": map[string]uint64{"rss": m.RSS, "allocated": m.Allocated}}
	for _, c := range m.Categories() {
		out[c.Name] = c.Bytes
	}
	return out
}
