package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The cost of the middleware chain and routing on a small request.
func BenchmarkModels(b *testing.B) {
	s := New(Options{Logger: zerolog.Nop(), APIKeys: []string{"k1", "k2"}, CORSOrigins: []string{"http://a.test"}})
	s.SetModel(testModel(b))
	req := httptest.NewRequest("GET", "/v1/models", nil)
	req.Header.Set("Authorization", "Bearer k2")
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// /tokenize on a ~1 KB prompt: request decoding, BPE and the response.
func BenchmarkTokenize(b *testing.B) {
	s := New(Options{Logger: zerolog.Nop()})
	s.SetModel(testModel(b))
	body := `{"content":"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 22) + `"}`
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("POST", "/tokenize", strings.NewReader(body)))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}
