package server_test

import (
	"strings"
	"testing"

	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/server"
)

// TestPredictionBound (issue #39 finding 7): an 835 KB prediction is served
// as OpenAI serves it, but costs at most a context's worth of tokenising in
// the handler (before the queue), not seconds of CPU in the engine's step.
func TestPredictionBound(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{BodyLimit: 4 << 20}})
	huge := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 835_000/45)
	var rep reply
	cost := costtest.Measure(func() {
		rep = r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":4,"prediction":{"type":"content","content":"`+huge+`"}`))
	})
	t.Logf("%d bytes of prediction: %d in %v wall, %v CPU", len(huge), rep.Status, cost.Wall, cost.CPU)
	if rep.Status != 200 {
		t.Fatalf("%d %.300s", rep.Status, rep.Body)
	}
	costtest.Within(t, "835 KB prediction", cost, 300e6, 100<<20)
	ok := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":4,"prediction":{"type":"content","content":"Hello there, general"}`))
	if ok.Status != 200 {
		t.Errorf("a short prediction: %d %s", ok.Status, ok.Body)
	}
	r.assertHealthy(t)
}
