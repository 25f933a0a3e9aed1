package tests

import (
	"reflect"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Users and permissions through the API, as RabbitMQ 3.10.8 answers.
func TestMgmtUsersAndPermissions(t *testing.T) {
	m := startMgmt(t)
	alice, bob := uniq(t, "alice"), uniq(t, "bob")
	t.Cleanup(func() { m.call("DELETE", "/api/users/"+esc(alice), ""); m.call("DELETE", "/api/users/"+esc(bob), "") })
	// Tags as a comma-separated string or as a list; shown as a list.
	m.expect("PUT", "/api/users/"+esc(alice), `{"password":"pw","tags":"monitoring, management"}`, 201)
	m.expect("PUT", "/api/users/"+esc(alice), `{"password":"pw","tags":["monitoring","management"]}`, 204)
	var u struct {
		Name             string
		PasswordHash     string `json:"password_hash"`
		HashingAlgorithm string `json:"hashing_algorithm"`
		Tags             []string
		Limits           map[string]any
	}
	m.expect("GET", "/api/users/"+esc(alice), "", 200).json(t, &u)
	if !reflect.DeepEqual(u.Tags, []string{"monitoring", "management"}) || u.HashingAlgorithm != "rabbit_password_hashing_sha256" || u.PasswordHash == "" {
		t.Fatalf("user: %+v", u)
	}
	m.expectError(m.call("PUT", "/api/users/"+esc(bob), `{"password":"pw"}`), 400, "bad_request", "tags_not_present")
	// A password hash as RabbitMQ writes it (RabbitMQ 3.10.8's hash of "guest").
	m.expect("PUT", "/api/users/"+esc(bob), `{"password_hash":"ctxOjaoYQs4WVgZMSUT+O40TlWVHWmV5UPi8ZM7yBg4sLBZQ","hashing_algorithm":"rabbit_password_hashing_sha256","tags":""}`, 201)
	m.expectNotFound("GET", "/api/users/nobody-"+m.vhost)
	m.expectNotFound("DELETE", "/api/users/nobody-"+m.vhost)

	p := "/api/permissions/" + m.v() + "/" + esc(bob)
	m.expect("PUT", p, `{"configure":".*","write":".*","read":".*"}`, 201)
	m.expect("PUT", p, `{"configure":"^bob","write":".*","read":".*"}`, 204)
	m.expectError(m.call("PUT", p, `{"write":".*","read":".*"}`), 400, "bad_request", "[{key_missing,configure}]")
	m.expectError(m.call("PUT", "/api/permissions/no-such-vhost/"+esc(bob), `{"configure":".*","write":".*","read":".*"}`),
		400, "bad_request", "vhost_or_user_not_found")
	var perm map[string]string
	m.expect("GET", p, "", 200).json(t, &perm)
	if perm["configure"] != "^bob" || perm["user"] != bob || perm["vhost"] != m.vhost {
		t.Fatalf("permission: %v", perm)
	}
	var perms []map[string]string
	m.expect("GET", "/api/users/"+esc(bob)+"/permissions", "", 200).json(t, &perms)
	if len(perms) != 1 {
		t.Fatalf("bob's permissions: %v", perms)
	}
	m.expect("GET", "/api/vhosts/"+m.v()+"/permissions", "", 200).json(t, &perms)
	if len(perms) != 2 { // guest's and bob's
		t.Fatalf("the vhost's permissions: %v", perms)
	}
	// bob logs in over AMQP with the imported hash's password.
	c, err := amqp.Dial(amqpURLAs(m, bob, "guest"))
	if err != nil {
		t.Fatalf("bob cannot log in with his hashed password: %v", err)
	}
	c.Close()
	m.expect("DELETE", p, "", 204)
	m.expectNotFound("DELETE", p)
	m.expectNotFound("GET", p)
	m.expect("DELETE", "/api/users/"+esc(bob), "", 204)
}

func amqpURLAs(m *mgmt, user, password string) string {
	u := m.amqpURL()
	return "amqp://" + esc(user) + ":" + password + "@" + u[len("amqp://guest:guest@"):]
}

// Access by tag, with RabbitMQ 3.10.8's statuses and reasons.
func TestMgmtAccessByTag(t *testing.T) {
	m := startMgmt(t)
	none, mgr, mon, pm := uniq(t, "none"), uniq(t, "mgr"), uniq(t, "mon"), uniq(t, "pm")
	m.addUser(none, "pw", "", "")
	m.addUser(mgr, "pw", "management", "")
	m.addUser(mon, "pw", "monitoring", "")
	m.addUser(pm, "pw", "policymaker", m.vhost)
	other := uniq(t, "other")
	t.Cleanup(func() { m.call("DELETE", "/api/vhosts/"+esc(other), "") })
	m.expect("PUT", "/api/vhosts/"+esc(other), "", 201)
	m.expect("PUT", "/api/permissions/"+m.v()+"/"+esc(mgr), `{"configure":".*","write":".*","read":".*"}`, 201)
	m.expect("PUT", "/api/queues/"+esc(other)+"/hidden", `{}`, 201)
	m.expect("PUT", "/api/queues/"+m.v()+"/shown", `{}`, 201)

	as := func(user, method, path, body string) response {
		return m.callAs(user, "pw", method, path, body, nil)
	}
	m.expectError(as(none, "GET", "/api/overview", ""), 401, "not_authorised", "Not management user")
	m.expectError(as(none, "GET", "/api/whoami", ""), 401, "not_authorised", "Not management user")
	m.expectError(as(mgr, "GET", "/api/users", ""), 401, "not_authorised", "Not administrator user")
	m.expectError(as(mgr, "GET", "/api/nodes", ""), 401, "not_authorised", "Not monitor user")
	m.expectError(as(mon, "GET", "/api/users", ""), 401, "not_authorised", "Not administrator user")
	m.expectError(as(mgr, "GET", "/api/queues/"+esc(other), ""), 401, "not_authorised", "User not authorised to access virtual host")
	m.expectError(as(mon, "PUT", "/api/queues/"+esc(other)+"/q", `{}`), 401, "not_authorised", "User not authorised to access virtual host")
	m.expectError(as(mgr, "PUT", "/api/policies/"+m.v()+"/p", `{"pattern":".*","definition":{"max-length":1}}`), 401, "not_authorised", "")

	// management sees only its vhosts; monitoring sees every vhost and
	// connection, but the objects of its own vhosts only.
	var qs []struct{ Name, VHost string }
	if r := as(mgr, "GET", "/api/queues", ""); r.status != 200 {
		t.Fatalf("management lists queues: %d %s", r.status, r.body)
	} else {
		r.json(t, &qs)
	}
	for _, q := range qs {
		if q.VHost == other {
			t.Fatalf("management saw %s in %s", q.Name, other)
		}
	}
	m.expectError(as(mon, "GET", "/api/queues/"+esc(other), ""), 401, "not_authorised", "User not authorised to access virtual host")
	if r := as(mon, "GET", "/api/vhosts", ""); r.status != 200 || !containsName(t, r, other) {
		t.Fatalf("monitoring lists every vhost: %d %s", r.status, r.body)
	}
	if r := as(mgr, "GET", "/api/vhosts", ""); r.status != 200 || containsName(t, r, other) {
		t.Fatalf("management lists only its vhosts: %d %s", r.status, r.body)
	}
	if r := as(mgr, "PUT", "/api/queues/"+m.v()+"/byMgr", `{}`); r.status != 201 {
		t.Fatalf("management declares in its vhost: %d %s", r.status, r.body)
	}
	if r := as(pm, "PUT", "/api/policies/"+m.v()+"/p", `{"pattern":"^none$","definition":{"max-length":1}}`); r.status != 201 {
		t.Fatalf("policymaker sets a policy in its vhost: %d %s", r.status, r.body)
	}
	var who struct {
		Name string
		Tags []string
	}
	as(mon, "GET", "/api/whoami", "").json(t, &who)
	if who.Name != mon || !reflect.DeepEqual(who.Tags, []string{"monitoring"}) {
		t.Fatalf("whoami: %+v", who)
	}

	// Bad credentials, and none.
	r := m.callAs(mgr, "wrong", "GET", "/api/overview", "", nil)
	if r.status != 401 || r.body != `{"error":"not_authorized","reason":"Login failed"}` || r.header.Get("WWW-Authenticate") != `Basic realm="RabbitMQ Management"` {
		t.Fatalf("bad password: %d %s %v", r.status, r.body, r.header)
	}
	r = m.callAs("", "", "GET", "/api/overview", "", nil)
	if r.status != 401 || r.header.Get("WWW-Authenticate") != `Basic realm="RabbitMQ Management"` {
		t.Fatalf("no credentials: %d %s %v", r.status, r.body, r.header)
	}
}

func containsName(t testing.TB, r response, name string) bool {
	var items []struct{ Name string }
	r.json(t, &items)
	for _, i := range items {
		if i.Name == name {
			return true
		}
	}
	return false
}

// /api/users/without-permissions lists the users with no permission in
// any vhost; POST /api/users/bulk-delete deletes the users it names.
func TestUsersWithoutPermissionsAndBulkDelete(t *testing.T) {
	m := startMgmt(t)
	bare, other := uniq(t, "bare"), uniq(t, "other")
	m.addUser(bare, "pw", "", "")
	m.addUser(other, "pw", "", m.vhost)
	var users []struct{ Name string }
	m.expect("GET", "/api/users/without-permissions", "", 200).json(t, &users)
	names := map[string]bool{}
	for _, u := range users {
		names[u.Name] = true
	}
	if !names[bare] || names[other] || names["guest"] {
		t.Fatalf("without permissions: %v", users)
	}
	m.expectError(m.call("POST", "/api/users/bulk-delete", `{}`), 400, "bad_request", "[{key_missing,users}]")
	if m.isWarren() {
		// Warren checks every name before it deletes any.
		r := m.call("POST", "/api/users/bulk-delete", `{"users":["`+bare+`","`+uniq(t, "nobody")+`"]}`)
		if r.status != 400 {
			t.Fatalf("a bulk delete naming a user that does not exist: %d %s", r.status, r.body)
		}
		m.expect("GET", "/api/users/"+esc(bare), "", 200)
	}
	m.expect("POST", "/api/users/bulk-delete", `{"users":["`+bare+`","`+other+`"]}`, 204)
	m.expectNotFound("GET", "/api/users/"+esc(bare))
	m.expectNotFound("GET", "/api/users/"+esc(other))
}
