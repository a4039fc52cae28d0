package inference

import "github.com/hexserve/hexserve/inference/sample"

// Result is a whole request's output, gathered by Collect.
type Result struct {
	Choices []Choice // indexed by Event.Choice
	Finish  FinishReason
	Usage   Usage
	Timings Timings
}

// Choice is one generated continuation.
type Choice struct {
	Text      string
	Reasoning string // the reasoning (Request.Reasoning), apart from Text
	Tokens    []int32
	Logprobs  []sample.Logprob // when requested, one per token
	Finish    FinishReason
	Stop      string // the stop string that ended it (Event.Stop)
}

// Collect reads s to the end for callers that do not stream. The error is
// the Done event's (the request failed or was cancelled); the partial
// result is returned with it.
func Collect(s *Stream) (Result, error) {
	var r Result
	var err error
	for ev := range s.Events() {
		if ev.Done {
			r.Finish, r.Usage, r.Timings, err = ev.Finish, ev.Usage, ev.Timings, ev.Err
			continue
		}
		for len(r.Choices) <= ev.Choice {
			r.Choices = append(r.Choices, Choice{})
		}
		c := &r.Choices[ev.Choice]
		c.Text += ev.Text
		c.Reasoning += ev.Reasoning
		c.Tokens = append(c.Tokens, ev.Tokens...)
		c.Logprobs = append(c.Logprobs, ev.Logprobs...)
		if ev.Finish != "" {
			c.Finish, c.Stop = ev.Finish, ev.Stop
		}
	}
	return r, err
}
