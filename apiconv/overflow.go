package apiconv

import (
	"errors"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/overflow"
)

// Policy is a request's context_overflow policy: field when the request
// sets it (a bad name is the 400 of param), else the model's (Params.
// Overflow), else def, the API's default.
func (p Params) Policy(field, param string, def overflow.Policy) (overflow.Policy, error) {
	if p.Overflow != "" {
		def = p.Overflow
	}
	pol, err := overflow.Parse(field, def)
	if err != nil {
		return "", Invalid(param, "%v", err)
	}
	return pol, nil
}

// FitChat renders and encodes msgs (EncodeChat with opt and tail) within
// p's window under pol: a truncating policy leaves out the fewest older
// turns that make the prompt leave overflow.ReplyRoom(maxTokens) tokens of
// the window for the reply (when even what the policy keeps leaves less,
// what is left), and tells p.Truncated how many messages it left out. With
// overflow.Error, or a window of 0 (unknown), the prompt is all of msgs
// whatever its length (the engine refuses one over the window). When even
// what the policy keeps is over the window it is a
// *inference.ContextLengthError naming what was kept.
func (p Params) FitChat(msgs []chat.Message, opt chat.Options, tail string, pol overflow.Policy, maxTokens int) (overflow.Fitted, error) {
	if p.ContextLen <= 0 {
		pol = overflow.Error
	}
	room := overflow.ReplyRoom(maxTokens, p.ContextLen)
	f, err := overflow.Fit(msgs, pol, p.ContextLen-room, p.ContextLen-1, func(m []chat.Message) ([]int32, error) {
		return EncodeChat(p.Tokenizer, m, opt, tail)
	})
	if err != nil {
		return f, p.tooLong(err)
	}
	p.truncated(f.Dropped, len(f.Prompt))
	return f, nil
}

// FitText fits a raw prompt (completions, Ollama's raw generate) in p's
// window under pol: a truncating policy keeps BOS and the next nKeep
// tokens, and the newest tail, leaving overflow.ReplyRoom(maxTokens) tokens
// for the reply; it tells p.Truncated how many tokens it left out.
func (p Params) FitText(prompt []int32, nKeep int, pol overflow.Policy, maxTokens int) ([]int32, error) {
	if !pol.Truncates() || p.ContextLen <= 0 {
		return prompt, nil
	}
	if len(prompt) > 0 && prompt[0] == p.bos() {
		nKeep++
	}
	room := overflow.ReplyRoom(maxTokens, p.ContextLen)
	f, err := overflow.FitTokens(prompt, nKeep, p.ContextLen-room)
	if err != nil && len(prompt) < p.ContextLen {
		return prompt, nil // n_keep leaves no room to cut, but it all fits
	}
	if err != nil {
		return nil, p.tooLong(err)
	}
	p.truncated(f.Dropped, len(f.Prompt))
	return f.Prompt, nil
}

func (p Params) bos() int32 {
	if p.Tokenizer == nil {
		return -1
	}
	return p.Tokenizer.Specials().BOS
}

// tooLong turns an overflow.TooLongError into the context-length 400.
func (p Params) tooLong(err error) error {
	var tl *overflow.TooLongError
	if !errors.As(err, &tl) {
		return err
	}
	return &inference.ContextLengthError{PromptTokens: tl.PromptTokens, ContextLen: p.ContextLen, Kept: tl.Kept}
}

func (p Params) truncated(dropped, tokens int) {
	if dropped > 0 && p.Truncated != nil {
		p.Truncated(dropped, tokens)
	}
}
