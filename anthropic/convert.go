package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/overflow"
)

// Generation is a validated Messages request: the engine request plus what
// building the response needs.
type Generation struct {
	Request inference.Request
	Stream  bool
	// Model is the requested name, echoed in the response.
	Model string
	// Tools are the callable tool names; nil: the output is never parsed
	// as tool calls (no tools, or tool_choice "none").
	Tools []string
	// Single keeps at most one tool_use (disable_parallel_tool_use).
	Single bool
	// Forced: tool_choice any or tool, so output that the token limit cut
	// off is still read as tool uses (apiconv.CutToolCalls).
	Forced bool
	// ToolFormat is how the model writes calls (apiconv.Params.ToolFormat).
	ToolFormat apiconv.ToolFormat
	// ForcedName is the tool a tool_choice of type tool forces: the only
	// name a call can have, however early the limit cut it.
	ForcedName string
	// Thinking is the request's thinking setting; key signs the thinking
	// blocks of the reply.
	Thinking apiconv.Thinking
	key      []byte
}

// BillingHeaderPrefix starts the system block Claude Code sends first. It
// carries no instruction, and some versions change it per request, which
// would defeat the prefix cache, so it is dropped (as llama.cpp does).
const BillingHeaderPrefix = "x-anthropic-billing-header:"

// FromMessagesRequest validates r and renders its conversation with the
// chat template into g.Request.Prompt. p is the same as for chat completions.
func FromMessagesRequest(r *MessagesRequest, p apiconv.Params) (*Generation, error) {
	if err := checkMaxTokens(r); err != nil {
		return nil, err
	}
	g, err := convert(r, p)
	if err != nil {
		return nil, err
	}
	g.Request.MaxTokens = *r.MaxTokens
	g.Stream = r.Stream
	return g, nil
}

// CountTokens is the number of prompt tokens /v1/messages would feed the
// model for r (max_tokens and the sampling fields are not needed).
func CountTokens(r *MessagesRequest, p apiconv.Params) (int, error) {
	g, err := convert(r, p)
	if err != nil {
		return 0, err
	}
	return len(g.Request.Prompt), nil
}

func checkMaxTokens(r *MessagesRequest) error {
	if r.MaxTokens == nil {
		return invalid("max_tokens", "Field required")
	}
	if *r.MaxTokens < 1 {
		return invalid("max_tokens", "max_tokens must be at least 1, got %d", *r.MaxTokens)
	}
	return nil
}

// check validates what serving r needs wherever it runs (here or on an
// upstream): no MCP servers, the sampling fields and stop sequences (into
// g, over p's defaults), thinking, the tools (as the template's tool
// objects, and their names) and tool_choice (its type).
func check(r *MessagesRequest, p apiconv.Params, g *Generation) (tools []json.RawMessage, names []string, mode string, err error) {
	if !isNull(r.MCPServers) && !bytes.Equal(bytes.TrimSpace(r.MCPServers), []byte("[]")) {
		return nil, nil, "", invalid("mcp_servers", "mcp_servers (the MCP connector) is not supported: this server cannot reach MCP servers; run them in the client")
	}
	if err := sampling(r, p, g); err != nil {
		return nil, nil, "", err
	}
	if g.Thinking, err = thinking(r); err != nil {
		return nil, nil, "", err
	}
	if tools, names, err = toolDefs(r.Tools); err != nil {
		return nil, nil, "", err
	}
	if mode, err = toolChoice(r.ToolChoice, names); err != nil {
		return nil, nil, "", err
	}
	if (mode == "any" || mode == "tool") && g.Thinking.Set && !g.Thinking.Off {
		return nil, nil, "", invalid("tool_choice", "Thinking may not be enabled when tool_choice forces tool use.")
	}
	return tools, names, mode, nil
}

// thinking validates the thinking field as Anthropic does: budget_tokens
// of an enabled thinking at least 1024 and below max_tokens.
func thinking(r *MessagesRequest) (apiconv.Thinking, error) {
	t := r.Thinking
	if t == nil {
		return apiconv.Thinking{}, nil
	}
	switch t.Type {
	case "":
		return apiconv.Thinking{}, invalid("thinking.type", "thinking.type is required (enabled, disabled or adaptive)")
	case "disabled":
		return apiconv.Thinking{Set: true, Off: true}, nil
	case "adaptive":
		return apiconv.Thinking{Set: true}, nil
	case "enabled":
	default:
		return apiconv.Thinking{}, invalid("thinking.type", "thinking: Input tag '%s' found using 'type' does not match any of the expected tags: 'disabled', 'enabled', 'adaptive'", t.Type)
	}
	b := t.BudgetTokens
	switch {
	case b == nil:
		return apiconv.Thinking{}, invalid("thinking.enabled.budget_tokens", "thinking.enabled.budget_tokens: Field required")
	case *b < MinThinkingBudget:
		return apiconv.Thinking{}, invalid("thinking.enabled.budget_tokens", "thinking.enabled.budget_tokens: Input should be greater than or equal to %d", MinThinkingBudget)
	case r.MaxTokens != nil && *b >= *r.MaxTokens:
		return apiconv.Thinking{}, invalid("max_tokens", "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
	}
	return apiconv.Thinking{Set: true, Budget: *b}, nil
}

// MinThinkingBudget is Anthropic's least thinking.budget_tokens.
const MinThinkingBudget = 1024

func convert(r *MessagesRequest, p apiconv.Params) (*Generation, error) {
	g := &Generation{Model: r.Model, key: p.ReasoningKey}
	tools, names, mode, err := check(r, p, g)
	if err != nil {
		return nil, err
	}
	opt := p.ChatOptions()
	apiconv.ApplyThinking(&opt, g.Thinking)
	if mode != "none" && len(tools) > 0 {
		opt.Tools = tools
		g.Tools, g.ToolFormat = names, p.ToolFormat
	}
	g.Single = r.ToolChoice != nil && r.ToolChoice.DisableParallelToolUse != nil && *r.ToolChoice.DisableParallelToolUse
	msgs, prefill, err := chatMessages(r.System, r.Messages, p.ReasoningKey)
	if err != nil {
		return nil, err
	}
	p.SplitTurns(msgs)
	if len(msgs) == 0 {
		return nil, invalid("messages", "messages must contain a user message")
	}
	pol, err := p.Policy(r.ContextOverflow, "context_overflow", overflow.Error)
	if err != nil {
		return nil, err
	}
	maxTokens := 0
	if r.MaxTokens != nil {
		maxTokens = *r.MaxTokens
	}
	f, err := p.FitChat(msgs, opt, prefill, pol, maxTokens)
	if err != nil {
		return nil, err
	}
	g.Request.Prompt = f.Prompt
	p.ShiftChat(&g.Request, p.ContextShift(r.ContextShift, false), msgs, opt)
	// The grammar last: a prompt too long for the window is refused before
	// a schema is compiled (cheap checks first).
	if err := constrain(r, mode, names, g, p); err != nil {
		return nil, err
	}
	p.Reason(&g.Request, g.Thinking)
	return g, nil
}

// sampling validates the sampling fields (Anthropic's ranges) over the
// server's defaults, the stop sequences and the cache hint.
func sampling(r *MessagesRequest, p apiconv.Params, g *Generation) error {
	s := p.Defaults
	s.LogitBias = nil
	if err := apiconv.InRange(r.Temperature, "temperature", 0, 1, false, &s.Temperature); err != nil {
		return err
	}
	if err := apiconv.InRange(r.TopP, "top_p", 0, 1, true, &s.TopP); err != nil {
		return err
	}
	if v := r.TopK; v != nil {
		if *v < 0 {
			return invalid("top_k", "top_k must be >= 0 (0: off), got %d", *v)
		}
		s.TopK = *v
	}
	g.Request.Sampling, g.Request.N = s, 1
	if len(r.StopSequences) > inference.MaxStops {
		return invalid("stop_sequences", "at most %d stop sequences are allowed, got %d", inference.MaxStops, len(r.StopSequences))
	}
	for i, st := range r.StopSequences {
		if st == "" {
			return invalid(fmt.Sprintf("stop_sequences[%d]", i), "stop sequences must not be empty")
		}
	}
	g.Request.Stop = r.StopSequences
	if r.Metadata != nil && r.Metadata.UserID != nil {
		g.Request.CacheKey = apiconv.CacheKey(*r.Metadata.UserID)
	}
	return nil
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// toolDefs checks the tool definitions and converts them to the chat
// template's tool objects ({"type":"function","function":{name,
// description, parameters}}).
func toolDefs(tools []Tool) ([]json.RawMessage, []string, error) {
	out := make([]json.RawMessage, 0, len(tools))
	names := make([]string, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		p := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "" && t.Type != "custom":
			return nil, nil, invalid(p+".type", "tool type %q is not supported: it is a tool Anthropic's service runs or defines; "+
				"this server runs only custom tools (name, description, input_schema)", t.Type)
		case !toolName.MatchString(t.Name):
			return nil, nil, invalid(p+".name", "tool name %q must be 1 to 128 characters of a-z, A-Z, 0-9, _ and -", t.Name)
		case seen[t.Name]:
			return nil, nil, invalid(p+".name", "tool names must be unique; %q is given twice", t.Name)
		}
		schema := bytes.TrimSpace(t.InputSchema)
		if len(schema) == 0 || schema[0] != '{' {
			return nil, nil, invalid(p+".input_schema", "input_schema is required and must be a JSON Schema object")
		}
		seen[t.Name] = true
		out = append(out, apiconv.FunctionTool(t.Name, t.Description, schema))
		names = append(names, t.Name)
	}
	return out, names, nil
}

// toolChoice checks tool_choice against the tools and returns its type.
func toolChoice(tc *ToolChoice, names []string) (string, error) {
	if tc == nil {
		return "auto", nil
	}
	switch tc.Type {
	case "auto", "none":
		return tc.Type, nil
	case "any":
		if len(names) == 0 {
			return "", invalid("tool_choice", "tool_choice \"any\" needs at least one tool in tools")
		}
	case "tool":
		if tc.Name == "" {
			return "", invalid("tool_choice.name", "tool_choice.name is required when tool_choice.type is \"tool\"")
		}
		found := false
		for _, n := range names {
			found = found || n == tc.Name
		}
		if !found {
			return "", invalid("tool_choice.name", "tool_choice names tool %q, which is not in tools", tc.Name)
		}
	case "":
		return "", invalid("tool_choice.type", "tool_choice.type is required (auto, any, tool or none)")
	default:
		return "", invalid("tool_choice.type", "tool_choice.type must be auto, any, tool or none, got %q", tc.Type)
	}
	return tc.Type, nil
}

// constrain sets the constrained decoder for a forced tool call (tool_choice
// any or tool) or JSON outputs (output_config.format).
func constrain(r *MessagesRequest, mode string, names []string, g *Generation, p apiconv.Params) error {
	var gr *grammar.Grammar
	var err error
	if f := r.OutputConfig; f != nil && f.Format != nil {
		if f.Format.Type != "json_schema" {
			return invalid("output_config.format.type", "output_config.format.type must be \"json_schema\", got %q", f.Format.Type)
		}
		if mode == "any" || mode == "tool" {
			return invalid("output_config.format", "output_config.format cannot be combined with tool_choice %q", mode)
		}
		schema := f.Format.Schema
		if isNull(schema) {
			schema = []byte(`{}`)
		}
		if gr, err = grammar.Compile(schema, p.GrammarOptions()); err != nil {
			return apiconv.SchemaError("output_config.format.schema", err)
		}
	}
	if mode == "any" || mode == "tool" {
		var ts []grammar.Tool
		var params []string
		for i, t := range r.Tools {
			if mode == "tool" && t.Name != r.ToolChoice.Name {
				continue
			}
			if mode == "tool" {
				g.ForcedName = names[i]
			}
			ts = append(ts, grammar.Tool{Name: names[i], Parameters: bytes.Clone(t.InputSchema), Strict: t.Strict != nil && *t.Strict})
			params = append(params, fmt.Sprintf("tools[%d].input_schema", i))
		}
		if gr, err = apiconv.ToolGrammar(ts, params, !g.Single, p.GrammarOptions()); err != nil {
			return err
		}
		g.Forced = true
	}
	return p.Constrain(&g.Request, gr, "tool_choice", "forced tool use and JSON outputs are not available on this server")
}

// chatMessages converts system and the turns to chat messages. A final
// assistant turn of text is the prefill the reply continues: it is returned
// apart, its trailing whitespace trimmed.
func chatMessages(system *Content, turns []MessageParam, key []byte) ([]chat.Message, string, error) {
	if len(turns) == 0 {
		return nil, "", invalid("messages", "messages must contain at least one message")
	}
	var out []chat.Message
	if system.set() {
		text, err := systemText(system)
		if err != nil {
			return nil, "", err
		}
		if text != "" {
			out = append(out, chat.Message{Role: "system", Content: text})
		}
	}
	prefill := ""
	for i, m := range turns {
		p := fmt.Sprintf("messages[%d]", i)
		if !m.Content.set() {
			return nil, "", invalid(p+".content", "content is required: a string or an array of content blocks")
		}
		if m.Content.Text != nil {
			m.Content.Blocks = []Block{{Type: "text", Text: m.Content.Text}}
		}
		if empty := len(m.Content.Blocks) == 0 || m.Content.Text != nil && *m.Content.Text == ""; empty && (m.Role != "assistant" || i < len(turns)-1) {
			return nil, "", invalid(fmt.Sprintf("messages.%d", i), "all messages must have non-empty content except for the optional final assistant message")
		}
		var msgs []chat.Message
		var err error
		switch m.Role {
		case "user":
			msgs, err = userMessages(m.Content.Blocks, p)
		case "assistant":
			msgs, err = assistantMessages(m.Content.Blocks, p, key)
			if i == len(turns)-1 && len(msgs) == 1 && len(msgs[0].ToolCalls) == 0 {
				prefill, msgs = strings.TrimRightFunc(msgs[0].Content, isSpace), nil
			}
		case "system":
			var text string
			text, err = systemText(&m.Content)
			msgs = []chat.Message{{Role: "system", Content: text}}
		case "":
			return nil, "", invalid(p+".role", "role is required (user or assistant)")
		default:
			return nil, "", invalid(p+".role", "invalid role %q (want user or assistant; the system prompt is the top-level system field)", m.Role)
		}
		if err != nil {
			return nil, "", err
		}
		out = append(out, msgs...)
	}
	return out, prefill, nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// systemText joins the text of a system prompt (a string or text blocks)
// with blank lines, leaving out Claude Code's billing header.
func systemText(c *Content) (string, error) {
	if c.Text != nil {
		return *c.Text, nil
	}
	texts := make([]string, 0, len(c.Blocks))
	for j, b := range c.Blocks {
		if b.Type != "text" || b.Text == nil {
			return "", invalid(fmt.Sprintf("system[%d]", j), "system blocks must be text blocks ({\"type\": \"text\", \"text\": ...})")
		}
		if strings.HasPrefix(*b.Text, BillingHeaderPrefix) {
			continue
		}
		texts = append(texts, *b.Text)
	}
	return strings.Join(texts, "\n\n"), nil
}

// userMessages converts a user turn: text blocks become a user message,
// each tool_result a tool message, in their order.
func userMessages(blocks []Block, p string) ([]chat.Message, error) {
	var out []chat.Message
	var texts []string
	flush := func() {
		if texts != nil {
			out = append(out, chat.Message{Role: "user", Content: strings.Join(texts, "\n")})
			texts = nil
		}
	}
	err := eachBlock(blocks, p, &texts, "tool_result", func(b Block, bp string) error {
		if b.ToolUseID == "" {
			return invalid(bp+".tool_use_id", "a tool_result block needs tool_use_id")
		}
		text, err := resultText(b.Content, bp+".content")
		if err != nil {
			return err
		}
		if b.IsError != nil && *b.IsError {
			text = "Error: " + text
		}
		flush()
		out = append(out, chat.Message{Role: "tool", Content: text, ToolCallID: b.ToolUseID})
		return nil
	})
	if err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

// assistantMessages converts an assistant turn: its text as one message,
// then each tool_use as a message with one call (the Llama-3.2 template
// renders one call per message). The text of the thinking blocks whose
// signature key verifies is the turn's reasoning (on its first message);
// other thinking blocks, and redacted_thinking, are dropped.
func assistantMessages(blocks []Block, p string, key []byte) ([]chat.Message, error) {
	var texts, reasoning []string
	var calls []chat.Message
	err := eachBlock(blocks, p, &texts, "tool_use", func(b Block, bp string) error {
		if b.Type == "thinking" {
			switch {
			case b.Thinking == nil:
				return invalid(bp+".thinking", "%s.thinking: Field required", bp)
			case b.Signature == nil:
				return invalid(bp+".signature", "%s.signature: Field required", bp)
			}
			if apiconv.VerifyReasoning(key, *b.Thinking, *b.Signature) {
				reasoning = append(reasoning, *b.Thinking)
			}
			return nil
		}
		switch {
		case b.Name == "":
			return invalid(bp+".name", "a tool_use block needs name")
		case b.ID == "":
			return invalid(bp+".id", "a tool_use block needs id")
		}
		input := bytes.TrimSpace(b.Input)
		if isNull(input) {
			input = []byte("{}")
		}
		if input[0] != '{' {
			return invalid(bp+".input", "tool_use input must be an object")
		}
		calls = append(calls, chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: b.ID, Name: b.Name, Arguments: input}}})
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []chat.Message
	if texts != nil {
		out = append(out, chat.Message{Role: "assistant", Content: strings.Join(texts, "\n")})
	}
	out = append(out, calls...)
	if len(out) > 0 && reasoning != nil {
		out[0].ReasoningContent = strings.Join(reasoning, "\n\n")
	}
	return out, nil
}

// eachBlock walks a turn's content blocks: a text block's text is appended
// to *texts (a text block needs text), thinking blocks are dropped, each
// block of the turn's own type (tool_result for a user, tool_use for an
// assistant) goes to do with its param path, and any other is refused.
func eachBlock(blocks []Block, p string, texts *[]string, own string, do func(b Block, bp string) error) error {
	for j, b := range blocks {
		bp := fmt.Sprintf("%s.content[%d]", p, j)
		switch b.Type {
		case "text":
			if b.Text == nil {
				return invalid(bp+".text", "a text block needs text")
			}
			*texts = append(*texts, *b.Text)
		case "redacted_thinking":
		case "thinking":
			if own != "tool_use" {
				continue // a user turn's: dropped, as before
			}
			if err := do(b, bp); err != nil {
				return err
			}
		case own:
			if err := do(b, bp); err != nil {
				return err
			}
		case "tool_use":
			return invalid(bp+".type", "tool_use blocks belong in assistant messages")
		case "tool_result":
			return invalid(bp+".type", "tool_result blocks belong in user messages")
		default:
			return blockError(b.Type, bp+".type")
		}
	}
	return nil
}

// resultText reads a tool_result's content: absent, a string or text blocks.
func resultText(c *Content, p string) (string, error) {
	switch {
	case !c.set():
		return "", nil
	case c.Text != nil:
		return *c.Text, nil
	}
	texts := make([]string, 0, len(c.Blocks))
	for j, b := range c.Blocks {
		bp := fmt.Sprintf("%s[%d]", p, j)
		if b.Type != "text" {
			return "", blockError(b.Type, bp+".type")
		}
		if b.Text == nil {
			return "", invalid(bp+".text", "a text block needs text")
		}
		texts = append(texts, *b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// blockError refuses a content block this server cannot render.
func blockError(typ, p string) error {
	switch typ {
	case "image":
		return invalid(p, "image content blocks are not supported: this model reads text only")
	case "document":
		return invalid(p, "document content blocks are not supported: this model reads text only")
	case "":
		return invalid(p, "content block has no type")
	}
	if strings.HasPrefix(typ, "server_tool_use") || strings.HasSuffix(typ, "_tool_result") {
		return invalid(p, "%s blocks belong to tools Anthropic's service runs, which this server does not", typ)
	}
	return invalid(p, "content block type %q is not supported (text, tool_use, tool_result, thinking)", typ)
}

var (
	invalid = apiconv.Invalid
	isNull  = apiconv.IsNull
)
