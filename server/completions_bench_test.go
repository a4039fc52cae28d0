package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/inference"
)

// BenchmarkChatCompletion measures the HTTP, template, tokenizer and SSE
// overhead around a scripted model that answers 32 tokens instantly.
func BenchmarkChatCompletion(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name := "json"
		extra := `"max_tokens":32`
		if stream {
			name, extra = "sse", extra+`,"stream":true`
		}
		b.Run(name, func(b *testing.B) {
			g := newGenServer(b, strings.Repeat(" hello", 40), Options{}, inference.Config{})
			g.fm.Record(false)
			body := chatBody(extra)
			b.ResetTimer()
			for b.Loop() {
				resp, err := http.Post(g.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatal(resp.Status)
				}
			}
			b.ReportMetric(float64(32*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
