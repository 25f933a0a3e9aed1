package admin

import "net/http"

// What a request may be, checked before it reaches a route.
//
// A request line (method, path and query, protocol) longer than
// maxRequestLine is answered 414 with an empty body and the connection
// closed, as RabbitMQ 3.10.8's HTTP server answers one (it lets lines of
// up to some 8.7 KB pass, measured; no name fits in that much: names are
// at most 255 bytes, see core/names).

// maxRequestLine bounds a request line in bytes.
const maxRequestLine = 8192

// bounded refuses a request past the bounds above.
func bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Method)+1+len(r.RequestURI)+1+len(r.Proto) > maxRequestLine {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestURITooLong)
			return
		}
		next.ServeHTTP(w, r)
	})
}
