package server

import (
	"unicode/utf8"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/tokenizer"
)

// predictionChunk is how much of a prediction is tokenised at a time, so
// that one longer than the bound stops costing once it is past it.
const predictionChunk = 4 << 10

// tokenisePrediction tokenises req's prediction before the request is
// queued (the engine's step then never does), refusing one of more tokens
// than the model's context holds: no output can be longer, and the drafter
// realigns on the prediction's text at every step.
func tokenisePrediction(req *inference.Request, tok *tokenizer.Tokenizer, contextLen int) error {
	if req.Prediction == "" || tok == nil {
		return nil
	}
	if contextLen <= 0 {
		contextLen = 1 << 20
	}
	// A token is at most MaxPieceBytes long: past this, the bound is sure.
	if maxBytes := contextLen * max(tok.MaxPieceBytes(), 1); len(req.Prediction) > maxBytes {
		return tooLongPrediction(contextLen)
	}
	var toks []int32
	for rest := req.Prediction; rest != ""; {
		n := chunkEnd(rest, predictionChunk)
		toks = append(toks, tok.Encode(rest[:n], false, false)...)
		rest = rest[n:]
		if len(toks) > contextLen {
			return tooLongPrediction(contextLen)
		}
	}
	req.PredictionTokens = toks
	return nil
}

// chunkEnd is where the first chunk of s of at most n bytes ends: before
// a single space between two words (Llama-3's pre-tokenizer starts a word
// with the space before it, and splits whitespace runs its own way), so
// the chunks tokenise as the whole text does; else at a character's start.
func chunkEnd(s string, n int) int {
	if len(s) <= n {
		return len(s)
	}
	for i := n - 1; i > 0; i-- {
		if s[i] == ' ' && !isSpace(s[i-1]) && !isSpace(s[i+1]) {
			return i
		}
	}
	for n > 1 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func tooLongPrediction(contextLen int) error {
	return invalid("prediction", "prediction is longer than this model's context of %d tokens, which no output can exceed; "+
		"send the part of the expected output that the reply can reach.", contextLen)
}
