package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/inference"
)

// TestTokenisePrediction: tokenised in chunks, a prediction gets the tokens
// of tokenising it whole (chunks end after a space or newline), and one of
// more tokens than the context keeps the whole chunks that fit, text and
// tokens cut at the same place.
func TestTokenisePrediction(t *testing.T) {
	tok := testModel(t).Tokenizer
	text := strings.Repeat("func main() {\n\tfmt.Println(\"héllo, wörld\")\n}\n", 400) // 20 KB: five chunks
	req := &inference.Request{Prediction: text}
	tokenisePrediction(req, tok, 1<<20)
	if want := tok.Encode(text, false, false); !slices.Equal(req.PredictionTokens, want) {
		t.Errorf("%d tokens in chunks, %d whole", len(req.PredictionTokens), len(want))
	}
	cut := &inference.Request{Prediction: text}
	tokenisePrediction(cut, tok, 1000)
	if n := len(cut.PredictionTokens); n == 0 || n > 1000 {
		t.Errorf("a prediction of %d tokens kept %d tokens in a context of 1000", len(req.PredictionTokens), n)
	}
	if !strings.HasPrefix(text, cut.Prediction) || !slices.Equal(cut.PredictionTokens, tok.Encode(cut.Prediction, false, false)) {
		t.Errorf("the kept text (%d bytes) and tokens (%d) disagree", len(cut.Prediction), len(cut.PredictionTokens))
	}
}
