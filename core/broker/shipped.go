package broker

import "github.com/warrenmq/warren/plugins/shipped"

// shippedModules returns the plugin modules built into Warren.
func shippedModules() map[string][]byte { return shipped.Modules() }
