package inference_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/hexserve/hexserve/inference"

	"github.com/hexserve/hexserve/inference/sample"
)

// seqConstraint allows exactly want, then end-of-turn.
type seqConstraint struct {
	want  []int32
	pos   int
	masks *int
}

func (c *seqConstraint) Allowed(id int32) bool {
	if c.pos == len(c.want) {
		return id == eot
	}
	return id == c.want[c.pos]
}

func (c *seqConstraint) Mask(allowed []uint64) {
	*c.masks++
	maskOf(allowed, vocab, c.Allowed)
}

// maskOf sets allowed to the bitmask of the ids below n that ok allows.
func maskOf(allowed []uint64, n int32, ok func(int32) bool) {
	clear(allowed)
	for id := range n {
		if ok(id) {
			allowed[id>>6] |= 1 << (id & 63)
		}
	}
}

func (c *seqConstraint) Accept(id int32) error {
	if !c.Allowed(id) {
		return errors.New("rejected")
	}
	c.pos++
	return nil
}

func (c *seqConstraint) Complete() bool { return c.pos == len(c.want) }

func TestConstraint(t *testing.T) {
	seed := int64(3)
	tests := []struct {
		name   string
		script []int32
		req    inference.Request
		text   string
		finish inference.FinishReason
		masks  int // full masks built: only when the drawn token is rejected
	}{
		{"greedy, script rejected", []int32{1, 2, 6, 1, 2}, inference.Request{}, " world!", inference.FinishStop, 4},
		{"script allowed: no mask", []int32{3, 4, 5, eot}, inference.Request{}, " world!", inference.FinishStop, 0},
		{"stop strings do not cut the value", []int32{3, 4, 5, eot}, inference.Request{Stop: []string{"wor"}}, " world!", inference.FinishStop, 0},
		{"max_tokens ends it early", []int32{1, 1, 1}, inference.Request{MaxTokens: 2}, " world", inference.FinishLength, 2},
		{"sampled, two choices", []int32{1, 2, 6, 1, 2}, inference.Request{N: 2, Sampling: sample.Params{Temperature: 1, Seed: &seed}}, " world!", inference.FinishStop, 8},
		{"penalties and bias", []int32{1, 2, 6, 1, 2}, inference.Request{Logprobs: true, Sampling: sample.Params{Temperature: 0.7, FrequencyPenalty: 1, LogitBias: map[int32]float32{3: -100}}}, " world!", inference.FinishStop, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e, _ := setup(t, tc.script, inference.Config{})
				masks, made := 0, 0
				tc.req.Prompt = []int32{10, 11}
				tc.req.Constrain = func() inference.Constraint {
					made++
					return &seqConstraint{want: []int32{3, 4, 5}, masks: &masks}
				}
				r, err := run(t, e, tc.req)
				if err != nil {
					t.Fatal(err)
				}
				if made != len(r.Choices) {
					t.Errorf("%d constraints for %d choices", made, len(r.Choices))
				}
				for _, c := range r.Choices {
					if c.Text != tc.text || c.Finish != tc.finish {
						t.Errorf("got %q %s, want %q %s", c.Text, c.Finish, tc.text, tc.finish)
					}
					if tc.req.Logprobs && len(c.Logprobs) != len(c.Tokens) {
						t.Errorf("%d logprobs for %d tokens", len(c.Logprobs), len(c.Tokens))
					}
				}
				if masks != tc.masks {
					t.Errorf("%d masks built, want %d", masks, tc.masks)
				}
			})
		})
	}
}

func TestConstraintValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _ := setup(t, []int32{1}, inference.Config{})
		_, err := e.Submit(t.Context(), inference.Request{Prompt: []int32{1}, IgnoreEOS: true,
			Constrain: func() inference.Constraint { return &seqConstraint{} }})
		var ie *inference.InvalidRequestError
		if !errors.As(err, &ie) || ie.Param != "ignore_eos" {
			t.Fatalf("got %v, want an ignore_eos error", err)
		}
	})
}
