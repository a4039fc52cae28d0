package server

import (
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/hexserve/hexserve/webui"
)

// webUIRoutes serves / and, when Options.WebUI is on, the chat page's assets
// under /ui/ (off, they are unknown paths: 404). / is negotiated: a browser
// (Accept: text/html) gets the chat page when the web UI is on; everyone
// else gets Ollama's "Ollama is running", which Ollama clients probe for
// with GET or HEAD.
func (s *Server) webUIRoutes(r chi.Router) {
	var ui *webui.UI
	if s.opts.WebUI {
		ui = webui.New()
		r.Get(webui.Prefix+"*", func(w http.ResponseWriter, r *http.Request) {
			if !ui.Asset(w, r) {
				s.notFound(w, r)
			}
		})
	}
	root := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept")
		if ui != nil && wantsHTML(r) {
			ui.Index(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "Ollama is running") // HEAD: net/http drops the body
	}
	r.Get("/", root)
	r.Head("/", root)
}

// wantsHTML reports whether r's Accept header asks for HTML (a browser).
func wantsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(mt, "text/html") || strings.EqualFold(mt, "application/xhtml+xml") {
			return true
		}
	}
	return false
}
