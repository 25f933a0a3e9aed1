package admin

// Feature flags, as RabbitMQ 3.10.8 lists them: what a node of a mixed
// cluster may use. Warren has one behaviour, every flag's, so each is
// listed enabled and enabling one is a no-op; tools that check a flag
// before they rely on it (the Kubernetes operator, rabbitmqadmin) find it.

func (a *api) routeFeatureFlags(mux *router) {
	a.handle(mux, "GET /api/feature-flags", administrator, func(*call) (any, error) { return featureFlags, nil })
	a.handle(mux, "PUT /api/feature-flags/{name}/enable", administrator, func(c *call) (any, error) {
		for _, f := range featureFlags {
			if f.Name == c.path("name") {
				return nil, nil
			}
		}
		return nil, badRequest("unsupported")
	})
}

type featureFlag struct {
	Name       string `json:"name"`
	Desc       string `json:"desc"`
	DocURL     string `json:"doc_url"`
	State      string `json:"state"`
	Stability  string `json:"stability"`
	ProvidedBy string `json:"provided_by"`
}

// featureFlags are RabbitMQ 3.10.8's, in its order and words.
var featureFlags = []featureFlag{
	{"classic_mirrored_queue_version", "Support setting version for classic mirrored queues", "", "enabled", "stable", "rabbit"},
	{"drop_unroutable_metric", "Count unroutable publishes to be dropped in stats", "", "enabled", "stable", "rabbitmq_management_agent"},
	{"empty_basic_get_metric", "Count AMQP `basic.get` on empty queues in stats", "", "enabled", "stable", "rabbitmq_management_agent"},
	{"implicit_default_bindings", "Default bindings are now implicit, instead of being stored in the database", "", "enabled", "stable", "rabbit"},
	{"maintenance_mode_status", "Maintenance mode status", "", "enabled", "stable", "rabbit"},
	{"quorum_queue", "Support queues of type `quorum`", "https://www.rabbitmq.com/quorum-queues.html", "enabled", "stable", "rabbit"},
	{"stream_queue", "Support queues of type `stream`", "https://www.rabbitmq.com/stream.html", "enabled", "stable", "rabbit"},
	{"user_limits", "Configure connection and channel limits for a user", "", "enabled", "stable", "rabbit"},
	{"virtual_host_metadata", "Virtual host metadata (description, tags, etc)", "", "enabled", "stable", "rabbit"},
}
