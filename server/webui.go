package server

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/hexserve/hexserve/webui"
)

// webUIRoutes serves the chat page at / and its assets under /ui/ when
// Options.WebUI is on; off, both are unknown paths (404).
func (s *Server) webUIRoutes(r chi.Router) {
	if !s.opts.WebUI {
		return
	}
	ui := webui.New()
	r.Get("/", ui.Index)
	r.Get(webui.Prefix+"*", func(w http.ResponseWriter, r *http.Request) {
		if !ui.Asset(w, r) {
			s.notFound(w, r)
		}
	})
}

// isWebUIPath reports whether p is the page or one of its assets, which are
// public like /health: the page holds no data and asks for the API key
// itself.
func (s *Server) isWebUIPath(p string) bool {
	return s.opts.WebUI && (p == "/" || strings.HasPrefix(p, webui.Prefix))
}
