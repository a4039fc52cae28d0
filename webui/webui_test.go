package webui

import (
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func get(h http.HandlerFunc, path string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h(rec, req)
	return rec
}

func TestIndex(t *testing.T) {
	u := New()
	rec := get(u.Index, "/")
	h := rec.Header()
	if rec.Code != 200 || h.Get("Content-Type") != "text/html; charset=utf-8" || h.Get("Cache-Control") != "no-cache" ||
		h.Get("ETag") != `"`+u.Version()+`"` || h.Get("Content-Security-Policy") != CSP {
		t.Fatalf("GET /: %d %v", rec.Code, h)
	}
	page := rec.Body.String()
	if strings.Contains(page, "{{version}}") || !strings.Contains(page, Prefix+u.Version()+"/app.js") {
		t.Errorf("asset paths are not versioned: %s", page)
	}
	// No inline script or style: the CSP would block them.
	for _, re := range []string{`<script(?:\s+type="module")?>`, `<style`, `\sstyle=`, `\son[a-z]+=`} {
		if regexp.MustCompile(re).MatchString(page) {
			t.Errorf("page has inline code matching %s", re)
		}
	}
	if rec := get(u.Index, "/", "If-None-Match", `"`+u.Version()+`"`); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("revalidation: %d, %d bytes", rec.Code, rec.Body.Len())
	}
}

func TestAsset(t *testing.T) {
	u := New()
	tests := []struct {
		path  string
		found bool
		ctype string
	}{
		{Prefix + u.Version() + "/app.js", true, "text/javascript; charset=utf-8"},
		{Prefix + u.Version() + "/text.js", true, "text/javascript; charset=utf-8"},
		{Prefix + u.Version() + "/style.css", true, "text/css; charset=utf-8"},
		{Prefix + u.Version() + "/icon.svg", true, "image/svg+xml"},
		{Prefix + u.Version() + "/index.html", false, ""}, // the page is only at /
		{Prefix + u.Version() + "/nope.js", false, ""},
		{Prefix + "000000000000/app.js", false, ""}, // another version
		{"/app.js", false, ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		found := u.Asset(rec, httptest.NewRequest("GET", tt.path, nil))
		if found != tt.found {
			t.Errorf("%s: found = %v", tt.path, found)
			continue
		}
		if !found {
			if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
				t.Errorf("%s: not found but wrote %v %q", tt.path, rec.Header(), rec.Body)
			}
			continue
		}
		h := rec.Header()
		if rec.Code != 200 || h.Get("Content-Type") != tt.ctype || h.Get("Cache-Control") != "public, max-age=31536000, immutable" ||
			h.Get("Content-Security-Policy") != CSP || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %v", tt.path, rec.Code, h)
		}
	}
}

// The page stays small, and docs/webui.md states its size (within 3%).
func TestSize(t *testing.T) {
	const budget = 32 << 10
	n := New().Size()
	if n > budget {
		t.Errorf("page and assets are %d bytes, over the %d budget", n, budget)
	} else {
		t.Logf("page and assets: %d bytes", n)
	}
	doc, err := os.ReadFile("../docs/webui.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`about \*\*([0-9.]+) KB\*\* in all`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/webui.md does not state the size as \"about **N KB** in all\"")
	}
	stated, _ := strconv.ParseFloat(string(m[1]), 64)
	if got := float64(n) / 1000; math.Abs(got-stated) > 0.03*stated {
		t.Errorf("docs/webui.md says %.1f KB; the page and assets are %.1f KB: update it", stated, got)
	}
}
