package admin

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/federation"
)

// The federation links' status, as RabbitMQ 3.10.8's
// rabbitmq_federation_management serves it: every link each node runs
// (an exchange's or a queue's, from one upstream), in the vhosts the user
// may use, or only those that are down (neither running nor starting). A
// monitoring user reads them, as in RabbitMQ. The upstreams themselves
// are runtime parameters (federation-upstream), served by parameters.go.
//
// Restarting a link changes what the broker does, so it asks what
// changing an upstream asks (policymaker), as the shovels' restart does.
// RabbitMQ 3.10.8 asks only monitoring; its later releases ask
// policymaker too.
//
// The paths cannot be mistaken for one another: each has its own number
// of segments, so a vhost named "state" or "vhost" is simply a vhost
// (/api/federation-links/state lists its links,
// /api/federation-links/state/state/down its links that are down), and
// /api/federation-links/state/down is always the literal route, as in
// RabbitMQ's dispatch.
func (a *api) routeFederation(mux *router) {
	a.handle(mux, "GET /api/federation-links", monitoring, a.federationLinks(false))
	a.handle(mux, "GET /api/federation-links/state/down", monitoring, a.federationLinks(true))
	a.handle(mux, "GET /api/federation-links/{vhost}", monitoring, a.federationLinks(false))
	a.handle(mux, "GET /api/federation-links/{vhost}/state/down", monitoring, a.federationLinks(true))
	a.handle(mux, "DELETE /api/federation-links/vhost/{vhost}/{id}/{node}/restart", policymaker, a.restartFederationLink)
}

// federationLinkJSON is a link's status, with RabbitMQ's names in its
// order. The pointers are the fields RabbitMQ gives only for one type of
// link (exchange or queue) or in one state (running or error): absent
// otherwise, present even when empty.
type federationLinkJSON struct {
	Node             string  `json:"node"`
	Exchange         *string `json:"exchange,omitempty"`
	UpstreamExchange *string `json:"upstream_exchange,omitempty"`
	Queue            *string `json:"queue,omitempty"`
	UpstreamQueue    *string `json:"upstream_queue,omitempty"`
	ConsumerTag      *string `json:"consumer_tag,omitempty"`
	Type             string  `json:"type"`
	VHost            string  `json:"vhost"`
	Upstream         string  `json:"upstream"`
	ID               string  `json:"id"`
	Status           string  `json:"status"`
	LocalConnection  *string `json:"local_connection,omitempty"`
	Error            *string `json:"error,omitempty"`
	URI              string  `json:"uri"`
	Timestamp        string  `json:"timestamp"`
}

func federationLinkView(l broker.FederationLink) federationLinkJSON {
	j := federationLinkJSON{Node: l.Node, Type: l.Type, VHost: l.VHost, Upstream: l.Upstream, ID: l.ID,
		Status: l.State, URI: l.URI, Timestamp: l.Since.Format("2006-01-02 15:04:05")}
	if l.Type == federation.QueueLink {
		j.Queue, j.UpstreamQueue, j.ConsumerTag = &l.Queue, &l.UpstreamQueue, &l.ConsumerTag
	} else {
		j.Exchange, j.UpstreamExchange = &l.Exchange, &l.UpstreamExchange
	}
	switch l.State {
	case federation.Running:
		j.LocalConnection = &l.LocalConnection
	case federation.Error:
		j.Error = &l.Error
	}
	return j
}

// isDown is RabbitMQ's filter for the state/down routes: a link neither
// running nor starting.
func isDown(state string) bool { return state != federation.Running && state != federation.Starting }

// federationLinkList is the views of links whose vhost keep accepts (and
// that are down, with down), in a fixed order: by vhost, as RabbitMQ
// sorts the list, then by what the link federates, its upstream and
// node, so that a refresh does not reorder a table.
func federationLinkList(links []broker.FederationLink, keep func(vhost string) bool, down bool) []federationLinkJSON {
	out := []federationLinkJSON{}
	for _, l := range links {
		if keep(l.VHost) && (!down || isDown(l.State)) {
			out = append(out, federationLinkView(l))
		}
	}
	slices.SortStableFunc(out, func(x, y federationLinkJSON) int {
		return cmp.Or(cmp.Compare(x.VHost, y.VHost), cmp.Compare(x.Type, y.Type),
			cmp.Compare(deref(x.Exchange)+deref(x.Queue), deref(y.Exchange)+deref(y.Queue)),
			cmp.Compare(x.Upstream, y.Upstream), cmp.Compare(x.Node, y.Node))
	})
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// federationLinks lists the links of the path's vhost (a 404 when there
// is no such vhost, a 401 when the user may not use it), or of every vhost
// the user may use.
func (a *api) federationLinks(down bool) handlerFunc {
	return func(c *call) (any, error) {
		only, err := c.pathVHost()
		if err != nil {
			return nil, err
		}
		// Every node's, as RabbitMQ gathers them; a member that does not
		// answer within a second is left out.
		ctx, cancel := context.WithTimeout(c.r.Context(), time.Second)
		defer cancel()
		keep := func(v string) bool { return (only == "" || v == only) && c.mayUse(v) }
		return federationLinkList(a.b.ClusterFederationLinks(ctx), keep, down), nil
	}
}

// restartFederationLink restarts a link on the node the path names, as
// the federation status page's restart button does: 204, or RabbitMQ's
// 404 when that node runs no link of that id in the vhost.
func (a *api) restartFederationLink(c *call) (any, error) {
	if _, err := c.pathVHost(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), callTimeout)
	defer cancel()
	restarted, err := a.b.RestartFederationLink(ctx, c.path("vhost"), c.path("id"), c.path("node"))
	if err != nil {
		return nil, err
	}
	if !restarted {
		return nil, errNotFound
	}
	return nil, nil
}
