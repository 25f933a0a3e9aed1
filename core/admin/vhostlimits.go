package admin

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/warrenmq/warren/core/vhost"
)

// Vhost limits, as RabbitMQ 3.10.8's management API serves them
// (rabbit_mgmt_wm_limits, rabbit_mgmt_wm_limit): listed to management
// users for the vhosts they may see, changed by administrators.
func (a *api) routeVHostLimits(mux *router) {
	a.handle(mux, "GET /api/vhost-limits", management, a.vhostLimits)
	a.handle(mux, "GET /api/vhost-limits/{vhost}", management, a.vhostLimits)
	a.handle(mux, "PUT /api/vhost-limits/{vhost}/{name}", administrator, a.putVHostLimit)
	a.handle(mux, "DELETE /api/vhost-limits/{vhost}/{name}", administrator, a.deleteVHostLimit)
}

type vhostLimitsJSON struct {
	VHost string       `json:"vhost"`
	Value vhost.Limits `json:"value"`
}

// vhostLimits lists the limits of every vhost the user may see that has
// any, or of the path's vhost.
func (a *api) vhostLimits(c *call) (any, error) {
	vhosts, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	out := []vhostLimitsJSON{}
	for _, v := range vhosts {
		if l := v.Limits(); len(l) > 0 {
			out = append(out, vhostLimitsJSON{VHost: v.Name, Value: l})
		}
	}
	slices.SortFunc(out, func(x, y vhostLimitsJSON) int {
		if x.VHost < y.VHost {
			return -1
		}
		return 1
	})
	return out, nil
}

// putVHostLimit sets one limit: {"value": N}.
func (a *api) putVHostLimit(c *call) (any, error) {
	var body struct {
		Value *json.Number `json:"value"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if err := keysPresent(field{"value", body.Value != nil}); err != nil {
		return nil, err
	}
	n, err := body.Value.Int64()
	if err != nil {
		return nil, badRequest("Validation failed\n\n%s should be a number, actually was %s\n", c.path("name"), body.Value)
	}
	v, ok := a.findVHost(c.path("vhost"))
	if !ok {
		return nil, errNotFound
	}
	l := v.Limits()
	if l == nil {
		l = vhost.Limits{}
	}
	l[c.path("name")] = n
	if err := vhost.CheckLimits(l); err != nil {
		return nil, badRequest("%s", reason(err))
	}
	return nil, a.b.SetVHostLimits(v.Name, l)
}

// deleteVHostLimit clears one limit; one not set is no change.
func (a *api) deleteVHostLimit(c *call) (any, error) {
	v, ok := a.findVHost(c.path("vhost"))
	if !ok {
		return nil, errNotFound
	}
	l := v.Limits()
	if _, set := l[c.path("name")]; !set {
		return nil, nil
	}
	delete(l, c.path("name"))
	return nil, a.b.SetVHostLimits(v.Name, maps.Clone(l))
}
