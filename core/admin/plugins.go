package admin

func (a *api) routePlugins(mux *router) {
	a.handle(mux, "GET /api/plugins", monitoring, a.plugins)
	a.handle(mux, "POST /api/plugins/{name}/enable", administrator, a.enablePlugin)
	a.handle(mux, "POST /api/plugins/{name}/disable", administrator, a.disablePlugin)
	a.handle(mux, "PUT /api/plugins/{name}/settings/{key}", administrator, a.configurePlugin)
	a.handle(mux, "DELETE /api/plugins/{name}/settings/{key}", administrator, a.resetPluginSetting)
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

// configurePlugin sets one of a plugin's settings in the running broker:
// the body is {"value": V}, V of the setting's kind or text to convert
// ("30" for an int setting). The plugin gets the change at once and may
// refuse it (406 with its reason). The value outlives a restart.
func (a *api) configurePlugin(c *call) (any, error) {
	var body struct {
		Value any `json:"value"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Value == nil {
		return nil, badRequest("the body must be {\"value\": ...}, with a value that is not null")
	}
	return nil, a.b.ConfigurePlugin(c.path("name"), c.path("key"), body.Value)
}

// resetPluginSetting drops a setting set in the running broker: broker.toml's
// value, or none, applies again.
func (a *api) resetPluginSetting(c *call) (any, error) {
	return nil, a.b.ConfigurePlugin(c.path("name"), c.path("key"), nil)
}
