package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/tokenizer"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Say hello.")},
		Temperature: openai.Float(0),
		MaxTokens:   openai.Int(12),
	}
}

// TestChat compares a non-streamed greedy chat completion with the same
// request streamed and gathered by the SDK's accumulator.
func TestChat(t *testing.T) {
	s := sharedServer(t)
	c := s.client()
	ctx := context.Background()
	resp, err := c.Chat.Completions.New(ctx, chatParams(s.Model))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "chatcmpl-") || resp.Object != "chat.completion" || resp.Model != s.Model ||
		len(resp.Choices) != 1 || resp.Choices[0].Message.Role != "assistant" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "length" && ch.FinishReason != "stop" {
		t.Fatalf("finish_reason %q", ch.FinishReason)
	}
	u := resp.Usage
	if u.PromptTokens == 0 || u.CompletionTokens == 0 || u.CompletionTokens > 12 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Fatalf("usage %s", u.RawJSON())
	}

	p := chatParams(s.Model)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator rejected chunk %s", stream.Current().RawJSON())
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 || len(acc.Choices) != 1 {
		t.Fatalf("%d chunks, %+v", chunks, acc.ChatCompletion)
	}
	if got := acc.Choices[0]; got.Message.Content != ch.Message.Content || got.FinishReason != ch.FinishReason {
		t.Fatalf("streamed %q (%s), non-streamed %q (%s)", got.Message.Content, got.FinishReason, ch.Message.Content, ch.FinishReason)
	}
	if acc.Usage.CompletionTokens != u.CompletionTokens || acc.Usage.PromptTokens != u.PromptTokens {
		t.Fatalf("stream usage %+v, want %+v", acc.Usage, u)
	}

	// An alias resolves to the served model.
	p = chatParams("gpt-4o-mini")
	if resp, err := c.Chat.Completions.New(ctx, p); err != nil || resp.Choices[0].Message.Content != ch.Message.Content {
		t.Fatalf("alias: %v", err)
	}
}

// TestCompletionsTokenIDs checks that a token-id prompt is used exactly and
// that the greedy continuation is the same non-streamed, streamed, and when
// the prompt is extended by the first generated token.
func TestCompletionsTokenIDs(t *testing.T) {
	s := sharedServer(t)
	c := s.client()
	ctx := context.Background()
	prompt := []int64{128000, 791, 4062, 14198, 39935}
	params := func(p []int64, n int64) openai.CompletionNewParams {
		return openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(s.Model),
			Prompt:      openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: p},
			Temperature: openai.Float(0), MaxTokens: openai.Int(n)}
	}
	resp, err := c.Completions.New(ctx, params(prompt, 8), option.WithJSONSet("return_token_ids", true))
	if err != nil {
		t.Fatal(err)
	}
	var extra struct {
		PromptTokenIDs []int64 `json:"prompt_token_ids"`
		Choices        []struct {
			TokenIDs []int64 `json:"token_ids"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(resp.RawJSON()), &extra); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(extra.PromptTokenIDs, prompt) {
		t.Fatalf("prompt_token_ids %v, sent %v (no BOS may be added)", extra.PromptTokenIDs, prompt)
	}
	ids := extra.Choices[0].TokenIDs
	if len(ids) == 0 || resp.Usage.PromptTokens != int64(len(prompt)) || resp.Object != "text_completion" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	tok, err := tokenizer.Load(filepath.Join(root, "testdata", "tokenizer", "llama3.2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ids32 := make([]int32, len(ids))
	for i, id := range ids {
		ids32[i] = int32(id)
	}
	text := resp.Choices[0].Text
	if want := tok.Decode(ids32, true); !strings.HasPrefix(want, strings.TrimRight(text, "\ufffd")) {
		t.Fatalf("text %q is not the decoded token_ids %q", text, want)
	}

	// Streamed: the same text.
	stream := c.Completions.NewStreaming(ctx, params(prompt, 8))
	var streamed strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			streamed.WriteString(ch.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if streamed.String() != text {
		t.Fatalf("streamed %q, non-streamed %q", streamed.String(), text)
	}

	// The prompt extended by the first generated token continues the same way.
	if len(ids) >= 2 {
		resp2, err := c.Completions.New(ctx, params(append(slices.Clone(prompt), ids[0]), int64(len(ids)-1)),
			option.WithJSONSet("return_token_ids", true))
		if err != nil {
			t.Fatal(err)
		}
		if got := choiceOf(t, resp2.RawJSON()).Choices[0].TokenIDs; !slices.Equal(got, ids[1:]) {
			t.Fatalf("extended prompt gave %v, want %v", got, ids[1:])
		}
	}
}

func TestErrors(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	checkErrors(t, []errorCase{
		{"bad temperature", func() error {
			c := s.client()
			p := chatParams(s.Model)
			p.Temperature = openai.Float(3)
			_, err := c.Chat.Completions.New(ctx, p)
			return err
		}, 400, "", "temperature"},
		{"unknown model", func() error {
			c := s.client()
			_, err := c.Chat.Completions.New(ctx, chatParams("no-such-model"))
			return err
		}, 404, "model_not_found", "model"},
		{"wrong api key", func() error {
			c := s.client(option.WithAPIKey("sk-wrong"))
			_, err := c.Chat.Completions.New(ctx, chatParams(s.Model))
			return err
		}, 401, "invalid_api_key", ""},
		{"token id out of range", func() error {
			c := s.client()
			_, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(s.Model),
				Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{128000, 1 << 20}}})
			return err
		}, 400, "", "prompt"},
		{"tool_choice required without tools", func() error {
			c := s.client()
			p := chatParams(s.Model)
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
			_, err := c.Chat.Completions.New(ctx, p)
			return err
		}, 400, "", "tool_choice"},
	})
}

func weatherTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("Get the current weather in a city"),
		Parameters: openai.FunctionParameters{"type": "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	})
}

// TestToolCallRoundTrip scripts the model (HOSTSIM_SCRIPT) to emit a
// get_weather call, checks the parsed call, and sends the result back.
func TestToolCallRoundTrip(t *testing.T) {
	binary(t)
	hostsimLibs(t)
	tok, err := tokenizer.Load(filepath.Join(root, "testdata", "tokenizer", "llama3.2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(`{"name": "get_weather", "parameters": {"city": "Paris"}}`, false, false)
	script := idScript(t, append(ids, tok.Specials().EOT)...)
	s, err := start(t, "HOSTSIM_SCRIPT="+script)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c := s.client()
	ctx := context.Background()
	p := chatParams(s.Model)
	p.MaxTokens = openai.Int(64)
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
	p.Tools = []openai.ChatCompletionToolUnionParam{weatherTool()}
	resp, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.Content != "" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	call := ch.Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris"}` || !strings.HasPrefix(call.ID, "call_") {
		t.Fatalf("tool call %s", call.RawJSON())
	}

	// Streamed, the script (which cycles) produces the same call as deltas.
	stream := c.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	var finished bool
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("rejected chunk %s", stream.Current().RawJSON())
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = tc.Name == "get_weather" && tc.Arguments == `{"city":"Paris"}`
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !finished || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("streamed tool call: %+v", acc.Choices[0])
	}

	// Send the result back: the conversation renders and generates.
	p.Messages = append(p.Messages, ch.Message.ToParam(), openai.ToolMessage(`{"temperature_c": 18}`, call.ID))
	p.MaxTokens = openai.Int(4)
	if _, err := c.Chat.Completions.New(ctx, p); err != nil {
		t.Fatalf("tool result round trip: %v", err)
	}
}
