package server

import (
	"regexp"
	"strings"
	"testing"
)

// TestRouteLabels (issue #39 finding 8): a 401 and a 413 are counted under
// the route they came in on (the label of the endpoint's own answers), not
// route="unmatched" or the API's prefix ("/api/*"), in every API.
func TestRouteLabels(t *testing.T) {
	s, _ := newTest(t, Options{APIKeys: []string{"k1"}, BodyLimit: 64})
	big := `{"model":"x","messages":[{"role":"user","content":"` + strings.Repeat("a", 100) + `"}]}`
	cases := []struct {
		path, route string
		hdr         []string
		body        string
		status      string
	}{
		{"/v1/chat/completions", "/v1/chat/completions", nil, "{}", "401"},
		{"/v1/chat/completions", "/v1/chat/completions", []string{"Authorization", "Bearer k1"}, big, "413"},
		{"/v1/messages", "/v1/messages", nil, "{}", "401"},
		{"/v1/messages", "/v1/messages", []string{"x-api-key", "k1"}, big, "413"},
		{"/v1/messages", "/v1/messages", []string{"x-api-key", "k1"}, "{", "400"}, // the handler's own answer: the same label
		{"/api/chat", "/api/chat", nil, "{}", "401"},
		{"/api/chat", "/api/chat", []string{"Authorization", "Bearer k1"}, big, "413"},
		{"/api/chat", "/api/chat", []string{"Authorization", "Bearer k1"}, "{", "400"},
	}
	for _, c := range cases {
		rec := do(s, "POST", c.path, c.body, c.hdr...)
		if got := rec.Code; got != atoi(c.status) {
			t.Errorf("%s: %d %s", c.path, got, rec.Body)
		}
	}
	metrics := do(s, "GET", "/metrics", "", "Authorization", "Bearer k1").Body.String()
	for _, c := range cases {
		re := regexp.MustCompile(`hexserve_http_requests_total\{method="POST",route="` + regexp.QuoteMeta(c.route) + `",status="` + c.status + `"\} [1-9]`)
		if !re.MatchString(metrics) {
			t.Errorf("no %s on route %q", c.status, c.route)
		}
	}
	if m := regexp.MustCompile(`hexserve_http_requests_total\{[^}]*route="(unmatched|[^"]*\*)"[^}]*\} \d+`).FindAllString(metrics, -1); m != nil {
		t.Errorf("counted as unmatched: %v", m)
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
