package webui

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	Handler().ServeHTTP(w, httptest.NewRequest(method, path, nil))
	return w
}

func TestServesPageAndAssets(t *testing.T) {
	for _, c := range []struct{ path, ctype, contains string }{
		{"/", "text/html", `<script type="module" src="/ui/main.js">`},
		{"/ui/main.js", "text/javascript", "hashchange"},
		{"/ui/app.css", "text/css", ":root"},
		{"/ui/favicon.svg", "image/svg+xml", "<svg"},
	} {
		w := get(t, "GET", c.path)
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d", c.path, w.Code)
			continue
		}
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, c.ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", c.path, ct, c.ctype)
		}
		if !strings.Contains(w.Body.String(), c.contains) {
			t.Errorf("GET %s: body lacks %q", c.path, c.contains)
		}
		h := w.Header()
		if h.Get("Content-Security-Policy") != contentSecurityPolicy || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: security headers %v", c.path, h)
		}
	}
	if w := get(t, "HEAD", "/"); w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("HEAD /: %d with %d bytes", w.Code, w.Body.Len())
	}
}

func TestRefusesEverythingElse(t *testing.T) {
	for _, p := range []string{"/ui/", "/ui/nope.js", "/ui/../handler.go", "/ui/%2e%2e/doc.go", "/ui/static/main.js", "/index.html", "/api"} {
		if w := get(t, "GET", p); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
	}
	if w := get(t, "POST", "/"); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", w.Code)
	}
}

// The package's invariants, checked on the shipped files: no HTML is ever
// built from strings, nothing is loaded from elsewhere, no inline script
// (which the Content-Security-Policy would block anyway).
func TestStaticFilesKeepTheRules(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`)
	err := fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		text := string(b)
		if strings.HasSuffix(name, ".js") {
			for _, bad := range []string{".innerHTML =", ".outerHTML =", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
				if strings.Contains(text, bad) {
					t.Errorf("%s uses %s", name, bad)
				}
			}
		}
		if external.MatchString(text) || strings.Contains(text, "@import") {
			t.Errorf("%s loads something from another origin", name)
		}
		if strings.HasSuffix(name, ".html") && regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(text) {
			t.Errorf("%s has an inline script", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
