package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/grammar"
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
		return nil, apiconv.SchemaError(sp+".schema", err)
	}
	return g, nil
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
	var params []string
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
		params = append(params, fmt.Sprintf("tools[%d].function.parameters", i))
	}
	if len(ts) == 0 {
		if mode.name != "" {
			return nil, invalid("tool_choice.function.name", "tool_choice names function %q, which is not in tools", mode.name)
		}
		return nil, invalid("tool_choice", "tool_choice \"required\" needs at least one tool in tools")
	}
	return apiconv.ToolGrammar(ts, params, parallel, o)
}

// constrain sets g's constraint to gr (nil: none).
func constrain(g *Generation, gr *grammar.Grammar, p apiconv.Params) error {
	return p.Constrain(&g.Request, gr, "response_format", "structured outputs are not available on this server")
}
