// Package admin is Warren's HTTP management API, shaped like RabbitMQ
// 3.10.8's management plugin: the same paths, JSON field names, status
// codes and error bodies, so rabbitmqadmin, monitoring scripts and
// RabbitMQ's habits work against Warren. Prometheus metrics are served at
// /metrics beside it. warrenctl and the web UI drive it.
//
// # Files
//
// One file per family of endpoints (overview.go, with /api/nodes;
// vhosts.go, users.go, queues.go, exchanges.go, bindings.go,
// connections.go, policies.go, plugins.go, definitions.go, health.go;
// Warren's own under /api/warren/: cluster.go, quorum.go for queues'
// members, limits.go for the alarms' limits, pprof.go for the runtime's
// profiles; metrics.go for /metrics),
// and the machinery they share:
// access.go (who may do what), paging.go (RabbitMQ's pagination, filter
// and sort), stats.go (message_stats and the *_details objects), tables.go
// (field tables to and from JSON), router.go and crosssite.go.
//
// # Authentication and access
//
// Every /api request needs HTTP basic credentials (realm admin.realm, by
// default RabbitMQ's "RabbitMQ Management"). What a user may do follows
// its tags as RabbitMQ has them (access.go): administrator everything;
// monitoring reads everything; policymaker is management plus the policies
// of its vhosts; management sees and changes only the vhosts it has
// permissions in, and its own connections and channels; a user with none
// of these tags gets 401 "Not management user". Within what the tags
// allow, every request that declares, deletes, binds, publishes to, reads
// or purges a resource asks the user's configure, write and read
// permissions in its vhost through auth.Grant, the same rules the AMQP
// channel asks; a refusal is answered as RabbitMQ's API answers it
// (access.go). tests/permissions_table_test.go holds a row for every
// route and fails on a route without one. Users in
// defaults.loopback_users (guest by default) may log in only from a
// loopback address, judged by the HTTP peer's address as the AMQP
// handshake judges the socket's: from anywhere else, even with the listener
// bound to 0.0.0.0, the answer is RabbitMQ's 401 {"error":"not_authorised",
// "reason":"User can only log in via localhost"}. (A reverse proxy on the
// same host makes every client look local, as it does to RabbitMQ.)
//
// PUT, POST and DELETE change state, so a browser must not be able to send
// them on behalf of a page from another site (crosssite.go): a cross-origin
// browser request is a 403, and a Content-Type other than application/json
// is a 415, as is a body without one. warrenctl and curl-style clients,
// which send no Origin, work as long as a body is declared JSON.
//
// # Requests and answers
//
// Vhost names in paths are percent-encoded, so the default vhost "/" is
// written %2F, as with RabbitMQ. A new vhost's, user's, queue's or
// exchange's name must pass core/names' check (a 400 naming the
// character and where it is); a request line longer than 8 KiB is a 414,
// and a body larger than admin.max_body_size RabbitMQ's 400 "Exceeded
// HTTP request body size limit", refused before it is read (bounds.go).
// A request's context ends when its answer could no longer be sent (the
// listener's write timeout, see core/broker's ServeAdmin; a CPU profile's
// is later, pprof.go) or its client goes away; a definitions import
// still being checked then stops, one being applied finishes. A request
// body's unknown fields are ignored, as RabbitMQ ignores them; a body
// that is not JSON, or a field with the wrong type or value, is a 400
// whose reason names the field. PUT answers 201 when it created
// something and 204 when it changed or confirmed something that existed;
// DELETE answers 204. An object that does
// not exist is RabbitMQ's 404 {"error":"Object Not Found","reason":"Not
// Found"}; a refusal from the broker itself carries its AMQP meaning (404
// not_found for a missing exchange named in a binding, 400 bad_request for
// PRECONDITION_FAILED, 401 "Access refused." for ACCESS_REFUSED). A
// response is encoded in full before it is sent, so a failure to encode it
// is a 500 with such a body, never an empty 200.
//
// Field tables (queue and binding arguments, client properties, policy
// definitions) are JSON objects: byte arrays as base64, timestamps as
// RFC 3339, and the floats JSON has no number for as the strings "NaN",
// "Infinity" and "-Infinity". RabbitMQ 3.10 cannot decode those floats and
// drops the connection that sends one; Warren accepts them, so its
// listings must be able to show them.
//
// # Invariants
//
// The API holds no lock of its own while it calls the broker, and asks
// the broker only through methods that follow LOCKS.md (listings copy under
// a vhost's lock and read each queue after): a slow HTTP client never holds
// up a publisher. Listings are built from snapshots, so a listing of 10,000
// queues takes each queue's lock once, briefly, and nothing else.
package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/warrenmq/warren/core/admin/webui"
	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// Handler returns the admin API for a broker.
func Handler(b *broker.Broker) http.Handler {
	cfg := b.Config().Admin
	return serverHeader(bounded(int64(cfg.MaxBodySize), refuseForgeable(routes(&api{b: b, realm: cfg.Realm, profiling: cfg.Profiling}))))
}

// Patterns lists every route the API serves, as "METHOD /path/{param}".
// The permission test holds a row for each and fails on one without.
func Patterns() []string {
	rt := routes(&api{})
	out := make([]string, len(rt.routes))
	for i, r := range rt.routes {
		out[i] = r.pattern
	}
	return out
}

func routes(a *api) *router {
	mux := &router{}
	a.routeOverview(mux)
	a.routeMemory(mux)
	a.routeFeatureFlags(mux)
	a.routeGlobalParameters(mux)
	a.routeParameters(mux)
	a.routeVHosts(mux)
	a.routeUsers(mux)
	a.routeQueues(mux)
	a.routeExchanges(mux)
	a.routeBindings(mux)
	a.routeConnections(mux)
	a.routeStreams(mux)
	a.routePolicies(mux)
	a.routePlugins(mux)
	a.routeHealth(mux)
	a.routeLimits(mux)
	a.routeCluster(mux)
	a.routeQuorum(mux)
	a.routeDefinitions(mux)
	a.routeShovels(mux)
	a.routeFederation(mux)
	a.routePprof(mux)
	a.handle(mux, "GET /api/extensions", management, func(*call) (any, error) { return []any{}, nil }) // no UI extensions
	// The login page asks it before anyone has logged in: no OAuth here.
	mux.Handle("GET /api/auth", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"enable_uaa": false, "uaa_client_id": "", "uaa_location": ""})
	}))
	mux.Handle("GET /metrics", metricsHandler(a.b))
	mux.Handle("GET /", webui.Handler())                            // the web UI's page
	mux.Handle("GET "+webui.AssetPrefix+"{asset}", webui.Handler()) // and its files
	return mux
}

type api struct {
	b         *broker.Broker
	realm     string
	profiling bool // admin.profiling: the pprof routes answer
}

// call is one authenticated request: what a handler gets.
type call struct {
	r *http.Request
	u *auth.User
	a *api
}

// path returns a path parameter.
func (c *call) path(name string) string { return c.r.PathValue(name) }

// query returns a query parameter.
func (c *call) query(name string) string { return c.r.URL.Query().Get(name) }

// handlerFunc is an endpoint: its answer is written as JSON with 200, or
// as an *answer's status; nil is a 204; an http.Handler answers for
// itself (a profile, which is not JSON).
type handlerFunc func(c *call) (any, error)

// answer is a response other than 200 with a JSON body.
type answer struct {
	status   int
	body     any    // nil: no body
	location string // the Location header, when set
}

// created is PUT's and POST's 201 with no body.
var created = &answer{status: http.StatusCreated}

// createdOrUpdated is PUT's answer: 201 when the object is new.
func createdOrUpdated(isNew bool) (any, error) {
	if isNew {
		return created, nil
	}
	return nil, nil
}

// handle registers an endpoint that needs at least the given access.
func (a *api) handle(mux *router, pattern string, need access, f handlerFunc) {
	mux.Handle(pattern, a.wrap(need, f))
}

// wrap authenticates, checks the user's tags against need, runs f and
// writes its result.
func (a *api) wrap(need access, f handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="`+a.realm+`"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		u, err := a.b.Users().Login(user, pass, peerIsLoopback(r))
		switch {
		case errors.Is(err, auth.ErrBadCredentials):
			// RabbitMQ 3.10.8 spells this one with a z.
			w.Header().Set("WWW-Authenticate", `Basic realm="`+a.realm+`"`)
			writeError(w, http.StatusUnauthorized, "not_authorized", "Login failed")
			return
		case err != nil:
			// Login's other refusal: a loopback-only user from elsewhere.
			writeError(w, http.StatusUnauthorized, "not_authorised", "User can only log in via localhost")
			return
		}
		if reason := need.refusal(u); reason != "" {
			writeError(w, http.StatusUnauthorized, "not_authorised", reason)
			return
		}
		out, err := f(&call{r: r, u: u, a: a})
		if err != nil {
			writeFailure(w, err)
			return
		}
		switch out := out.(type) {
		case nil:
			w.WriteHeader(http.StatusNoContent)
		case *answer:
			if out.location != "" {
				w.Header().Set("Location", out.location)
			}
			if out.body == nil {
				w.WriteHeader(out.status)
				return
			}
			writeJSON(w, out.status, out.body)
		case http.Handler:
			out.ServeHTTP(w, r)
		default:
			writeJSON(w, http.StatusOK, out)
		}
	})
}

// Errors a handler returns besides the broker's *reply.Error.
var (
	// errNotFound is RabbitMQ's answer for any object a path names that
	// does not exist.
	errNotFound = errors.New("Object Not Found")
	// errBadRequest wraps a malformed request's reason.
	errBadRequest = errors.New("bad request")
	// errNotAuthorised wraps an access refusal's reason.
	errNotAuthorised = errors.New("not authorised")
)

func badRequest(format string, args ...any) error {
	return &reasonError{kind: errBadRequest, reason: fmt.Sprintf(format, args...)}
}

// field is one field a request body must have, and whether it has it.
type field struct {
	name    string
	present bool
}

// keysPresent is RabbitMQ's 400 for the first field of fields a body
// lacks.
func keysPresent(fields ...field) error {
	for _, f := range fields {
		if !f.present {
			return badRequest("[{key_missing,%s}]", f.name)
		}
	}
	return nil
}

func notAuthorised(reason string) error {
	return &reasonError{kind: errNotAuthorised, reason: reason}
}

// notFound is a 404 that says more than RabbitMQ's "Not Found".
func notFound(reason string) error {
	return &reasonError{kind: errNotFound, reason: reason}
}

// reasonError is an API-level refusal with RabbitMQ's reason text.
type reasonError struct {
	kind   error
	reason string
	// name overrides the "error" field (RabbitMQ's pagination errors have
	// their own).
	name string
}

func (e *reasonError) Error() string { return e.reason }
func (e *reasonError) Unwrap() error { return e.kind }

// writeFailure maps an error to RabbitMQ's status and body.
func writeFailure(w http.ResponseWriter, err error) {
	var re *reasonError
	if errors.As(err, &re) {
		status, kind := http.StatusBadRequest, "bad_request"
		switch {
		case errors.Is(re.kind, errNotAuthorised):
			status, kind = http.StatusUnauthorized, "not_authorised"
		case errors.Is(re.kind, errNotFound):
			status, kind = http.StatusNotFound, "not_found"
		}
		if re.name != "" {
			kind = re.name
		}
		writeError(w, status, kind, re.reason)
		return
	}
	if errors.Is(err, errNotFound) {
		writeError(w, http.StatusNotFound, "Object Not Found", "Not Found")
		return
	}
	if errors.Is(err, cluster.ErrNoQuorum) {
		writeError(w, http.StatusServiceUnavailable, "service_unavailable", err.Error())
		return
	}
	var e *reply.Error
	if errors.As(err, &e) {
		// RabbitMQ's API gives the AMQP text without its "CODE_NAME - ".
		text := strings.TrimPrefix(e.Text, protocol.ReplyText(e.Code)+" - ")
		switch e.Code {
		case protocol.NotFound:
			writeError(w, http.StatusNotFound, "not_found", text)
			return
		case protocol.AccessRefused:
			writeError(w, http.StatusUnauthorized, "not_authorised", "Access refused.")
			return
		case protocol.PreconditionFailed, protocol.CommandInvalid, protocol.ResourceLocked, protocol.NotAllowed:
			writeError(w, http.StatusBadRequest, "bad_request", text)
			return
		}
	}
	writeError(w, http.StatusInternalServerError, "internal_error", err.Error())
}

// writeJSON encodes v in full before the status line goes out: once a 200
// is written an encoder error can no longer be reported, and the client
// would get an empty or cut-off body. An encoder error becomes a 500 with
// a JSON error body instead. The encoding is compact, as RabbitMQ's.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, http.StatusInternalServerError, "internal_error", "could not encode the response: "+err.Error())
		return
	}
	send(w, status, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// peerIsLoopback reports whether the HTTP client connected from this host.
// An address that does not parse is not loopback.
func peerIsLoopback(r *http.Request) bool {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && peer.Addr().IsLoopback()
}

// writeError sends {"error":kind,"reason":reason} byte for byte as
// RabbitMQ does: compact, no trailing newline.
func writeError(w http.ResponseWriter, status int, kind, reason string) {
	body, _ := json.Marshal(map[string]string{"error": kind, "reason": reason}) // strings always encode
	send(w, status, body)
}

func send(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
