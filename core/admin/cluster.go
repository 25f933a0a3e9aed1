package admin

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/warrenmq/warren/core/cluster"
)

// Warren's cluster endpoints, for what rabbitmqctl's cluster_status and
// forget_cluster_node do (warrenctl calls them):
//
//	GET    /api/warren/cluster              this node's view: members, who is
//	                                        alive, the Raft role, term,
//	                                        leader, commit and applied index
//	DELETE /api/warren/cluster/nodes/{node} remove a node that is down from
//	                                        the cluster, and from its quorum
//	                                        queues and streams
//	POST   /api/warren/cluster/join         {"seed": "host:port"}: reset this
//	                                        node and join the cluster the
//	                                        node at seed is in
//
// On a node without [cluster] the view is a cluster of one, itself.

func (a *api) routeCluster(mux *router) {
	a.handle(mux, "GET /api/warren/cluster", monitoring, a.clusterStatus)
	a.handle(mux, "DELETE /api/warren/cluster/nodes/{node}", administrator, a.forgetNode)
	a.handle(mux, "POST /api/warren/cluster/join", administrator, a.joinCluster)
}

func (a *api) joinCluster(c *call) (any, error) {
	var body struct {
		Seed *string `json:"seed"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Seed == nil || *body.Seed == "" {
		return nil, badRequest("[{key_missing,seed}]")
	}
	if err := a.b.JoinCluster(*body.Seed); err != nil {
		return nil, badRequest("%v", err)
	}
	return nil, nil
}

type clusterMemberJSON struct {
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
	Running bool   `json:"running"`
	Leader  bool   `json:"leader"`
	// LatencyMS is the last round trip this node measured to the other,
	// in milliseconds; absent for itself and before the first.
	LatencyMS float64 `json:"latency_ms,omitempty"`
}

type clusterJSON struct {
	ClusterName string              `json:"cluster_name"`
	Node        string              `json:"node"`
	Clustered   bool                `json:"clustered"`
	Role        string              `json:"raft_role"`
	Term        uint64              `json:"raft_term"`
	Commit      uint64              `json:"raft_commit_index"`
	Applied     uint64              `json:"raft_applied_index"`
	LogBytes    uint64              `json:"raft_log_bytes"`
	LogEntries  uint64              `json:"raft_log_entries"`
	Members     []clusterMemberJSON `json:"nodes"`
}

func (a *api) clusterStatus(*call) (any, error) {
	out := clusterJSON{ClusterName: a.b.ClusterName(), Node: a.b.NodeName()}
	n := a.b.Cluster()
	if n == nil {
		out.Role = "leader"
		out.Members = []clusterMemberJSON{{Name: out.Node, Running: true, Leader: true}}
		return out, nil
	}
	st := n.Status()
	out.Clustered, out.Role, out.Term, out.Commit, out.Applied = true, st.Role, st.Term, st.Commit, st.Applied
	out.LogBytes, out.LogEntries = st.LogBytes, st.LogEntries
	for _, m := range st.Members {
		out.Members = append(out.Members, clusterMemberJSON{Name: m.Name, Address: m.Addr, Running: m.Alive,
			Leader: m.ID == st.Leader, LatencyMS: float64(m.Latency.Microseconds()) / 1000})
	}
	return out, nil
}

// forgetNode removes a node that is down from the cluster, and first from
// the quorum queues and streams it is a member of (broker's
// ForgetClusterNode); what could not be removed is in the log, as
// RabbitMQ's forget_cluster_node leaves it.
func (a *api) forgetNode(c *call) (any, error) {
	_, err := a.b.ForgetClusterNode(c.r.Context(), c.path("node"))
	if err != nil && !errors.Is(err, cluster.ErrNoQuorum) {
		return nil, badRequest("%v", err)
	}
	return nil, err
}

// clusterMembers are the cluster's other nodes for /api/nodes, each with
// the figures it answers when asked (all are asked at once, for a second
// at most); a node that does not answer is listed not running.
// memberNames are the cluster's other members, by name; none on a node
// of its own.
func (a *api) memberNames() []string {
	n := a.b.Cluster()
	if n == nil {
		return nil
	}
	var others []string
	for _, m := range n.Members() {
		if m.Name != a.b.NodeName() {
			others = append(others, m.Name)
		}
	}
	return others
}

func (a *api) clusterMembers() []nodeJSON {
	others := a.memberNames()
	out := make([]nodeJSON, len(others))
	var wg sync.WaitGroup
	for i, name := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			f, err := a.b.MemberFigures(ctx, name)
			if err != nil {
				out[i] = nodeJSON{Name: name, Type: "disc", Partitions: []string{}, EnabledPlugins: []string{},
					ExchangeTypes: []exchangeTypeJSON{}}
				return
			}
			out[i] = a.nodeViewOf(name, f)
		}()
	}
	wg.Wait()
	return out
}
