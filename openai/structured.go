package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
)

var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// FormatGrammar compiles a response format (chat completions'
// response_format, or a Responses API text.format, whose json_schema fields
// may sit at the top level: flat) into a grammar; nil for plain text.
// Errors are 400s naming param and, for the schema, the offending keyword's
// path (param.json_schema.schema.properties.x.not), also for a schema over
// o.Limits; a done o.Context returns its error. The compile runs here, in
// the request's handler, never in the engine's worker.
func FormatGrammar(raw json.RawMessage, param string, flat bool, o grammar.Options) (*grammar.Grammar, error) {
	if isNull(raw) {
		return nil, nil
	}
	type jsonSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	var rf struct {
		Type       string      `json:"type"`
		JSONSchema *jsonSchema `json:"json_schema"`
		jsonSchema
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, invalid(param, "%s must be an object with a type", param)
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return grammar.Compile([]byte(`{"type":"object"}`), o)
	case "json_schema":
	default:
		return nil, invalid(param+".type", "%s type %q is not supported; use \"text\", \"json_object\" or \"json_schema\"", param, rf.Type)
	}
	js, sp := rf.JSONSchema, param+".json_schema"
	if flat {
		js, sp = &rf.jsonSchema, param
	}
	if js == nil {
		return nil, invalid(sp, "%s is required when type is \"json_schema\"", sp)
	}
	if !schemaName.MatchString(js.Name) {
		return nil, invalid(sp+".name", "%s.name must be 1 to 64 characters of a-z, A-Z, 0-9, _ and -", sp)
	}
	schema := js.Schema
	if isNull(schema) {
		schema = []byte(`{}`)
	}
	o.Strict = js.Strict != nil && *js.Strict
	g, err := grammar.Compile(schema, o)
	if err != nil {
		return nil, schemaError(sp+".schema", err)
	}
	return g, nil
}

func schemaError(param string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, grammar.ErrBusy) {
		return err // the client left, or the server is busy: not the schema's fault
	}
	e, ok := err.(*grammar.Error)
	if !ok {
		return invalid(param, "%v", err)
	}
	if e.Path != "" {
		param += "." + e.Path
	}
	return invalid(param, "invalid schema for structured outputs at %s: %s", param, e.Message)
}

// toolMode is what tool_choice asks for.
type toolMode struct {
	off      bool   // "none"
	required bool   // "required" or a named function
	name     string // the named function
}

// toolChoice parses tool_choice.
func toolChoice(raw json.RawMessage) (toolMode, error) {
	if isNull(raw) {
		return toolMode{}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var named struct {
			Type     string `json:"type"`
			Name     string `json:"name"` // the Responses API's form
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" {
			return toolMode{}, invalid("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
		}
		if named.Function != nil && named.Function.Name != "" {
			return toolMode{required: true, name: named.Function.Name}, nil
		}
		if named.Function == nil && named.Name != "" {
			return toolMode{required: true, name: named.Name}, nil
		}
		return toolMode{}, invalid("tool_choice.function.name", "tool_choice.function.name is required")
	}
	switch s {
	case "auto":
		return toolMode{}, nil
	case "none":
		return toolMode{off: true}, nil
	case "required":
		return toolMode{required: true}, nil
	}
	return toolMode{}, invalid("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or an object, got %q", s)
}

// toolGrammar compiles the forced tool call of mode over tools.
func toolGrammar(tools []json.RawMessage, names []string, mode toolMode, parallel bool, o grammar.Options) (*grammar.Grammar, error) {
	var ts []grammar.Tool
	var idx []int
	for i, raw := range tools {
		if mode.name != "" && names[i] != mode.name {
			continue
		}
		var t struct {
			Function struct {
				Parameters json.RawMessage `json:"parameters"`
				Strict     *bool           `json:"strict"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, invalid(fmt.Sprintf("tools[%d]", i), "tool must be an object: %v", err)
		}
		var p []byte
		if !isNull(t.Function.Parameters) {
			p = bytes.Clone(t.Function.Parameters)
		}
		ts = append(ts, grammar.Tool{Name: names[i], Parameters: p, Strict: t.Function.Strict != nil && *t.Function.Strict})
		idx = append(idx, i)
	}
	if len(ts) == 0 {
		if mode.name != "" {
			return nil, invalid("tool_choice.function.name", "tool_choice names function %q, which is not in tools", mode.name)
		}
		return nil, invalid("tool_choice", "tool_choice \"required\" needs at least one tool in tools")
	}
	g, err := grammar.Tools(ts, parallel, o)
	if te, ok := err.(*grammar.ToolError); ok {
		return nil, schemaError(fmt.Sprintf("tools[%d].function.parameters", idx[te.Index]), te.Err)
	}
	return g, err
}

// grammarOptions are the compile options of p's request.
func (p Params) grammarOptions() grammar.Options {
	o := p.Grammar
	o.Context = p.Context
	return o
}

// GrammarOptions are the compile options of p's request, for the other API
// packages that compile grammars (anthropic/, ollama/).
func (p Params) GrammarOptions() grammar.Options { return p.grammarOptions() }

// SchemaError is the 400 for a schema the constrained decoder cannot
// enforce, naming param and the keyword's path; a client that went away
// passes through.
func SchemaError(param string, err error) error { return schemaError(param, err) }

// constrain sets g's constraint to gr (nil: none).
func constrain(g *Generation, gr *grammar.Grammar, p Params) error {
	if gr == nil {
		return nil
	}
	c, ok := p.Constraint(gr)
	if !ok {
		return invalid("response_format", "structured outputs are not available on this server")
	}
	g.Request.Constrain = c
	return nil
}

// Constraint is the engine's per-choice constraint factory for gr (for
// every API package that compiles grammars: anthropic/ and ollama/ too): each choice
// matches gr against the tokens of p.Vocab, stopping when p.Context is
// done, and p.Compiled is told of gr. ok is false when p has no vocabulary
// (structured outputs are off).
func (p Params) Constraint(gr *grammar.Grammar) (c func() inference.Constraint, ok bool) {
	if p.Vocab == nil {
		return nil, false
	}
	if p.Compiled != nil {
		p.Compiled(gr)
	}
	v, ctx := p.Vocab(), p.Context
	return func() inference.Constraint { return gr.NewMatcherContext(ctx, v) }, true
}
