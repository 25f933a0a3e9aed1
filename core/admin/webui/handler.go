package webui

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// files is the static folder as the root of the UI's assets.
var files = func() fs.FS {
	f, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed pattern above guarantees the folder
	}
	return f
}()

// AssetPrefix is the path under which the UI's files are served; it stays
// clear of /api and /metrics.
const AssetPrefix = "/ui/"

// contentSecurityPolicy lets the page load only its own files and talk
// only to its own origin; see the package doc.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; form-action 'none'; " +
	"frame-ancestors 'none'; base-uri 'none'"

// Handler serves the UI: index.html at / and the assets at /ui/NAME.
// Anything else is a 404; the UI's own routes live after the # in the URL,
// so the server never has to know them.
func Handler() http.Handler {
	return http.HandlerFunc(serve)
}

func serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var name string
	switch p := r.URL.Path; {
	case p == "/":
		name = "index.html"
	case strings.HasPrefix(p, AssetPrefix):
		name = strings.TrimPrefix(p, AssetPrefix)
	}
	// Only plain file names: the assets are one flat folder, and this
	// keeps "..", sub-folders and the folder listing out.
	if name == "" || strings.Contains(name, "/") || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	body, err := fs.ReadFile(files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	// The files change with the binary; revalidating each time is cheap
	// on a local admin listener and never shows a stale UI after upgrade.
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}
