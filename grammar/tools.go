package grammar

import (
	"encoding/json"
	"time"
)

// Tool is a function the model may call.
type Tool struct {
	Name       string
	Parameters []byte // JSON Schema of the arguments; nil: no arguments
	Strict     bool   // argument keys in schema order
}

// ToolError is a tool whose parameters schema cannot be enforced.
type ToolError struct {
	Index int // into the tools given to Tools
	Err   *Error
}

func (e *ToolError) Error() string { return e.Err.Error() }

// Tools compiles the output of a forced tool call in the Llama-3.2 form
// {"name": "f", "parameters": {...}}: one call of one of tools, or with
// parallel also a non-empty JSON array of calls (which chat.ParseToolCalls
// reads as several).
func Tools(tools []Tool, parallel bool) (*Grammar, error) {
	t0 := time.Now()
	call := &node{}
	for i, t := range tools {
		p := t.Parameters
		if len(p) == 0 {
			p = []byte(`{"type":"object","properties":{},"additionalProperties":false}`)
		}
		g, err := Compile(p, Options{Strict: t.Strict})
		if err != nil {
			e := err.(*Error)
			return nil, &ToolError{Index: i, Err: e}
		}
		name, _ := json.Marshal(t.Name)
		call.alts = append(call.alts, &node{types: tObj, strict: true, props: []prop{
			{name: "name", n: &node{lits: []string{string(name)}}, req: true},
			{name: "parameters", n: g.root, req: true},
		}})
	}
	if !parallel {
		return &Grammar{root: call, took: time.Since(t0), masks: &maskCache{}}, nil
	}
	list := &node{types: tArr, items: call, minItems: 1, maxItems: -1}
	return &Grammar{root: &node{alts: []*node{call, list}}, took: time.Since(t0), masks: &maskCache{}}, nil
}
