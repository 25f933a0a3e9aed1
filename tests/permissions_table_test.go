package tests

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/protocol"
)

// The permission table: every way into the broker asks the same
// configure, write and read permissions for the same operation (auth.Grant
// holds the rules). The operations below say what each needs; each door's
// test maps its entry points onto them and, for every need in turn, acts
// as a user who has every permission but that one and expects the
// refusal, then as a user who has them all and expects success. A door's
// entry point missing from its map fails its test: a new admin route, a
// new AMQP method, a new protocol's command cannot be added without a row.
//
// The doors: the management API (every route, which is also every call
// the web UI makes: it has no other way in), AMQP 0-9-1 (every method),
// and a cluster (the AMQP table through another node than the one the
// permissions were set on). The tests run against the reference too, but
// for what only Warren has.

// The fixtures the operations name, made afresh before each request.
const (
	permQueue     = "perm.q"     // holds a message; bound from permExchange with key "k"
	permNewQueue  = "perm.new-q" // absent: declares create it
	permExchange  = "perm.x"     // direct, bound to permQueue and permExchange2 with key "k"
	permExchange2 = "perm.x2"    // direct
	permNewX      = "perm.new-x" // absent
	permDefault   = "amq.default"
	permAliveness = "aliveness-test"
)

// permNames is every name an operation's needs mention.
var permNames = []string{permQueue, permNewQueue, permExchange, permExchange2, permNewX, permDefault, permAliveness}

// need is one permission an operation needs on one resource.
type need struct{ perm, kind, name string }

// operation is what a door's entry point does to a vhost's resources.
type operation []need

var (
	opNone              operation // touches no resource, or needs a tag and nothing more
	opDeclareQueue      = operation{{"configure", "queue", permNewQueue}}
	opDeclareQueueDLX   = operation{{"configure", "queue", permNewQueue}, {"read", "queue", permNewQueue}, {"write", "exchange", permExchange}}
	opDeleteQueue       = operation{{"configure", "queue", permQueue}}
	opReadQueue         = operation{{"read", "queue", permQueue}} // purge, get, consume
	opDeclareExchange   = operation{{"configure", "exchange", permNewX}}
	opDeclareExchangeAE = operation{{"configure", "exchange", permNewX}, {"read", "exchange", permNewX}, {"write", "exchange", permExchange}}
	opDeleteExchange    = operation{{"configure", "exchange", permExchange}}
	opBindQueue         = operation{{"write", "queue", permQueue}, {"read", "exchange", permExchange}}
	opBindExchange      = operation{{"write", "exchange", permExchange2}, {"read", "exchange", permExchange}}
	opPublish           = operation{{"write", "exchange", permExchange}}
	opPublishDefault    = operation{{"write", "exchange", permDefault}}
	opReadHeld          = operation{{"read", "exchange", permExchange}}
	opAliveness         = operation{{"configure", "queue", permAliveness}, {"write", "exchange", permDefault}, {"read", "queue", permAliveness}}
)

// permissionsLacking are a user's three patterns when it has every
// permission but n.perm on n.name: that one matches every other name the
// table uses.
func permissionsLacking(n need) (configure, write, read string) {
	var others []string
	for _, name := range permNames {
		if name != n.name {
			others = append(others, regexp.QuoteMeta(name))
		}
	}
	lacking := "^(" + strings.Join(others, "|") + ")$"
	configure, write, read = ".*", ".*", ".*"
	switch n.perm {
	case "configure":
		configure = lacking
	case "write":
		write = lacking
	case "read":
		read = lacking
	}
	return configure, write, read
}

// refusalText is the AMQP channel's text for a missing permission.
func refusalText(n need, vhost, user string) string {
	return fmt.Sprintf("ACCESS_REFUSED - access to %s '%s' in vhost '%s' refused for user '%s'", n.kind, n.name, vhost, user)
}

// permUsers are the table's users, one per tag, each named for its tag.
var permUsers = []string{"management", "monitoring", "policymaker", "administrator"}

func permUser(tag string) string { return "perm-" + tag }

// tagsBelow are the tags that do not reach tag.
func tagsBelow(tag string) []string {
	switch tag {
	case "monitoring", "policymaker":
		return []string{"management"}
	case "administrator":
		return []string{"management", "monitoring", "policymaker"}
	}
	return nil
}

// permDoor is the broker as the table drives it: set is where users and
// permissions are changed, act where the user acts (the same node, or
// another node of a cluster).
type permDoor struct {
	set, act *mgmt
}

// addUsers makes the table's users.
func (d permDoor) addUsers() {
	for _, tag := range permUsers {
		d.set.addUser(permUser(tag), permUser(tag), tag, "")
	}
}

// grant gives user the three patterns in the test's vhost, and waits
// until the acting node has them.
func (d permDoor) grant(user, configure, write, read string) {
	d.set.t.Helper()
	path := "/api/permissions/" + d.set.v() + "/" + esc(user)
	body := fmt.Sprintf(`{"configure":%q,"write":%q,"read":%q}`, configure, write, read)
	if r := d.set.call("PUT", path, body); r.status != 201 && r.status != 204 {
		d.set.t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
	}
	d.untilActingNodeHas(path, func(r response) bool {
		var p struct{ Configure, Write, Read string }
		if r.status != 200 {
			return false
		}
		r.json(d.act.t, &p)
		return p.Configure == configure && p.Write == write && p.Read == read
	})
}

// revoke takes user's permission in the test's vhost away.
func (d permDoor) revoke(user string) {
	d.set.t.Helper()
	path := "/api/permissions/" + d.set.v() + "/" + esc(user)
	if r := d.set.call("DELETE", path, ""); r.status != 204 && r.status != 404 {
		d.set.t.Fatalf("DELETE %s: %d %s", path, r.status, r.body)
	}
	d.untilActingNodeHas(path, func(r response) bool { return r.status == 404 })
}

func (d permDoor) untilActingNodeHas(path string, ok func(response) bool) {
	if d.act == d.set {
		return
	}
	waitFor(d.act.t, "the acting node to have "+path, func() bool { return ok(d.act.call("GET", path, "")) })
}

// fixtures makes the table's resources as they were, on the acting node.
func (d permDoor) fixtures() {
	m := d.act
	m.t.Helper()
	for _, q := range []string{permNewQueue, permAliveness} {
		m.call("DELETE", "/api/queues/"+m.v()+"/"+q, "")
	}
	m.call("DELETE", "/api/exchanges/"+m.v()+"/"+permNewX, "")
	// What the global rows create.
	m.call("DELETE", "/api/vhosts/perm-scratch-vhost", "")
	m.call("DELETE", "/api/users/perm-scratch-user", "")
	m.call("DELETE", "/api/policies/"+m.v()+"/perm-policy", "")
	m.call("DELETE", "/api/operator-policies/"+m.v()+"/perm-policy", "")
	m.call("DELETE", "/api/global-parameters/perm-param", "")
	m.call("DELETE", "/api/queues/"+m.v()+"/"+permQueue, "")
	m.expect("PUT", "/api/queues/"+m.v()+"/"+permQueue, `{}`, 201)
	for _, x := range []string{permExchange, permExchange2} {
		if r := m.call("PUT", "/api/exchanges/"+m.v()+"/"+x, `{"type":"direct"}`); r.status != 201 && r.status != 204 {
			m.t.Fatalf("PUT exchange %s: %d %s", x, r.status, r.body)
		}
	}
	m.expect("POST", "/api/bindings/"+m.v()+"/e/"+permExchange+"/q/"+permQueue, `{"routing_key":"k"}`, 201)
	if r := m.call("POST", "/api/bindings/"+m.v()+"/e/"+permExchange+"/e/"+permExchange2, `{"routing_key":"k"}`); r.status != 201 {
		m.t.Fatalf("bind %s to %s: %d %s", permExchange, permExchange2, r.status, r.body)
	}
	m.expect("POST", "/api/exchanges/"+m.v()+"/amq.default/publish",
		`{"properties":{},"routing_key":"`+permQueue+`","payload":"m","payload_encoding":"string"}`, 200)
}

// adminRow is one request to the management API and what it needs.
type adminRow struct {
	route string // the pattern it exercises, as admin.Patterns lists it
	path  string // the request's; {v} stands for the test's vhost
	body  string
	tag   string // the least tag it needs; "" is management
	op    operation
	ok    int           // the status with every permission
	refOK int           // the reference's, where it differs (RabbitMQ answers some missing objects with a 500)
	how   refusalAnswer // how a refusal is answered
	// warrenOnly: a route RabbitMQ does not have, or answers otherwise
	// for reasons that are not permissions.
	warrenOnly bool
	public     bool // served without credentials (metrics, the web UI)
}

// refusalAnswer is how the management API answers a refused request
// (RabbitMQ runs each on an AMQP channel of the user's own).
type refusalAnswer int

const (
	refusedPlain    refusalAnswer = iota // 401 "Access refused."
	refusedWithText                      // 401 with the channel's text
	refusedPublish                       // 400 "403 ACCESS_REFUSED - ..."
)

const (
	qPath      = "/api/queues/{v}/" + permQueue
	xPath      = "/api/exchanges/{v}/" + permExchange
	getMessage = `{"count":1,"ackmode":"ack_requeue_false","encoding":"auto"}`
	publishMsg = `{"properties":{},"routing_key":"k","payload":"m","payload_encoding":"string"}`
)

// adminRows covers every route of admin.Patterns at least once.
var adminRows = []adminRow{
	{route: "GET /api/overview", path: "/api/overview", ok: 200},
	{route: "GET /api/cluster-name", path: "/api/cluster-name", ok: 200},
	{route: "PUT /api/cluster-name", path: "/api/cluster-name", body: `{"name":"perm-cluster"}`, tag: "administrator", ok: 204, warrenOnly: true},
	{route: "GET /api/nodes", path: "/api/nodes", tag: "monitoring", ok: 200},
	{route: "GET /api/nodes/{node}", path: "/api/nodes/perm-no-such-node", tag: "monitoring", ok: 404, refOK: 500},
	{route: "GET /api/nodes/{node}/memory", path: "/api/nodes/perm-no-such-node/memory", tag: "monitoring", ok: 404},

	{route: "GET /api/vhosts", path: "/api/vhosts", ok: 200},
	{route: "GET /api/vhosts/{vhost}", path: "/api/vhosts/{v}", tag: "administrator", ok: 200},
	{route: "PUT /api/vhosts/{vhost}", path: "/api/vhosts/perm-scratch-vhost", body: `{}`, tag: "administrator", ok: 201},
	{route: "DELETE /api/vhosts/{vhost}", path: "/api/vhosts/perm-no-such-vhost", tag: "administrator", ok: 404},

	{route: "GET /api/whoami", path: "/api/whoami", ok: 200},
	{route: "GET /api/users", path: "/api/users", tag: "administrator", ok: 200},
	{route: "GET /api/users/{user}", path: "/api/users/perm-management", tag: "administrator", ok: 200},
	{route: "GET /api/users/without-permissions", path: "/api/users/without-permissions", tag: "administrator", ok: 200},
	{route: "POST /api/users/bulk-delete", path: "/api/users/bulk-delete", body: `{"users":[]}`, tag: "administrator", ok: 204},
	{route: "GET /api/extensions", path: "/api/extensions", ok: 200},
	{route: "GET /api/auth", path: "/api/auth", ok: 200, public: true},
	{route: "PUT /api/users/{user}", path: "/api/users/perm-scratch-user", body: `{"password":"x","tags":""}`, tag: "administrator", ok: 201},
	{route: "DELETE /api/users/{user}", path: "/api/users/perm-no-such-user", tag: "administrator", ok: 404},
	{route: "GET /api/users/{user}/permissions", path: "/api/users/perm-management/permissions", tag: "administrator", ok: 200},
	{route: "GET /api/permissions", path: "/api/permissions", tag: "administrator", ok: 200},
	{route: "GET /api/vhosts/{vhost}/permissions", path: "/api/vhosts/{v}/permissions", tag: "administrator", ok: 200},
	{route: "GET /api/permissions/{vhost}/{user}", path: "/api/permissions/{v}/guest", tag: "administrator", ok: 200},
	{route: "PUT /api/permissions/{vhost}/{user}", path: "/api/permissions/{v}/perm-management",
		body: `{"configure":"","write":"","read":""}`, tag: "administrator", ok: 204},
	{route: "DELETE /api/permissions/{vhost}/{user}", path: "/api/permissions/{v}/perm-no-such-user", tag: "administrator", ok: 404},
	{route: "GET /api/vhost-limits", path: "/api/vhost-limits", ok: 200},
	{route: "GET /api/vhost-limits/{vhost}", path: "/api/vhost-limits/{v}", ok: 200},
	{route: "PUT /api/vhost-limits/{vhost}/{name}", path: "/api/vhost-limits/{v}/max-queues", body: `{"value":-1}`, tag: "administrator", ok: 204},
	{route: "DELETE /api/vhost-limits/{vhost}/{name}", path: "/api/vhost-limits/{v}/max-queues", tag: "administrator", ok: 204},
	{route: "GET /api/user-limits", path: "/api/user-limits", ok: 200},
	{route: "GET /api/user-limits/{user}", path: "/api/user-limits/perm-management", ok: 200},
	{route: "PUT /api/user-limits/{user}/{name}", path: "/api/user-limits/perm-management/max-channels", body: `{"value":-1}`, tag: "administrator", ok: 204},
	{route: "DELETE /api/user-limits/{user}/{name}", path: "/api/user-limits/perm-management/max-channels", tag: "administrator", ok: 204},
	{route: "GET /api/topic-permissions", path: "/api/topic-permissions", tag: "administrator", ok: 200},
	{route: "GET /api/users/{user}/topic-permissions", path: "/api/users/perm-management/topic-permissions", tag: "administrator", ok: 200},
	{route: "GET /api/vhosts/{vhost}/topic-permissions", path: "/api/vhosts/{v}/topic-permissions", tag: "administrator", ok: 200},
	{route: "GET /api/topic-permissions/{vhost}/{user}", path: "/api/topic-permissions/{v}/guest", tag: "administrator", ok: 404},
	{route: "PUT /api/topic-permissions/{vhost}/{user}", path: "/api/topic-permissions/{v}/perm-no-such-user",
		body: `{"exchange":"amq.topic","write":".*","read":".*"}`, tag: "administrator", ok: 400},
	{route: "DELETE /api/topic-permissions/{vhost}/{user}", path: "/api/topic-permissions/{v}/perm-no-such-user", tag: "administrator", ok: 404},
	{route: "DELETE /api/topic-permissions/{vhost}/{user}/{exchange}", path: "/api/topic-permissions/{v}/perm-no-such-user/amq.topic",
		tag: "administrator", ok: 404},

	{route: "GET /api/queues", path: "/api/queues", ok: 200},
	{route: "GET /api/queues/{vhost}", path: "/api/queues/{v}", ok: 200},
	{route: "GET /api/queues/{vhost}/{queue}", path: qPath, ok: 200},
	{route: "PUT /api/queues/{vhost}/{queue}", path: "/api/queues/{v}/" + permNewQueue, body: `{}`, op: opDeclareQueue, ok: 201},
	{route: "PUT /api/queues/{vhost}/{queue}", path: "/api/queues/{v}/" + permNewQueue,
		body: `{"arguments":{"x-dead-letter-exchange":"` + permExchange + `"}}`, op: opDeclareQueueDLX, ok: 201},
	{route: "DELETE /api/queues/{vhost}/{queue}", path: qPath, op: opDeleteQueue, ok: 204},
	{route: "DELETE /api/queues/{vhost}/{queue}/contents", path: qPath + "/contents", op: opReadQueue, ok: 204},
	{route: "POST /api/queues/{vhost}/{queue}/get", path: qPath + "/get", body: getMessage, op: opReadQueue, ok: 200, how: refusedWithText},
	{route: "POST /api/queues/{vhost}/{queue}/actions", path: qPath + "/actions", body: `{"action":"sync"}`, tag: "administrator", ok: 204},
	{route: "GET /api/queues/{vhost}/{queue}/bindings", path: qPath + "/bindings", ok: 200},

	{route: "GET /api/exchanges", path: "/api/exchanges", ok: 200},
	{route: "GET /api/exchanges/{vhost}", path: "/api/exchanges/{v}", ok: 200},
	{route: "GET /api/exchanges/{vhost}/{exchange}", path: xPath, ok: 200},
	{route: "PUT /api/exchanges/{vhost}/{exchange}", path: "/api/exchanges/{v}/" + permNewX, body: `{"type":"fanout"}`, op: opDeclareExchange, ok: 201},
	{route: "PUT /api/exchanges/{vhost}/{exchange}", path: "/api/exchanges/{v}/" + permNewX,
		body: `{"type":"fanout","arguments":{"alternate-exchange":"` + permExchange + `"}}`, op: opDeclareExchangeAE, ok: 201},
	{route: "DELETE /api/exchanges/{vhost}/{exchange}", path: xPath, op: opDeleteExchange, ok: 204},
	{route: "POST /api/exchanges/{vhost}/{exchange}/publish", path: xPath + "/publish", body: publishMsg, op: opPublish, ok: 200, how: refusedPublish},
	{route: "POST /api/exchanges/{vhost}/{exchange}/publish", path: "/api/exchanges/{v}/amq.default/publish", body: publishMsg,
		op: opPublishDefault, ok: 200, how: refusedPublish},
	{route: "GET /api/exchanges/{vhost}/{exchange}/bindings/source", path: xPath + "/bindings/source", ok: 200},
	{route: "GET /api/exchanges/{vhost}/{exchange}/bindings/destination", path: xPath + "/bindings/destination", ok: 200},
	{route: "GET /api/exchanges/{vhost}/{exchange}/delayed", path: xPath + "/delayed", op: opReadHeld, ok: 200, how: refusedWithText, warrenOnly: true},
	{route: "DELETE /api/exchanges/{vhost}/{exchange}/delayed", path: xPath + "/delayed", op: opReadHeld, ok: 200, how: refusedWithText, warrenOnly: true},

	{route: "GET /api/bindings", path: "/api/bindings", ok: 200},
	{route: "GET /api/bindings/{vhost}", path: "/api/bindings/{v}", ok: 200},
	{route: "GET /api/bindings/{vhost}/e/{source}/q/{dest}", path: "/api/bindings/{v}/e/" + permExchange + "/q/" + permQueue, ok: 200},
	{route: "POST /api/bindings/{vhost}/e/{source}/q/{dest}", path: "/api/bindings/{v}/e/" + permExchange + "/q/" + permQueue,
		body: `{"routing_key":"k2"}`, op: opBindQueue, ok: 201},
	{route: "GET /api/bindings/{vhost}/e/{source}/q/{dest}/{props}", path: "/api/bindings/{v}/e/" + permExchange + "/q/" + permQueue + "/k", ok: 200},
	{route: "DELETE /api/bindings/{vhost}/e/{source}/q/{dest}/{props}", path: "/api/bindings/{v}/e/" + permExchange + "/q/" + permQueue + "/k",
		op: opBindQueue, ok: 204},
	{route: "GET /api/bindings/{vhost}/e/{source}/e/{dest}", path: "/api/bindings/{v}/e/" + permExchange + "/e/" + permExchange2, ok: 200},
	{route: "POST /api/bindings/{vhost}/e/{source}/e/{dest}", path: "/api/bindings/{v}/e/" + permExchange + "/e/" + permExchange2,
		body: `{"routing_key":"k2"}`, op: opBindExchange, ok: 201},
	{route: "GET /api/bindings/{vhost}/e/{source}/e/{dest}/{props}", path: "/api/bindings/{v}/e/" + permExchange + "/e/" + permExchange2 + "/k", ok: 200},
	{route: "DELETE /api/bindings/{vhost}/e/{source}/e/{dest}/{props}", path: "/api/bindings/{v}/e/" + permExchange + "/e/" + permExchange2 + "/k",
		op: opBindExchange, ok: 204},

	// A user sees and closes its own connections only (monitoring sees
	// all, administrator closes all): tags and ownership, no permission.
	{route: "GET /api/connections", path: "/api/connections", ok: 200},
	{route: "GET /api/vhosts/{vhost}/connections", path: "/api/vhosts/{v}/connections", ok: 200},
	{route: "GET /api/connections/{name}", path: "/api/connections/perm-no-such-connection", ok: 404, refOK: 500},
	{route: "DELETE /api/connections/{name}", path: "/api/connections/perm-no-such-connection", ok: 404, refOK: 500},
	{route: "GET /api/connections/{name}/channels", path: "/api/connections/perm-no-such-connection/channels", ok: 404, refOK: 500},
	{route: "GET /api/channels", path: "/api/channels", ok: 200},
	{route: "GET /api/vhosts/{vhost}/channels", path: "/api/vhosts/{v}/channels", ok: 200},
	{route: "GET /api/channels/{channel}", path: "/api/channels/perm-no-such-channel", ok: 404, refOK: 500},
	{route: "GET /api/consumers", path: "/api/consumers", ok: 200},
	{route: "GET /api/consumers/{vhost}", path: "/api/consumers/{v}", ok: 200},
	// The stream plugin's routes, the same rules: tags and ownership, and
	// access to a vhost the path names. A missing connection is a 500 in
	// RabbitMQ's /api/connections/{name}; its stream routes check the
	// user against the connection the same way, so they are taken to
	// answer alike (not yet run against a reference with
	// rabbitmq_stream_management enabled).
	{route: "GET /api/stream/connections", path: "/api/stream/connections", ok: 200},
	{route: "GET /api/stream/connections/{vhost}", path: "/api/stream/connections/{v}", ok: 200},
	{route: "GET /api/stream/connections/{vhost}/{name}", path: "/api/stream/connections/{v}/perm-no-such-connection", ok: 404, refOK: 500},
	{route: "DELETE /api/stream/connections/{vhost}/{name}", path: "/api/stream/connections/{v}/perm-no-such-connection", ok: 404, refOK: 500},
	{route: "GET /api/stream/connections/{vhost}/{name}/publishers", path: "/api/stream/connections/{v}/perm-no-such-connection/publishers",
		ok: 404, refOK: 500},
	{route: "GET /api/stream/connections/{vhost}/{name}/consumers", path: "/api/stream/connections/{v}/perm-no-such-connection/consumers",
		ok: 404, refOK: 500},
	{route: "GET /api/stream/publishers", path: "/api/stream/publishers", ok: 200},
	{route: "GET /api/stream/publishers/{vhost}", path: "/api/stream/publishers/{v}", ok: 200},
	{route: "GET /api/stream/publishers/{vhost}/{stream}", path: "/api/stream/publishers/{v}/" + permQueue, ok: 200},
	{route: "GET /api/stream/consumers", path: "/api/stream/consumers", ok: 200},
	{route: "GET /api/stream/consumers/{vhost}", path: "/api/stream/consumers/{v}", ok: 200},

	{route: "GET /api/policies", path: "/api/policies", ok: 200},
	{route: "GET /api/policies/{vhost}", path: "/api/policies/{v}", ok: 200},
	{route: "GET /api/policies/{vhost}/{name}", path: "/api/policies/{v}/perm-no-such-policy", tag: "policymaker", ok: 404},
	{route: "PUT /api/policies/{vhost}/{name}", path: "/api/policies/{v}/perm-policy",
		body: `{"pattern":"^perm-nothing$","definition":{"max-length":1},"apply-to":"queues"}`, tag: "policymaker", ok: 201},
	{route: "DELETE /api/policies/{vhost}/{name}", path: "/api/policies/{v}/perm-no-such-policy", tag: "policymaker", ok: 404},
	{route: "GET /api/feature-flags", path: "/api/feature-flags", tag: "administrator", ok: 200},
	{route: "GET /api/parameters", path: "/api/parameters", tag: "policymaker", ok: 200},
	{route: "GET /api/parameters/{component}", path: "/api/parameters/vhost-limits", tag: "policymaker", ok: 200},
	{route: "GET /api/parameters/{component}/{vhost}", path: "/api/parameters/vhost-limits/{v}", tag: "policymaker", ok: 200},
	{route: "GET /api/parameters/{component}/{vhost}/{name}", path: "/api/parameters/perm-no-such-component/{v}/limits", tag: "policymaker", ok: 404},
	{route: "PUT /api/parameters/{component}/{vhost}/{name}", path: "/api/parameters/perm-no-such-component/{v}/x", body: `{"value":{}}`, tag: "policymaker", ok: 400},
	{route: "DELETE /api/parameters/{component}/{vhost}/{name}", path: "/api/parameters/perm-no-such-component/{v}/x", tag: "policymaker", ok: 404},
	{route: "GET /api/global-parameters", path: "/api/global-parameters", tag: "policymaker", ok: 200},
	{route: "GET /api/global-parameters/{name}", path: "/api/global-parameters/cluster_name", tag: "policymaker", ok: 200},
	{route: "PUT /api/global-parameters/{name}", path: "/api/global-parameters/perm-param", body: `{"value":{"a":1}}`, tag: "policymaker", ok: 201},
	{route: "DELETE /api/global-parameters/{name}", path: "/api/global-parameters/perm-no-such-param", tag: "policymaker", ok: 404},
	{route: "PUT /api/feature-flags/{name}/enable", path: "/api/feature-flags/quorum_queue/enable", body: `{}`, tag: "administrator", ok: 204},
	{route: "GET /api/operator-policies", path: "/api/operator-policies", ok: 200},
	{route: "GET /api/operator-policies/{vhost}", path: "/api/operator-policies/{v}", ok: 200},
	{route: "GET /api/operator-policies/{vhost}/{name}", path: "/api/operator-policies/{v}/perm-no-such-policy", tag: "administrator", ok: 404},
	{route: "PUT /api/operator-policies/{vhost}/{name}", path: "/api/operator-policies/{v}/perm-policy",
		body: `{"pattern":"^perm-nothing$","definition":{"max-length":1},"apply-to":"queues"}`, tag: "administrator", ok: 201},
	{route: "DELETE /api/operator-policies/{vhost}/{name}", path: "/api/operator-policies/{v}/perm-no-such-policy", tag: "administrator", ok: 404},

	{route: "GET /api/plugins", path: "/api/plugins", tag: "monitoring", ok: 200, warrenOnly: true},
	{route: "POST /api/plugins/{name}/enable", path: "/api/plugins/perm-no-such-plugin/enable", tag: "administrator", ok: 404, warrenOnly: true},
	{route: "POST /api/plugins/{name}/disable", path: "/api/plugins/perm-no-such-plugin/disable", tag: "administrator", ok: 404, warrenOnly: true},
	{route: "PUT /api/plugins/{name}/settings/{key}", path: "/api/plugins/perm-no-such-plugin/settings/k", body: `{"value":1}`,
		tag: "administrator", ok: 404, warrenOnly: true},
	{route: "DELETE /api/plugins/{name}/settings/{key}", path: "/api/plugins/perm-no-such-plugin/settings/k", tag: "administrator", ok: 404, warrenOnly: true},

	{route: "GET /api/aliveness-test/{vhost}", path: "/api/aliveness-test/{v}", op: opAliveness, ok: 200, how: refusedWithText},
	{route: "GET /api/health/checks/alarms", path: "/api/health/checks/alarms", ok: 200},
	{route: "GET /api/health/checks/local-alarms", path: "/api/health/checks/local-alarms", ok: 200},
	{route: "GET /api/health/checks/port-listener/{port}", path: "/api/health/checks/port-listener/1", ok: 503},
	{route: "GET /api/health/checks/protocol-listener/{protocol}", path: "/api/health/checks/protocol-listener/amqp", ok: 200},
	{route: "GET /api/health/checks/virtual-hosts", path: "/api/health/checks/virtual-hosts", ok: 200},
	{route: "GET /api/health/checks/certificate-expiration/{within}/{unit}", path: "/api/health/checks/certificate-expiration/1/weeks", ok: 200},
	{route: "GET /api/health/checks/node-is-quorum-critical", path: "/api/health/checks/node-is-quorum-critical", ok: 200},
	{route: "GET /api/health/checks/node-is-mirror-sync-critical", path: "/api/health/checks/node-is-mirror-sync-critical", ok: 200},

	{route: "PUT /api/warren/vm-memory-high-watermark", path: "/api/warren/vm-memory-high-watermark", body: `{"fraction":0.4}`,
		tag: "administrator", ok: 204, warrenOnly: true},
	{route: "PUT /api/warren/disk-free-limit", path: "/api/warren/disk-free-limit", body: `{"bytes":50000000}`,
		tag: "administrator", ok: 204, warrenOnly: true},
	{route: "GET /api/warren/cluster", path: "/api/warren/cluster", tag: "monitoring", ok: 200, warrenOnly: true},
	{route: "DELETE /api/warren/cluster/nodes/{node}", path: "/api/warren/cluster/nodes/perm-no-such-node", tag: "administrator", ok: 400, warrenOnly: true},
	{route: "POST /api/warren/cluster/join", path: "/api/warren/cluster/join", body: `{}`, tag: "administrator", ok: 400, warrenOnly: true},
	{route: "POST /api/warren/queues/{vhost}/{queue}/members", path: "/api/warren/queues/{v}/" + permQueue + "/members",
		body: `{"node":"perm-no-such-node"}`, tag: "administrator", ok: 400, warrenOnly: true},
	{route: "DELETE /api/warren/queues/{vhost}/{queue}/members/{node}", path: "/api/warren/queues/{v}/" + permQueue + "/members/perm-no-such-node",
		tag: "administrator", ok: 400, warrenOnly: true},
	{route: "POST /api/warren/quorum/grow", path: "/api/warren/quorum/grow", body: `{"node":"perm-no-such-node"}`, tag: "administrator", ok: 400, warrenOnly: true},
	{route: "POST /api/warren/quorum/shrink", path: "/api/warren/quorum/shrink", body: `{"node":"perm-no-such-node"}`, tag: "administrator", ok: 400, warrenOnly: true},
	{route: "POST /api/warren/quorum/rebalance", path: "/api/warren/quorum/rebalance", body: `{"type":"quorum","queue_pattern":"^perm-none$"}`, tag: "administrator", ok: 200, warrenOnly: true},
	{route: "POST /api/rebalance/queues", path: "/api/rebalance/queues", tag: "administrator", ok: 204},

	// The shovel plugin's status routes: monitoring reads them, as in
	// RabbitMQ; restarting or deleting a shovel asks policymaker, as its
	// parameter does (RabbitMQ 3.10.8 asks monitoring: warrenOnly). A
	// reference without rabbitmq_shovel_management has none of them.
	{route: "GET /api/shovels", path: "/api/shovels", tag: "monitoring", ok: 200, warrenOnly: true},
	{route: "GET /api/shovels/{vhost}", path: "/api/shovels/{v}", tag: "monitoring", ok: 200, warrenOnly: true},
	{route: "GET /api/shovels/vhost/{vhost}/{name}", path: "/api/shovels/vhost/{v}/perm-no-such-shovel", tag: "monitoring", ok: 404, warrenOnly: true},
	{route: "DELETE /api/shovels/vhost/{vhost}/{name}", path: "/api/shovels/vhost/{v}/perm-no-such-shovel", tag: "policymaker", ok: 404, warrenOnly: true},
	{route: "DELETE /api/shovels/vhost/{vhost}/{name}/restart", path: "/api/shovels/vhost/{v}/perm-no-such-shovel/restart", tag: "policymaker", ok: 404,
		warrenOnly: true},

	// The federation plugin's status routes, the same way: monitoring
	// reads them; restarting a link asks policymaker, as its upstream's
	// parameter does (RabbitMQ 3.10.8 asks monitoring: warrenOnly). A
	// reference without rabbitmq_federation_management has none of them.
	{route: "GET /api/federation-links", path: "/api/federation-links", tag: "monitoring", ok: 200, warrenOnly: true},
	{route: "GET /api/federation-links/state/down", path: "/api/federation-links/state/down", tag: "monitoring", ok: 200, warrenOnly: true},
	{route: "GET /api/federation-links/{vhost}", path: "/api/federation-links/{v}", tag: "monitoring", ok: 200, warrenOnly: true},
	{route: "GET /api/federation-links/{vhost}/state/down", path: "/api/federation-links/{v}/state/down", tag: "monitoring", ok: 200, warrenOnly: true},
	{route: "DELETE /api/federation-links/vhost/{vhost}/{id}/{node}/restart", path: "/api/federation-links/vhost/{v}/perm-no-such-link/perm-no-such-node/restart",
		tag: "policymaker", ok: 404, warrenOnly: true},

	{route: "GET /api/definitions", path: "/api/definitions", tag: "administrator", ok: 200},
	{route: "GET /api/definitions/{vhost}", path: "/api/definitions/{v}", tag: "administrator", ok: 200},
	{route: "POST /api/definitions", path: "/api/definitions", body: `{}`, tag: "administrator", ok: 204},
	{route: "POST /api/definitions/{vhost}", path: "/api/definitions/{v}", body: `{}`, tag: "administrator", ok: 204},

	// The runtime's profiles (admin.profiling is on for this table). cpu
	// profiles for a second each time a row asks with every permission.
	{route: "GET /api/warren/pprof/cpu", path: "/api/warren/pprof/cpu?seconds=1", tag: "administrator", ok: 200, warrenOnly: true},
	{route: "GET /api/warren/pprof/heap", path: "/api/warren/pprof/heap", tag: "administrator", ok: 200, warrenOnly: true},
	{route: "GET /api/warren/pprof/allocs", path: "/api/warren/pprof/allocs", tag: "administrator", ok: 200, warrenOnly: true},
	{route: "GET /api/warren/pprof/mutex", path: "/api/warren/pprof/mutex", tag: "administrator", ok: 200, warrenOnly: true},
	{route: "GET /api/warren/pprof/block", path: "/api/warren/pprof/block", tag: "administrator", ok: 200, warrenOnly: true},
	{route: "GET /api/warren/pprof/goroutine", path: "/api/warren/pprof/goroutine", tag: "administrator", ok: 200, warrenOnly: true},
	{route: "GET /api/warren/pprof/threadcreate", path: "/api/warren/pprof/threadcreate", tag: "administrator", ok: 200, warrenOnly: true},

	{route: "GET /metrics", path: "/metrics", ok: 200, public: true, warrenOnly: true},
	{route: "GET /", path: "/", ok: 200, public: true, warrenOnly: true},
	{route: "GET /ui/{asset}", path: "/ui/main.js", ok: 200, public: true, warrenOnly: true},
}

// TestEveryAdminRouteAsksPermissions runs adminRows, and fails when a
// route of the API has no row.
func TestEveryAdminRouteAsksPermissions(t *testing.T) {
	m := startMgmt(t, func(c *config.Config) { c.Admin.Profiling = true })
	if m.isWarren() {
		var missing []string
		for _, p := range admin.Patterns() {
			if !slices.ContainsFunc(adminRows, func(r adminRow) bool { return r.route == p }) {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			t.Fatalf("routes without a row in adminRows (say what each needs): %s", strings.Join(missing, ", "))
		}
		for _, r := range adminRows {
			if !slices.Contains(admin.Patterns(), r.route) {
				t.Errorf("adminRows names %q, which the API does not serve", r.route)
			}
		}
	}
	d := permDoor{set: m, act: m}
	d.addUsers()
	t.Cleanup(d.fixtures) // which drops the global rows' scratch objects too
	runAdminRows(t, d, adminRows, m.isWarren())
}

// runAdminRows makes rows' requests to d's acting node; warren says
// whether it is Warren's.
func runAdminRows(t *testing.T, d permDoor, rows []adminRow, warren bool) {
	t.Helper()
	m := d.act
	for _, r := range rows {
		if r.warrenOnly && !warren {
			continue
		}
		tag := r.tag
		if tag == "" {
			tag = "management"
		}
		user := permUser(tag)
		path := strings.ReplaceAll(r.path, "{v}", m.v())
		do := func(user string) response {
			d.fixtures()
			if r.public {
				return m.callAs("", "", strings.Fields(r.route)[0], path, r.body, nil)
			}
			return m.callAs(user, user, strings.Fields(r.route)[0], path, r.body, nil)
		}
		what := r.route + " (" + path + ")"
		ok := r.ok
		if r.refOK != 0 && !warren {
			ok = r.refOK
		}

		// Every permission: the request does what it does.
		d.grant(user, ".*", ".*", ".*")
		if got := do(user); got.status != ok {
			t.Errorf("%s as %s with every permission: %d %s, want %d", what, user, got.status, got.body, ok)
			continue
		}
		if !r.public {
			// A tag below the one it needs, every permission: refused.
			for _, lower := range tagsBelow(tag) {
				d.grant(permUser(lower), ".*", ".*", ".*")
				if got := do(permUser(lower)); got.status != 401 {
					t.Errorf("%s as %s, which needs %s: %d %s, want 401", what, permUser(lower), tag, got.status, got.body)
				}
			}
		}
		if len(r.op) == 0 {
			// No permission at all, but one in the vhost: the same answer.
			d.grant(user, "", "", "")
			if got := do(user); got.status != ok {
				t.Errorf("%s as %s with empty permissions: %d %s, want %d (it needs no permission)", what, user, got.status, got.body, ok)
			}
			continue
		}
		// Each permission it needs, taken away in turn: refused.
		for _, n := range r.op {
			configure, write, read := permissionsLacking(n)
			d.grant(user, configure, write, read)
			got := do(user)
			wantStatus, wantReason := 401, "Access refused."
			switch r.how {
			case refusedWithText:
				wantReason = refusalText(n, m.vhost, user)
			case refusedPublish:
				wantStatus, wantReason = 400, "403 "+refusalText(n, m.vhost, user)
			}
			var e struct{ Error, Reason string }
			if got.status == wantStatus {
				got.json(t, &e)
			}
			if got.status != wantStatus || e.Reason != wantReason {
				t.Errorf("%s as %s without %s on %s: %d %s, want %d %q", what, user, n.perm, n.name, got.status, got.body, wantStatus, wantReason)
			}
		}
		// An administrator with no permission in the vhost may look, not
		// touch, as in RabbitMQ.
		d.revoke(permUser("administrator"))
		if got := do(permUser("administrator")); got.status != 401 || !strings.Contains(got.body, `"Access refused."`) {
			t.Errorf("%s as an administrator without a permission in the vhost: %d %s, want 401 Access refused.", what, got.status, got.body)
		}
	}
}

// amqpRow is one AMQP method a client sends and what it needs. A method
// that touches no resource has op nil and no do.
type amqpRow struct {
	op operation
	do func(ch *amqp.Channel) error
}

// amqpRows names every method of AMQP 0-9-1, by its name.
var amqpRows = map[string]amqpRow{
	"exchange.declare": {opDeclareExchange, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(permNewX, "fanout", false, false, false, false, nil)
	}},
	"exchange.declare with an alternate exchange": {opDeclareExchangeAE, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(permNewX, "fanout", false, false, false, false, amqp.Table{"alternate-exchange": permExchange})
	}},
	"exchange.delete": {opDeleteExchange, func(ch *amqp.Channel) error { return ch.ExchangeDelete(permExchange, false, false) }},
	"exchange.bind": {opBindExchange, func(ch *amqp.Channel) error {
		return ch.ExchangeBind(permExchange2, "k2", permExchange, false, nil)
	}},
	"exchange.unbind": {opBindExchange, func(ch *amqp.Channel) error {
		return ch.ExchangeUnbind(permExchange2, "k", permExchange, false, nil)
	}},
	"queue.declare": {opDeclareQueue, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(permNewQueue, false, false, false, false, nil)
		return err
	}},
	"queue.declare with a dead-letter exchange": {opDeclareQueueDLX, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(permNewQueue, false, false, false, false, amqp.Table{"x-dead-letter-exchange": permExchange})
		return err
	}},
	"queue.bind":   {opBindQueue, func(ch *amqp.Channel) error { return ch.QueueBind(permQueue, "k2", permExchange, false, nil) }},
	"queue.unbind": {opBindQueue, func(ch *amqp.Channel) error { return ch.QueueUnbind(permQueue, "k", permExchange, nil) }},
	"queue.purge": {opReadQueue, func(ch *amqp.Channel) error {
		_, err := ch.QueuePurge(permQueue, false)
		return err
	}},
	"queue.delete": {opDeleteQueue, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(permQueue, false, false, false)
		return err
	}},
	"basic.consume": {opReadQueue, func(ch *amqp.Channel) error {
		_, err := ch.Consume(permQueue, "", false, false, false, false, nil)
		return err
	}},
	"basic.get": {opReadQueue, func(ch *amqp.Channel) error {
		_, _, err := ch.Get(permQueue, false)
		return err
	}},
	"basic.publish": {opPublish, func(ch *amqp.Channel) error {
		return publishThenAsk(ch, permExchange, "k")
	}},
	"basic.publish to the default exchange": {opPublishDefault, func(ch *amqp.Channel) error {
		return publishThenAsk(ch, "", permQueue)
	}},

	// Methods that touch no resource of the vhost: the connection's and
	// the channel's own, settling deliveries already permitted, flow
	// control, transactions and confirms over methods checked above, and
	// what only the broker sends. (A passive declare only asks whether a
	// resource exists, as in RabbitMQ.)
	"connection.start": {}, "connection.start-ok": {}, "connection.secure": {}, "connection.secure-ok": {},
	"connection.tune": {}, "connection.tune-ok": {}, "connection.open": {}, "connection.open-ok": {},
	"connection.close": {}, "connection.close-ok": {}, "connection.blocked": {}, "connection.unblocked": {},
	"connection.update-secret": {}, "connection.update-secret-ok": {},
	"channel.open": {}, "channel.open-ok": {}, "channel.flow": {}, "channel.flow-ok": {}, "channel.close": {}, "channel.close-ok": {},
	"exchange.declare-ok": {}, "exchange.delete-ok": {}, "exchange.bind-ok": {}, "exchange.unbind-ok": {},
	"queue.declare-ok": {}, "queue.bind-ok": {}, "queue.unbind-ok": {}, "queue.purge-ok": {}, "queue.delete-ok": {},
	"basic.qos": {}, "basic.qos-ok": {}, "basic.consume-ok": {}, "basic.cancel": {}, "basic.cancel-ok": {},
	"basic.return": {}, "basic.deliver": {}, "basic.get-ok": {}, "basic.get-empty": {},
	"basic.ack": {}, "basic.reject": {}, "basic.recover-async": {}, "basic.recover": {}, "basic.recover-ok": {}, "basic.nack": {},
	"tx.select": {}, "tx.select-ok": {}, "tx.commit": {}, "tx.commit-ok": {}, "tx.rollback": {}, "tx.rollback-ok": {},
	"confirm.select": {}, "confirm.select-ok": {},
}

// protocolMethods lists every method protocol knows, by name.
func protocolMethods() []string {
	var out []string
	for class := uint16(0); class <= 100; class++ {
		for method := uint16(0); method <= 200; method++ {
			if m := protocol.NewMethod(class, method); m != nil {
				out = append(out, m.Name())
			}
		}
	}
	return out
}

// TestEveryAMQPMethodAsksPermissions runs amqpRows, and fails when a
// method of the protocol has no row.
func TestEveryAMQPMethodAsksPermissions(t *testing.T) {
	m := startMgmt(t)
	if m.isWarren() {
		for _, name := range protocolMethods() {
			found := false
			for row := range amqpRows {
				found = found || row == name || strings.HasPrefix(row, name+" ")
			}
			if !found {
				t.Errorf("AMQP method %s has no row in amqpRows (say what it needs)", name)
			}
		}
	}
	d := permDoor{set: m, act: m}
	d.addUsers()
	runAMQPRows(t, d)
}

// runAMQPRows acts out amqpRows through d's acting node.
func runAMQPRows(t *testing.T, d permDoor) {
	t.Helper()
	user := permUser("management")
	names := make([]string, 0, len(amqpRows))
	for name, r := range amqpRows {
		if r.do != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		r := amqpRows[name]
		do := func() error {
			d.fixtures()
			u := strings.Replace(d.act.amqpURL(), "guest:guest@", user+":"+user+"@", 1)
			c, err := amqp.Dial(u)
			if err != nil {
				t.Fatalf("%s: dial as %s: %v", name, user, err)
			}
			defer c.Close()
			ch, err := c.Channel()
			if err != nil {
				t.Fatal(err)
			}
			return r.do(ch)
		}
		d.grant(user, ".*", ".*", ".*")
		if err := do(); err != nil {
			t.Errorf("%s with every permission: %v", name, err)
			continue
		}
		for _, n := range r.op {
			configure, write, read := permissionsLacking(n)
			d.grant(user, configure, write, read)
			err := do()
			want := refusalText(n, d.act.vhost, user)
			if e, ok := err.(*amqp.Error); !ok || e.Code != amqp.AccessRefused || e.Reason != want {
				t.Errorf("%s without %s on %s: %v, want 403 %q", name, n.perm, n.name, err, want)
			}
		}
	}
}

// publishThenAsk publishes and makes a synchronous call: a refused
// publish closes the channel, and the error is the channel's close. The
// close may come before the call is sent, which the client then answers
// "channel/connection is not open" (504) itself: the reason is the one
// the broker's close gave.
func publishThenAsk(ch *amqp.Channel, exchange, key string) error {
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Publish(exchange, key, false, false, amqp.Publishing{Body: []byte("m")}); err != nil {
		return err
	}
	_, err := ch.QueueDeclarePassive(permQueue, false, false, false, false, nil)
	if err == nil {
		return nil
	}
	select {
	case e := <-closed:
		if e != nil {
			return e
		}
	case <-time.After(10 * time.Second):
	}
	return err
}

// TestClusterAsksThePermissionsOfTheActingUser: users and permissions set
// through one node of a cluster are what another node asks, through AMQP
// and its management API alike; the changes it refuses are not proposed,
// and those it allows reach the other node.
func TestClusterAsksThePermissionsOfTheActingUser(t *testing.T) {
	skipReference(t)
	n1 := startClusterNode(t, "n1", nil)
	n2 := startClusterNode(t, "n2", []string{n1.listen})
	for _, n := range []*clusterNode{n1, n2} {
		waitUntil(t, n.name+" sees two running nodes", func() bool { return len(n.running(t)) == 2 })
	}
	vhost := uniq(t, "vh")
	node := func(n *clusterNode) *mgmt {
		return &mgmt{t: t, s: &server{url: "amqp://guest:guest@" + n.addr + "/", t: t}, base: "http://" + n.admin, vhost: vhost}
	}
	d := permDoor{set: node(n1), act: node(n2)}
	d.set.expect("PUT", "/api/vhosts/"+d.set.v(), "", 201)
	d.grant("guest", ".*", ".*", ".*")
	d.addUsers()
	runAMQPRows(t, d)
	var touching []adminRow
	for _, r := range adminRows {
		if len(r.op) > 0 {
			touching = append(touching, r)
		}
	}
	runAdminRows(t, d, touching, true)

	// What n2 allowed reached n1; what it refused did not.
	waitFor(t, "n1 to have the queue the last row declared through n2", func() bool {
		return d.set.call("GET", "/api/queues/"+d.set.v()+"/"+permQueue, "").status == 200
	})
	user := permUser("management")
	configure, write, read := permissionsLacking(opDeclareQueue[0])
	d.grant(user, configure, write, read)
	u := strings.Replace(d.act.amqpURL(), "guest:guest@", user+":"+user+"@", 1)
	c, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(permNewQueue, false, false, false, false, nil); amqpCode(err) != amqp.AccessRefused {
		t.Fatalf("refused declare through n2: %v", err)
	}
	d.grant(user, ".*", ".*", ".*") // a change after the refused one, to wait for
	if r := d.set.call("GET", "/api/queues/"+d.set.v()+"/"+permNewQueue, ""); r.status != 404 {
		t.Fatalf("a declare n2 refused is on n1: %d %s", r.status, r.body)
	}
}
