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
// queued (the engine's step then never does). Like OpenAI, it accepts a
// prediction of any length, but keeps only the tokens that fit the model's
// context (no output can be longer): the text is cut where the kept tokens'
// bytes end, so the drafter, which realigns on the text, sees the same
// prediction as its tokens. Tokenising stops
// there, so a huge prediction costs at most a context's worth of work.
func tokenisePrediction(req *inference.Request, tok *tokenizer.Tokenizer, contextLen int) {
	if req.Prediction == "" || tok == nil {
		return
	}
	if contextLen <= 0 {
		contextLen = 1 << 20
	}
	var toks []int32
	kept := 0
	for kept < len(req.Prediction) {
		rest := req.Prediction[kept:]
		n := chunkEnd(rest, predictionChunk)
		more := tok.Encode(rest[:n], false, false)
		if room := contextLen - len(toks); len(more) > room {
			for _, id := range more[:room] {
				kept += len(tok.Piece(id))
			}
			toks = append(toks, more[:room]...)
			break
		}
		toks = append(toks, more...)
		kept += n
	}
	req.Prediction, req.PredictionTokens = req.Prediction[:kept], toks
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
