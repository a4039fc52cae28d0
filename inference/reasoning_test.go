package inference_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
)

// Pieces of the reasoning tests' vocabulary.
const (
	tThink, tEnd, tNL, tA, tB, tC, tJSON1, tJSON2 = 1, 2, 3, 4, 5, 6, 7, 8
)

var thinkWords = map[int32]string{tThink: "<think>", tEnd: "</think>", tNL: "\n", tA: "a", tB: "b", tC: "c",
	tJSON1: "{", tJSON2: "}", eot: "<|eot_id|>"}

// TestReasoning runs scripted replies through the engine with a
// reasoning: the reasoning comes apart from the text, its tokens are
// counted (and count against max_tokens), stop strings and the constraint
// apply to the answer only, and a spent budget forces the end marker.
func TestReasoning(t *testing.T) {
	qwen := &inference.Reasoning{Start: "<think>", End: "</think>", EndTokens: []int32{tNL, tEnd, tNL}}
	open := *qwen
	open.Open = true
	budget := open
	budget.Budget = 2
	json := func() inference.Constraint { return &seqConstraint{want: []int32{tJSON1, tJSON2}, masks: new(int)} }
	tests := []struct {
		name                  string
		script                []int32
		req                   inference.Request
		reasoning, text       string
		reasoningTokens, toks int
		finish                inference.FinishReason
	}{
		{"qwen3", []int32{tThink, tNL, tA, tNL, tEnd, tNL, tB, eot}, inference.Request{Reasoning: qwen}, "a", "b", 5, 8, inference.FinishStop},
		{"none", []int32{tA, tB, eot}, inference.Request{Reasoning: qwen}, "", "ab", 0, 3, inference.FinishStop},
		{"open", []int32{tA, tEnd, tB, eot}, inference.Request{Reasoning: &open}, "a", "b", 2, 4, inference.FinishStop},
		{"stop in the answer only", []int32{tA, tB, tEnd, tA, tB, tC, eot}, inference.Request{Reasoning: &open, Stop: []string{"b"}}, "ab", "a", 3, 5, inference.FinishStop},
		{"max_tokens counts reasoning", []int32{tA, tB, tC}, inference.Request{Reasoning: &open, MaxTokens: 2}, "ab", "", 2, 2, inference.FinishLength},
		{"budget forces the end", []int32{tA, tB, tC, tC, tC, tC, tA, eot}, inference.Request{Reasoning: &budget}, "ab", "cca", 4, 8, inference.FinishStop},
		{"constraint after reasoning", []int32{tA, tEnd, tA, tJSON1, tA, eot}, inference.Request{Reasoning: &open, Constrain: json}, "a", "{}", 2, 5, inference.FinishStop},
		{"budget then constraint", []int32{tA, tB, tC, tC, tC, tC}, inference.Request{Reasoning: &budget, Constrain: json}, "ab", "{}", 4, 7, inference.FinishStop},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := inferencetest.NewScripted(inference.ModelInfo{VocabSize: vocab, ContextLen: 64, EOS: []int32{eot}}, tc.script)
				e := inference.New(m, inferencetest.NewVocab(thinkWords), inference.Config{})
				defer e.Close()
				tc.req.Prompt = []int32{10, 11}
				r, err := run(t, e, tc.req)
				if err != nil {
					t.Fatal(err)
				}
				c := r.Choices[0]
				if c.Reasoning != tc.reasoning || c.Text != tc.text || c.Finish != tc.finish {
					t.Errorf("got reasoning %q text %q %s, want %q %q %s", c.Reasoning, c.Text, c.Finish, tc.reasoning, tc.text, tc.finish)
				}
				if r.Usage.ReasoningTokens != tc.reasoningTokens || r.Usage.CompletionTokens != tc.toks {
					t.Errorf("reasoning tokens %d, completion %d, want %d, %d", r.Usage.ReasoningTokens, r.Usage.CompletionTokens, tc.reasoningTokens, tc.toks)
				}
			})
		})
	}
}

func TestReasoningValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setup(t, []int32{1}, inference.Config{})
		for _, r := range []*inference.Reasoning{{End: "</think>", EndTokens: []int32{vocab}}, {End: "</think>", Budget: -1}, {Start: "<think>"}} {
			_, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}, Reasoning: r})
			var ie *inference.InvalidRequestError
			if !errors.As(err, &ie) || ie.Param != "reasoning" {
				t.Errorf("%+v: %v", r, err)
			}
		}
	})
}
