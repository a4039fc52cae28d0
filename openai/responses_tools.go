package openai

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/apiconv"
)

// hostedTools are the Responses tool types that OpenAI runs on its own
// side (search, code execution, image generation, remote MCP servers).
// This server cannot run them: they are left out of the prompt, and a
// tool_choice that forces one is refused.
var hostedTools = []string{"web_search", "web_search_preview", "file_search", "code_interpreter",
	"computer_use_preview", "computer_use", "image_generation", "mcp", "tool_search"}

// hostedType reports whether typ is a hosted tool type; dated variants
// (web_search_2025_08_26, web_search_preview_2025_03_11) count as their base.
func hostedType(typ string) bool {
	for _, h := range hostedTools {
		if typ == h || (strings.HasPrefix(typ, h+"_") && isDate(typ[len(h)+1:])) {
			return true
		}
	}
	return false
}

// isDate reports whether s is a YYYY_MM_DD suffix.
func isDate(s string) bool {
	if len(s) != 10 || s[4] != '_' || s[7] != '_' {
		return false
	}
	return !strings.ContainsFunc(s[:4]+s[5:7]+s[8:], func(r rune) bool { return r < '0' || r > '9' })
}

// qualifiedName is a namespace's function: the model sees it as
// "namespace.name" (function names cannot hold a dot, so the form is
// unambiguous), and its calls come back as OpenAI sends them, with
// `namespace` and `name` apart.
type qualifiedName struct{ namespace, name string }

// qualify is the name a namespace's function is offered under.
func qualify(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

// respTools is a Responses request's tool list as the model sees it.
type respTools struct {
	tools      []json.RawMessage // the chat template's tool objects
	names      []string          // their names, in the same order
	namespaced map[string]qualifiedName
	hosted     []string // the hosted tool types left out, each once
}

// responseTool is a Responses tool object: a function
// ({type, name, description, parameters, strict}), a namespace ({type,
// name, description, tools: functions}) or a hosted tool.
type responseTool struct {
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description *string           `json:"description"`
	Parameters  json.RawMessage   `json:"parameters"`
	Tools       []json.RawMessage `json:"tools"`
}

// responseTools converts a Responses tool list to the chat template's tool
// objects: functions as they are, a namespace's functions under their
// qualified names (the namespace's description before each function's),
// and hosted tools left out.
func responseTools(raw []json.RawMessage) (*respTools, error) {
	rt := &respTools{tools: make([]json.RawMessage, 0, len(raw)), names: make([]string, 0, len(raw))}
	seen := map[string]string{} // offered name → its param, for duplicates
	add := func(param, name string, description *string, parameters json.RawMessage) error {
		if prev, dup := seen[name]; dup {
			return invalid(param+".name", "duplicate tool name %q (also %s)", name, prev)
		}
		seen[name] = param
		rt.tools = append(rt.tools, apiconv.FunctionTool(name, description, parameters))
		rt.names = append(rt.names, name)
		return nil
	}
	for i, t := range raw {
		param := fmt.Sprintf("tools[%d]", i)
		var f responseTool
		if err := json.Unmarshal(t, &f); err != nil {
			return nil, invalid(param, "tool must be an object: %v", err)
		}
		switch {
		case f.Type == "function":
			if err := checkFunctionName(param, f.Name); err != nil {
				return nil, err
			}
			if err := add(param, f.Name, f.Description, f.Parameters); err != nil {
				return nil, err
			}
		case f.Type == "namespace":
			if err := checkFunctionName(param, f.Name); err != nil {
				return nil, err
			}
			if len(f.Tools) == 0 {
				return nil, invalid(param+".tools", "namespace %q has no tools", f.Name)
			}
			for j, inner := range f.Tools {
				ip := fmt.Sprintf("%s.tools[%d]", param, j)
				var fn responseTool
				if err := json.Unmarshal(inner, &fn); err != nil {
					return nil, invalid(ip, "tool must be an object: %v", err)
				}
				if fn.Type != "function" {
					return nil, invalid(ip+".type", "tool type %q is not supported in a namespace; only \"function\"", fn.Type)
				}
				if err := checkFunctionName(ip, fn.Name); err != nil {
					return nil, err
				}
				q := qualify(f.Name, fn.Name)
				if err := add(ip, q, namespaceDescription(f.Description, fn.Description), fn.Parameters); err != nil {
					return nil, err
				}
				if rt.namespaced == nil {
					rt.namespaced = map[string]qualifiedName{}
				}
				rt.namespaced[q] = qualifiedName{f.Name, fn.Name}
			}
		case hostedType(f.Type):
			if !slices.Contains(rt.hosted, f.Type) {
				rt.hosted = append(rt.hosted, f.Type)
			}
		case f.Type == "":
			return nil, invalid(param+".type", "tool has no type")
		default:
			return nil, invalid(param+".type", "tool type %q is not supported; only \"function\", \"namespace\" and hosted tools (left out: this server cannot run them)", f.Type)
		}
	}
	return rt, nil
}

// checkFunctionName applies OpenAI's rule for function and namespace
// names: 1 to 64 letters, digits, underscores and dashes.
func checkFunctionName(param, name string) error {
	switch {
	case name == "":
		return invalid(param+".name", "tool has no name")
	case len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}):
		return invalid(param+".name", "Invalid 'name': %q does not match '^[a-zA-Z0-9_-]{1,64}$'.", name)
	}
	return nil
}

// namespaceDescription is a namespace function's description as offered:
// the namespace's description, then the function's.
func namespaceDescription(ns, fn *string) *string {
	switch {
	case ns == nil || *ns == "":
		return fn
	case fn == nil || *fn == "":
		return ns
	}
	d := strings.TrimRight(*ns, " ") + " " + *fn
	return &d
}

// choice reads tool_choice against the offered tools: a forced hosted tool
// is refused, and a forced function of a namespace is named by its
// namespace and name ({"type":"function","namespace":…,"name":…}) or by
// its qualified name.
func (rt *respTools) choice(raw json.RawMessage) (toolMode, error) {
	var obj struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Type != "" {
		if hostedType(obj.Type) {
			return toolMode{}, invalid("tool_choice", "tool_choice forces the hosted tool %q, which this server cannot run", obj.Type)
		}
		if obj.Type == "function" && obj.Namespace != "" {
			return toolMode{required: true, name: qualify(obj.Namespace, obj.Name)}, nil
		}
	}
	return toolChoice(raw)
}
