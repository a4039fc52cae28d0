package server

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// cancelAtEOF cancels its context once the body has been read in full: a
// client that sends its request and goes away while the prompt renders.
type cancelAtEOF struct {
	io.Reader
	cancel context.CancelFunc
}

func (c cancelAtEOF) Read(p []byte) (int, error) {
	n, err := c.Reader.Read(p)
	if err == io.EOF {
		c.cancel()
	}
	return n, err
}

// TestRenderStopsWhenClientGoes: a client that disconnects while its tools
// render gets the cancelled status (499 in the log) rather than the 400 the
// finished rendering would give, in chat completions and /apply-template.
func TestRenderStopsWhenClientGoes(t *testing.T) {
	s, _ := newTest(t, Options{})
	wide := `"tools":[{"type":"function","function":{"name":"w","parameters":[` + strings.Repeat(`[1],`, 50000) + `[1]]}}]`
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"Hi"}],` + wide + `}`},
		{"/apply-template", `{"messages":[{"role":"user","content":"Hi"}],` + wide + `}`},
	} {
		// Connected, the rendering stops at the context's byte limit.
		if rec := do(s, "POST", tc.path, tc.body); rec.Code != 400 || str(apiErr(t, rec).Code) != "context_length_exceeded" {
			t.Fatalf("%s: %d %s", tc.path, rec.Code, rec.Body)
		}
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequest("POST", tc.path, nil).WithContext(ctx)
		req.Body = io.NopCloser(cancelAtEOF{strings.NewReader(tc.body), cancel})
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if e := apiErr(t, rec); rec.Code != StatusClientClosedRequest || str(e.Code) != "request_cancelled" {
			t.Errorf("%s after a disconnect: %d %s", tc.path, rec.Code, rec.Body)
		}
	}
}
