package admin

import (
	"errors"
	"net/http"
)

// What a request may be, checked before it reaches a route.
//
// A request line (method, path and query, protocol) longer than
// maxRequestLine is answered 414 with an empty body and the connection
// closed, as RabbitMQ 3.10.8's HTTP server answers one (it lets lines of
// up to some 8.7 KB pass, measured; no name fits in that much: names are
// at most 255 bytes, see core/names).
//
// A body may be at most admin.max_body_size bytes, as RabbitMQ's
// management.http.max_body_size bounds it (rabbit_mgmt_util's
// read_complete_body): one larger is RabbitMQ's 400 {"error":
// "bad_request","reason":"Exceeded HTTP request body size limit"}. When
// the request says its length, nothing of the body is read: the first
// read fails, so the handler answers at once, after the same checks of
// credentials and tags as any request (RabbitMQ's order too). A body of
// unknown length is read up to the bound.

// maxRequestLine bounds a request line in bytes.
const maxRequestLine = 8192

// errBodyTooLarge is RabbitMQ's reason for a body over the bound.
var errBodyTooLarge = badRequest("Exceeded HTTP request body size limit")

// bounded refuses a request past the bounds above; maxBody is
// admin.max_body_size.
func bounded(maxBody int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Method)+1+len(r.RequestURI)+1+len(r.Proto) > maxRequestLine {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestURITooLong)
			return
		}
		if r.ContentLength > maxBody {
			r.Body = refusedBody{limit: maxBody}
		} else {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		}
		next.ServeHTTP(w, r)
	})
}

// refusedBody stands for a body declared longer than the bound: reading
// it fails at once, as an *http.MaxBytesError.
type refusedBody struct{ limit int64 }

func (b refusedBody) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: b.limit} }
func (refusedBody) Close() error               { return nil }

// tooLarge says whether err is a body over the bound.
func tooLarge(err error) bool {
	var e *http.MaxBytesError
	return errors.As(err, &e)
}
