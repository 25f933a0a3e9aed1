package admin

import (
	"context"
	"time"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/shovel"
)

// callTimeout bounds a request that another node carries out.
const callTimeout = 10 * time.Second

// The shovels' status, as RabbitMQ 3.10.8's rabbitmq_shovel_management
// serves it: each shovel this node runs, with its state (starting,
// running, terminated and why), in the vhosts the user may use. A
// monitoring user reads it, as in RabbitMQ. Restarting or deleting a
// shovel through these routes changes what the broker does, so it asks
// what changing its parameter asks (policymaker), where RabbitMQ asks
// only monitoring.
func (a *api) routeShovels(mux *router) {
	a.handle(mux, "GET /api/shovels", monitoring, a.shovels)
	a.handle(mux, "GET /api/shovels/{vhost}", monitoring, a.shovels)
	a.handle(mux, "GET /api/shovels/vhost/{vhost}/{name}", monitoring, a.shovel)
	a.handle(mux, "DELETE /api/shovels/vhost/{vhost}/{name}", policymaker, a.deleteShovel)
	a.handle(mux, "DELETE /api/shovels/vhost/{vhost}/{name}/restart", policymaker, a.restartShovel)
}

// shovelJSON is a shovel's status, in RabbitMQ's order.
type shovelJSON struct {
	Node            string  `json:"node"`
	Timestamp       string  `json:"timestamp"`
	Name            string  `json:"name"`
	VHost           string  `json:"vhost"`
	Type            string  `json:"type"`
	State           string  `json:"state"`
	BlockedStatus   string  `json:"blocked_status,omitempty"` // as RabbitMQ 3.12+: running or blocked
	Reason          string  `json:"reason,omitempty"`
	SrcURI          string  `json:"src_uri,omitempty"`
	SrcProtocol     string  `json:"src_protocol,omitempty"`
	DestProtocol    string  `json:"dest_protocol,omitempty"`
	DestURI         string  `json:"dest_uri,omitempty"`
	SrcQueue        string  `json:"src_queue,omitempty"`
	SrcExchange     string  `json:"src_exchange,omitempty"`
	SrcExchangeKey  *string `json:"src_exchange_key,omitempty"`
	DestExchange    *string `json:"dest_exchange,omitempty"`
	DestExchangeKey *string `json:"dest_exchange_key,omitempty"`
	DestQueue       string  `json:"dest_queue,omitempty"`
}

func shovelView(s broker.ShovelStatus) shovelJSON {
	j := shovelJSON{Node: s.Node, Timestamp: s.Since.Format("2006-01-02 15:04:05"), Name: s.Name, VHost: s.VHost,
		Type: s.Type, State: s.State, Reason: s.Reason}
	if s.State == shovel.Running {
		j.BlockedStatus = "running"
		if s.Blocked != "" {
			j.BlockedStatus, j.Reason = "blocked", s.Blocked
		}
		j.SrcURI, j.DestURI, j.SrcProtocol, j.DestProtocol = s.SrcURI, s.DestURI, "amqp091", "amqp091"
		j.SrcQueue, j.SrcExchange, j.DestQueue = s.SrcQueue, s.SrcExchange, s.DestQueue
		if s.SrcExchange != "" {
			j.SrcExchangeKey = &s.SrcExchangeKey
		}
		j.DestExchange, j.DestExchangeKey = s.DestExchange, s.DestExchangeKey
	}
	return j
}

// shovelList is the shovels of the path's vhost, or of every vhost the
// user may use.
func (a *api) shovelList(c *call) ([]shovelJSON, error) {
	only, err := c.pathVHost()
	if err != nil {
		return nil, err
	}
	// Every node's, as RabbitMQ gathers them; a member that does not
	// answer within a second is left out.
	ctx, cancel := context.WithTimeout(c.r.Context(), time.Second)
	defer cancel()
	out := []shovelJSON{}
	for _, s := range a.b.ClusterShovels(ctx) {
		if (only == "" || s.VHost == only) && c.mayUse(s.VHost) {
			out = append(out, shovelView(s))
		}
	}
	return out, nil
}

func (a *api) shovels(c *call) (any, error) { return a.shovelList(c) }

func (a *api) shovel(c *call) (any, error) {
	list, err := a.shovelList(c)
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if s.Name == c.path("name") {
			return s, nil
		}
	}
	return nil, errNotFound
}

// deleteShovel deletes a shovel's parameter, as RabbitMQ's delete_shovel;
// a static shovel has none (it is the configuration's).
func (a *api) deleteShovel(c *call) (any, error) {
	s, err := a.shovel(c)
	if err != nil {
		return nil, err
	}
	if s.(shovelJSON).Type == shovel.Static {
		return nil, badRequest("shovel '%s' is static (broker.toml's [[shovels]]): change the configuration to remove it", c.path("name"))
	}
	return nil, a.b.ClearVHostParameter(c.path("vhost"), shovel.Component, c.path("name"))
}

func (a *api) restartShovel(c *call) (any, error) {
	if _, err := c.pathVHost(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), callTimeout)
	defer cancel()
	restarted, err := a.b.RestartShovel(ctx, c.path("vhost"), c.path("name"))
	if err != nil {
		return nil, err
	}
	if !restarted {
		return nil, errNotFound
	}
	return nil, nil
}
