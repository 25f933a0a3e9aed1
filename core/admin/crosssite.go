package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// A browser holding an administrator's credentials for the admin API sends
// them with any request a page from another site makes it send, and an
// HTML form can POST there without script. The API itself changes state
// only on PUT, POST and DELETE, so those are the requests refused when a
// browser could have forged them:
//
//   - a browser's cross-origin request, told by Sec-Fetch-Site or, from
//     older browsers, an Origin whose host is not the Host the request was
//     sent to (net/http's CrossOriginProtection), is a 403;
//   - from a browser (it sends Origin, Sec-Fetch-Site or a cookie), a body
//     that is not declared application/json, and any other declared
//     Content-Type even without a body, is a 415: those are the types a
//     form or a script's "simple" request can send without a CORS
//     preflight, which this API never grants.
//
// warrenctl and curl-style clients send none of those headers: their
// body is taken whatever its declared type when it is JSON (`curl -d`
// declares a form; RabbitMQ 3.10.8 accepts any type and any Origin). A
// request with no body needs no Content-Type. GET, HEAD and OPTIONS never
// change state and are not checked: a cross-origin page cannot read their
// answers. (A browser so old it sends no Origin on a form POST is left
// the form's own defence: its body is not JSON.)
func refuseForgeable(next http.Handler) http.Handler {
	origins := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		if err := origins.Check(r); err != nil {
			writeError(w, http.StatusForbidden, "not_authorised", "cross-origin request refused: "+err.Error())
			return
		}
		if problem := bodyTypeProblem(r); problem != "" && (fromBrowser(r) || !bodyIsJSON(r)) {
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", problem)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bodyTypeProblem says why a state-changing request's Content-Type is
// refused, or "" when it is application/json, or absent with no body.
func bodyTypeProblem(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength == 0 {
			return ""
		}
		return "a request body needs Content-Type: application/json"
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return ""
	}
	return fmt.Sprintf("Content-Type %q is not application/json", ct)
}

// fromBrowser says whether a request carries what only a browser sends
// unasked: an Origin, Sec-Fetch-Site, or a cookie.
func fromBrowser(r *http.Request) bool {
	return r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Cookie") != ""
}

// bodyIsJSON reads the body (bounded by admin.max_body_size) and says
// whether it is one JSON value; the handler reads it again.
func bodyIsJSON(r *http.Request) bool {
	if r.Body == nil {
		return false
	}
	b, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return err == nil && len(bytes.TrimSpace(b)) > 0 && json.Valid(b)
}
