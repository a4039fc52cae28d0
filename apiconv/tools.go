package apiconv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
)

// FunctionTool is the chat template's tool object
// {"type":"function","function":{"name":…,"description":…,"parameters":…}}
// for a function of an API's tool list; a nil description and null or
// empty parameters are left out.
func FunctionTool(name string, description *string, parameters json.RawMessage) chat.Tool {
	n, _ := json.Marshal(name)
	var b bytes.Buffer
	b.WriteString(`{"type":"function","function":{"name":`)
	b.Write(n)
	if description != nil {
		d, _ := json.Marshal(*description)
		b.WriteString(`,"description":`)
		b.Write(d)
	}
	if !IsNull(parameters) {
		b.WriteString(`,"parameters":`)
		b.Write(bytes.TrimSpace(parameters))
	}
	b.WriteString("}}")
	return b.Bytes()
}

// ToolNames checks tool definitions in the OpenAI form ({"type":
// "function", "function": {"name", ...}}, which chat completions and the
// Ollama API share) and returns their function names. As OpenAI does, a
// tool needs its type: a missing one is refused like any other than
// "function".
func ToolNames(tools []json.RawMessage) ([]string, error) {
	names := make([]string, 0, len(tools))
	for i, raw := range tools {
		var t struct {
			Type     *string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, Invalid(fmt.Sprintf("tools[%d]", i), "tool must be an object: %v", err)
		}
		switch {
		case t.Type == nil:
			return nil, Invalid(fmt.Sprintf("tools[%d].type", i), "Missing required parameter: 'tools[%d].type'.", i)
		case *t.Type != "function":
			return nil, Invalid(fmt.Sprintf("tools[%d].type", i), "tool type %q is not supported; only \"function\"", *t.Type)
		case t.Function == nil || t.Function.Name == "":
			return nil, Invalid(fmt.Sprintf("tools[%d].function.name", i), "tool has no function name")
		}
		names = append(names, t.Function.Name)
	}
	return names, nil
}

// ParseToolCalls is ParseReply's calls in Llama 3's format.
func ParseToolCalls(text string, offered []string, parallel, cut bool) ([]chat.ToolCall, bool) {
	_, calls, ok := ParseReply(Llama3JSON, text, offered, parallel, cut)
	return calls, ok
}

// ParseReply parses a choice's whole text in format f (nil: Llama3JSON) as
// content followed by calls of the offered functions; ok is false when it
// is all content (or nothing was offered). With parallel false only the
// first call is kept, as the APIs promise at most one. With cut (a forced
// call that the token limit cut off) text that is not whole calls is read
// by cutCalls.
func ParseReply(f ToolFormat, text string, offered []string, parallel, cut bool) (content string, calls []chat.ToolCall, ok bool) {
	if f == nil {
		f = Llama3JSON
	}
	content, calls, ok = f.Calls(text, offered)
	if !ok && cut {
		calls, ok = cutCalls(text, offered, parallel, f.Syntax())
		return "", calls, ok
	}
	if ok && !parallel {
		calls = calls[:1]
	}
	return content, calls, ok
}

// CutToolCalls is cutCalls in Llama 3's syntax.
func CutToolCalls(text string, offered []string, parallel bool) (calls []chat.ToolCall, ok bool) {
	return cutCalls(text, offered, parallel, grammar.CallSyntax{})
}

// cutCalls reads the output of a forced tool call (ToolGrammar's form in
// syntax syn) that the token limit cut off, as the APIs return one: the
// calls it completed, then the call it cut with its arguments as far as
// they came (not valid JSON, or empty). A name the cut left partial, or
// that had not begun (a cut before the first call's object, or in or right
// after the first marker), is the one offered name it begins: with one name
// offered (a named tool_choice) the cut always gives a call, as OpenAI
// always returns one; ok is false when the name could be several.
func cutCalls(text string, offered []string, parallel bool, syn grammar.CallSyntax) (calls []chat.ToolCall, ok bool) {
	text = strings.TrimLeft(withoutStops(text), " \t\r\n")
	argsKey, array := syn.ArgsKey, false
	if argsKey == "" {
		argsKey = "parameters"
	}
	marked := syn.Prefix + syn.Open
	if marked != "" && strings.HasPrefix(marked+"[", text) {
		return onlyCall(offered)
	}
	if syn.Prefix != "" {
		rest, found := strings.CutPrefix(text, syn.Prefix)
		if !found {
			return nil, false
		}
		text, array = rest, true
	}
	if syn.Open != "" { // the wrapped calls read as objects in a row
		text = strings.ReplaceAll(strings.ReplaceAll(text, syn.Open, ""), syn.Close, "")
	}
	s := cutScanner{s: text}
	array = s.take('[') || array
	if s.space(); s.s == "" {
		return onlyCall(offered)
	}
	for {
		if !s.take('{') {
			break
		}
		if !s.key("name") {
			if s.endsIn("name") { // cut before the name began: the only tool offered
				if name := onlyPrefixed(offered, ""); name != "" {
					calls = append(calls, chat.ToolCall{ID: chat.NewCallID(), Name: name})
				}
			}
			break
		}
		name, whole := s.str()
		if !whole {
			name = onlyPrefixed(offered, name)
		}
		if !slices.Contains(offered, name) {
			break
		}
		c := chat.ToolCall{ID: chat.NewCallID(), Name: name}
		calls = append(calls, c)
		if !s.take(',') || !s.key(argsKey) {
			break
		}
		args, whole := s.value()
		calls[len(calls)-1].Arguments = json.RawMessage(args)
		if !whole || !s.take('}') || !(array && s.take(',') || syn.Open != "") {
			break
		}
	}
	if len(calls) == 0 {
		return nil, false
	}
	if !parallel {
		calls = calls[:1]
	}
	return calls, true
}

// onlyCall is a call of the only tool offered, its arguments not begun.
func onlyCall(offered []string) ([]chat.ToolCall, bool) {
	if name := onlyPrefixed(offered, ""); name != "" {
		return []chat.ToolCall{{ID: chat.NewCallID(), Name: name}}, true
	}
	return nil, false
}

// onlyPrefixed is the one name that begins with prefix, "" when there are
// none or several.
func onlyPrefixed(names []string, prefix string) string {
	found := ""
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			if found != "" {
				return ""
			}
			found = n
		}
	}
	return found
}

// cutScanner reads JSON that may end anywhere.
type cutScanner struct{ s string }

func (c *cutScanner) space() { c.s = strings.TrimLeft(c.s, " \t\r\n") }

// take consumes b after any whitespace.
func (c *cutScanner) take(b byte) bool {
	c.space()
	if c.s == "" || c.s[0] != b {
		return false
	}
	c.s = c.s[1:]
	return true
}

// key consumes "k" and its colon.
func (c *cutScanner) key(k string) bool {
	c.space()
	q, _ := json.Marshal(k)
	if !strings.HasPrefix(c.s, string(q)) {
		return false
	}
	c.s = c.s[len(q):]
	return c.take(':')
}

// endsIn reports whether the rest of the text is the start of "k": (the
// cut came inside it).
func (c *cutScanner) endsIn(k string) bool {
	c.space()
	q, _ := json.Marshal(k)
	return strings.HasPrefix(string(q)+":", strings.TrimRight(c.s, " \t\r\n"))
}

// str consumes a string; whole is false when the text ends inside it, and
// v is then what came of it, escapes undecoded.
func (c *cutScanner) str() (v string, whole bool) {
	c.space()
	if c.s == "" || c.s[0] != '"' {
		return "", false
	}
	for i := 1; i < len(c.s); i++ {
		switch c.s[i] {
		case '\\':
			i++
		case '"':
			err := json.Unmarshal([]byte(c.s[:i+1]), &v)
			c.s = c.s[i+1:]
			return v, err == nil
		}
	}
	v, c.s = c.s[1:], ""
	return v, false
}

// value consumes one value, an object or array up to its closing bracket,
// and returns its text; whole is false when the text ends inside it.
func (c *cutScanner) value() (v string, whole bool) {
	c.space()
	depth, in := 0, false
	for i := 0; i < len(c.s); i++ {
		switch b := c.s[i]; {
		case in && b == '\\':
			i++
		case b == '"':
			in = !in
		case in:
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
		}
		if depth == 0 && !in && (c.s[i] == '}' || c.s[i] == ']' || c.s[i] == '"') {
			v, c.s = c.s[:i+1], c.s[i+1:]
			return v, true
		}
	}
	v, c.s = c.s, ""
	return v, false
}

// ToolCallsAs is ParseReply with each call (and its index) converted to
// an API's wire type by as.
func ToolCallsAs[T any](f ToolFormat, text string, offered []string, parallel, cut bool, as func(i int, c chat.ToolCall) T) (content string, out []T, ok bool) {
	content, calls, ok := ParseReply(f, text, offered, parallel, cut)
	if !ok {
		return "", nil, false
	}
	out = make([]T, len(calls))
	for i, c := range calls {
		out[i] = as(i, c)
	}
	return content, out, true
}

// ToolGrammar compiles a forced call of one of tools (several in a row when
// parallel); a schema the decoder cannot enforce is a 400 naming
// params[i], the field of the offending tool's schema.
func ToolGrammar(tools []grammar.Tool, params []string, parallel bool, o grammar.Options) (*grammar.Grammar, error) {
	g, err := grammar.Tools(tools, parallel, o)
	if te, ok := err.(*grammar.ToolError); ok {
		return nil, SchemaError(params[te.Index], te.Err)
	}
	return g, err
}

// CallGate holds a choice's streamed text back while it may still be a
// call of the offered tools, so a stream sends either text deltas or tool
// calls, never the start of a call as text. For a format whose calls
// follow content after a marker (ToolFormat.Start) the text before the
// marker passes, except an end that may begin it (and the whitespace
// before that, which ParseReply trims from content); from the marker on
// all is held. Otherwise chat.ToolCallDetector decides from the start.
// The zero value holds nothing: every delta passes.
type CallGate struct {
	det   chat.ToolCallDetector
	start string          // the format's marker; "": the detector decides
	buf   strings.Builder // with start: the text held
	found bool            // with start: the marker came
	hold  bool
}

// NewCallGate is a Llama 3 gate that holds the output back while tools are
// offered.
func NewCallGate(toolsOffered bool) CallGate { return NewFormatGate(Llama3JSON, toolsOffered) }

// NewFormatGate is the gate of format f (nil: Llama3JSON) that holds the
// output back while tools are offered.
func NewFormatGate(f ToolFormat, toolsOffered bool) CallGate {
	if f == nil {
		f = Llama3JSON
	}
	return CallGate{hold: toolsOffered, start: f.Start()}
}

// Holding reports whether the output may still be a tool call.
func (g *CallGate) Holding() bool { return g.hold }

// Pass feeds delta and returns the text to send now: delta itself once the
// output is known to be text, everything held so far at the moment that
// becomes known, or with a marker the text known to come before it; ok is
// false while nothing is released.
func (g *CallGate) Pass(delta string) (text string, ok bool) {
	switch {
	case !g.hold:
		return delta, true
	case g.start != "":
		return g.passMarked(delta)
	case g.det.Feed(delta) != chat.Text:
		return "", false
	}
	g.hold = false
	return g.det.Buffered(), true
}

// passMarked is Pass for a format with a start marker.
func (g *CallGate) passMarked(delta string) (string, bool) {
	g.buf.WriteString(delta)
	if g.found {
		return "", false
	}
	s := g.buf.String()
	cut := len(s) // what may be content: before the marker or a start of it
	if i := strings.Index(s, g.start); i >= 0 {
		cut, g.found = i, true
	} else {
		for k := min(len(g.start)-1, len(s)); k > 0; k-- {
			if strings.HasSuffix(s, g.start[:k]) {
				cut = len(s) - k
				break
			}
		}
	}
	cut = len(strings.TrimRight(s[:cut], " \t\r\n"))
	if cut == 0 {
		return "", false
	}
	g.buf.Reset()
	g.buf.WriteString(s[cut:])
	return s[:cut], true
}

// End ends the output and returns the text still held (to parse as tool
// calls); held is false when none was.
func (g *CallGate) End() (text string, held bool) {
	if !g.hold {
		return "", false
	}
	g.hold = false
	if g.start != "" {
		return g.buf.String(), g.buf.Len() > 0
	}
	return g.det.Buffered(), true
}
