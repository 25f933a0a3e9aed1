package admin

import (
	"encoding/json"
	"slices"

	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
)

func (a *api) routeVHosts(mux *router) {
	a.handle(mux, "GET /api/vhosts", management, a.vhostList)
	a.handle(mux, "GET /api/vhosts/{vhost}", administrator, a.vhostOne) // so RabbitMQ 3.10.8 has it
	a.handle(mux, "PUT /api/vhosts/{vhost}", administrator, a.putVHost)
	a.handle(mux, "DELETE /api/vhosts/{vhost}", administrator, a.deleteVHost)
}

// vhostJSON is a vhost as RabbitMQ lists it, with its message statistics
// and the message counts of its queues.
type vhostJSON struct {
	ClusterState     map[string]string `json:"cluster_state"`
	Description      string            `json:"description"`
	MessageStats     map[string]any    `json:"message_stats"`
	Metadata         map[string]any    `json:"metadata"`
	Name             string            `json:"name"`
	Tags             []string          `json:"tags"`
	Tracing          bool              `json:"tracing"`
	DefaultQueueType string            `json:"default_queue_type"`
	queueCounts
}

type queueCounts struct {
	Messages                      int64   `json:"messages"`
	MessagesDetails               details `json:"messages_details"`
	MessagesReady                 int64   `json:"messages_ready"`
	MessagesReadyDetails          details `json:"messages_ready_details"`
	MessagesUnacknowledged        int64   `json:"messages_unacknowledged"`
	MessagesUnacknowledgedDetails details `json:"messages_unacknowledged_details"`
}

func (a *api) vhostView(v *vhost.VHost, node string) vhostJSON {
	var t stats.QueueTotals
	for _, q := range v.Queues() {
		t.Ready += int64(q.Ready)
		t.Unacked += int64(q.Unacked)
	}
	t.Messages = t.Ready + t.Unacked
	m := v.Metadata()
	desc, tags := m.Description, m.Tags
	if desc == "" && tags == nil && v.Name == a.b.Config().Defaults.VHost {
		desc = "Default virtual host" // as RabbitMQ makes it
	}
	if tags == nil {
		tags = []string{}
	}
	return vhostJSON{
		ClusterState: map[string]string{node: "running"}, Description: desc,
		MessageStats: orEmpty(messageStats(v.Counters.Values(), v.Counters.Rates())),
		Metadata:     map[string]any{"description": desc, "tags": tags},
		Name:         v.Name, Tags: tags, DefaultQueueType: "undefined",
		queueCounts: queueCounts{Messages: t.Messages, MessagesReady: t.Ready, MessagesUnacknowledged: t.Unacked},
	}
}

var vhostLister = lister[vhostJSON]{name: func(v vhostJSON) string { return v.Name }}

func (a *api) vhostList(c *call) (any, error) {
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return nil, err
	}
	node := a.b.NodeName()
	var out []vhostJSON
	for _, name := range a.b.VHosts() {
		v, ok := a.b.VHost(name)
		if !ok || !(c.seesAll() || c.mayUse(name)) {
			continue
		}
		out = append(out, a.vhostView(v, node))
	}
	return list(out, p, vhostLister, same)
}

func (a *api) vhostOne(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	return a.vhostView(v, a.b.NodeName()), nil
}

func (a *api) putVHost(c *call) (any, error) {
	var body struct {
		Description string          `json:"description"`
		Tags        json.RawMessage `json:"tags"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	var tags []string
	if len(body.Tags) > 0 && string(body.Tags) != "null" {
		var err error
		if tags, err = parseTags(body.Tags); err != nil {
			return nil, err
		}
	}
	name := c.path("vhost")
	_, existed := a.b.VHost(name)
	v, err := a.b.AddVHost(name)
	if err != nil {
		return nil, err
	}
	// A PUT says the whole metadata, as RabbitMQ reads it: what it leaves
	// out is cleared.
	if m := v.Metadata(); m.Description != body.Description || !slices.Equal(m.Tags, tags) {
		if err := a.b.SetVHostMetadata(name, topology.Metadata{Description: body.Description, Tags: tags}); err != nil {
			return nil, err
		}
	}
	if !existed {
		// RabbitMQ grants the user who creates a vhost through the API
		// full permissions there.
		if err := a.b.SetPermission(name, c.u.Name, ".*", ".*", ".*"); err != nil {
			return nil, err
		}
	}
	return createdOrUpdated(!existed)
}

func (a *api) deleteVHost(c *call) (any, error) {
	if _, ok := a.findVHost(c.path("vhost")); !ok {
		return nil, errNotFound
	}
	return nil, a.b.DeleteVHost(c.path("vhost"))
}
