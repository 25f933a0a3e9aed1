package broker

// shippedModules returns the plugin modules built into Warren.
func shippedModules() map[string][]byte { return nil }
