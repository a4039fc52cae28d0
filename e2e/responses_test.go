package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/tokenizer"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// longInstructions put the system block past the tiny bundle's 128-token
// prefill window. Its contract (qhexrt) prefills only from position 0, so
// recomputing a conversation costs a prefill call plus a decode step per
// token beyond the window, more than the decode steps of a continuation's new
// tokens: the planner reuses the cached prefix whatever the measured costs,
// and cached_tokens is deterministic. (With a short prompt one prefill call
// can be cheaper than reusing the prefix, and the engine rightly recomputes.)
var longInstructions = "Be brief." + strings.Repeat(" You are a helpful assistant.", 24)

func responseParams(model, input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           model,
		Instructions:    openai.String(longInstructions),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		Temperature:     openai.Float(0),
		MaxOutputTokens: openai.Int(16),
	}
}

// accumulate reads a Responses stream through the SDK's event accumulator,
// which rejects events for items it was not told about, and returns its
// snapshot and the terminal response.
func accumulate(t *testing.T, c openai.Client, p responses.ResponseNewParams) (responses.ResponseAccumulatorSnapshot, *responses.Response) {
	t.Helper()
	stream := c.Responses.NewStreaming(context.Background(), p)
	var acc responses.ResponseAccumulator
	n := 0
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(n) {
			t.Fatalf("event %d has sequence_number %d: %s", n, ev.SequenceNumber, ev.RawJSON())
		}
		n++
		var union responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &union); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddEvent(union); err != nil {
			t.Fatalf("the accumulator rejected %s: %v", ev.RawJSON(), err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	final, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatal(err)
	}
	return acc.Snapshot(), final
}

// TestResponses runs the Responses API through openai-go: create, stream,
// continue with previous_response_id (the prefix cache serves the earlier
// turn), list input items, retrieve, delete, and typed errors.
func TestResponses(t *testing.T) {
	s := sharedServer(t)
	c := s.client()
	ctx := context.Background()
	resp, err := c.Responses.New(ctx, responseParams(s.Model, "Say hello."))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "resp_") || resp.Model != s.Model || len(resp.Output) != 1 ||
		resp.Output[0].Type != "message" || resp.OutputText() == "" || resp.Instructions.OfString != longInstructions {
		t.Fatalf("response %s", resp.RawJSON())
	}
	if resp.Status != "completed" && !(resp.Status == "incomplete" && resp.IncompleteDetails.Reason == "max_output_tokens") {
		t.Fatalf("status %s: %s", resp.Status, resp.RawJSON())
	}
	u := resp.Usage
	if u.InputTokens == 0 || u.OutputTokens == 0 || u.OutputTokens > 16 || u.TotalTokens != u.InputTokens+u.OutputTokens {
		t.Fatalf("usage %s", u.RawJSON())
	}

	// text.format goes through the constrained decoder: the random-weight
	// model can only write the object, and the schema makes it short.
	jp := responseParams(s.Model, "Answer in JSON.")
	jp.MaxOutputTokens = openai.Int(256)
	jp.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
		OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "answer", Strict: openai.Bool(true),
			Schema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
				"required": []string{"ok"}, "additionalProperties": false}}}}
	jr, err := c.Responses.New(ctx, jp)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct{ OK *bool }
	if jr.Status != "completed" || json.Unmarshal([]byte(jr.OutputText()), &obj) != nil || obj.OK == nil {
		t.Fatalf("text.format json_schema: %q", jr.OutputText())
	}

	snap, final := accumulate(t, c, responseParams(s.Model, "Say hello."))
	if snap.TerminalEvent != "response.completed" && snap.TerminalEvent != "response.incomplete" {
		t.Fatalf("terminal event %q", snap.TerminalEvent)
	}
	if snap.OutputText() != resp.OutputText() || final.OutputText() != resp.OutputText() || final.Status != resp.Status ||
		final.Usage.OutputTokens != u.OutputTokens {
		t.Fatalf("streamed %q (final %s), want %q", snap.OutputText(), final.RawJSON(), resp.OutputText())
	}

	p := responseParams(s.Model, "And once more.")
	p.PreviousResponseID = openai.String(resp.ID)
	next, err := c.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if next.PreviousResponseID != resp.ID || next.Usage.InputTokens <= u.TotalTokens ||
		next.Usage.InputTokensDetails.CachedTokens < u.InputTokens {
		t.Fatalf("continuation usage %s (first turn %s)", next.Usage.RawJSON(), u.RawJSON())
	}
	t.Logf("turn 2: %d input tokens, %d cached", next.Usage.InputTokens, next.Usage.InputTokensDetails.CachedTokens)

	items, err := c.Responses.InputItems.List(ctx, next.ID, responses.InputItemListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items.Data) != 1 || items.Data[0].Type != "message" || items.Data[0].Role != "user" {
		t.Fatalf("input items %s", items.RawJSON())
	}
	got, err := c.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != resp.OutputText() {
		t.Fatalf("get: %v %+v", err, got)
	}
	if err := c.Responses.Delete(ctx, resp.ID); err != nil {
		t.Fatal(err)
	}

	checkErrors(t, []errorCase{
		{"get deleted", func() error { _, err := c.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{}); return err }, 404, "", ""},
		{"delete deleted", func() error { return c.Responses.Delete(ctx, resp.ID) }, 404, "", ""},
		{"continue deleted", func() error {
			p := responseParams(s.Model, "Hi")
			p.PreviousResponseID = openai.String(resp.ID)
			_, err := c.Responses.New(ctx, p)
			return err
		}, 404, "previous_response_not_found", "previous_response_id"},
		{"bad temperature", func() error {
			p := responseParams(s.Model, "Hi")
			p.Temperature = openai.Float(3)
			_, err := c.Responses.New(ctx, p)
			return err
		}, 400, "", "temperature"},
		{"json_schema without a name", func() error {
			p := responseParams(s.Model, "Hi")
			p.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
				OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Schema: map[string]any{"type": "object"}}}}
			_, err := c.Responses.New(ctx, p)
			return err
		}, 400, "", "text.format.name"},
		{"wrong api key", func() error {
			wrong := s.client(option.WithAPIKey("sk-wrong"))
			_, err := wrong.Responses.New(ctx, responseParams(s.Model, "Hi"))
			return err
		}, 401, "invalid_api_key", ""},
	})
}

// scriptFile writes a HOSTSIM_SCRIPT of the given texts, each followed by
// end-of-turn: the k-th request that ends at end-of-turn gets text k mod n.
func scriptFile(t *testing.T, texts ...string) string {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Join(root, "testdata", "tokenizer", "llama3.2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, text := range texts {
		ids = append(append(ids, tok.Encode(text, false, false)...), tok.Specials().EOT)
	}
	return idScript(t, ids...)
}

// idScript writes a HOSTSIM_SCRIPT of ids (hostsim's scripted model offers
// them in turn) and returns its path.
func idScript(t *testing.T, ids ...int32) string {
	t.Helper()
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(strconv.Itoa(int(id)) + " ")
	}
	script := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(script, []byte(sb.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return script
}

// TestResponsesFunctionCall scripts the model to call get_weather and then
// answer: function_call → function_call_output → final text, non-streamed
// and streamed.
func TestResponsesFunctionCall(t *testing.T) {
	binary(t)
	hostsimLibs(t)
	const answer = "It is sunny in Paris."
	s, err := start(t, "HOSTSIM_SCRIPT="+scriptFile(t, `{"name": "get_weather", "parameters": {"city": "Paris"}}`, answer))
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	c := s.client()
	ctx := context.Background()
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
		Name: "get_weather", Description: openai.String("Get the current weather in a city"), Strict: openai.Bool(true),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required": []string{"city"}, "additionalProperties": false}}}
	ask := func() responses.ResponseNewParams {
		p := responseParams(s.Model, "What is the weather in Paris?")
		p.MaxOutputTokens = openai.Int(64)
		p.Tools = []responses.ToolUnionParam{tool}
		return p
	}
	reply := func(prev, callID string) responses.ResponseNewParams {
		p := ask()
		p.PreviousResponseID = openai.String(prev)
		out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temperature_c": 18, "sky": "clear"}`)
		out.OfFunctionCallOutput.CallID = openai.String(callID)
		p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}
		return p
	}

	resp, err := c.Responses.New(ctx, ask())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	call := resp.Output[0].AsFunctionCall()
	if call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || !strings.HasPrefix(call.CallID, "call_") {
		t.Fatalf("call %s", call.RawJSON())
	}
	final, err := c.Responses.New(ctx, reply(resp.ID, call.CallID))
	if err != nil {
		t.Fatal(err)
	}
	if final.OutputText() != answer || final.Status != "completed" || final.Usage.InputTokensDetails.CachedTokens == 0 {
		t.Fatalf("final %s", final.RawJSON())
	}

	// Streamed: the same round trip through the accumulator.
	snap, streamed := accumulate(t, c, ask())
	if len(snap.Output) != 1 || snap.Output[0].Type != "function_call" || snap.Output[0].Name != "get_weather" ||
		snap.Output[0].Arguments != `{"city":"Paris"}` {
		t.Fatalf("streamed call %+v", snap.Output)
	}
	snap, _ = accumulate(t, c, reply(streamed.ID, snap.Output[0].CallID))
	if snap.OutputText() != answer || snap.TerminalEvent != "response.completed" {
		t.Fatalf("streamed final %q %s", snap.OutputText(), snap.TerminalEvent)
	}
}

// TestResponsesPersist checks that with responses.dir a stored response
// survives a restart and can still be continued.
func TestResponsesPersist(t *testing.T) {
	libs := hostsimLibs(t)
	dir := t.TempDir()
	cfg := config{Bundle: bundle(t), Extra: "responses:\n  dir: " + strconv.Quote(dir) + "\n  max_count: 10\n"}.write(t, libs)
	ctx := context.Background()
	first := serve(t, cfg, true)
	c := first.client()
	models, err := c.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	model := models.Data[0].ID
	resp, err := c.Responses.New(ctx, responseParams(model, "Remember me."))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	second := serve(t, cfg, true)
	c = second.client()
	got, err := c.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != resp.OutputText() {
		t.Fatalf("after restart: %v %+v", err, got)
	}
	p := responseParams(model, "Who am I?")
	p.PreviousResponseID = openai.String(resp.ID)
	next, err := c.Responses.New(ctx, p)
	if err != nil || next.Usage.InputTokens <= resp.Usage.TotalTokens {
		t.Fatalf("continuation after restart: %v %+v", err, next)
	}
}
