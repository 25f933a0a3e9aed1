package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
)

// clusterView is GET /api/warren/cluster.
type clusterView struct {
	ClusterName string `json:"cluster_name"`
	Node        string `json:"node"`
	Clustered   bool   `json:"clustered"`
	Role        string `json:"raft_role"`
	Term        uint64 `json:"raft_term"`
	Commit      uint64 `json:"raft_commit_index"`
	Applied     uint64 `json:"raft_applied_index"`
	Nodes       []struct {
		Name      string  `json:"name"`
		Address   string  `json:"address"`
		Running   bool    `json:"running"`
		Leader    bool    `json:"leader"`
		LatencyMS float64 `json:"latency_ms"`
	} `json:"nodes"`
}

// clusterStatus prints rabbitmqctl cluster_status's sections, with the
// node's Raft state under its own heading.
func clusterStatus(c *client, o *opts, out io.Writer, _ []string) error {
	var v clusterView
	if err := c.get("/api/warren/cluster", &v); err != nil {
		return err
	}
	if o.formatter == "json" {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	}
	if !o.quiet && !o.silent {
		fmt.Fprintf(out, "Cluster status of node %s ...\n", v.Node)
	}
	fmt.Fprintf(out, "Basics\n\nCluster name: %s\n\nDisk Nodes\n\n", v.ClusterName)
	for _, n := range v.Nodes {
		fmt.Fprintln(out, n.Name)
	}
	fmt.Fprint(out, "\nRunning Nodes\n\n")
	for _, n := range v.Nodes {
		if n.Running {
			fmt.Fprintln(out, n.Name)
		}
	}
	leader := "none"
	for _, n := range v.Nodes {
		if n.Leader {
			leader = n.Name
		}
	}
	fmt.Fprintf(out, "\nRaft (metadata)\n\nRole: %s\nLeader: %s\nTerm: %d\nCommit index: %d\nApplied index: %d\n",
		v.Role, leader, v.Term, v.Commit, v.Applied)
	header := false
	for _, n := range v.Nodes {
		if n.LatencyMS > 0 {
			if !header {
				fmt.Fprint(out, "\nRound trips from this node\n\n")
				header = true
			}
			fmt.Fprintf(out, "%s: %.2f ms\n", n.Name, n.LatencyMS)
		}
	}
	return nil
}

func forgetClusterNode(c *client, o *opts, out io.Writer, args []string) error {
	if !o.quiet && !o.silent {
		fmt.Fprintf(out, "Removing node %s from the cluster ...\n", args[0])
	}
	return c.do("DELETE", "/api/warren/cluster/nodes/"+url.PathEscape(args[0]), nil)
}

// joinCluster resets the node and joins the cluster of the node at ADDR
// (its cluster.listen address), as rabbitmqctl join_cluster.
func joinCluster(c *client, o *opts, out io.Writer, args []string) error {
	if !o.quiet && !o.silent {
		fmt.Fprintf(out, "Clustering node with %s ...\n", args[0])
	}
	return c.do("POST", "/api/warren/cluster/join", map[string]string{"seed": args[0]})
}
