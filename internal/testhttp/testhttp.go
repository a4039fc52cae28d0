// Package testhttp makes the HTTP requests of the tests: a method, a URL, a
// body and headers as name, value pairs, answered by the whole reply.
package testhttp

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Reply is a response read whole.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends the request (no body when body is empty; hdr holds header name,
// value pairs, later ones winning) with the default client and reads the
// reply. It fails t when the request cannot be made or read.
func Do(t testing.TB, method, url, body string, hdr ...string) Reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return Reply{resp.StatusCode, resp.Header, b}
}
