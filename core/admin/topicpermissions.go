package admin

import "github.com/warrenmq/warren/core/auth"

// Topic permissions, as RabbitMQ 3.10.8's management API serves them
// (rabbit_mgmt_wm_topic_permission and its listings): administrators only.
func (a *api) routeTopicPermissions(mux *router) {
	a.handle(mux, "GET /api/topic-permissions", administrator, a.topicPermissions)
	a.handle(mux, "GET /api/users/{user}/topic-permissions", administrator, a.topicPermissions)
	a.handle(mux, "GET /api/vhosts/{vhost}/topic-permissions", administrator, a.topicPermissions)
	a.handle(mux, "GET /api/topic-permissions/{vhost}/{user}", administrator, a.topicPermissionsOfPair)
	a.handle(mux, "PUT /api/topic-permissions/{vhost}/{user}", administrator, a.putTopicPermission)
	a.handle(mux, "DELETE /api/topic-permissions/{vhost}/{user}", administrator, a.deleteTopicPermissions)
	a.handle(mux, "DELETE /api/topic-permissions/{vhost}/{user}/{exchange}", administrator, a.deleteTopicPermissions)
}

type topicPermissionJSON struct {
	User     string `json:"user"`
	VHost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

// topicPermissionsWhere lists the topic permissions of user and vhostName
// ("": any).
func (a *api) topicPermissionsWhere(vhostName, user string) []topicPermissionJSON {
	out := []topicPermissionJSON{}
	for _, p := range a.b.Users().TopicPermissions() {
		if (user != "" && p.User != user) || (vhostName != "" && p.VHost != vhostName) {
			continue
		}
		out = append(out, topicPermissionView(p))
	}
	return out
}

func topicPermissionView(p auth.TopicPermissionEntry) topicPermissionJSON {
	return topicPermissionJSON{User: p.User, VHost: p.VHost, Exchange: p.Exchange, Write: p.Write, Read: p.Read}
}

// topicPermissions lists every topic permission, or a user's, or a
// vhost's (404 for a user or vhost that does not exist).
func (a *api) topicPermissions(c *call) (any, error) {
	user, vhostName := c.path("user"), c.path("vhost")
	if !a.pathNamesExist(user, vhostName) {
		return nil, errNotFound
	}
	return a.topicPermissionsWhere(vhostName, user), nil
}

// pairExists is whether the path's vhost and user both exist.
func (a *api) pairExists(c *call) bool {
	_, vok := a.findVHost(c.path("vhost"))
	_, uok := a.findUser(c.path("user"))
	return vok && uok
}

// topicPermissionsOfPair lists a user's topic permissions in a vhost; 404
// when they have none there, as RabbitMQ answers.
func (a *api) topicPermissionsOfPair(c *call) (any, error) {
	if !a.pairExists(c) {
		return nil, errNotFound
	}
	list := a.topicPermissionsWhere(c.path("vhost"), c.path("user"))
	if len(list) == 0 {
		return nil, errNotFound
	}
	return list, nil
}

func (a *api) putTopicPermission(c *call) (any, error) {
	var body struct {
		Exchange, Write, Read *string
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if err := keysPresent(field{"exchange", body.Exchange != nil}, field{"write", body.Write != nil}, field{"read", body.Read != nil}); err != nil {
		return nil, err
	}
	if !a.pairExists(c) {
		return nil, badRequest("vhost_or_user_not_found")
	}
	vhostName, user := c.path("vhost"), c.path("user")
	existed := len(a.topicPermissionsWhere(vhostName, user)) > 0
	if err := a.b.SetTopicPermission(vhostName, user, *body.Exchange, *body.Write, *body.Read); err != nil {
		return nil, err
	}
	return createdOrUpdated(!existed)
}

// deleteTopicPermissions drops a user's topic permissions in a vhost, or
// the one on the path's exchange: 404 when they have none there; one on
// another exchange only is no change, as RabbitMQ has it.
func (a *api) deleteTopicPermissions(c *call) (any, error) {
	vhostName, user, x := c.path("vhost"), c.path("user"), c.path("exchange")
	if !a.pairExists(c) {
		return nil, errNotFound
	}
	list := a.topicPermissionsWhere(vhostName, user)
	if len(list) == 0 {
		return nil, errNotFound
	}
	if x != "" {
		if _, ok := a.b.Users().TopicPermission(vhostName, user, x); !ok {
			return nil, nil
		}
	}
	return nil, a.b.ClearTopicPermission(vhostName, user, x)
}
