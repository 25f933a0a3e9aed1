package admin

import (
	"encoding/json"
	"strings"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/vhost"
)

func (a *api) routeUsers(mux *router) {
	a.handle(mux, "GET /api/whoami", management, a.whoami)
	a.handle(mux, "GET /api/users", administrator, a.users)
	a.handle(mux, "GET /api/users/without-permissions", administrator, a.usersWithoutPermissions)
	a.handle(mux, "POST /api/users/bulk-delete", administrator, a.bulkDeleteUsers)
	a.handle(mux, "GET /api/users/{user}", administrator, a.user)
	a.handle(mux, "PUT /api/users/{user}", administrator, a.putUser)
	a.handle(mux, "DELETE /api/users/{user}", administrator, a.deleteUser)
	a.handle(mux, "GET /api/users/{user}/permissions", administrator, a.permissions)
	a.handle(mux, "GET /api/permissions", administrator, a.permissions)
	a.handle(mux, "GET /api/vhosts/{vhost}/permissions", administrator, a.permissions)
	a.handle(mux, "GET /api/permissions/{vhost}/{user}", administrator, a.permission)
	a.handle(mux, "PUT /api/permissions/{vhost}/{user}", administrator, a.putPermission)
	a.handle(mux, "DELETE /api/permissions/{vhost}/{user}", administrator, a.deletePermission)
	a.routeTopicPermissions(mux)
	a.routeVHostLimits(mux)
}

// userJSON is a user as RabbitMQ 3.10.8 shows it: tags as a list (3.10
// writes a list; earlier versions a comma-separated string).
type userJSON struct {
	Name             string         `json:"name"`
	PasswordHash     string         `json:"password_hash"`
	HashingAlgorithm string         `json:"hashing_algorithm"`
	Tags             []string       `json:"tags"`
	Limits           map[string]any `json:"limits"`
}

func userView(u *auth.User) userJSON {
	tags := u.Tags
	if tags == nil {
		tags = []string{}
	}
	limits := map[string]any{}
	for k, n := range u.Limits {
		limits[k] = n
	}
	return userJSON{Name: u.Name, PasswordHash: u.PasswordHash, HashingAlgorithm: u.Hashing.Name(), Tags: tags, Limits: limits}
}

func (a *api) whoami(c *call) (any, error) {
	tags := c.u.Tags
	if tags == nil {
		tags = []string{}
	}
	return map[string]any{"name": c.u.Name, "tags": tags}, nil
}

var userLister = lister[userJSON]{name: func(u userJSON) string { return u.Name }}

func (a *api) users(c *call) (any, error) {
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return nil, err
	}
	var out []userJSON
	for _, u := range a.b.Users().Users() {
		out = append(out, userView(u))
	}
	return list(out, p, userLister, same)
}

// usersWithoutPermissions lists the users with a permission in no vhost.
func (a *api) usersWithoutPermissions(c *call) (any, error) {
	with := map[string]bool{}
	for _, p := range a.b.Users().Permissions() {
		with[p.User] = true
	}
	out := []userJSON{}
	for _, u := range a.b.Users().Users() {
		if !with[u.Name] {
			out = append(out, userView(u))
		}
	}
	return out, nil
}

// bulkDeleteUsers deletes the users of {"users": [...]}. Unlike RabbitMQ
// 3.10.8, which deletes up to the first name it does not know and then
// answers 400, it checks every name first: a refused request deletes
// nobody.
func (a *api) bulkDeleteUsers(c *call) (any, error) {
	var body struct {
		Users []string `json:"users"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if err := keysPresent(field{"users", body.Users != nil}); err != nil {
		return nil, err
	}
	for _, name := range body.Users {
		if _, ok := a.findUser(name); !ok {
			return nil, badRequest("no_such_user %s", name)
		}
	}
	for _, name := range body.Users {
		if err := a.b.DeleteUser(name); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func (a *api) user(c *call) (any, error) {
	u, ok := a.findUser(c.path("user"))
	if !ok {
		return nil, errNotFound
	}
	return userView(u), nil
}

// userBody is PUT /api/users/{user}'s body. tags is required, as
// RabbitMQ requires it, and may be a comma-separated string or a list.
type userBody struct {
	Password         *string         `json:"password"`
	PasswordHash     *string         `json:"password_hash"`
	HashingAlgorithm string          `json:"hashing_algorithm"`
	Tags             json.RawMessage `json:"tags"`
}

// parseTags reads tags as a string ("a,b", spaces trimmed) or a list.
func parseTags(raw json.RawMessage) ([]string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		var tags []string
		for _, t := range strings.Split(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
		return tags, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("field 'tags' must be a comma-separated string or a list of strings")
	}
	return list, nil
}

func (a *api) putUser(c *call) (any, error) {
	var body userBody
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Tags == nil {
		return nil, badRequest("tags_not_present")
	}
	tags, err := parseTags(body.Tags)
	if err != nil {
		return nil, err
	}
	name := c.path("user")
	_, existed := a.b.Users().User(name)
	switch {
	case body.Password != nil:
		err = a.b.PutUser(name, body.Password, tags)
	case body.PasswordHash != nil:
		alg := auth.SHA256 // RabbitMQ's default
		if body.HashingAlgorithm != "" {
			if alg, err = auth.ParseHashing(body.HashingAlgorithm); err != nil {
				return nil, badRequest("field 'hashing_algorithm': %v", err)
			}
		}
		err = a.b.PutUserHash(name, *body.PasswordHash, alg, tags)
	default:
		// Neither: an existing user keeps its password, a new one has none.
		err = a.b.PutUser(name, nil, tags)
	}
	if err != nil {
		return nil, err
	}
	return createdOrUpdated(!existed)
}

func (a *api) deleteUser(c *call) (any, error) {
	if _, ok := a.findUser(c.path("user")); !ok {
		return nil, errNotFound
	}
	return nil, a.b.DeleteUser(c.path("user"))
}

type permissionJSON struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// permissions lists every permission, or a user's, or a vhost's.
func (a *api) permissions(c *call) (any, error) {
	user, vhostName := c.path("user"), c.path("vhost")
	if !a.pathNamesExist(user, vhostName) {
		return nil, errNotFound
	}
	out := []permissionJSON{}
	for _, p := range a.b.Users().Permissions() {
		if (user != "" && p.User != user) || (vhostName != "" && p.VHost != vhostName) {
			continue
		}
		out = append(out, permissionJSON{User: p.User, VHost: p.VHost, Configure: p.Configure, Write: p.Write, Read: p.Read})
	}
	return out, nil
}

func (a *api) permission(c *call) (any, error) {
	p, ok := a.b.Users().Permission(c.path("vhost"), c.path("user"))
	if !ok {
		return nil, errNotFound
	}
	return permissionJSON{User: c.path("user"), VHost: c.path("vhost"), Configure: p.Configure, Write: p.Write, Read: p.Read}, nil
}

func (a *api) putPermission(c *call) (any, error) {
	var body struct {
		Configure, Write, Read *string
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if err := keysPresent(field{"configure", body.Configure != nil}, field{"write", body.Write != nil}, field{"read", body.Read != nil}); err != nil {
		return nil, err
	}
	vhostName, user := c.path("vhost"), c.path("user")
	_, vok := a.findVHost(vhostName)
	_, uok := a.findUser(user)
	if !vok || !uok {
		return nil, badRequest("vhost_or_user_not_found")
	}
	_, existed := a.b.Users().Permission(vhostName, user)
	if err := a.b.SetPermission(vhostName, user, *body.Configure, *body.Write, *body.Read); err != nil {
		return nil, err
	}
	return createdOrUpdated(!existed)
}

func (a *api) deletePermission(c *call) (any, error) {
	if !a.findPermission(c.path("vhost"), c.path("user")) {
		return nil, errNotFound
	}
	return nil, a.b.ClearPermission(c.path("vhost"), c.path("user"))
}

// pathNamesExist says whether the user and the vhost a listing's path
// names exist ("": none named).
func (a *api) pathNamesExist(user, vhostName string) bool {
	if user != "" {
		if _, ok := a.findUser(user); !ok {
			return false
		}
	}
	if vhostName != "" {
		_, ok := a.findVHost(vhostName)
		return ok
	}
	return true
}

// findUser looks a user up; in a cluster a miss looks again once this
// node has caught up, so that a user made through another node a moment
// ago is found.
func (a *api) findUser(name string) (*auth.User, bool) {
	u, ok := a.b.Users().User(name)
	if !ok && a.b.CatchUp() {
		u, ok = a.b.Users().User(name)
	}
	return u, ok
}

// findVHost is findUser for a vhost.
func (a *api) findVHost(name string) (*vhost.VHost, bool) {
	v, ok := a.b.VHost(name)
	if !ok && a.b.CatchUp() {
		v, ok = a.b.VHost(name)
	}
	return v, ok
}

// findPermission is findUser for a permission.
func (a *api) findPermission(vhostName, user string) bool {
	_, ok := a.b.Users().Permission(vhostName, user)
	if !ok && a.b.CatchUp() {
		_, ok = a.b.Users().Permission(vhostName, user)
	}
	return ok
}
