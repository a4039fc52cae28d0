package openai

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/overflow"
)

// ResponseRequest is the body of POST /v1/responses. Unknown keys are
// ignored as for chat completions; options this server cannot honour are
// refused by FromResponseRequest.
type ResponseRequest struct {
	Model              string            `json:"model"`
	Input              ResponseInput     `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Stream             bool              `json:"stream"`
	Store              *bool             `json:"store"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Text               *TextConfig       `json:"text"`
	Metadata           map[string]string `json:"metadata"`
	User               string            `json:"user"`
	SafetyIdentifier   string            `json:"safety_identifier"`
	PromptCacheKey     string            `json:"prompt_cache_key"`
	Truncation         *string           `json:"truncation"`
	Reasoning          *ReasoningConfig  `json:"reasoning"`
	Background         *bool             `json:"background"`
	Conversation       json.RawMessage   `json:"conversation"`
	Prompt             json.RawMessage   `json:"prompt"`
	Include            []string          `json:"include"`
	TopLogprobs        *int              `json:"top_logprobs"`
}

// TextConfig is the request's and response's `text` object.
type TextConfig struct {
	Format json.RawMessage `json:"format,omitempty"`
}

// ResponseInput is `input`: a string (one user message) or a list of items.
type ResponseInput struct {
	Items []Item
	Set   bool // present and not null
}

// UnmarshalJSON accepts a string, an array of items or null.
func (in *ResponseInput) UnmarshalJSON(b []byte) error {
	text, items, err := stringOrArray[Item](b, reflect.TypeFor[ResponseInput](), "a value other than a string or an array of items")
	switch {
	case err != nil || (text == nil && items == nil):
		*in = ResponseInput{}
	case text != nil:
		*in = ResponseInput{Set: true, Items: []Item{{Type: "message", Role: "user", Content: ItemContent{{Type: "input_text", Text: *text}}}}}
	default:
		*in = ResponseInput{Set: true, Items: items}
	}
	return err
}

// Item is an input or output item: a message, a function_call or a
// function_call_output.
type Item struct {
	Type      string          `json:"type"`
	ID        string          `json:"id,omitempty"`
	Status    string          `json:"status,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   ItemContent     `json:"content,omitzero"`
	CallID    string          `json:"call_id,omitempty"`
	Namespace string          `json:"namespace,omitempty"` // a function_call of a namespace tool's function
	Name      string          `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	// Summary is a reasoning item's summary parts (always a list, empty
	// here: the model's reasoning is in Content as reasoning_text).
	Summary []ItemPart `json:"summary,omitzero"`
}

// ItemContent is a message's content; a string decodes as one input_text part.
type ItemContent []ItemPart

// ItemPart is a content part. Annotations and Logprobs are set (to empty
// lists) on output_text parts, as OpenAI sends them.
type ItemPart struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations,omitzero"`
	Logprobs    []json.RawMessage `json:"logprobs,omitzero"`
}

// UnmarshalJSON accepts a string, an array of parts or null.
func (c *ItemContent) UnmarshalJSON(b []byte) error {
	text, parts, err := stringOrArray[ItemPart](b, reflect.TypeFor[ItemContent](), "a value other than a string, an array or null")
	*c = parts
	if text != nil {
		*c = ItemContent{{Type: "input_text", Text: *text}}
	}
	return err
}

// Response is OpenAI's response object.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"` // "response"
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"` // completed, incomplete, failed, in_progress
	Background         bool               `json:"background"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []Item             `json:"output"`
	OutputText         string             `json:"output_text"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          ReasoningConfig    `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               TextConfig         `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *ResponseUsage     `json:"usage"`
	User               *string            `json:"user"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	PromptCacheKey     *string            `json:"prompt_cache_key"`
	Metadata           map[string]string  `json:"metadata"`
}

// ResponseError is a failed response's error.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"` // "max_output_tokens"
}

// ReasoningConfig is the request's reasoning object, echoed in the
// response (effort: "none" and "minimal" switch a reasoning model's
// thinking off); summaries are not written.
type ReasoningConfig struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// ResponseUsage is the Responses API's usage object.
type ResponseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// StoredResponse is what the server keeps for a stored response: the
// response, this request's input items, and the conversation before them
// (the previous response's whole conversation), so a continuation renders
// History + Input + Response.Output + its own input.
type StoredResponse struct {
	Response *Response `json:"response"`
	Input    []Item    `json:"input"`
	History  []Item    `json:"history,omitempty"`
}

// ValidateStored checks a stored response document (from the Responses
// store's directory) as if a client had sent its items: a response with
// the id, and every item of its input, history and output well formed.
func ValidateStored(id string, data []byte) error {
	var sr StoredResponse
	if err := json.Unmarshal(data, &sr); err != nil {
		return fmt.Errorf("not a stored response: %w", err)
	}
	if sr.Response == nil || sr.Response.ID != id {
		return fmt.Errorf("not a stored response %s", id)
	}
	for _, list := range []struct {
		name  string
		items []Item
	}{{"input", sr.Input}, {"history", sr.History}, {"output", sr.Response.Output}} {
		for i, it := range list.items {
			if err := normalizeItem(&it, fmt.Sprintf("%s[%d]", list.name, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Conversation is the stored conversation a continuation extends.
func (s *StoredResponse) Conversation() []Item {
	out := make([]Item, 0, len(s.History)+len(s.Input)+len(s.Response.Output))
	out = append(append(append(out, s.History...), s.Input...), s.Response.Output...)
	return out
}

// ResponseGeneration is a validated Responses request.
type ResponseGeneration struct {
	Generation
	Response *Response // the echoed settings; FinishResponse fills in the rest
	Input    []Item    // this request's input items, with ids
	History  []Item    // the conversation before Input
	Store    bool
	// LeftOut are the hosted tool types of the request (web_search,
	// file_search, …) that the server cannot run: they are not offered to
	// the model. The server logs each type once.
	LeftOut []string

	namespaced map[string]qualifiedName // offered name → a namespace's function
}

// MinOutputTokens is OpenAI's lower bound for max_output_tokens.
const MinOutputTokens = 16

// FromResponseRequest validates r and renders the conversation, prev's
// (when continuing) followed by r's input, through the chat template.
func FromResponseRequest(r *ResponseRequest, prev *StoredResponse, p apiconv.Params, id string, created int64) (*ResponseGeneration, error) {
	if err := rejectUnsupportedResponse(r); err != nil {
		return nil, err
	}
	g := &ResponseGeneration{Store: r.Store == nil || *r.Store}
	c := CommonParams{Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream, User: r.User}
	c.PromptCacheKey = r.PromptCacheKey // the KV store's hint, as on chat completions
	if err := common(&c, p, &g.Generation); err != nil {
		return nil, err
	}
	if v := r.MaxOutputTokens; v != nil && *v < MinOutputTokens {
		return nil, invalid("max_output_tokens", "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= %d, but got %d instead.", MinOutputTokens, *v)
	}
	if err := setMaxTokens(&g.Generation, r.MaxOutputTokens, "max_output_tokens", p); err != nil {
		return nil, err
	}
	rt, err := responseTools(r.Tools)
	if err != nil {
		return nil, err
	}
	g.LeftOut, g.namespaced = rt.hosted, rt.namespaced
	mode, err := rt.choice(r.ToolChoice)
	if err != nil {
		return nil, err
	}
	tools, names := rt.tools, rt.names
	if err := constrainResponse(&g.Generation, r, tools, names, mode, p); err != nil {
		return nil, err
	}
	var thinking apiconv.Thinking
	if r.Reasoning != nil && r.Reasoning.Effort != nil {
		if thinking, err = apiconv.EffortThinking(*r.Reasoning.Effort, "reasoning.effort"); err != nil {
			return nil, err
		}
	}
	truncation, err := responseTruncation(r.Truncation)
	if err != nil {
		return nil, err
	}
	if err := checkMetadata(r.Metadata); err != nil {
		return nil, err
	}
	if err := g.setInput(r, prev); err != nil {
		return nil, err
	}

	opt := p.ChatOptions()
	apiconv.ApplyThinking(&opt, thinking)
	if !mode.off && len(tools) > 0 {
		opt.Tools = tools
		g.Tools, g.ToolFormat = names, p.ToolFormat
	}
	var system []chat.Message
	if r.Instructions != nil && *r.Instructions != "" {
		system = []chat.Message{{Role: "system", Content: *r.Instructions}}
	}
	items := append(append([]Item(nil), g.History...), g.Input...)
	prompt, err := truncate(items, system, truncation == "auto", p, opt, g.Request.MaxTokens)
	if err != nil {
		return nil, err
	}
	g.Request.Prompt = prompt
	p.Reason(&g.Request, thinking)

	g.Response = echoResponse(r, g, id, created, truncation)
	return g, nil
}

// echoResponse is the in-progress Response object of g, echoing r's
// settings as OpenAI does.
func echoResponse(r *ResponseRequest, g *ResponseGeneration, id string, created int64, truncation string) *Response {
	resp := &Response{ID: id, Object: "response", CreatedAt: created, Status: "in_progress",
		Instructions: r.Instructions, MaxOutputTokens: r.MaxOutputTokens, Output: []Item{},
		ParallelToolCalls: r.ParallelToolCalls == nil || *r.ParallelToolCalls, PreviousResponseID: r.PreviousResponseID,
		Store: g.Store, Temperature: shortest(g.Request.Sampling.Temperature), TopP: shortest(g.Request.Sampling.TopP),
		Text: TextConfig{Format: json.RawMessage(`{"type":"text"}`)}, ToolChoice: json.RawMessage(`"auto"`),
		Tools: r.Tools, Truncation: truncation, Metadata: r.Metadata,
		User: optional(r.User), SafetyIdentifier: optional(r.SafetyIdentifier), PromptCacheKey: optional(r.PromptCacheKey)}
	if !isNull(r.ToolChoice) {
		resp.ToolChoice = r.ToolChoice
	}
	if r.Text != nil && !isNull(r.Text.Format) {
		resp.Text.Format = r.Text.Format // echoed, as OpenAI does
	}
	if resp.Tools == nil {
		resp.Tools = []json.RawMessage{}
	}
	if r.Reasoning != nil {
		resp.Reasoning = *r.Reasoning
	}
	if resp.Metadata == nil {
		resp.Metadata = map[string]string{}
	}
	return resp
}

// setInput checks and normalizes r's input items and sets g's input and,
// when continuing prev, its history.
func (g *ResponseGeneration) setInput(r *ResponseRequest, prev *StoredResponse) error {
	if !r.Input.Set && prev == nil {
		return invalid("input", "input is required")
	}
	for i := range r.Input.Items {
		if err := normalizeItem(&r.Input.Items[i], fmt.Sprintf("input[%d]", i)); err != nil {
			return err
		}
	}
	g.Input = r.Input.Items
	if prev != nil {
		g.History = prev.Conversation()
	}
	return nil
}

// responseTruncation is the truncation setting: "auto" or "disabled"
// (the default).
func responseTruncation(t *string) (string, error) {
	if t == nil {
		return "disabled", nil
	}
	if *t != "auto" && *t != "disabled" {
		return "", invalid("truncation", "truncation must be \"auto\" or \"disabled\", got %q", *t)
	}
	return *t, nil
}

// shortest widens v to the float64 with v's shortest decimal form (0.9, not 0.8999999761581421).
func shortest(v float32) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(v), 'g', -1, 32), 64)
	return f
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// constrainResponse applies text.format (json_object, json_schema) or a
// forced tool call (tool_choice "required" or a named function) through the
// constrained decoder, as chat completions' response_format and tool_choice.
func constrainResponse(g *Generation, r *ResponseRequest, tools []json.RawMessage, names []string, mode toolMode, p apiconv.Params) error {
	var format json.RawMessage
	if r.Text != nil {
		format = r.Text.Format
	}
	gr, err := FormatGrammar(format, "text.format", true, p.GrammarOptions())
	if err != nil {
		return err
	}
	if mode.required {
		if gr != nil {
			return invalid("text.format", "text.format cannot be combined with a forced tool_choice")
		}
		parallel := r.ParallelToolCalls == nil || *r.ParallelToolCalls
		if gr, err = toolGrammar(tools, names, mode, parallel, p.GrammarOptions()); err != nil {
			return err
		}
		g.ForcedTools, g.ForcedName = true, mode.name
	}
	return constrain(g, gr, p)
}

// checkMetadata applies OpenAI's metadata limits: at most 16 pairs, keys up
// to 64 characters, values up to 512.
func checkMetadata(m map[string]string) error {
	if len(m) > 16 {
		return invalid("metadata", "Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got %d instead.", len(m))
	}
	for k, v := range m {
		switch {
		case utf8.RuneCountInString(k) > 64:
			return invalid("metadata", "Invalid 'metadata': key %q is longer than 64 characters.", k)
		case utf8.RuneCountInString(v) > 512:
			return invalid("metadata."+k, "Invalid 'metadata.%s': string too long. Expected a string with maximum length 512.", k)
		}
	}
	return nil
}

// rejectUnsupportedResponse refuses the options this server cannot honour.
func rejectUnsupportedResponse(r *ResponseRequest) error {
	switch {
	case r.Background != nil && *r.Background:
		return invalid("background", "background responses are not supported")
	case !isNull(r.Conversation):
		return invalid("conversation", "conversations are not supported; use previous_response_id")
	case !isNull(r.Prompt):
		return invalid("prompt", "prompt templates are not supported; send instructions and input")
	case r.TopLogprobs != nil && *r.TopLogprobs != 0:
		return invalid("top_logprobs", "top_logprobs is not supported on /v1/responses")
	}
	for i, inc := range r.Include {
		if inc != "reasoning.encrypted_content" { // no reasoning: nothing to include
			return invalid(fmt.Sprintf("include[%d]", i), "include value %q is not supported", inc)
		}
	}
	return nil
}

// normalizeItem checks an input item and gives it OpenAI's stored form:
// a type, an id, and parts instead of a string.
func normalizeItem(it *Item, param string) error {
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	switch it.Type {
	case "message":
		return normalizeMessage(it, param)
	case "function_call":
		switch {
		case it.Name == "":
			return invalid(param+".name", "function_call has no name")
		case it.CallID == "":
			return invalid(param+".call_id", "function_call has no call_id")
		case it.Arguments == nil:
			return invalid(param+".arguments", "function_call has no arguments")
		}
		if a := strings.TrimSpace(*it.Arguments); a != "" && !json.Valid([]byte(a)) {
			return invalid(param+".arguments", "function arguments are not valid JSON")
		}
		if it.Status == "" {
			it.Status = "completed"
		}
		it.ID = orNewID(it.ID, "fc_")
	case "function_call_output":
		if it.CallID == "" {
			return invalid(param+".call_id", "function_call_output has no call_id")
		}
		if _, err := outputText(it.Output, param+".output"); err != nil {
			return err
		}
		if it.Status == "" {
			it.Status = "completed"
		}
		it.ID = orNewID(it.ID, "fco_")
	case "reasoning":
		for j, part := range it.Content {
			if part.Type != "reasoning_text" {
				return invalid(fmt.Sprintf("%s.content[%d].type", param, j), "reasoning content part type %q is not supported; only reasoning_text", part.Type)
			}
		}
		if it.Summary == nil {
			it.Summary = []ItemPart{}
		}
		it.ID = orNewID(it.ID, "rs_")
	case "item_reference":
		return invalid(param+".type", "item references are not supported; use previous_response_id")
	case "":
		return invalid(param+".type", "input item has no type")
	default:
		return invalid(param+".type", "input item type %q is not supported; only message, function_call, function_call_output and reasoning", it.Type)
	}
	return nil
}

// contentPartErrors are the input content parts this server refuses, by
// type.
var contentPartErrors = map[string]string{
	"input_image": "image input is not supported by this model",
	"input_file":  "file input is not supported by this model",
	"input_audio": "audio input is not supported by this model",
	"":            "content part has no type",
}

// normalizeMessage checks a message item's role and parts and gives it
// the stored form (an assistant's input_text parts as output_text).
func normalizeMessage(it *Item, param string) error {
	switch it.Role {
	case "user", "system", "developer":
	case "assistant":
		for j := range it.Content {
			if p := &it.Content[j]; p.Type == "input_text" {
				p.Type = "output_text"
			}
		}
	case "":
		return invalid(param+".role", "message has no role")
	default:
		return invalid(param+".role", "invalid role %q (want user, system, developer or assistant)", it.Role)
	}
	for j, part := range it.Content {
		pp := fmt.Sprintf("%s.content[%d].type", param, j)
		switch part.Type {
		case "input_text", "output_text", "refusal":
		default:
			if msg, ok := contentPartErrors[part.Type]; ok {
				return invalid(pp, "%s", msg)
			}
			return invalid(pp, "unsupported content part type %q", part.Type)
		}
		if part.Type == "output_text" && part.Annotations == nil {
			it.Content[j].Annotations, it.Content[j].Logprobs = []json.RawMessage{}, []json.RawMessage{}
		}
	}
	if it.Status == "" {
		it.Status = "completed"
	}
	it.ID = orNewID(it.ID, "msg_")
	return nil
}

// outputText reads a function_call_output's output: a string or input_text parts.
func outputText(raw json.RawMessage, param string) (string, error) {
	var s string
	if isNull(raw) {
		return "", invalid(param, "function_call_output has no output")
	}
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts ItemContent
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(param, "output must be a string or a list of input_text parts")
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		if p.Type != "input_text" {
			return "", invalid(fmt.Sprintf("%s[%d].type", param, j), "output part type %q is not supported; only input_text", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// itemMessages converts normalized items to chat messages: developer is
// system, each function_call an assistant tool call, each output a tool
// message, and a reasoning item the reasoning of the assistant turn after it.
func itemMessages(items []Item) ([]chat.Message, error) {
	out := make([]chat.Message, 0, len(items))
	reasoning := ""
	for _, it := range items {
		switch it.Type {
		case "message":
			role := ChatRole(it.Role)
			texts := make([]string, 0, len(it.Content))
			for _, p := range it.Content {
				texts = append(texts, p.Text)
			}
			m := chat.Message{Role: role, Content: strings.Join(texts, "\n")}
			if role == "assistant" {
				m.ReasoningContent, reasoning = reasoning, ""
			}
			out = append(out, m)
		case "reasoning":
			for _, p := range it.Content {
				reasoning += p.Text
			}
		case "function_call":
			var args json.RawMessage
			if a := strings.TrimSpace(*it.Arguments); a != "" {
				args = json.RawMessage(a)
			}
			out = append(out, chat.Message{Role: "assistant", ReasoningContent: reasoning,
				ToolCalls: []chat.ToolCall{{ID: it.CallID, Name: qualify(it.Namespace, it.Name), Arguments: args}}})
			reasoning = ""
		case "function_call_output":
			text, err := outputText(it.Output, "output")
			if err != nil {
				return nil, err
			}
			out = append(out, chat.Message{Role: "tool", Content: text, ToolCallID: it.CallID})
		}
	}
	return out, nil
}

// truncate renders items after system into a prompt for p's window. With
// auto it is truncate_middle (apiconv.Params.FitChat): the system messages,
// the first and the last user turn stay, older turns go whole, and a
// function_call goes with its outputs; disabled, a prompt over the window
// is the context-length 400.
func truncate(items []Item, system []chat.Message, auto bool, p apiconv.Params, opt chat.Options, maxTokens int) ([]int32, error) {
	msgs, err := itemMessages(items)
	if err != nil {
		return nil, err
	}
	p.SplitTurns(msgs)
	if len(msgs)+len(system) == 0 {
		return nil, invalid("input", "input must contain at least one item")
	}
	pol := overflow.Error
	if auto {
		pol = overflow.TruncateMiddle
	}
	f, err := p.FitChat(append(system, msgs...), opt, "", pol, maxTokens)
	if err != nil {
		return nil, err
	}
	if len(f.Prompt)+1 > p.ContextLen && p.ContextLen > 0 {
		return nil, &inference.ContextLengthError{PromptTokens: len(f.Prompt), MaxTokens: maxTokens, ContextLen: p.ContextLen}
	}
	return f.Prompt, nil
}

func orNewID(id, prefix string) string {
	if id != "" {
		return id
	}
	return apiconv.NewID(prefix)
}

// FinishResponse fills in g.Response from the engine's result: the output
// items (a message, or function_call items when the text parses as calls of
// the offered tools), status, usage and output_text.
func FinishResponse(g *ResponseGeneration, res inference.Result) *Response {
	resp := g.Response
	text, finish := "", res.Finish
	if len(res.Choices) > 0 {
		text, finish = res.Choices[0].Text, res.Choices[0].Finish
		if r := res.Choices[0].Reasoning; r != "" {
			resp.Output = append(resp.Output, reasoningItem(apiconv.NewID("rs_"), r))
		}
	}
	if content, calls, ok := g.parseCalls(text, finish); ok {
		if content != "" {
			resp.Output = append(resp.Output, messageItem(apiconv.NewID("msg_"), content, "completed"))
		}
		for _, c := range calls {
			resp.Output = append(resp.Output, g.functionCallItem(c))
		}
	} else {
		resp.Output = append(resp.Output, messageItem(apiconv.NewID("msg_"), text, "completed"))
	}
	setStatus(resp, finish, res.Usage)
	return resp
}

// parseCalls parses text, which ended with f, as content and calls of the
// offered tools; with parallel_tool_calls false only the first call is
// kept, as OpenAI guarantees at most one. A forced call that the token
// limit cut off is read as far as it came.
func (g *ResponseGeneration) parseCalls(text string, f inference.FinishReason) (string, []chat.ToolCall, bool) {
	return apiconv.ParseReply(g.ToolFormat, text, g.callable(), g.Response.ParallelToolCalls, g.cut(f))
}

func setStatus(resp *Response, f inference.FinishReason, u inference.Usage) {
	resp.Status = "completed"
	if finishReason(f) == "length" {
		resp.Status = "incomplete"
		resp.IncompleteDetails = &IncompleteDetails{Reason: "max_output_tokens"}
		for i := range resp.Output {
			resp.Output[i].Status = "incomplete"
		}
	}
	resp.Usage = &ResponseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		TotalTokens: u.PromptTokens + u.CompletionTokens}
	resp.Usage.InputTokensDetails.CachedTokens = u.CachedTokens
	resp.Usage.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	resp.OutputText = ""
	for _, it := range resp.Output {
		for _, p := range it.Content {
			if p.Type == "output_text" {
				resp.OutputText += p.Text
			}
		}
	}
}

// reasoningItem is the reasoning output item of text, in the shape OpenAI
// gives the raw reasoning of open-weight models (gpt-oss servers): no
// summary, the text as one reasoning_text part.
func reasoningItem(id, text string) Item {
	return Item{Type: "reasoning", ID: id, Summary: []ItemPart{}, Content: ItemContent{{Type: "reasoning_text", Text: text}}}
}

func messageItem(id, text, status string) Item {
	return Item{Type: "message", ID: id, Status: status, Role: "assistant",
		Content: ItemContent{{Type: "output_text", Text: text, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}}}}
}

// functionCallItem is the function_call item of a parsed call; a call of
// a namespace's function names it as OpenAI does, by namespace and name.
func (g *ResponseGeneration) functionCallItem(c chat.ToolCall) Item {
	args := string(c.Arguments)
	it := Item{Type: "function_call", ID: apiconv.NewID("fc_"), Status: "completed", CallID: c.ID, Name: c.Name, Arguments: &args}
	if !json.Valid(c.Arguments) { // a call the token limit cut
		it.Status = "incomplete"
	}
	if q, ok := g.namespaced[c.Name]; ok {
		it.Namespace, it.Name = q.namespace, q.name
	}
	return it
}
