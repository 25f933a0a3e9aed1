package admin

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/topology"
)

// Vhost and user limits, as RabbitMQ 3.10.8's management API serves
// them (rabbit_mgmt_wm_limits, rabbit_mgmt_wm_limit, and their user
// forms): vhost limits listed to management users for the vhosts they
// may see, users' limits to any management user (RabbitMQ 3.10.8 asks
// only that a user may see some vhost); changed by administrators.
func (a *api) routeVHostLimits(mux *router) {
	a.handle(mux, "GET /api/vhost-limits", management, a.vhostLimits)
	a.handle(mux, "GET /api/vhost-limits/{vhost}", management, a.vhostLimits)
	a.handle(mux, "PUT /api/vhost-limits/{vhost}/{name}", administrator, a.putVHostLimit)
	a.handle(mux, "DELETE /api/vhost-limits/{vhost}/{name}", administrator, a.deleteVHostLimit)
	a.handle(mux, "GET /api/user-limits", management, a.userLimits)
	a.handle(mux, "GET /api/user-limits/{user}", management, a.userLimits)
	a.handle(mux, "PUT /api/user-limits/{user}/{name}", administrator, a.putUserLimit)
	a.handle(mux, "DELETE /api/user-limits/{user}/{name}", administrator, a.deleteUserLimit)
}

type vhostLimitsJSON struct {
	VHost string          `json:"vhost"`
	Value topology.Limits `json:"value"`
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

// limitValue reads a limit's body, {"value": N}.
func limitValue(c *call) (int64, error) {
	var body struct {
		Value *json.Number `json:"value"`
	}
	if err := decode(c.r, &body); err != nil {
		return 0, err
	}
	if err := keysPresent(field{"value", body.Value != nil}); err != nil {
		return 0, err
	}
	n, err := body.Value.Int64()
	if err != nil {
		return 0, badRequest("Validation failed\n\n%s should be a number, actually was %s\n", c.path("name"), body.Value)
	}
	return n, nil
}

// putVHostLimit sets one limit: {"value": N}.
func (a *api) putVHostLimit(c *call) (any, error) {
	n, err := limitValue(c)
	if err != nil {
		return nil, err
	}
	v, ok := a.findVHost(c.path("vhost"))
	if !ok {
		return nil, errNotFound
	}
	l := v.Limits()
	if l == nil {
		l = topology.Limits{}
	}
	l[c.path("name")] = n
	if err := topology.CheckLimits(l); err != nil {
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

type userLimitsJSON struct {
	User  string           `json:"user"`
	Value map[string]int64 `json:"value"`
}

// userLimits lists the limits of every user that has any, or of the
// path's user (404 when there is no such user).
func (a *api) userLimits(c *call) (any, error) {
	users := a.b.Users().Users()
	if name := c.path("user"); name != "" {
		u, ok := a.findUser(name)
		if !ok {
			return nil, errNotFound
		}
		users = []*auth.User{u}
	}
	out := []userLimitsJSON{}
	for _, u := range users {
		if len(u.Limits) > 0 {
			out = append(out, userLimitsJSON{User: u.Name, Value: u.Limits})
		}
	}
	return out, nil
}

// putUserLimit sets one of a user's limits: {"value": N}.
func (a *api) putUserLimit(c *call) (any, error) {
	n, err := limitValue(c)
	if err != nil {
		return nil, err
	}
	u, ok := a.findUser(c.path("user"))
	if !ok {
		return nil, badRequest("no_such_user %s", c.path("user"))
	}
	l := maps.Clone(u.Limits)
	if l == nil {
		l = map[string]int64{}
	}
	l[c.path("name")] = n
	if err := auth.CheckUserLimits(l); err != nil {
		return nil, badRequest("%v", err)
	}
	return nil, a.b.SetUserLimits(u.Name, l)
}

// deleteUserLimit clears one of a user's limits; one not set is no
// change.
func (a *api) deleteUserLimit(c *call) (any, error) {
	u, ok := a.findUser(c.path("user"))
	if !ok {
		return nil, errNotFound
	}
	if _, set := u.Limits[c.path("name")]; !set {
		return nil, nil
	}
	l := maps.Clone(u.Limits)
	delete(l, c.path("name"))
	return nil, a.b.SetUserLimits(u.Name, l)
}
