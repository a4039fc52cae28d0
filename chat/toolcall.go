package chat

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// ParseToolCalls parses model output that is entirely tool calls. It accepts,
// after trimming whitespace (as pyStrip) and an optional leading
// "<|python_tag|>":
//
//   - one call object: {"name": "f", "parameters": {...}}
//     ("arguments" is accepted instead of "parameters");
//   - a non-empty JSON array of call objects;
//   - call objects separated by ";" (the form Llama emits for several calls).
//
// A call object has a non-empty string "name", at most one of "parameters"
// and "arguments" whose value is a JSON object (missing means {}), and
// optionally "type": "function"; any other key means it is not a call. ok is
// false, and calls nil, whenever any part of the text is not a valid call:
// such output is ordinary content. Arguments are returned as compact JSON
// text with key order kept; IDs are "call_" plus 24 random alphanumerics.
// Callers should also check names against the request's tools.
func ParseToolCalls(text string) (calls []ToolCall, ok bool) {
	s := pyStrip(text)
	if rest, found := strings.CutPrefix(s, PythonTag); found {
		s = pyStrip(rest)
	}
	if s == "" {
		return nil, false
	}
	if s[0] == '[' {
		v, err := parseJSON(s)
		if err != nil || v.kind != jsonArray || len(v.elem) == 0 {
			return nil, false
		}
		for _, e := range v.elem {
			c, ok := toolCallFrom(e, false)
			if !ok {
				return nil, false
			}
			calls = append(calls, c)
		}
		return calls, true
	}
	p := jsonParser{s: s, maxDepth: maxJSONDepth}
	for {
		p.skipSpace()
		if p.i >= len(s) || s[p.i] != '{' {
			return nil, false
		}
		v, err := p.value(0)
		if err != nil {
			return nil, false
		}
		c, ok := toolCallFrom(v, false)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
		p.skipSpace()
		if p.i == len(s) {
			return calls, true
		}
		if s[p.i] != ';' {
			return nil, false
		}
		p.i++
	}
}

// OfferedToolCalls parses a whole output, with the stop tokens removed, as
// calls of the offered functions: ok is false when offered is nil, when
// ParseToolCalls rejects the text or when a call names a function not
// offered. Empty arguments read as {}.
func OfferedToolCalls(text string, offered []string) ([]ToolCall, bool) {
	if offered == nil {
		return nil, false
	}
	for _, st := range StopTokens {
		text = strings.ReplaceAll(text, st, "")
	}
	calls, ok := ParseToolCalls(text)
	if !ok {
		return nil, false
	}
	for i, c := range calls {
		if !slices.Contains(offered, c.Name) {
			return nil, false
		}
		if len(c.Arguments) == 0 {
			calls[i].Arguments = json.RawMessage(`{}`)
		}
	}
	return calls, true
}

// ParseCallJSON parses s, after trimming whitespace, as one call object
// {"name": "f", "arguments": {...}} or, with list, also a non-empty JSON
// array of them: the JSON of Hermes' <tool_call> blocks and of Granite's
// <|tool_call|> list. As vLLM's parsers do, it ignores keys other than
// "name" and "arguments" ("parameters" is accepted instead); arguments
// must be an object (missing means {}). ok is false for anything else.
func ParseCallJSON(s string, list bool) (calls []ToolCall, ok bool) {
	v, err := parseJSON(pyStrip(s))
	if err != nil {
		return nil, false
	}
	elems := []jsonValue{v}
	if v.kind == jsonArray && list {
		elems = v.elem
	}
	for _, e := range elems {
		c, ok := toolCallFrom(e, true)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, len(calls) > 0
}

// toolCallFrom reads a call object; lenient ignores other keys.
func toolCallFrom(v jsonValue, lenient bool) (ToolCall, bool) {
	if v.kind != jsonObject {
		return ToolCall{}, false
	}
	var name string
	var args *jsonValue
	hasName := false
	for i, k := range v.keys {
		e := &v.elem[i]
		switch k {
		case "name":
			if e.kind != jsonString || e.str == "" {
				return ToolCall{}, false
			}
			name, hasName = e.str, true
		case "parameters", "arguments":
			if args != nil || e.kind != jsonObject {
				return ToolCall{}, false
			}
			args = e
		case "type":
			if !lenient && (e.kind != jsonString || e.str != "function") {
				return ToolCall{}, false
			}
		default:
			if !lenient {
				return ToolCall{}, false
			}
		}
	}
	if !hasName {
		return ToolCall{}, false
	}
	raw := []byte("{}")
	if args != nil {
		raw = compactJSON(*args)
	}
	return ToolCall{ID: NewCallID(), Name: name, Arguments: raw}, true
}

// compactJSON serialises v as compact standard JSON (no spaces, no HTML
// escaping), keeping key order and number literals.
func compactJSON(v jsonValue) json.RawMessage {
	var b bytes.Buffer
	writeCompact(&b, v)
	return b.Bytes()
}

func writeCompact(b *bytes.Buffer, v jsonValue) {
	switch v.kind {
	case jsonNull:
		b.WriteString("null")
	case jsonBool, jsonNumber:
		b.WriteString(v.str)
	case jsonString:
		var sb strings.Builder
		writePyString(&sb, v.str)
		b.WriteString(sb.String())
	case jsonArray, jsonObject:
		open, closing := byte('['), byte(']')
		if v.kind == jsonObject {
			open, closing = '{', '}'
		}
		b.WriteByte(open)
		for i, e := range v.elem {
			if i > 0 {
				b.WriteByte(',')
			}
			if v.kind == jsonObject {
				var sb strings.Builder
				writePyString(&sb, v.keys[i])
				b.WriteString(sb.String())
				b.WriteByte(':')
			}
			writeCompact(b, e)
		}
		b.WriteByte(closing)
	}
}

// NewCallID returns a tool call ID: "call_" plus 24 random alphanumerics.
func NewCallID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	var buf [24]byte
	out := make([]byte, 0, 5+len(buf))
	out = append(out, "call_"...)
	for len(out) < cap(out) {
		rand.Read(buf[:])
		for _, c := range buf {
			if c < 248 && len(out) < cap(out) { // 248 = 4*62: no modulo bias
				out = append(out, alphabet[int(c)%len(alphabet)])
			}
		}
	}
	return string(out)
}

// Decision is what a ToolCallDetector knows about the output so far.
type Decision int

const (
	// Undecided: hold the text back, it could still be either.
	Undecided Decision = iota
	// Text: the output is not a tool call; release everything.
	Text
	// MaybeCall: the output starts like a tool call; buffer it to the end
	// and then call ParseToolCalls (release it as text if that fails).
	MaybeCall
)

func (d Decision) String() string {
	switch d {
	case Text:
		return "Text"
	case MaybeCall:
		return "MaybeCall"
	}
	return "Undecided"
}

// ToolCallDetector decides from the start of a streamed output whether it
// may be a tool call. The rule looks only at the beginning: skip leading
// whitespace (as pyStrip, including multi-byte whitespace split across
// deltas); then
//
//   - "<|python_tag|>" → MaybeCall (a proper prefix of it → Undecided);
//   - "{" then JSON whitespace then '"' → MaybeCall;
//   - "[" then JSON whitespace, "{", JSON whitespace, '"' → MaybeCall;
//   - anything else, as soon as the next character is known → Text.
//
// The decision only depends on the text, not on how it was split into
// deltas, and once it is Text or MaybeCall it never changes. Every output
// that ParseToolCalls accepts is decided MaybeCall (or stays Undecided), so
// Text can be released immediately. The zero value is ready to use.
type ToolCallDetector struct {
	buf  strings.Builder
	d    Decision
	skip int // bytes of leading whitespace already seen
}

// Feed adds the next piece of output and returns the current decision.
func (t *ToolCallDetector) Feed(delta string) Decision {
	t.buf.WriteString(delta)
	if t.d == Undecided {
		t.d, t.skip = decide(t.buf.String(), t.skip)
	}
	return t.d
}

// Decision returns the current decision.
func (t *ToolCallDetector) Decision() Decision { return t.d }

// Buffered returns all output fed so far.
func (t *ToolCallDetector) Buffered() string { return t.buf.String() }

// decide decides on the output s, whose first skip bytes are known to be
// whitespace, and returns the new count of leading whitespace bytes.
func decide(s string, skip int) (Decision, int) {
	// Leading whitespace, which may end in an incomplete UTF-8 sequence.
	for skip < len(s) {
		if !utf8.FullRuneInString(s[skip:]) {
			return Undecided, skip
		}
		r, n := utf8.DecodeRuneInString(s[skip:])
		if !isPySpace(r) || (r == utf8.RuneError && n == 1) {
			break
		}
		skip += n
	}
	return decideTrimmed(s[skip:]), skip
}

// decideTrimmed decides on output whose leading whitespace is removed.
func decideTrimmed(s string) Decision {
	if s == "" {
		return Undecided
	}
	if strings.HasPrefix(s, PythonTag) {
		return MaybeCall
	}
	if strings.HasPrefix(PythonTag, s) {
		return Undecided
	}
	want := `{"`
	if s[0] == '[' {
		want = `[{"`
	}
	for i := 0; i < len(want); i++ {
		for len(s) > 0 && isJSONSpace(s[0]) && i > 0 {
			s = s[1:]
		}
		if s == "" {
			return Undecided
		}
		if s[0] != want[i] {
			return Text
		}
		s = s[1:]
	}
	return MaybeCall
}
