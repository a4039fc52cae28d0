package apiconv

import (
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/overflow"
)

// ContextShift is whether a request goes on past the window
// (inference.Request.ContextShift): field when the request sets it, else
// the model's (Params.Shift), else def, the API's default.
func (p Params) ContextShift(field *bool, def bool) bool {
	switch {
	case field != nil:
		return *field
	case p.Shift != nil:
		return *p.Shift
	}
	return def
}

// ChatSink is how many of prompt's first tokens a context shift keeps: the
// rendered system prefix (BOS, the system and developer messages, and the
// tool declarations), found as the tokens prompt shares with msgs' leading
// system messages rendered before a user message of a marker text: where
// a template puts the tools in the first user message they are kept with
// its header, never its text. At least the first token.
func (p Params) ChatSink(msgs []chat.Message, opt chat.Options, prompt []int32) int {
	n := 0
	for n < len(msgs) && overflow.System(msgs[n]) {
		n++
	}
	opt.AddGenerationPrompt = false
	head, err := EncodeChat(p.Tokenizer, append(msgs[:n:n], chat.Message{Role: "user", Content: sinkMarker}), opt, "")
	if err != nil {
		return min(1, len(prompt))
	}
	return max(inference.CommonPrefix(head, prompt), min(1, len(prompt)))
}

// sinkMarker is the text of the user message ChatSink renders after the
// system prefix: the prompt's own text parts from it.
const sinkMarker = "\x00\x01sink"

// TextSink is how many of a raw prompt's first tokens a context shift
// keeps: BOS (when the prompt starts with it) and the next nKeep.
func (p Params) TextSink(prompt []int32, nKeep int) int {
	if len(prompt) > 0 && prompt[0] == p.bos() {
		nKeep++
	}
	return min(max(nKeep, 1), len(prompt))
}

// ShiftChat sets r's context shift to on, keeping (when on) msgs' system
// prefix of r's prompt (ChatSink); msgs may be those before a
// context_overflow fit, which keeps every system message.
func (p Params) ShiftChat(r *inference.Request, on bool, msgs []chat.Message, opt chat.Options) {
	if r.ContextShift = on; on {
		r.Keep = p.ChatSink(msgs, opt, r.Prompt)
	}
}
