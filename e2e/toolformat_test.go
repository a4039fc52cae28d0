package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/tokenizer"
)

// hermesReply is a Qwen-style reply: content, then two <tool_call> blocks.
const hermesReply = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n" +
	"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>"

// hermesCalls are hermesReply's calls as name=arguments.
var hermesCalls = []string{`get_weather={"city":"Paris"}`, `get_time={"tz":"CET"}`}

const hermesTools = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":10}},"required":["city"],"additionalProperties":false}}},` +
	`{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"enum":["UTC","CET"]}},"required":["tz"],"additionalProperties":false}}}]`

// hermesServer serves the tiny model with model.tool_parser hermes; with a
// reply the model is scripted (HOSTSIM_SCRIPT) to say it, then end its
// turn, on every request.
func hermesServer(t *testing.T, reply string) *hexserve {
	t.Helper()
	cfg := config{Bundle: bundle(t), Server: fmt.Sprintf("  api_keys: [%q]", apiKey), Model: "  tool_parser: hermes"}.write(t, hostsimLibs(t))
	var env []string
	if reply != "" {
		tok, err := tokenizer.Load(filepath.Join(root, "testdata", "tokenizer", "llama3.2", "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		script := idScript(t, append(tok.Encode(reply, false, false), tok.Specials().EOT)...)
		env = append(env, "HOSTSIM_SCRIPT="+script)
	}
	s := serve(t, cfg, true, env...)
	c := s.client()
	models, err := c.Models.List(context.Background())
	if err != nil || len(models.Data) != 1 {
		t.Fatalf("list models: %v", err)
	}
	s.Model = models.Data[0].ID
	return s
}

// authPost sends body to path with the key and returns the 200 reply's body.
func (s *hexserve) authPost(t *testing.T, path, body string) string {
	t.Helper()
	r := s.do(t, "POST", path, body, "Content-Type", "application/json", "Authorization", "Bearer "+apiKey)
	if r.Status != 200 {
		t.Fatalf("%s: %d %s", path, r.Status, r.Body)
	}
	return r.Body
}

// compact is the JSON text v as compact JSON.
func compact(t *testing.T, v any) string {
	t.Helper()
	if s, ok := v.(string); ok {
		v = json.RawMessage(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("arguments %v: %v", v, err)
	}
	return string(b)
}

// TestHermesToolCallsEveryAPI scripts the model to write content and two
// Hermes <tool_call> blocks, served with tool_parser hermes: every API
// returns the content and the two calls in its own shape, streamed and not.
func TestHermesToolCallsEveryAPI(t *testing.T) {
	binary(t)
	s := hermesServer(t, hermesReply)
	chat := fmt.Sprintf(`{"model":%q,"max_tokens":200,"messages":[{"role":"user","content":"Weather and time in Paris?"}],"tools":%s`, s.Model, hermesTools)

	t.Run("chat", func(t *testing.T) {
		var resp struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content   *string
					ToolCalls []struct {
						ID, Type string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		json.Unmarshal([]byte(s.authPost(t, "/v1/chat/completions", chat+"}")), &resp)
		m := resp.Choices[0]
		var got []string
		for _, c := range m.Message.ToolCalls {
			if !strings.HasPrefix(c.ID, "call_") || c.Type != "function" {
				t.Errorf("call %+v", c)
			}
			got = append(got, c.Function.Name+"="+c.Function.Arguments)
		}
		if m.FinishReason != "tool_calls" || m.Message.Content == nil || *m.Message.Content != "Let me check." || !slices.Equal(got, hermesCalls) {
			t.Errorf("finish %q content %v calls %q", m.FinishReason, m.Message.Content, got)
		}
	})

	t.Run("chat stream", func(t *testing.T) {
		content, finish := "", ""
		ids, names, args := map[int]string{}, map[int]string{}, map[int]string{}
		for _, f := range dataLines(t, s.authPost(t, "/v1/chat/completions", chat+`,"stream":true}`)) {
			ch := f["choices"].([]any)[0].(map[string]any)
			d := ch["delta"].(map[string]any)
			if c, ok := d["content"].(string); ok {
				content += c
			}
			for _, tc := range asList(d["tool_calls"]) {
				tc := tc.(map[string]any)
				i := int(tc["index"].(float64))
				fn := tc["function"].(map[string]any)
				if id, ok := tc["id"].(string); ok { // the call's first delta: id, type and name
					if ids[i] != "" || tc["type"] != "function" || fn["name"] == nil {
						t.Errorf("call %d head %v", i, tc)
					}
					ids[i], names[i] = id, fn["name"].(string)
				}
				if a, ok := fn["arguments"].(string); ok {
					args[i] += a
				}
			}
			if r, ok := ch["finish_reason"].(string); ok {
				finish = r
			}
		}
		var got []string
		for i := range len(ids) {
			got = append(got, names[i]+"="+args[i])
		}
		if content != "Let me check." || finish != "tool_calls" || !slices.Equal(got, hermesCalls) {
			t.Errorf("content %q finish %q calls %q", content, finish, got)
		}
	})

	responses := fmt.Sprintf(`{"model":%q,"max_output_tokens":200,"input":"Weather and time in Paris?","tools":[`+
		`{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}},`+
		`{"type":"function","name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}]`, s.Model)
	t.Run("responses", func(t *testing.T) {
		var resp struct {
			Output []struct {
				Type, Name, Arguments string
				Content               []struct{ Text string }
			}
		}
		json.Unmarshal([]byte(s.authPost(t, "/v1/responses", responses+"}")), &resp)
		var got []string
		text := ""
		for _, it := range resp.Output {
			switch it.Type {
			case "message":
				text += it.Content[0].Text
			case "function_call":
				got = append(got, it.Name+"="+it.Arguments)
			}
		}
		if text != "Let me check." || !slices.Equal(got, hermesCalls) {
			t.Errorf("output %+v", resp.Output)
		}
	})

	t.Run("responses stream", func(t *testing.T) {
		var got []string
		text := ""
		for _, e := range dataLines(t, s.authPost(t, "/v1/responses", responses+`,"stream":true}`)) {
			switch e["type"] {
			case "response.output_text.delta":
				text += e["delta"].(string)
			case "response.function_call_arguments.done":
				got = append(got, e["name"].(string)+"="+e["arguments"].(string))
			}
		}
		if text != "Let me check." || !slices.Equal(got, hermesCalls) {
			t.Errorf("text %q calls %q", text, got)
		}
	})

	messages := fmt.Sprintf(`{"model":%q,"max_tokens":200,"messages":[{"role":"user","content":"Weather and time in Paris?"}],"tools":[`+
		`{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},`+
		`{"name":"get_time","input_schema":{"type":"object","properties":{"tz":{"type":"string"}}}}]`, s.Model)
	t.Run("messages", func(t *testing.T) {
		var resp struct {
			StopReason string `json:"stop_reason"`
			Content    []struct {
				Type, Text, ID, Name string
				Input                json.RawMessage
			}
		}
		json.Unmarshal([]byte(s.authPost(t, "/v1/messages", messages+"}")), &resp)
		var got []string
		text := ""
		for _, b := range resp.Content {
			switch b.Type {
			case "text":
				text += b.Text
			case "tool_use":
				if !strings.HasPrefix(b.ID, "toolu_") {
					t.Errorf("id %q", b.ID)
				}
				got = append(got, b.Name+"="+compact(t, b.Input))
			}
		}
		if resp.StopReason != "tool_use" || text != "Let me check." || !slices.Equal(got, hermesCalls) || resp.Content[0].Type != "text" {
			t.Errorf("stop %q content %+v", resp.StopReason, resp.Content)
		}
	})

	t.Run("messages stream", func(t *testing.T) {
		names, inputs := map[int]string{}, map[int]string{}
		text, stop := "", ""
		for _, e := range dataLines(t, s.authPost(t, "/v1/messages", messages+`,"stream":true}`)) {
			i, _ := e["index"].(float64)
			if b, ok := e["content_block"].(map[string]any); ok && b["type"] == "tool_use" {
				names[int(i)] = b["name"].(string)
			}
			if d, ok := e["delta"].(map[string]any); ok {
				switch d["type"] {
				case "text_delta":
					text += d["text"].(string)
				case "input_json_delta":
					inputs[int(i)] += d["partial_json"].(string)
				}
				if r, ok := d["stop_reason"].(string); ok {
					stop = r
				}
			}
		}
		var got []string
		for i := 1; i <= len(names); i++ { // block 0 is the text
			got = append(got, names[i]+"="+compact(t, inputs[i]))
		}
		if text != "Let me check." || stop != "tool_use" || !slices.Equal(got, hermesCalls) {
			t.Errorf("text %q stop %q calls %q", text, stop, got)
		}
	})

	ollama := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Weather and time in Paris?"}],"options":{"num_predict":200},"tools":%s`, s.Model, hermesTools)
	type ollamaLine struct {
		Message struct {
			Content   string
			ToolCalls []struct {
				Function struct {
					Name      string
					Arguments json.RawMessage
				}
			} `json:"tool_calls"`
		}
	}
	ollamaCalls := func(lines []ollamaLine) (string, []string) {
		text := ""
		var got []string
		for _, l := range lines {
			text += l.Message.Content
			for _, c := range l.Message.ToolCalls {
				got = append(got, c.Function.Name+"="+compact(t, c.Function.Arguments))
			}
		}
		return text, got
	}
	t.Run("ollama", func(t *testing.T) {
		var l ollamaLine
		json.Unmarshal([]byte(s.authPost(t, "/api/chat", ollama+`,"stream":false}`)), &l)
		if text, got := ollamaCalls([]ollamaLine{l}); text != "Let me check." || !slices.Equal(got, hermesCalls) {
			t.Errorf("content %q calls %q", text, got)
		}
	})

	t.Run("ollama stream", func(t *testing.T) {
		var lines []ollamaLine
		for _, raw := range strings.Split(strings.TrimSpace(s.authPost(t, "/api/chat", ollama+`,"stream":true}`)), "\n") {
			var l ollamaLine
			if err := json.Unmarshal([]byte(raw), &l); err != nil {
				t.Fatalf("line %q: %v", raw, err)
			}
			lines = append(lines, l)
		}
		if text, got := ollamaCalls(lines); text != "Let me check." || !slices.Equal(got, hermesCalls) {
			t.Errorf("content %q calls %q", text, got)
		}
	})
}

// TestHermesForcedCall: with tool_parser hermes, tool_choice "required"
// (and Anthropic's "any") makes the real tiny model write a Hermes call
// through the grammar, which comes back as a call whose arguments
// validate; cut by max_tokens it is still a call.
func TestHermesForcedCall(t *testing.T) {
	binary(t)
	s := hermesServer(t, "")
	v := validator(t, `{"type":"object","properties":{"city":{"type":"string","maxLength":10}},"required":["city"],"additionalProperties":false}`)
	calls := 0
	for seed := range 6 {
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Weather?"}],"temperature":1,"seed":%d,"max_tokens":80,"tools":%s,"tool_choice":"required","parallel_tool_calls":false}`,
			s.Model, seed, hermesTools)
		c := s.firstChoice(t, body)
		if c.FinishReason == "length" {
			continue
		}
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
			t.Errorf("seed %d: finish %q, %d calls, content %q", seed, c.FinishReason, len(c.Message.ToolCalls), c.Message.Content)
			continue
		}
		calls++
		switch f := c.Message.ToolCalls[0].Function; f.Name {
		case "get_weather":
			if err := validates(v, f.Arguments); err != nil {
				t.Errorf("seed %d: arguments %s: %v", seed, f.Arguments, err)
			}
		case "get_time":
			if f.Arguments != `{"tz":"UTC"}` && f.Arguments != `{"tz":"CET"}` {
				t.Errorf("seed %d: arguments %s", seed, f.Arguments)
			}
		default:
			t.Errorf("seed %d: called %q", seed, f.Name)
		}
	}
	if calls == 0 {
		t.Error("no call finished")
	}

	var m struct {
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Name string }
	}
	json.Unmarshal([]byte(s.authPost(t, "/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":80,"temperature":0,"messages":[{"role":"user","content":"Time?"}],"tool_choice":{"type":"tool","name":"get_time"},`+
		`"tools":[{"name":"get_time","input_schema":{"type":"object","properties":{"tz":{"enum":["UTC","CET"]}},"required":["tz"],"additionalProperties":false}}]}`, s.Model))), &m)
	if m.StopReason != "tool_use" || len(m.Content) != 1 || m.Content[0].Name != "get_time" {
		t.Errorf("messages: %+v", m)
	}

	for _, max := range []int{1, 3, 12} { // cut in the marker, in the name, in the arguments
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Weather?"}],"temperature":0,"max_tokens":%d,"tool_choice":"required",`+
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`, s.Model, max)
		c := s.firstChoice(t, body)
		if c.FinishReason != "length" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "get_weather" {
			t.Errorf("max_tokens %d: finish %q calls %+v content %q", max, c.FinishReason, c.Message.ToolCalls, c.Message.Content)
		}
	}
}
