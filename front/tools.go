package front

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

// ParseToolCalls parses a choice's whole text as calls of the offered
// functions (chat.OfferedToolCalls); ok is false when it is ordinary
// content (or nothing was offered). With parallel false only the first
// call is kept, as the APIs promise at most one. With cut (a forced call
// that the token limit cut off) text that is not whole calls is read by
// CutToolCalls.
func ParseToolCalls(text string, offered []string, parallel, cut bool) ([]chat.ToolCall, bool) {
	calls, ok := chat.OfferedToolCalls(text, offered)
	if !ok && cut {
		return CutToolCalls(text, offered, parallel)
	}
	if ok && !parallel {
		calls = calls[:1]
	}
	return calls, ok
}

// CutToolCalls reads the output of a forced tool call (ToolGrammar's form)
// that the token limit cut off, as the APIs return one: the calls it
// completed, then the call it cut with its arguments as far as they came
// (not valid JSON, or empty). A name the cut left partial is the one
// offered name it begins; ok is false when it could be several, or when
// the cut came before the first call's object began.
func CutToolCalls(text string, offered []string, parallel bool) (calls []chat.ToolCall, ok bool) {
	for _, st := range chat.StopTokens {
		text = strings.ReplaceAll(text, st, "")
	}
	s := cutScanner{s: strings.TrimLeft(text, " \t\r\n")}
	array := s.take('[')
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
		if !s.take(',') || !s.key("parameters") {
			break
		}
		args, whole := s.value()
		calls[len(calls)-1].Arguments = json.RawMessage(args)
		if !whole || !s.take('}') || !array || !s.take(',') {
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

// ToolCallsAs is ParseToolCalls with each call (and its index) converted
// to an API's wire type by as.
func ToolCallsAs[T any](text string, offered []string, parallel, cut bool, as func(i int, c chat.ToolCall) T) ([]T, bool) {
	calls, ok := ParseToolCalls(text, offered, parallel, cut)
	if !ok {
		return nil, false
	}
	out := make([]T, len(calls))
	for i, c := range calls {
		out[i] = as(i, c)
	}
	return out, true
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
// call of the offered tools (chat.ToolCallDetector), so a stream sends
// either text deltas or tool calls, never the start of a call as text.
// The zero value holds nothing: every delta passes.
type CallGate struct {
	det  chat.ToolCallDetector
	hold bool
}

// NewCallGate is a gate that holds the output back while tools are
// offered.
func NewCallGate(toolsOffered bool) CallGate { return CallGate{hold: toolsOffered} }

// Holding reports whether the output may still be a tool call.
func (g *CallGate) Holding() bool { return g.hold }

// Pass feeds delta and returns the text to send now: delta itself once the
// output is known to be text, everything held so far at the moment that
// becomes known; ok is false while the text is held.
func (g *CallGate) Pass(delta string) (text string, ok bool) {
	if !g.hold {
		return delta, true
	}
	if g.det.Feed(delta) != chat.Text {
		return "", false
	}
	g.hold = false
	return g.det.Buffered(), true
}

// End ends the output and returns the text still held (to parse as tool
// calls); held is false when none was.
func (g *CallGate) End() (text string, held bool) {
	if !g.hold {
		return "", false
	}
	g.hold = false
	return g.det.Buffered(), true
}
