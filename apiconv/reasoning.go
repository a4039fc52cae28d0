package apiconv

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
)

// ReasoningParser is a model family's reasoning markers, named as vLLM
// names its --reasoning-parser: the text between them is the model's
// reasoning, returned apart from the answer.
type ReasoningParser struct {
	Name       string
	Start, End string
}

// reasoningParsers are the parsers by name; "none" is no parser.
var reasoningParsers = map[string]ReasoningParser{
	"qwen3":       {Name: "qwen3", Start: "<think>", End: "</think>"},
	"deepseek_r1": {Name: "deepseek_r1", Start: "<think>", End: "</think>"},
}

// ReasoningParserNamed returns the parser called name (model.reasoning_parser);
// "none" is nil, and so is "" unless template's markers say otherwise
// (DetectReasoningParser). ok is false for an unknown name.
func ReasoningParserNamed(name, template string) (p *ReasoningParser, ok bool) {
	if name == "" {
		name = DetectReasoningParser(template)
	}
	if name == "none" {
		return nil, true
	}
	r, ok := reasoningParsers[name]
	if !ok {
		return nil, false
	}
	return &r, true
}

// DetectReasoningParser names the parser a chat template's source calls
// for: "qwen3" when it writes <think> (Qwen3, Qwen3-2507, DeepSeek-R1
// distills), else "none" (Llama 3.x).
func DetectReasoningParser(template string) string {
	if strings.Contains(template, "<think>") {
		return "qwen3"
	}
	return "none"
}

// Thinking is a request's reasoning controls, whatever API they came in:
// OpenAI's reasoning_effort, Anthropic's thinking, Ollama's think.
type Thinking struct {
	Set    bool // the request said whether to think
	Off    bool // it said not to
	Budget int  // the most reasoning tokens (Anthropic's budget_tokens); 0: no limit
}

// EffortThinking is the Thinking of an OpenAI reasoning effort
// (reasoning_effort on chat and /apply-template, reasoning.effort on
// Responses; param names it): "none" and "minimal" switch thinking off,
// "low" to "xhigh" on; "" says nothing. Another value is the 400 naming
// param.
func EffortThinking(effort, param string) (Thinking, error) {
	switch effort {
	case "":
		return Thinking{}, nil
	case "none", "minimal":
		return Thinking{Set: true, Off: true}, nil
	case "low", "medium", "high", "xhigh":
		return Thinking{Set: true}, nil
	}
	return Thinking{}, Invalid(param, "Invalid value: '%s'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high' and 'xhigh'.", effort)
}

// ApplyThinking maps th onto the template's switch: thinking off sets
// enable_thinking false, as Qwen3's template reads it, unless the request's
// chat_template_kwargs set enable_thinking themselves; on leaves the
// template's default (Qwen3's is on). Every API's control goes through it,
// whatever the model (a template without the switch ignores it).
func ApplyThinking(opt *chat.Options, th Thinking) {
	if !th.Off {
		return
	}
	if _, set := opt.Kwargs["enable_thinking"]; set {
		return
	}
	kw := make(map[string]any, len(opt.Kwargs)+1)
	for k, v := range opt.Kwargs {
		kw[k] = v
	}
	kw["enable_thinking"] = false
	opt.Kwargs = kw
}

// ReasoningEffort applies an OpenAI reasoning effort to opt
// (EffortThinking, then ApplyThinking).
func ReasoningEffort(opt *chat.Options, effort, param string) error {
	th, err := EffortThinking(effort, param)
	if err == nil {
		ApplyThinking(opt, th)
	}
	return err
}

// Reason makes r return the model's reasoning apart from its answer, once
// r's prompt and constraint are set: the reasoning starts open when the
// prompt ends inside one (a template that opens <think> itself), and with
// th.Budget the end marker is forced once the budget is spent. A
// constrained request whose template leaves the opening to the model gets
// the start marker at the end of its prompt, so the constraint knows where
// the answer starts. Without a parser r is left alone.
func (p Params) Reason(r *inference.Request, th Thinking) {
	rp := p.Reasoning
	if rp == nil {
		return
	}
	tok := p.Tokenizer
	tail := strings.TrimRight(tok.Decode(r.Prompt[max(len(r.Prompt)-8, 0):], false), spaces)
	open, closed := strings.HasSuffix(tail, rp.Start), strings.HasSuffix(tail, rp.End)
	if !open && !closed && r.Constrain != nil && !th.Off {
		r.Prompt = append(r.Prompt, tok.Encode(rp.Start+"\n", false, true)...)
		open = true
	}
	r.Reasoning = &inference.Reasoning{Start: rp.Start, End: rp.End, Open: open, Budget: th.Budget,
		EndTokens: tok.Encode("\n"+rp.End+"\n\n", false, true)}
}

// SplitReasoning splits reasoning written inline in an earlier assistant
// turn's content (<think>…</think>answer, or …</think>answer when the
// template opened it) into the reasoning and the answer, as the model's
// output is split. Without a parser, or without an end marker, content is
// all answer.
func (p Params) SplitReasoning(content string) (reasoning, answer string) {
	rp := p.Reasoning
	if rp == nil {
		return "", content
	}
	before, after, ok := strings.Cut(content, rp.End)
	if !ok {
		return "", content
	}
	before = strings.TrimLeft(before, spaces)
	before, _ = strings.CutPrefix(before, rp.Start)
	return strings.Trim(before, spaces), strings.TrimLeft(after, spaces)
}

// spaces is the whitespace around the markers that is not part of the
// reasoning or the answer.
const spaces = " \t\r\n"

// ReasoningOf is an earlier assistant turn's reasoning as the template
// takes it: given (the API's own field) when set, else split from the
// content; answer is the content without it.
func (p Params) ReasoningOf(given, content string) (reasoning, answer string) {
	r, answer := p.SplitReasoning(content)
	if given != "" {
		return given, answer
	}
	return r, answer
}

// SplitTurns gives each assistant turn of msgs its reasoning as the
// template takes it (ReasoningOf): its ReasoningContent when the client
// sent one, else split from its content.
func (p Params) SplitTurns(msgs []chat.Message) {
	for i := range msgs {
		if m := &msgs[i]; m.Role == "assistant" {
			m.ReasoningContent, m.Content = p.ReasoningOf(m.ReasoningContent, m.Content)
		}
	}
}

// SignReasoning is the signature of a reasoning text under key (a
// per-server secret): base64 of its HMAC-SHA256. Anthropic's thinking
// blocks carry it, so a block a client sends back can be checked.
func SignReasoning(key []byte, text string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(text))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// VerifyReasoning reports whether sig is text's signature under key.
func VerifyReasoning(key []byte, text, sig string) bool {
	want, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(text))
	return hmac.Equal(m.Sum(nil), want)
}
