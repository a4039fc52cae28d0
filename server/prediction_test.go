package server_test

import (
	"strings"
	"testing"

	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/server"
)

// TestPredictionBound (issue #39 finding 7): an 835 KB prediction is a 400
// naming prediction, answered in the handler (tokenised at most to the
// context's length, before the queue), not seconds of CPU in the engine's
// step; one within the context is served.
func TestPredictionBound(t *testing.T) {
	r := newRig(t, rigOptions{opts: server.Options{BodyLimit: 4 << 20}})
	huge := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 835_000/45)
	var rep reply
	cost := costtest.Measure(func() {
		rep = r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":4,"prediction":{"type":"content","content":"`+huge+`"}`))
	})
	t.Logf("%d bytes of prediction: %d in %v wall, %v CPU", len(huge), rep.Status, cost.Wall, cost.CPU)
	if rep.Status != 400 {
		t.Fatalf("%d %.300s", rep.Status, rep.Body)
	}
	if e := decodeError(t, rep); orNull(e.Param) != "prediction" {
		t.Errorf("param %s: %s", orNull(e.Param), e.Message)
	}
	costtest.Within(t, "835 KB prediction", cost, 300e6, 100<<20)
	ok := r.do(t, "POST", "/v1/chat/completions", chatBody(`"max_tokens":4,"prediction":{"type":"content","content":"Hello there, general"}`))
	if ok.Status != 200 {
		t.Errorf("a short prediction: %d %s", ok.Status, ok.Body)
	}
	r.assertHealthy(t)
}
