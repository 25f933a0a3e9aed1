package admin

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// Warren's endpoints for rabbitmq-queues' membership commands (warrenctl
// add_member, delete_member, grow and shrink call them):
//
//	POST   /api/warren/queues/{vhost}/{queue}/members        {"node": N}
//	DELETE /api/warren/queues/{vhost}/{queue}/members/{node}
//	POST   /api/warren/quorum/grow    {"node": N, "strategy": "all"|"even",
//	                                   "vhost_pattern": RE, "queue_pattern": RE}
//	POST   /api/warren/quorum/shrink  {"node": N}
//	POST   /api/warren/quorum/rebalance {"type": "all"|"quorum"|"stream"|"classic",
//	                                     "vhost_pattern": RE, "queue_pattern": RE}
//
// grow and shrink answer one row per queue: vhost, name, size (its
// members after the change) and result ("ok" or why not); rebalance one
// row per running node with the leaders it has after the move
// (broker.Rebalance). RabbitMQ's own POST /api/rebalance/queues
// rebalances every queue and answers 204.

func (a *api) routeQuorum(mux *router) {
	a.handle(mux, "POST /api/warren/queues/{vhost}/{queue}/members", administrator, a.addMember)
	a.handle(mux, "DELETE /api/warren/queues/{vhost}/{queue}/members/{node}", administrator, a.deleteMember)
	a.handle(mux, "POST /api/warren/quorum/grow", administrator, a.grow)
	a.handle(mux, "POST /api/warren/quorum/shrink", administrator, a.shrink)
	a.handle(mux, "POST /api/warren/quorum/rebalance", administrator, a.rebalance)
	a.handle(mux, "POST /api/rebalance/queues", administrator, a.rebalanceAll)
}

// rebalanceWait bounds how long a rebalance waits for the groups to
// report their new leaders.
const rebalanceWait = 10 * time.Second

type rebalanceRowJSON struct {
	Node          string `json:"node"`
	QuorumQueues  int    `json:"quorum_queues"`
	Streams       int    `json:"streams"`
	ClassicQueues int    `json:"classic_queues"`
}

func (a *api) rebalance(c *call) (any, error) {
	var body struct {
		Type         string `json:"type"`
		VHostPattern string `json:"vhost_pattern"`
		QueuePattern string `json:"queue_pattern"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Type == "" {
		body.Type = "all"
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), rebalanceWait)
	defer cancel()
	rows, err := a.b.Rebalance(ctx, body.Type, body.VHostPattern, body.QueuePattern)
	if err != nil {
		return nil, badRequest("%s", reason(err))
	}
	out := make([]rebalanceRowJSON, len(rows))
	for i, r := range rows {
		out[i] = rebalanceRowJSON{Node: r.Node, QuorumQueues: r.QuorumQueues, Streams: r.Streams, ClassicQueues: r.ClassicQueues}
	}
	return out, nil
}

func (a *api) rebalanceAll(c *call) (any, error) {
	ctx, cancel := context.WithTimeout(c.r.Context(), rebalanceWait)
	defer cancel()
	_, err := a.b.Rebalance(ctx, "all", "", "")
	return nil, err
}

func (a *api) addMember(c *call) (any, error) {
	var body struct {
		Node *string `json:"node"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Node == nil || *body.Node == "" {
		return nil, badRequest("[{key_missing,node}]")
	}
	return nil, a.changeMember(c, *body.Node, true)
}

func (a *api) deleteMember(c *call) (any, error) {
	return nil, a.changeMember(c, c.path("node"), false)
}

func (a *api) changeMember(c *call, node string, add bool) error {
	v, ok := a.b.VHost(c.path("vhost"))
	if !ok {
		return errNotFound
	}
	return v.ChangeQuorumMember(c.path("queue"), node, add)
}

// reason is a refused change's text, without its reply code's name.
func reason(err error) string {
	var re *reply.Error
	if errors.As(err, &re) {
		return strings.TrimPrefix(re.Text, protocol.ReplyText(re.Code)+" - ")
	}
	return err.Error()
}

type quorumChangeJSON struct {
	VHost  string `json:"vhost"`
	Name   string `json:"name"`
	Size   int    `json:"size"`
	Result string `json:"result"`
}

func (a *api) grow(c *call) (any, error) {
	var body struct {
		Node         string `json:"node"`
		Strategy     string `json:"strategy"`
		VHostPattern string `json:"vhost_pattern"`
		QueuePattern string `json:"queue_pattern"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Node == "" {
		return nil, badRequest("[{key_missing,node}]")
	}
	if body.Strategy != "all" && body.Strategy != "even" {
		return nil, badRequest("strategy %q: use all or even", body.Strategy)
	}
	compile := func(key, p string) (*regexp.Regexp, error) {
		if p == "" {
			return nil, nil
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, badRequest("%s: %v", key, err)
		}
		return re, nil
	}
	vhosts, err := compile("vhost_pattern", body.VHostPattern)
	if err != nil {
		return nil, err
	}
	queues, err := compile("queue_pattern", body.QueuePattern)
	if err != nil {
		return nil, err
	}
	if err := a.knownNode(body.Node); err != nil {
		return nil, err
	}
	return a.changes(a.b.GrowQuorum(body.Node, body.Strategy == "even", vhosts, queues)), nil
}

func (a *api) shrink(c *call) (any, error) {
	var body struct {
		Node string `json:"node"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Node == "" {
		return nil, badRequest("[{key_missing,node}]")
	}
	if err := a.knownNode(body.Node); err != nil {
		return nil, err
	}
	return a.changes(a.b.ShrinkQuorum(body.Node)), nil
}

// knownNode refuses a node the cluster does not have.
func (a *api) knownNode(node string) error {
	n := a.b.Cluster()
	if n == nil {
		return badRequest("this node is not clustered")
	}
	for _, m := range n.Members() {
		if m.Name == node {
			return nil
		}
	}
	return reply.NotFound("no node '%s' in the cluster", node)
}

func (a *api) changes(cs []broker.QuorumChange) []quorumChangeJSON {
	out := make([]quorumChangeJSON, len(cs))
	for i, ch := range cs {
		out[i] = quorumChangeJSON{VHost: ch.VHost, Name: ch.Name, Size: ch.Size, Result: "ok"}
		if ch.Err != nil {
			out[i].Result = reason(ch.Err)
		}
	}
	return out
}
