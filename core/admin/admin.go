// Package admin is Warren's HTTP admin API, shaped like RabbitMQ's
// management API where that is reasonable, plus Prometheus metrics at
// /metrics. warrenctl drives it.
//
// Every /api request needs HTTP basic credentials of a user with the
// administrator tag. Users in defaults.loopback_users (guest by default)
// may log in only from a loopback address, judged by the HTTP peer's
// address as the AMQP handshake judges the socket's: from anywhere else,
// even with the listener bound to 0.0.0.0, the answer is RabbitMQ's 401
// {"error":"not_authorised","reason":"User can only log in via localhost"}.
// (A reverse proxy on the same host makes every client look local, as it
// does to RabbitMQ.)
//
// PUT, POST and DELETE change state, so a browser must not be able to send
// them on behalf of a page from another site (crosssite.go): a cross-origin
// browser request is a 403, and a Content-Type other than application/json
// is a 415, as is a body without one. warrenctl and curl-style clients,
// which send no Origin, work as long as a body is declared JSON.
//
// Vhost names in paths are percent-encoded, so the default vhost "/" is
// written %2F, as with RabbitMQ. Errors come back as JSON
// {"error": "...", "reason": "..."} with a status code that follows the
// AMQP reply code where there is one (404 for NOT_FOUND, 400 for
// PRECONDITION_FAILED). A response is encoded in full before it is sent,
// so a failure to encode it is a 500 with such a body, never an empty 200.
//
// Field tables (queue and binding arguments, client properties, policy
// definitions) are JSON objects: byte arrays as base64, timestamps as
// RFC 3339, and the floats JSON has no number for as the strings "NaN",
// "Infinity" and "-Infinity". RabbitMQ 3.10 cannot decode those floats and
// drops the connection that sends one; Warren accepts them, so its
// listings must be able to show them.
package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"sort"
	"time"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// Handler returns the admin API for a broker.
func Handler(b *broker.Broker) http.Handler {
	a := &api{b: b}
	mux := &router{}
	h := a.wrap
	mux.Handle("GET /api/overview", h(a.overview))
	mux.Handle("GET /api/vhosts", h(a.vhosts))
	mux.Handle("PUT /api/vhosts/{vhost}", h(a.putVHost))
	mux.Handle("DELETE /api/vhosts/{vhost}", h(a.deleteVHost))
	mux.Handle("GET /api/users", h(a.users))
	mux.Handle("PUT /api/users/{user}", h(a.putUser))
	mux.Handle("DELETE /api/users/{user}", h(a.deleteUser))
	mux.Handle("GET /api/permissions", h(a.permissions))
	mux.Handle("PUT /api/permissions/{vhost}/{user}", h(a.putPermission))
	mux.Handle("DELETE /api/permissions/{vhost}/{user}", h(a.deletePermission))
	mux.Handle("GET /api/queues", h(a.queues))
	mux.Handle("GET /api/queues/{vhost}", h(a.queues))
	mux.Handle("GET /api/exchanges", h(a.exchanges))
	mux.Handle("GET /api/exchanges/{vhost}", h(a.exchanges))
	mux.Handle("GET /api/bindings", h(a.bindings))
	mux.Handle("GET /api/bindings/{vhost}", h(a.bindings))
	mux.Handle("GET /api/connections", h(a.connections))
	mux.Handle("GET /api/policies", h(a.policies))
	mux.Handle("GET /api/policies/{vhost}", h(a.policies))
	mux.Handle("PUT /api/policies/{vhost}/{name}", h(a.putPolicy))
	mux.Handle("DELETE /api/policies/{vhost}/{name}", h(a.deletePolicy))
	mux.Handle("GET /api/plugins", h(a.plugins))
	mux.Handle("POST /api/plugins/{name}/enable", h(a.enablePlugin))
	mux.Handle("POST /api/plugins/{name}/disable", h(a.disablePlugin))
	mux.Handle("PUT /api/warren/vm-memory-high-watermark", h(a.putMemoryWatermark))
	mux.Handle("PUT /api/warren/disk-free-limit", h(a.putDiskFreeLimit))
	a.definitionRoutes(mux, h)
	mux.Handle("GET /metrics", metricsHandler(b))
	return serverHeader(refuseForgeable(mux))
}

type api struct{ b *broker.Broker }

// wrap authenticates, runs f and writes its result as JSON (204 when nil).
func (a *api) wrap(f func(*http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="Warren"`)
			writeError(w, http.StatusUnauthorized, "not_authorised", "credentials required")
			return
		}
		u, err := a.b.Users().Login(user, pass, peerIsLoopback(r))
		switch {
		case errors.Is(err, auth.ErrBadCredentials):
			writeError(w, http.StatusUnauthorized, "not_authorised", "Login failed")
			return
		case err != nil:
			// Login's other refusal: a loopback-only user from elsewhere.
			writeError(w, http.StatusUnauthorized, "not_authorised", "User can only log in via localhost")
			return
		}
		if !u.HasTag("administrator") {
			writeError(w, http.StatusForbidden, "not_authorised", "user '"+user+"' is not an administrator")
			return
		}
		out, err := f(r)
		if err != nil {
			status, kind := http.StatusInternalServerError, "internal_error"
			var e *reply.Error
			if errors.As(err, &e) {
				switch e.Code {
				case protocol.NotFound:
					status, kind = http.StatusNotFound, "not_found"
				case protocol.PreconditionFailed, protocol.CommandInvalid:
					status, kind = http.StatusBadRequest, "bad_request"
				case protocol.AccessRefused:
					status, kind = http.StatusForbidden, "not_authorised"
				}
			} else if errors.Is(err, errBadRequest) {
				status, kind = http.StatusBadRequest, "bad_request"
			}
			writeError(w, status, kind, err.Error())
			return
		}
		if out == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// writeJSON encodes v in full before the status line goes out: once a 200
// is written an encoder error can no longer be reported, and the client
// would get an empty or cut-off body. An encoder error becomes a 500 with
// a JSON error body instead.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		writeError(w, http.StatusInternalServerError, "internal_error", "could not encode the response: "+err.Error())
		return
	}
	send(w, status, buf.Bytes())
}

// peerIsLoopback reports whether the HTTP client connected from this host.
// An address that does not parse is not loopback.
func peerIsLoopback(r *http.Request) bool {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && peer.Addr().IsLoopback()
}

var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
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

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %v", err)
	}
	return nil
}

func (a *api) vhostOf(r *http.Request) (*vhost.VHost, error) {
	name := r.PathValue("vhost")
	v, ok := a.b.VHost(name)
	if !ok {
		return nil, reply.NotFound("no vhost '%s'", name)
	}
	return v, nil
}

// selected returns the vhost named in the path, or all of them.
func (a *api) selected(r *http.Request) ([]*vhost.VHost, error) {
	if r.PathValue("vhost") != "" {
		v, err := a.vhostOf(r)
		if err != nil {
			return nil, err
		}
		return []*vhost.VHost{v}, nil
	}
	var out []*vhost.VHost
	for _, n := range a.b.VHosts() {
		if v, ok := a.b.VHost(n); ok {
			out = append(out, v)
		}
	}
	return out, nil
}

func (a *api) overview(*http.Request) (any, error) {
	var queues, exchanges, messages, held int
	for _, n := range a.b.VHosts() {
		v, _ := a.b.VHost(n)
		for _, q := range v.Queues() {
			queues++
			messages += q.Ready + q.Unacked
		}
		exchanges += len(v.Exchanges())
		held += v.HeldCount()
	}
	raised, reason, _ := a.b.Alarm().State()
	return map[string]any{
		"product_name":    "Warren",
		"product_version": broker.Version,
		"object_totals": map[string]int{
			"connections": len(a.b.Server().Connections()), "queues": queues,
			"exchanges": exchanges, "vhosts": len(a.b.VHosts()),
		},
		"queue_totals":   map[string]int{"messages": messages, "held": held},
		"exchange_types": a.b.Types().Names(),
		"alarm":          map[string]any{"raised": raised, "reason": reason},
	}, nil
}

func (a *api) vhosts(*http.Request) (any, error) {
	out := []map[string]any{}
	for _, n := range a.b.VHosts() {
		out = append(out, map[string]any{"name": n})
	}
	return out, nil
}

func (a *api) putVHost(r *http.Request) (any, error) {
	_, err := a.b.AddVHost(r.PathValue("vhost"))
	return nil, err
}

func (a *api) deleteVHost(r *http.Request) (any, error) {
	return nil, a.b.DeleteVHost(r.PathValue("vhost"))
}

func (a *api) users(*http.Request) (any, error) {
	out := []map[string]any{}
	for _, u := range a.b.Users().Users() {
		tags := u.Tags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, map[string]any{"name": u.Name, "tags": tags})
	}
	return out, nil
}

func (a *api) putUser(r *http.Request) (any, error) {
	var body struct {
		Password *string  `json:"password"`
		Tags     []string `json:"tags"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	return nil, a.b.PutUser(r.PathValue("user"), body.Password, body.Tags)
}

func (a *api) deleteUser(r *http.Request) (any, error) {
	return nil, a.b.DeleteUser(r.PathValue("user"))
}

func (a *api) permissions(*http.Request) (any, error) {
	out := []map[string]any{}
	for _, p := range a.b.Users().Permissions() {
		out = append(out, map[string]any{"vhost": p.VHost, "user": p.User, "configure": p.Configure, "write": p.Write, "read": p.Read})
	}
	return out, nil
}

func (a *api) putPermission(r *http.Request) (any, error) {
	var body struct{ Configure, Write, Read string }
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	return nil, a.b.SetPermission(r.PathValue("vhost"), r.PathValue("user"), body.Configure, body.Write, body.Read)
}

func (a *api) deletePermission(r *http.Request) (any, error) {
	return nil, a.b.ClearPermission(r.PathValue("vhost"), r.PathValue("user"))
}

func (a *api) queues(r *http.Request) (any, error) {
	vs, err := a.selected(r)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, v := range vs {
		qs := v.Queues()
		sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
		for _, q := range qs {
			out = append(out, map[string]any{
				"vhost": v.Name, "name": q.Name, "durable": q.Durable, "exclusive": q.Exclusive,
				"auto_delete": q.AutoDelete, "arguments": jsonTable(q.Args), "policy": q.Policy,
				"messages": q.Ready + q.Unacked, "messages_ready": q.Ready,
				"messages_unacknowledged": q.Unacked, "consumers": q.Consumers,
				"message_bytes_ready": q.ReadyBytes,
			})
		}
	}
	return out, nil
}

func (a *api) exchanges(r *http.Request) (any, error) {
	vs, err := a.selected(r)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, v := range vs {
		xs := v.Exchanges()
		sort.Slice(xs, func(i, j int) bool { return xs[i].Name < xs[j].Name })
		for _, x := range xs {
			e := map[string]any{
				"vhost": v.Name, "name": x.Name, "type": x.Type, "durable": x.Durable,
				"auto_delete": x.AutoDelete, "internal": x.Internal, "arguments": jsonTable(x.Args),
				"policy": x.Policy,
			}
			if x.Info != nil {
				e["type_info"] = jsonValue(x.Info) // a plugin's description may hold floats
			}
			out = append(out, e)
		}
	}
	return out, nil
}

func (a *api) bindings(r *http.Request) (any, error) {
	vs, err := a.selected(r)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, v := range vs {
		for _, bi := range v.Bindings() {
			out = append(out, map[string]any{
				"vhost": v.Name, "source": bi.Source, "destination": bi.Destination.Name,
				"destination_type": bi.Destination.Kind.String(), "routing_key": bi.Key,
				"arguments": jsonTable(bi.Args),
			})
		}
	}
	return out, nil
}

func (a *api) connections(*http.Request) (any, error) {
	out := []map[string]any{}
	for _, c := range a.b.Server().Connections() {
		out = append(out, map[string]any{
			"id": c.ID, "name": c.Name, "user": c.User, "vhost": c.VHost, "channels": c.Channels,
			"connected_at": c.Since.UnixMilli(), "client_properties": jsonTable(c.ClientProp),
		})
	}
	return out, nil
}

func (a *api) policies(r *http.Request) (any, error) {
	vs, err := a.selected(r)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, v := range vs {
		for _, p := range v.Policies() {
			out = append(out, map[string]any{
				"vhost": v.Name, "name": p.Name, "pattern": p.Pattern, "apply-to": string(p.ApplyTo),
				"priority": p.Priority, "definition": jsonTable(p.Definition),
			})
		}
	}
	return out, nil
}

func (a *api) putPolicy(r *http.Request) (any, error) {
	var body struct {
		Pattern    string         `json:"pattern"`
		Definition map[string]any `json:"definition"`
		Priority   int            `json:"priority"`
		ApplyTo    string         `json:"apply-to"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	return nil, a.b.SetPolicy(r.PathValue("vhost"), r.PathValue("name"), body.Pattern,
		policy.ApplyTo(body.ApplyTo), body.Priority, protocol.Table(body.Definition))
}

func (a *api) deletePolicy(r *http.Request) (any, error) {
	return nil, a.b.ClearPolicy(r.PathValue("vhost"), r.PathValue("name"))
}

func (a *api) plugins(*http.Request) (any, error) {
	return a.b.Plugins(), nil
}

func (a *api) enablePlugin(r *http.Request) (any, error) {
	return nil, a.b.EnablePlugin(r.PathValue("name"))
}

// disablePlugin refuses while the plugin's types have exchanges, unless
// ?force=true.
func (a *api) disablePlugin(r *http.Request) (any, error) {
	return nil, a.b.DisablePlugin(r.PathValue("name"), r.URL.Query().Get("force") == "true")
}

// jsonTable renders a field table for JSON: byte arrays as base64,
// timestamps as RFC 3339, NaN and the infinities as the strings "NaN",
// "Infinity" and "-Infinity", nested tables and arrays recursively.
func jsonTable(t protocol.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case protocol.Table:
		return jsonTable(x)
	case map[string]any:
		return jsonTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case protocol.Decimal:
		return x.Value
	case float64:
		if name, ok := nonFinite(x); ok {
			return name
		}
	case float32:
		if name, ok := nonFinite(float64(x)); ok {
			return name
		}
	}
	return v
}

// nonFinite names the floats JSON has no number for. The AMQP wire can
// carry them in a field table ('d' and 'f'); the names are JavaScript's.
func nonFinite(f float64) (string, bool) {
	switch {
	case math.IsNaN(f):
		return "NaN", true
	case math.IsInf(f, 1):
		return "Infinity", true
	case math.IsInf(f, -1):
		return "-Infinity", true
	}
	return "", false
}
