package admin

import (
	"net/http"
	"net/url"
	"strings"
)

// router matches "METHOD /api/queues/{vhost}" patterns against the
// escaped request path, one segment at a time. net/http's ServeMux cleans
// "/api/queues/%2F" into a path with an empty segment and redirects it, and
// "%2F" is how every RabbitMQ tool writes the default vhost.
type router struct {
	routes []route
}

type route struct {
	pattern  string // as registered
	method   string
	segments []string // literal, or "{name}"
	h        http.Handler
}

func (rt *router) Handle(pattern string, h http.Handler) {
	method, path, _ := strings.Cut(pattern, " ")
	rt.routes = append(rt.routes, route{pattern: pattern, method: method, segments: strings.Split(strings.Trim(path, "/"), "/"), h: h})
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "bad path escape: "+s)
			return
		}
		segs[i] = u
	}
	pathMatched := false
	for _, rte := range rt.routes {
		params, ok := rte.match(segs)
		if !ok {
			continue
		}
		pathMatched = true
		// HEAD is GET without the body (net/http drops it), as
		// RabbitMQ's web server and net/http's ServeMux answer it.
		if rte.method != r.Method && (r.Method != http.MethodHead || rte.method != http.MethodGet) {
			continue
		}
		for k, v := range params {
			r.SetPathValue(k, v)
		}
		rte.h.ServeHTTP(w, r)
		return
	}
	if pathMatched {
		// RabbitMQ answers 405 with no body.
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	writeError(w, http.StatusNotFound, "Object Not Found", "Not Found")
}

func (rte route) match(segs []string) (map[string]string, bool) {
	if len(segs) != len(rte.segments) {
		return nil, false
	}
	var params map[string]string
	for i, s := range rte.segments {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			if params == nil {
				params = make(map[string]string)
			}
			params[s[1:len(s)-1]] = segs[i]
			continue
		}
		if s != segs[i] {
			return nil, false
		}
	}
	return params, true
}
