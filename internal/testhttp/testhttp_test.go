package testhttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestDo: the method, body and headers arrive; the status, headers and body
// come back.
func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", r.Method+" "+r.Header.Get("X-A")+" "+string(b))
		w.WriteHeader(201)
		w.Write([]byte("done"))
	}))
	defer srv.Close()
	r := Do(t, "PUT", srv.URL, "hi", "X-A", "1", "X-A", "2")
	if r.Status != 201 || r.Header.Get("X-Got") != "PUT 2 hi" || string(r.Body) != "done" {
		t.Fatalf("%d %q %q", r.Status, r.Header.Get("X-Got"), r.Body)
	}
}
