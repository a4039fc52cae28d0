package server

import (
	"regexp"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/webui"
)

func TestWebUI(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		hdr    []string
		page   int // status of GET /
		models int // status of GET /v1/models with the same headers
	}{
		{"on", Options{WebUI: true}, nil, 200, 200},
		{"off: / is Ollama's probe", Options{}, nil, 200, 200},
		{"on with keys: the page is public, the API is not", Options{WebUI: true, APIKeys: []string{"sk-1"}}, nil, 200, 401},
		{"off with keys", Options{APIKeys: []string{"sk-1"}}, []string{"Authorization", "Bearer sk-1"}, 200, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTest(t, tt.opts)
			rec := do(s, "GET", "/", "", append([]string{"Accept", "text/html"}, tt.hdr...)...)
			if rec.Code != tt.page {
				t.Fatalf("GET /: %d %s", rec.Code, rec.Body)
			}
			if !tt.opts.WebUI && rec.Body.String() != "Ollama is running" {
				t.Errorf("web UI off, GET / from a browser: %s", rec.Body)
			}
			if rec := do(s, "GET", "/v1/models", "", tt.hdr...); rec.Code != tt.models {
				t.Errorf("GET /v1/models: %d %s", rec.Code, rec.Body)
			}
			if !tt.opts.WebUI {
				if rec := do(s, "GET", "/ui/x/app.js", ""); rec.Code != 404 && rec.Code != 401 {
					t.Errorf("web UI off, an asset path: %d", rec.Code)
				}
				return
			}
			// Every asset the page names is served, public, with the CSP.
			page := rec.Body.String()
			refs := regexp.MustCompile(`(?:src|href)="(/ui/[^"]+)"`).FindAllStringSubmatch(page, -1)
			if len(refs) != 3 {
				t.Fatalf("page names %d assets, want 3 (icon, style, script): %s", len(refs), page)
			}
			for _, ref := range refs {
				a := do(s, "GET", ref[1], "")
				if a.Code != 200 || a.Header().Get("Content-Security-Policy") != webui.CSP || a.Body.Len() == 0 {
					t.Errorf("%s: %d csp=%q", ref[1], a.Code, a.Header().Get("Content-Security-Policy"))
				}
			}
			for _, bad := range []string{"/ui/0123456789ab/app.js", "/ui/", strings.Replace(refs[0][1], "icon.svg", "nope.js", 1)} {
				if rec := do(s, "GET", bad, ""); rec.Code != 404 || apiErr(t, rec).Code == nil {
					t.Errorf("%s: %d %s", bad, rec.Code, rec.Body)
				}
			}
		})
	}
}
