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

// CallSyntax is how a model family writes tool calls around the call
// objects {"name": "f", ArgsKey: {...}}.
type CallSyntax struct {
	// ArgsKey is the arguments' key; "": "parameters" (Llama 3).
	ArgsKey string
	// Open and Close wrap each call, and Sep goes between wrapped calls
	// (Hermes: "<tool_call>\n", "\n</tool_call>", "\n"). Without Open,
	// several calls are a JSON array.
	Open, Close, Sep string
	// Prefix, when set, begins the output and the calls are always a JSON
	// array (Granite: "<|tool_call|>[…]").
	Prefix string
}

// Tools compiles the output of a forced tool call in o.Calls's syntax; by
// default the Llama-3.2 form {"name": "f", "parameters": {...}}: one call of
// one of tools, or with parallel also a non-empty JSON array of calls
// (which chat.ParseToolCalls reads as several). The tools share one budget
// (o.Limits); o.Strict is each tool's Strict. A done o.Context returns its
// error.
func Tools(tools []Tool, parallel bool, o Options) (*Grammar, error) {
	done, err := o.Cache.orDefault().enter(o.Context)
	if err != nil {
		return nil, err
	}
	defer done()
	t0 := time.Now()
	call := &node{}
	args := o.Calls.ArgsKey
	if args == "" {
		args = "parameters"
	}
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
			{name: args, n: root, req: true},
		}})
	}
	if c == nil {
		c = newCompiler(nil, nil, o)
	}
	return &Grammar{root: o.Calls.root(call, parallel), took: time.Since(t0), masks: c.newMasks(), lim: c.b.lim, steps: c.b.lim.Steps - c.b.left}, nil
}

// root is the output of s's calls, each one of call (several with
// parallel).
func (s CallSyntax) root(call *node, parallel bool) *node {
	lit := func(text string) *node { return &node{lits: []string{text}} }
	list := &node{types: tArr, items: call, minItems: 1, maxItems: 1}
	if parallel {
		list.maxItems = -1
	}
	switch {
	case s.Prefix != "":
		return &node{seq: []*node{lit(s.Prefix), list}}
	case s.Open != "":
		one := &node{seq: []*node{lit(s.Open), call, lit(s.Close)}}
		if parallel { // after a call: Close, or Close, Sep and another call
			one.seq[2] = &node{alts: []*node{one.seq[2], {seq: []*node{lit(s.Close + s.Sep), one}}}}
		}
		return one
	case parallel:
		return &node{alts: []*node{call, list}}
	}
	return call
}

// budgetOr returns c's budget, or a new one for o when c is nil.
func (c *compiler) budgetOr(o Options) *budget {
	if c == nil {
		return newBudget(o.Context, o.Limits)
	}
	return c.b
}
