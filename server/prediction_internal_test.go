package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/inference"
)

// TestTokenisePrediction: tokenised in chunks, a prediction gets the tokens
// of tokenising it whole (chunks end after a space or newline), and one of
// more tokens than the context is refused.
func TestTokenisePrediction(t *testing.T) {
	tok := testModel(t).Tokenizer
	text := strings.Repeat("func main() {\n\tfmt.Println(\"héllo, wörld\")\n}\n", 400) // 20 KB: five chunks
	req := &inference.Request{Prediction: text}
	if err := tokenisePrediction(req, tok, 1<<20); err != nil {
		t.Fatal(err)
	}
	if want := tok.Encode(text, false, false); !slices.Equal(req.PredictionTokens, want) {
		t.Errorf("%d tokens in chunks, %d whole", len(req.PredictionTokens), len(want))
	}
	if err := tokenisePrediction(&inference.Request{Prediction: text}, tok, 1000); err == nil {
		t.Errorf("a prediction of %d tokens passed a context of 1000", len(req.PredictionTokens))
	}
}
