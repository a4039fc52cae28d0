package server

import (
	"strings"
	"testing"
)

// TestBodyMemory: request bodies held at once are bounded server-wide
// (server.body_memory), past it 503 with Retry-After in the API's shape,
// and a finished request gives its bytes back.
func TestBodyMemory(t *testing.T) {
	s, _ := newTest(t, Options{BodyLimit: 1 << 20, BodyMemory: 4 << 10})
	small := `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`
	big := `{"model":"nope","messages":[{"role":"user","content":"` + strings.Repeat("a", 8<<10) + `"}]}`
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/v1/chat/completions", small, 404},
		{"/v1/chat/completions", big, 503},
		{"/api/chat", big, 503},
		{"/v1/messages", big, 503},
		{"/v1/chat/completions", small, 404}, // the big ones' bytes were given back
	} {
		rec := do(s, "POST", c.path, c.body, "Content-Type", "application/json")
		if rec.Code != c.status || c.status == 503 && (rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "server.body_memory")) {
			t.Errorf("%s (%d bytes): %d %s", c.path, len(c.body), rec.Code, rec.Body)
		}
	}
	if n := s.bodies.Load(); n != 0 {
		t.Errorf("%d body bytes still held", n)
	}
}
