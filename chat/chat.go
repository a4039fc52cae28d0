// Package chat renders conversations into prompt text with each model's own
// chat template, and parses the model's tool calls back out of generated
// text.
//
// # Jinja templates
//
// A model's chat_template (LoadTemplate: chat_template.jinja, else
// tokenizer_config.json's, in its string or named-list form) is rendered by
// github.com/ardanlabs/jinja, set up as transformers' apply_chat_template
// sets up Python Jinja2: trim_blocks, lstrip_blocks, loop controls,
// raise_exception (an *Error carrying the template's message), strftime_now,
// bos_token, eos_token, tools (None when there are none), add_generation_prompt,
// messages in transformers' and vLLM's shape (tool calls as {"id", "type":
// "function", "function": {"name", "arguments": <object>}}, and
// reasoning_content, tool_call_id and name when set), date_string, and the
// request's Options.Kwargs. The engine's tojson and trim differ from
// transformers' and cannot be replaced, so the template's uses of them are
// renamed at compile time to this package's (tojson.go). Checked against
// Python Jinja2 on the Llama-3.2, Qwen3, Qwen3-2507, Qwen2.5 and Phi-3.5
// templates (testdata/families.py, TestFamilyGoldens) and on 800 random
// Llama-3.2 conversations (TestJinjaLlamaGoldens). The engine has no hook to
// stop a rendering midway: Options.Context is checked before and after, and
// Options.MaxBytes after; both are also checked at each tojson, where a large
// prompt's bulk (the tools) is written. The templates' loops run over the
// request's lists, so their work is linear in the request's size.
//
// # Content and special tokens
//
// Request text must not become special tokens. Before rendering, every
// special-token text (the tokenizer's special added tokens) inside any
// request string is replaced by one rune of plane 16's private-use area that
// stands for it (marks.go); the template treats it as an ordinary character,
// so Qwen3's content.split('</think>') and strip work unchanged. The output
// is split at the template's own special-token texts only, and each mark
// turns back into its text in a plain segment. Non-special added tokens
// (Qwen3's <think>) are left to the tokenizer, in content and template alike.
//
// # The native Llama-3.2 renderer
//
// The official Llama-3.2 template (Llama32, or Options.Template nil) is
// rendered by native Go, about twice as fast as the engine with the same
// output (FuzzJinjaAgreesWithNative). It reproduces every branch of the
// official Llama-3.2 template byte for byte, checked against goldens rendered by @huggingface/jinja and
// cross-checked with Python Jinja2 as transformers sets it up, including
// tools_in_user_message=false (Options.ToolsInSystem; custom_tools is the
// caller's choice of Options.Tools):
//
//   - BOS, then a system block that is always present: "Environment: ipython\n"
//     when tools are given, "Cutting Knowledge Date: December 2023\n",
//     "Today Date: <date>\n\n", then the first message's content if its role
//     is system.
//   - With tools, the first remaining message (whatever its role) becomes the
//     user turn that lists the tools, each as tojson(indent=4); no such
//     message is an error, as in the template. With ToolsInSystem the tools
//     are listed in the system block instead, before the system message.
//   - Content is trimmed like Python's str.strip (Unicode whitespace including
//     U+001C..U+001F and U+0085, but not U+FEFF or U+200B).
//   - An assistant tool call renders as {"name": "<name>", "parameters":
//     <tojson(arguments)>}; only one call per message is allowed.
//   - tool and ipython messages render under an "ipython" header with their
//     (string) content JSON-quoted, untrimmed.
//
// tojson follows transformers: json.dumps(x, ensure_ascii=False,
// indent=...). Key order is kept as given, only '"', '\\' and control
// characters are escaped, and numbers are printed as a Python server would
// after json.loads: integers keep their digits, numbers with a fraction or
// exponent are Python floats printed with repr ("1.50" → "1.5", "1E2" →
// "100.0", "1e16" → "1e+16"). A JavaScript engine would print floats
// differently (1.0 → 1); the two agree on integers. Unpaired surrogate
// escapes (\ud800) become U+FFFD, as in encoding/json (Python keeps them).
//
// Deliberate deviations, all for input the template would render badly:
// roles other than system, user, assistant, tool and ipython are rejected
// (the template would paste any string into a header); tool calls are only
// accepted on assistant messages; an empty message list is an error; an
// empty Options.Tools means "no tools" (Python would treat [] as present).
// Content is a Go string, so JSON null content renders as "" (Jinja prints
// "None"), and tool results are always strings and therefore always quoted.
package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Message is one conversation turn. Name and ToolCallID reach Jinja
// templates; the Llama-3.2 template does not render them.
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
	Name       string
	// ReasoningContent is an assistant turn's earlier reasoning (vLLM's
	// reasoning_content), whatever form the client sent it in; a template
	// that knows it (Qwen3) decides whether it is rendered.
	ReasoningContent string
}

// ToolCall is a function call made by the assistant. Arguments holds a JSON
// value, normally an object; empty means {}.
type ToolCall struct {
	ID, Name  string
	Arguments json.RawMessage
}

// Tool is one OpenAI tool definition object, e.g.
// {"type":"function","function":{...}}, rendered with its key order kept.
type Tool = json.RawMessage

// Options control rendering.
type Options struct {
	// Tools are tool definitions; each must be valid JSON. Empty means none.
	Tools []json.RawMessage
	// AddGenerationPrompt appends the assistant header for the reply.
	AddGenerationPrompt bool
	// DateString is the "Today Date" text; "" gives the template default
	// "26 Jul 2024". Use FormatDate(time.Now()) for today's date, as
	// transformers does through strftime_now.
	DateString string
	// ToolsInSystem renders the tools in the system block instead of the
	// first user turn (the template's tools_in_user_message=false).
	ToolsInSystem bool
	// MaxBytes, when > 0, stops rendering with a *LengthError as soon as the
	// text passes this many bytes (a prompt that cannot fit the context).
	MaxBytes int
	// Context, when set, stops rendering with its error once it is done (a
	// client that went away).
	Context context.Context
	// Template is the model's chat template; nil (or Llama32) is the
	// built-in Llama-3.2 template, rendered natively.
	Template *Template
	// Kwargs are the template's own keyword arguments (vLLM's
	// chat_template_kwargs), e.g. Qwen3's enable_thinking; the request's
	// reasoning controls are mapped onto them before rendering.
	Kwargs map[string]any
}

// MaxToolDepth bounds the nesting of a tool definition: deeper schemas are
// refused (Python would render them, 4 more spaces of indent per level).
const MaxToolDepth = 64

// LengthError reports a rendering stopped at Options.MaxBytes.
type LengthError struct{ MaxBytes int }

func (e *LengthError) Error() string {
	return fmt.Sprintf("chat: the rendered prompt is longer than %d bytes", e.MaxBytes)
}

// DefaultDate is the template's date when none is supplied.
const DefaultDate = "26 Jul 2024"

// StopTokens end a Llama-3.2 generation.
var StopTokens = []string{"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"}

// Special token texts emitted by the template.
const (
	BeginOfText = "<|begin_of_text|>"
	StartHeader = "<|start_header_id|>"
	EndHeader   = "<|end_header_id|>"
	EndOfTurn   = "<|eot_id|>"
	PythonTag   = "<|python_tag|>"
)

// Error reports a request the template cannot render. Param names the
// offending field the way an OpenAI error does, e.g. "messages[3].role".
type Error struct {
	Param   string
	Message string
}

func (e *Error) Error() string {
	if e.Param == "" {
		return "chat: " + e.Message
	}
	return "chat: " + e.Param + ": " + e.Message
}

func errorf(param, format string, args ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}

// Segment is a piece of rendered text. Special segments are exactly one
// special token emitted by the template; everything else, template text and
// user- or tool-supplied content alike, is in non-special segments, so
// special-token strings inside content are encoded as plain text.
type Segment struct {
	Text    string
	Special bool
}

// FormatDate formats t like strftime("%d %b %Y"), e.g. "29 Nov 2026".
func FormatDate(t time.Time) string { return t.Format("02 Jan 2006") }

// Render renders msgs into prompt text with opt.Template.
func Render(msgs []Message, opt Options) (string, error) {
	segs, err := RenderSegments(msgs, opt)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.Text)
	}
	return b.String(), nil
}

// RenderSegments renders like Render but returns the text split into special
// tokens (Special=true) and the plain text between them. Adjacent plain text
// is merged and no segment is empty, so each non-special segment is a full
// run between two special tokens and can be encoded on its own.
func RenderSegments(msgs []Message, opt Options) ([]Segment, error) {
	if !opt.Template.Native() {
		return opt.Template.render(msgs, opt)
	}
	if err := validate(msgs); err != nil {
		return nil, err
	}
	if opt.Context != nil && opt.Context.Err() != nil {
		return nil, opt.Context.Err()
	}
	tools, err := parseTools(opt.Tools)
	if err != nil {
		return nil, err
	}
	r := renderer{max: opt.MaxBytes, ctx: opt.Context}
	r.special(BeginOfText)
	// The system message, if first, goes into the system block.
	system, first := "", 0
	if msgs[0].Role == "system" {
		system, first = pyStrip(msgs[0].Content), 1
	}
	if err := r.systemBlock(system, tools, opt); err != nil {
		return nil, err
	}
	// Tools go into the first remaining message, rendered as a user turn.
	if len(tools) > 0 && !opt.ToolsInSystem {
		if first == len(msgs) {
			return nil, errorf("messages", "Cannot put tools in the first user message when there's no first user message!")
		}
		if err := r.toolsTurn(tools, msgs[first]); err != nil {
			return nil, err
		}
		first++
	}
	for i := first; i < len(msgs); i++ {
		if err := r.message(i, msgs[i]); err != nil {
			return nil, err
		}
	}
	if opt.AddGenerationPrompt {
		r.header("assistant")
	}
	r.flush()
	if r.err != nil {
		return nil, r.err
	}
	return r.segs, nil
}

// parseTools parses the tool declarations (at most MaxToolDepth deep).
func parseTools(raw []json.RawMessage) ([]jsonValue, error) {
	tools := make([]jsonValue, len(raw))
	for i, t := range raw {
		v, err := parseJSONDepth(string(t), MaxToolDepth)
		if err != nil {
			return nil, errorf(fmt.Sprintf("tools[%d]", i), "%v", err)
		}
		tools[i] = v
	}
	return tools, nil
}

// toolsPreamble is how Llama 3.x's template asks for a call in JSON.
const toolsPreamble = `Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.` +
	"Do not use variables.\n\n"

// systemBlock writes the system turn: the environment line with tools, the
// dates, the tools when they go there, and the system message.
func (r *renderer) systemBlock(system string, tools []jsonValue, opt Options) error {
	date := opt.DateString
	if date == "" {
		date = DefaultDate
	}
	r.header("system")
	if len(tools) > 0 {
		r.text("Environment: ipython\n")
	}
	r.text("Cutting Knowledge Date: December 2023\n")
	r.text("Today Date: " + date + "\n\n")
	if len(tools) > 0 && opt.ToolsInSystem {
		r.text("You have access to the following functions. To call a function, please respond with JSON for a function call." +
			toolsPreamble)
		if err := r.tools(tools); err != nil {
			return err
		}
	}
	r.text(system)
	r.special(EndOfTurn)
	return nil
}

// toolsTurn writes the tools and then m's content as one user turn.
func (r *renderer) toolsTurn(tools []jsonValue, m Message) error {
	r.header("user")
	r.text("Given the following functions, please respond with a JSON for a function call " +
		"with its proper arguments that best answers the given prompt.\n\n" + toolsPreamble)
	if err := r.tools(tools); err != nil {
		return err
	}
	r.text(pyStrip(m.Content))
	r.special(EndOfTurn)
	return nil
}

// message writes messages[i]: a tool call as its JSON, a tool result as a
// Python string in an ipython turn, anything else as its role's turn.
func (r *renderer) message(i int, m Message) error {
	switch {
	case len(m.ToolCalls) > 0:
		if len(m.ToolCalls) != 1 {
			return errorf(fmt.Sprintf("messages[%d].tool_calls", i), "This model only supports single tool-calls at once!")
		}
		tc := m.ToolCalls[0]
		args := jsonValue{kind: jsonObject}
		if len(strings.TrimSpace(string(tc.Arguments))) > 0 {
			v, err := parseJSON(string(tc.Arguments))
			if err != nil {
				return errorf(fmt.Sprintf("messages[%d].tool_calls[0].function.arguments", i), "%v", err)
			}
			args = v
		}
		var b strings.Builder
		b.WriteString(`{"name": "` + tc.Name + `", "parameters": `)
		writePyJSON(&b, args, -1, 0)
		b.WriteByte('}')
		r.header("assistant")
		r.text(b.String())
	case m.Role == "tool" || m.Role == "ipython":
		var b strings.Builder
		writePyString(&b, m.Content)
		r.header("ipython")
		r.text(b.String())
	default:
		r.header(m.Role)
		r.text(pyStrip(m.Content))
	}
	r.special(EndOfTurn)
	return nil
}

var validRoles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "ipython": true}

func validate(msgs []Message) error {
	if len(msgs) == 0 {
		return errorf("messages", "at least one message is required")
	}
	for i, m := range msgs {
		if !validRoles[m.Role] {
			return errorf(fmt.Sprintf("messages[%d].role", i),
				"invalid role %q (want system, user, assistant, tool or ipython)", m.Role)
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return errorf(fmt.Sprintf("messages[%d].tool_calls", i), "only assistant messages may have tool calls, not %q", m.Role)
		}
	}
	return nil
}

// renderer collects segments: plain text goes into one buffer until the next
// special token. Once it has failed (too long, cancelled) it ignores writes.
type renderer struct {
	segs  []Segment
	buf   strings.Builder // plain text since the last special token
	n     int             // bytes written
	max   int             // Options.MaxBytes
	ctx   context.Context // Options.Context
	err   error
	polls int
}

func (r *renderer) special(tok string) {
	r.flush()
	r.segs = append(r.segs, Segment{Text: tok, Special: true})
	r.grow(len(tok))
}

func (r *renderer) flush() {
	if r.buf.Len() > 0 {
		r.segs = append(r.segs, Segment{Text: r.buf.String()})
		r.buf.Reset()
	}
}

func (r *renderer) text(s string) {
	if r.err == nil {
		r.buf.WriteString(s)
		r.grow(len(s))
	}
}

// grow counts n more bytes and checks the limit and, now and then, the context.
func (r *renderer) grow(n int) {
	r.n += n
	switch {
	case r.err != nil:
	case r.max > 0 && r.n > r.max:
		r.err = &LengthError{MaxBytes: r.max}
	case r.ctx != nil:
		if r.polls++; r.polls%1024 == 0 {
			r.err = r.ctx.Err()
		}
	}
}

// WriteString and WriteByte make the renderer a pyWriter.
func (r *renderer) WriteString(s string) (int, error) { r.text(s); return len(s), nil }

func (r *renderer) WriteByte(c byte) error {
	if r.err == nil {
		r.buf.WriteByte(c)
		r.grow(1)
	}
	return nil
}

func (r *renderer) failed() bool { return r.err != nil }

// tools writes each tool as tojson(indent=4) followed by a blank line.
func (r *renderer) tools(tools []jsonValue) error {
	for _, t := range tools {
		writePyJSON(r, t, 4, 0)
		r.text("\n\n")
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

func (r *renderer) header(role string) {
	r.special(StartHeader)
	r.text(role)
	r.special(EndHeader)
	r.text("\n\n")
}

// isPySpace reports whether Python's str.isspace is true for c: Go's
// unicode.IsSpace plus the information separators U+001C..U+001F.
func isPySpace(c rune) bool { return unicode.IsSpace(c) || (c >= 0x1c && c <= 0x1f) }

// pyStrip is Python's str.strip() with no arguments (Jinja's trim filter).
func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }
