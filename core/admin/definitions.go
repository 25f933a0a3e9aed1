package admin

import (
	"errors"
	"io"

	"github.com/warrenmq/warren/core/broker"
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
func (a *api) routeDefinitions(mux *router) {
	a.handle(mux, "GET /api/definitions", administrator, a.exportDefinitions)
	a.handle(mux, "GET /api/definitions/{vhost}", administrator, a.exportDefinitions)
	a.handle(mux, "POST /api/definitions", administrator, a.importDefinitions)
	a.handle(mux, "POST /api/definitions/{vhost}", administrator, a.importDefinitions)
}

func (a *api) exportDefinitions(c *call) (any, error) {
	if name := c.path("vhost"); name != "" {
		return a.b.ExportVHostDefinitions(name)
	}
	return a.b.ExportDefinitions(), nil
}

func (a *api) importDefinitions(c *call) (any, error) {
	doc, err := io.ReadAll(c.r.Body) // bounded by admin.max_body_size (bounds.go)
	switch {
	case tooLarge(err):
		return nil, errBodyTooLarge
	case err != nil:
		return nil, badRequest("request body: %v", err)
	}
	err = a.b.ImportDefinitions(c.r.Context(), doc, c.path("vhost"))
	if errors.Is(err, broker.ErrInvalidDefinitions) {
		return nil, badRequest("%v", err)
	}
	return nil, err
}
