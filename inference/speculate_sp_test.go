package inference_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
)

// spPieces is a SentencePiece-style vocabulary, as Llama 2's and Phi-3.5's:
// "▁" is a word's leading space, Encode prepends one to its text and a
// text's first token reads without it (StartPiece).
var spPieces = []string{"<|assistant|>", "</s>", "▁", "a", "▁Paris", "▁is", "▁the", "▁capital", "▁of",
	"▁France", ";", "▁it", "▁has", "▁many", "▁old", "▁museums", "."}

// spScript is the text the sp model says, cycling: each token's successor.
var spScript = func() map[int32]int32 {
	next := map[int32]int32{0: 4} // <|assistant|> → ▁Paris
	for id := int32(4); id < int32(len(spPieces))-1; id++ {
		next[id] = id + 1
	}
	next[int32(len(spPieces))-1] = 4 // "." → ▁Paris
	return next
}()

type spVocab struct{}

func (spVocab) Piece(id int32) []byte {
	return []byte(strings.ReplaceAll(spPieces[id], "▁", " "))
}
func (v spVocab) StartPiece(id int32) []byte {
	if v.IsSpecial(id) {
		return v.Piece(id)
	}
	return []byte(strings.TrimPrefix(string(v.Piece(id)), " "))
}
func (spVocab) IsSpecial(id int32) bool { return id < 2 }

// Encode is greedy longest-match on "▁" + text, spaces as "▁".
func (spVocab) Encode(text string, _, _ bool) []int32 {
	s := "▁" + strings.ReplaceAll(text, " ", "▁")
	var ids []int32
	for len(s) > 0 {
		best, n := int32(-1), 0
		for id, p := range spPieces[2:] {
			if len(p) > n && strings.HasPrefix(s, p) {
				best, n = int32(id+2), len(p)
			}
		}
		if best < 0 {
			s = s[1:]
			continue
		}
		ids = append(ids, best)
		s = s[n:]
	}
	return ids
}

// spFill's logits follow spScript from the last token.
func spFill(prefix []int32, _ int) sample.Logits {
	l := make([]float32, len(spPieces))
	l[spScript[prefix[len(prefix)-1]]] = 5
	return sample.Logits{Type: sample.F32, F32: l}
}

// TestSpeculativeSentencePiece: on a SentencePiece-style vocabulary a
// prediction equal to the output has nearly all its tokens accepted, given
// as text or tokenised (as the server does), whether the reply starts after
// a control token (its text starts "Paris", not " Paris") or continues
// text; the first token's logprob bytes are the reply's text.
func TestSpeculativeSentencePiece(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name   string
		prompt []int32
		first  string // the reply's first token's text
	}{
		{"after a control token", []int32{0}, "Paris"},
		{"continuing text", []int32{0, 4}, " is"},
	} {
		for _, given := range []bool{false, true} {
			newModel := func() *seqModel {
				return &seqModel{info: inference.ModelInfo{Name: "sp", VocabSize: len(spPieces), ContextLen: 128, PrefillWindow: 16, EOS: []int32{1}},
					fill: spFill, cost: func(rows int) time.Duration { return time.Duration(10+rows) * time.Millisecond }}
			}
			req := inference.Request{Prompt: tc.prompt, MaxTokens: n, IgnoreEOS: true, Logprobs: true, TopLogprobs: 2}
			off := inference.New(newModel(), spVocab{}, inference.Config{})
			t.Cleanup(func() { off.Close() })
			want, err := run(t, off, req)
			if err != nil {
				t.Fatal(err)
			}
			text := want.Choices[0].Text
			if !strings.HasPrefix(text, tc.first) {
				t.Fatalf("%s: text %q, want it to start %q", tc.name, text, tc.first)
			}
			if lp := want.Choices[0].Logprobs[0]; string(lp.Bytes) != tc.first || string(lp.Top[0].Bytes) != tc.first {
				t.Errorf("%s: first token's logprob bytes %q (top %q), want the text's %q", tc.name, lp.Bytes, lp.Top[0].Bytes, tc.first)
			}
			e := inference.New(newModel(), spVocab{}, inference.Config{Speculative: inference.Speculative{Enabled: true}})
			t.Cleanup(func() { e.Close() })
			req.Prediction = text
			if given {
				req.PredictionTokens = spVocab{}.Encode(text, false, false)
			}
			got, err := run(t, e, req)
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Text != text {
				t.Errorf("%s: speculation changed the text: %q, want %q", tc.name, got.Choices[0].Text, text)
			}
			t.Logf("%s (tokens given %v): %d of %d accepted, %d rejected", tc.name, given, got.Usage.AcceptedPredictionTokens, n, got.Usage.RejectedPredictionTokens)
			if u := got.Usage; u.AcceptedPredictionTokens < n-n/5 {
				t.Errorf("%s (tokens given %v): a right prediction had %d of %d tokens accepted (%d rejected)",
					tc.name, given, u.AcceptedPredictionTokens, n, u.RejectedPredictionTokens)
			}
		}
	}
}
