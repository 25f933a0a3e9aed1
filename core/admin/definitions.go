package admin

import (
	"errors"
	"io"
	"net/http"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/reply"
)

// Definitions, as RabbitMQ's management API serves them (the format and
// what an import does are in core/broker/definitions.go):
//
//	GET  /api/definitions            the whole broker
//	GET  /api/definitions/{vhost}    one vhost's policies, queues, exchanges, bindings
//	POST /api/definitions            import; 204 when applied
//	POST /api/definitions/{vhost}    import into that vhost only; 404 when it does not exist
//
// A document that is not JSON, or has a bad value, is a 400 whose reason
// names every bad entity and field, and nothing is applied (RabbitMQ
// 3.10.8 answers 400 too, but has applied what came before the bad value).
// An export holds every user's password hash, so these need the
// administrator tag whatever the rest of the API lets other tags do.
func (a *api) definitionRoutes(mux *router, h func(func(*http.Request) (any, error)) http.Handler) {
	mux.Handle("GET /api/definitions", h(a.adminOnly(a.exportDefinitions)))
	mux.Handle("GET /api/definitions/{vhost}", h(a.adminOnly(a.exportDefinitions)))
	mux.Handle("POST /api/definitions", h(a.adminOnly(a.importDefinitions)))
	mux.Handle("POST /api/definitions/{vhost}", h(a.adminOnly(a.importDefinitions)))
}

// maxDefinitionsBody bounds an imported document. Definitions of a large
// broker (thousands of queues and bindings) run to megabytes, more than
// the 1 MiB other request bodies get.
const maxDefinitionsBody = 64 << 20

// adminOnly refuses users without the administrator tag. wrap has
// authenticated the request already; this repeats the tag check so that
// definitions stay administrator-only when wrap lets other tags in.
func (a *api) adminOnly(f func(*http.Request) (any, error)) func(*http.Request) (any, error) {
	return func(r *http.Request) (any, error) {
		name, _, _ := r.BasicAuth()
		if u, ok := a.b.Users().User(name); !ok || !u.HasTag("administrator") {
			return nil, reply.AccessRefused("user '%s' is not an administrator: definitions need the administrator tag", name)
		}
		return f(r)
	}
}

func (a *api) exportDefinitions(r *http.Request) (any, error) {
	if name := r.PathValue("vhost"); name != "" {
		return a.b.ExportVHostDefinitions(name)
	}
	return a.b.ExportDefinitions(), nil
}

func (a *api) importDefinitions(r *http.Request) (any, error) {
	doc, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxDefinitionsBody))
	if err != nil {
		return nil, badRequest("request body: %v", err)
	}
	err = a.b.ImportDefinitions(doc, r.PathValue("vhost"))
	if errors.Is(err, broker.ErrInvalidDefinitions) {
		return nil, badRequest("%v", err)
	}
	return nil, err
}
