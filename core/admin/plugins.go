package admin

func (a *api) routePlugins(mux *router) {
	a.handle(mux, "GET /api/plugins", monitoring, a.plugins)
	a.handle(mux, "POST /api/plugins/{name}/enable", administrator, a.enablePlugin)
	a.handle(mux, "POST /api/plugins/{name}/disable", administrator, a.disablePlugin)
}

// plugins lists Warren's WebAssembly plugins (RabbitMQ has no such
// endpoint): each with its name, state, version, the exchange types it
// provides and its own description under "info".
func (a *api) plugins(*call) (any, error) {
	return a.b.Plugins(), nil
}

func (a *api) enablePlugin(c *call) (any, error) {
	return nil, a.b.EnablePlugin(c.path("name"))
}

// disablePlugin refuses while the plugin's types have exchanges, unless
// ?force=true.
func (a *api) disablePlugin(c *call) (any, error) {
	return nil, a.b.DisablePlugin(c.path("name"), c.query("force") == "true")
}
