// Package overflow fits a prompt longer than a model's window into it, under
// a Policy (LM Studio's stopAtLimit, truncateMiddle and rollingWindow): a
// conversation loses whole turns, oldest first, never its system messages,
// its last user turn, nor one half of a tool call and its results; a raw
// prompt loses the tokens between a kept head and the newest tail.
package overflow

import (
	"errors"
	"fmt"

	"github.com/hexserve/hexserve/chat"
)

// Policy says what to do with a prompt over the window.
type Policy string

// Policies.
const (
	// Error refuses the prompt (a 400), as OpenAI's and Anthropic's APIs do.
	Error Policy = "error"
	// TruncateMiddle leaves out the turns between the first and the last
	// user turn, oldest first.
	TruncateMiddle Policy = "truncate_middle"
	// Rolling leaves out the oldest turns, the first user turn included.
	Rolling Policy = "rolling"
)

// Parse reads a policy name; "" is def.
func Parse(s string, def Policy) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return def, nil
	case Error, TruncateMiddle, Rolling:
		return p, nil
	}
	return "", fmt.Errorf("context_overflow must be %q, %q or %q, got %q", Error, TruncateMiddle, Rolling, s)
}

// Truncates reports whether p leaves part of the prompt out rather than
// refusing it.
func (p Policy) Truncates() bool { return p == TruncateMiddle || p == Rolling }

// kept says in words what p always keeps of a conversation.
func (p Policy) kept() string {
	if p == TruncateMiddle {
		return "the system messages, the tools, the first and the last user turn"
	}
	return "the system messages, the tools and the last user turn"
}

// ReplyRoom is how many tokens of a window of ctxLen a truncated prompt
// leaves for the reply: maxTokens when the request sets it (> 0), else a
// quarter of the window; at most half the window either way, so a large
// max_tokens still leaves the conversation room. At least 1: the engine
// needs room for one token.
func ReplyRoom(maxTokens, ctxLen int) int {
	room := ctxLen / 4
	if maxTokens > 0 {
		room = min(maxTokens, ctxLen/2)
	}
	return max(room, 1)
}

// Fitted is a prompt that fits.
type Fitted struct {
	Prompt   []int32
	Messages []chat.Message // the messages kept, in order
	Dropped  int            // messages (or, for FitTokens, tokens) left out
}

// TooLongError is a prompt still over the budget with all that the policy
// may leave out left out.
type TooLongError struct {
	PromptTokens int    // the shortest prompt's tokens
	Budget       int    // the tokens it had to fit in
	Dropped      int    // messages (tokens) left out of it
	Kept         string // what the policy keeps, in words
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("the prompt has %d tokens, over the %d that fit, with %d left out (kept: %s)",
		e.PromptTokens, e.Budget, e.Dropped, e.Kept)
}

// Fit returns the prompt of msgs that measures at most budget tokens: all
// of msgs when they fit or p does not truncate (Error: the caller refuses
// a prompt over the window), else with the fewest oldest droppable turns
// left out (Turns). When even what p keeps is over budget, it is the
// prompt with all droppable turns left out if that is at most limit tokens
// (budget is the target with room for the reply, limit the window's
// bound), else a *TooLongError. encode renders and tokenizes a candidate; a
// *chat.LengthError from it (a render past the byte bound) reads as "does
// not fit". It is called O(log turns) times: a binary search over how many
// turns to leave out, since leaving more out never lengthens the prompt.
func Fit(msgs []chat.Message, p Policy, budget, limit int, encode func([]chat.Message) ([]int32, error)) (Fitted, error) {
	prompt, err := encode(msgs)
	if !p.Truncates() || err == nil && len(prompt) <= budget {
		return Fitted{Prompt: prompt, Messages: msgs}, err
	}
	if err != nil && !isLength(err) {
		return Fitted{}, err
	}
	turns := Turns(msgs)
	lo := 0
	if p == TruncateMiddle && len(turns) > 0 {
		lo = 1
	}
	droppable := max(len(turns)-1-lo, 0) // the last turn stays
	try := func(d int) (Fitted, bool, error) {
		kept := without(msgs, turns[lo:lo+d])
		pr, err := encode(kept)
		if isLength(err) {
			return Fitted{}, false, nil
		}
		f := Fitted{Prompt: pr, Messages: kept, Dropped: len(msgs) - len(kept)}
		return f, err == nil && len(pr) <= budget, err
	}
	best, ok, err := try(droppable)
	switch {
	case err != nil:
		return Fitted{}, err
	case !ok && best.Prompt != nil && len(best.Prompt) <= limit:
		return best, nil
	case !ok:
		n := len(best.Prompt)
		if best.Prompt == nil { // still past the byte bound
			n = len(prompt)
		}
		return Fitted{}, &TooLongError{PromptTokens: n, Budget: budget, Dropped: best.Dropped, Kept: p.kept()}
	}
	for a, b := 1, droppable; a < b; { // the fewest turns that fit is in [a, b]
		mid := a + (b-a)/2
		f, ok, err := try(mid)
		if err != nil {
			return Fitted{}, err
		}
		if ok {
			b, best = mid, f
		} else {
			a = mid + 1
		}
	}
	return best, nil
}

func isLength(err error) bool {
	var le *chat.LengthError
	return errors.As(err, &le)
}

// without is msgs less the messages of the turns given (in order), their
// system messages kept.
func without(msgs []chat.Message, drop []Turn) []chat.Message {
	if len(drop) == 0 {
		return msgs
	}
	out := make([]chat.Message, 0, len(msgs))
	next := 0
	for i, m := range msgs {
		for next < len(drop) && i >= drop[next].End {
			next++
		}
		if next < len(drop) && drop[next].has(i) && !System(m) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// FitTokens keeps the first keep tokens of prompt and its newest tail, so
// that the two together are at most budget tokens. A prompt within budget
// comes back whole.
func FitTokens(prompt []int32, keep, budget int) (Fitted, error) {
	if len(prompt) <= budget {
		return Fitted{Prompt: prompt}, nil
	}
	keep = min(keep, len(prompt))
	if keep >= budget {
		return Fitted{}, &TooLongError{PromptTokens: keep, Budget: budget, Dropped: len(prompt) - keep,
			Kept: fmt.Sprintf("the first %d tokens (n_keep)", keep)}
	}
	tail := budget - keep
	out := append(append(make([]int32, 0, budget), prompt[:keep]...), prompt[len(prompt)-tail:]...)
	return Fitted{Prompt: out, Dropped: len(prompt) - budget}, nil
}
