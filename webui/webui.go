// Package webui is the chat page served at `/`: plain HTML, CSS and
// JavaScript embedded in the binary. Assets live under a path holding a hash
// of their content (/ui/<version>/app.js), so they are cached for a year;
// the page itself is revalidated (no-cache, ETag). Every response carries a
// strict Content-Security-Policy: same-origin scripts, styles and fetches
// only, nothing inline.
package webui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// CSP is the Content-Security-Policy of the page and its assets.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Prefix starts every asset path.
const Prefix = "/ui/"

// UI serves the page and its assets.
type UI struct {
	version string
	index   []byte
	files   map[string][]byte // asset name → content
}

// New loads the embedded assets and versions them.
func New() *UI {
	u := &UI{files: make(map[string][]byte)}
	h := sha256.New()
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "assets/")
		h.Write([]byte(name + "\x00"))
		h.Write(b)
		if name == "index.html" {
			u.index = b
		} else {
			u.files[name] = b
		}
		return nil
	})
	if err != nil || u.index == nil {
		panic("webui: embedded assets are broken: " + errString(err)) // a build error, not a runtime one
	}
	u.version = hex.EncodeToString(h.Sum(nil))[:12]
	u.index = bytes.ReplaceAll(u.index, []byte("{{version}}"), []byte(u.version))
	return u
}

func errString(err error) string {
	if err == nil {
		return "no index.html"
	}
	return err.Error()
}

// Version is the hash in the asset paths and the page's ETag.
func (u *UI) Version() string { return u.version }

// Size is the total size in bytes of the page and its assets.
func (u *UI) Size() int {
	n := len(u.index)
	for _, b := range u.files {
		n += len(b)
	}
	return n
}

// Index serves the page: revalidated on every load (no-cache with an ETag),
// so a new binary's page, which names new asset paths, is seen at once.
func (u *UI) Index(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", `"`+u.version+`"`)
	serve(w, r, "index.html", u.index)
}

// Asset serves /ui/<version>/<name>, cached for a year. It reports false,
// writing nothing, for any other path (an old version included) so the
// caller answers with its own 404.
func (u *UI) Asset(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix+u.version+"/")
	b, found := u.files[rest]
	if !ok || !found {
		return false
	}
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	serve(w, r, path.Base(rest), b)
	return true
}

func serve(w http.ResponseWriter, r *http.Request, name string, b []byte) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
