package apiconv

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
)

// ToolFormat is one model family's way of writing tool calls. Each is a
// row of ToolFormats, chosen at model load (DetectToolFormat, or the
// setting model.tool_parser) and handed to every API in Params.ToolFormat.
type ToolFormat interface {
	// Name is the format's model.tool_parser value.
	Name() string
	// Calls reads a whole reply, its stop tokens removed, as content
	// followed by calls of the offered tools; ok is false when it holds no
	// call, and then all of it is content.
	Calls(text string, offered []string) (content string, calls []chat.ToolCall, ok bool)
	// Start is the text that begins calls inside a reply (the text before
	// it is content); "": only a whole reply can be calls.
	Start() string
	// Syntax is how forced calls are written: the grammar's form, and what
	// CutToolCalls reads.
	Syntax() grammar.CallSyntax
}

// ToolFormats are the formats by name, as vLLM's --tool-call-parser names
// them.
var ToolFormats = []ToolFormat{Llama3JSON, hermes{}, granite{}, jsonCalls{}}

// Llama3JSON is Llama 3.x's format, the default: the whole reply is a call
// object {"name": …, "parameters": {…}} (several joined by ";" or in an
// array), optionally after <|python_tag|> (chat.ParseToolCalls).
var Llama3JSON ToolFormat = llama3JSON{}

// ToolFormatNamed is the format called name; the error lists the names.
func ToolFormatNamed(name string) (ToolFormat, error) {
	names := make([]string, len(ToolFormats))
	for i, f := range ToolFormats {
		if f.Name() == name {
			return f, nil
		}
		names[i] = f.Name()
	}
	return nil, fmt.Errorf("tool parser %q is not one of %s", name, strings.Join(names, ", "))
}

// toolFormatMarkers are the template texts that tell a family's format,
// the first found wins: the call markers before Llama's python tag and,
// last, Llama 3's header (the 3.2 template has no python tag).
var toolFormatMarkers = []struct{ marker, name string }{
	{"<|tool_call|>", "granite"},
	{"<tool_call>", "hermes"},
	{"<|python_tag|>", "llama3_json"},
	{"<|start_header_id|>", "llama3_json"},
}

// modelTypeFormats are config.json's model_type values whose family has a
// native format, for a template that shows no marker.
var modelTypeFormats = map[string]string{
	"llama": "llama3_json", "qwen2": "hermes", "qwen2_moe": "hermes", "qwen3": "hermes", "qwen3_moe": "hermes",
	"granite": "granite", "granitemoe": "granite",
}

// DetectToolFormat is the format name of a model whose chat template source
// is template and whose config.json says modelType ("": unknown): the
// template's markers first (<|tool_call|> → granite, <tool_call> → hermes,
// <|python_tag|> or Llama 3's <|start_header_id|> → llama3_json), then
// modelType; else, without a template (the built-in Llama 3 one renders)
// llama3_json, and json with one. Falcon3's config.json says "llama", yet
// its template has <tool_call>: the markers decide.
func DetectToolFormat(template, modelType string) string {
	for _, m := range toolFormatMarkers {
		if strings.Contains(template, m.marker) {
			return m.name
		}
	}
	if name, ok := modelTypeFormats[strings.ToLower(modelType)]; ok {
		return name
	}
	if template == "" {
		return Llama3JSON.Name()
	}
	return jsonCalls{}.Name()
}

// withoutStops is text with the chat template's stop tokens removed.
func withoutStops(text string) string {
	for _, st := range chat.StopTokens {
		text = strings.ReplaceAll(text, st, "")
	}
	return text
}

// offeredOnly reports whether every call names an offered tool.
func offeredOnly(calls []chat.ToolCall, offered []string) bool {
	for _, c := range calls {
		if !slices.Contains(offered, c.Name) {
			return false
		}
	}
	return true
}

type llama3JSON struct{}

func (llama3JSON) Name() string               { return "llama3_json" }
func (llama3JSON) Start() string              { return "" }
func (llama3JSON) Syntax() grammar.CallSyntax { return grammar.CallSyntax{} }

func (llama3JSON) Calls(text string, offered []string) (string, []chat.ToolCall, bool) {
	calls, ok := chat.OfferedToolCalls(text, offered)
	return "", calls, ok
}

// hermes is the format of Qwen2.5, Qwen3 and Falcon3 (as vLLM's hermes
// parser reads it): content, then one or more
// <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call> blocks; the last
// may lack its closing tag. Content is the text before the first block,
// trailing whitespace trimmed. A block that is not one call object makes
// the whole reply content; a name that is not offered is still a call, as
// vLLM returns it (the marker leaves no doubt the model meant a call).
type hermes struct{}

func (hermes) Name() string  { return "hermes" }
func (hermes) Start() string { return "<tool_call>" }

func (hermes) Syntax() grammar.CallSyntax {
	return grammar.CallSyntax{ArgsKey: "arguments", Open: "<tool_call>\n", Close: "\n</tool_call>", Sep: "\n"}
}

func (h hermes) Calls(text string, offered []string) (string, []chat.ToolCall, bool) {
	text = withoutStops(text)
	before, rest, found := strings.Cut(text, h.Start())
	if offered == nil || !found {
		return "", nil, false
	}
	var calls []chat.ToolCall
	for found {
		var body string
		body, rest, _ = strings.Cut(rest, "</tool_call>")
		c, ok := chat.ParseCallJSON(body, false)
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c...)
		_, rest, found = strings.Cut(rest, h.Start())
	}
	return strings.TrimRight(before, " \t\r\n"), calls, true
}

// granite is Granite 3's format (as llama.cpp reads it): content, then
// <|tool_call|> and a JSON array of {"name": …, "arguments": {…}} (a single
// object is accepted too), nothing but whitespace after it. Names are not
// checked, as in vLLM.
type granite struct{}

func (granite) Name() string  { return "granite" }
func (granite) Start() string { return "<|tool_call|>" }

func (granite) Syntax() grammar.CallSyntax {
	return grammar.CallSyntax{ArgsKey: "arguments", Prefix: "<|tool_call|>"}
}

func (g granite) Calls(text string, offered []string) (string, []chat.ToolCall, bool) {
	before, rest, found := strings.Cut(withoutStops(text), g.Start())
	if offered == nil || !found {
		return "", nil, false
	}
	calls, ok := chat.ParseCallJSON(rest, true)
	if !ok {
		return "", nil, false
	}
	return strings.TrimRight(before, " \t\r\n"), calls, true
}

// jsonCalls is the fallback of families without a native format (Phi-3.5):
// a reply that is, whole, a call object {"name": …, "arguments": {…}} or a
// JSON array of them, naming offered tools only (a reply without a marker
// may be JSON the user asked for).
type jsonCalls struct{}

func (jsonCalls) Name() string               { return "json" }
func (jsonCalls) Start() string              { return "" }
func (jsonCalls) Syntax() grammar.CallSyntax { return grammar.CallSyntax{ArgsKey: "arguments"} }

func (jsonCalls) Calls(text string, offered []string) (string, []chat.ToolCall, bool) {
	if offered == nil {
		return "", nil, false
	}
	calls, ok := chat.ParseCallJSON(withoutStops(text), true)
	if !ok || !offeredOnly(calls, offered) {
		return "", nil, false
	}
	return "", calls, true
}
