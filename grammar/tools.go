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
// reads as several). The tools share one budget (o.Limits); o.Strict is
// each tool's Strict. A done o.Context returns its error.
func Tools(tools []Tool, parallel bool, o Options) (*Grammar, error) {
	done, err := o.Cache.orDefault().enter(o.Context)
	if err != nil {
		return nil, err
	}
	defer done()
	t0 := time.Now()
	call := &node{}
	var c *compiler
	for i, t := range tools {
		p := t.Parameters
		if len(p) == 0 {
			p = []byte(`{"type":"object","properties":{},"additionalProperties":false}`)
		}
		doc, orders, err := decode(p)
		if err != nil {
			return nil, &ToolError{Index: i, Err: decodeError(err)}
		}
		o.Strict = t.Strict
		b := c.budgetOr(o)
		c = newCompiler(doc, orders, o)
		c.b = b // one budget for all the tools
		root, err := c.run(func() (*node, error) { return c.compile(doc, "") })
		if e, ok := err.(*Error); ok {
			return nil, &ToolError{Index: i, Err: e}
		} else if err != nil {
			return nil, err
		}
		name, _ := json.Marshal(t.Name)
		call.alts = append(call.alts, &node{types: tObj, strict: true, props: []prop{
			{name: "name", n: &node{lits: []string{string(name)}}, req: true},
			{name: "parameters", n: root, req: true},
		}})
	}
	if c == nil {
		c = newCompiler(nil, nil, o)
	}
	g := &Grammar{root: call, took: time.Since(t0), masks: c.newMasks(), lim: c.b.lim, steps: c.b.lim.Steps - c.b.left}
	if parallel {
		list := &node{types: tArr, items: call, minItems: 1, maxItems: -1}
		g.root = &node{alts: []*node{call, list}}
	}
	return g, nil
}

// budgetOr returns c's budget, or a new one for o when c is nil.
func (c *compiler) budgetOr(o Options) *budget {
	if c == nil {
		return newBudget(o.Context, o.Limits)
	}
	return c.b
}
