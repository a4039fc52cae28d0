package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// structuredSchemas have bounded strings, numbers and arrays, so that the
// random-weight model (whose text is gibberish) can only produce valid
// values by way of the constraint.
var structuredSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120},"ok":{"type":"boolean"}},"required":["name","age","ok"],"additionalProperties":false}`,
	`{"type":"array","minItems":1,"maxItems":3,"items":{"type":"number","minimum":-1,"maximum":1}}`,
	`{"type":"object","properties":{"color":{"enum":["red","green","blue"]},"tags":{"type":"array","maxItems":2,"items":{"type":"string","maxLength":4}}},"required":["color","tags"],"additionalProperties":false}`,
	`{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},"ip":{"type":"string","format":"ipv6","maxLength":12},"mail":{"type":"string","format":"email","maxLength":12}},"required":["code","ip","mail"],"additionalProperties":false}`,
}

func validator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validates(s *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

func (s *hexserve) chat(t *testing.T, body string) reply {
	t.Helper()
	return s.do(t, "POST", "/v1/chat/completions", body, "Content-Type", "application/json", "Authorization", "Bearer "+apiKey)
}

// firstChoice posts a chat completion that must succeed and returns its
// first choice.
func (s *hexserve) firstChoice(t *testing.T, body string) chatChoice {
	t.Helper()
	r := s.chat(t, body)
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var resp struct{ Choices []chatChoice }
	if err := json.Unmarshal([]byte(r.Body), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) == 0 {
		t.Fatalf("no choices: %s", r.Body)
	}
	return resp.Choices[0]
}

type chatChoice struct {
	Message struct {
		Content   string `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// streamed concatenates the content deltas of an SSE chat stream.
func streamed(t *testing.T, body string) (string, string) {
	t.Helper()
	var text strings.Builder
	finish := ""
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("bad frame %q: %v", data, err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	return text.String(), finish
}

// TestStructuredOutputs: with temperature 1 and 20 seeds per schema, every
// output that finishes with "stop" validates, and streaming gives the same
// text.
func TestStructuredOutputs(t *testing.T) {
	s := sharedServer(t)
	for i, schema := range structuredSchemas {
		v := validator(t, schema)
		stops := 0
		for seed := range 20 {
			body := func(stream bool) string {
				return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Give me JSON."}],"temperature":1,"seed":%d,"max_tokens":80,"stream":%v,`+
					`"response_format":{"type":"json_schema","json_schema":{"name":"s%d","strict":true,"schema":%s}}}`, s.Model, seed, stream, i, schema)
			}
			c := s.firstChoice(t, body(false))
			switch c.FinishReason {
			case "stop":
				stops++
				if err := validates(v, c.Message.Content); err != nil {
					t.Errorf("schema %d seed %d: %q does not validate: %v", i, seed, c.Message.Content, err)
				}
			case "length":
			default:
				t.Errorf("schema %d seed %d: finish %q", i, seed, c.FinishReason)
			}
			rs := s.chat(t, body(true))
			text, finish := streamed(t, rs.Body)
			if text != c.Message.Content || finish != c.FinishReason {
				t.Errorf("schema %d seed %d: stream %q (%s), whole %q (%s)", i, seed, text, finish, c.Message.Content, c.FinishReason)
			}
		}
		t.Logf("schema %d: %d of 20 finished with stop", i, stops)
		if stops == 0 {
			t.Errorf("schema %d: no output finished", i)
		}
	}
}

// TestForcedToolCalls: tool_choice "required" and a named function make the
// model call a tool whose arguments validate; the named call's
// finish_reason is "stop", as OpenAI gives.
func TestForcedToolCalls(t *testing.T) {
	s := sharedServer(t)
	params := `{"type":"object","properties":{"city":{"type":"string","maxLength":10},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`
	v := validator(t, params)
	tools := `[{"type":"function","function":{"name":"get_weather","strict":true,"parameters":` + params + `}},` +
		`{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"enum":["UTC","CET"]}},"required":["tz"],"additionalProperties":false}}}]`
	calls := 0
	for _, choice := range []string{`"required"`, `{"type":"function","function":{"name":"get_weather"}}`} {
		for seed := range 10 {
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Weather?"}],"temperature":1,"seed":%d,"max_tokens":80,"tools":%s,"tool_choice":%s,"parallel_tool_calls":false}`,
				s.Model, seed, tools, choice)
			c := s.firstChoice(t, body)
			if c.FinishReason == "length" {
				continue
			}
			// A named tool_choice's call ends with "stop", as OpenAI's does.
			if want := map[bool]string{true: "tool_calls", false: "stop"}[choice == `"required"`]; c.FinishReason != want || len(c.Message.ToolCalls) != 1 {
				t.Errorf("%s seed %d: finish %q, %d calls, content %q", choice, seed, c.FinishReason, len(c.Message.ToolCalls), c.Message.Content)
				continue
			}
			calls++
			f := c.Message.ToolCalls[0].Function
			switch {
			case f.Name == "get_weather":
				if err := validates(v, f.Arguments); err != nil {
					t.Errorf("%s seed %d: arguments %s: %v", choice, seed, f.Arguments, err)
				}
			case f.Name == "get_time" && choice == `"required"`:
			default:
				t.Errorf("%s seed %d: called %q", choice, seed, f.Name)
			}
		}
	}
	if calls == 0 {
		t.Error("no call finished")
	}
}

// TestStructuredCompletions: response_format on /v1/completions (an
// extension) and json_object on chat give JSON objects, and the metrics
// count the constraint's steps and the compiles.
func TestStructuredCompletions(t *testing.T) {
	s := sharedServer(t)
	for seed := range 5 {
		for _, req := range []struct{ path, body string }{
			{"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"JSON:","temperature":1,"seed":%d,"max_tokens":60,"response_format":{"type":"json_object"}}`, s.Model, seed)},
			{"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"JSON"}],"temperature":1,"seed":%d,"max_tokens":60,"response_format":{"type":"json_object"}}`, s.Model, seed)},
		} {
			r := s.do(t, "POST", req.path, req.body, "Content-Type", "application/json", "Authorization", "Bearer "+apiKey)
			if r.Status != 200 {
				t.Fatalf("%s: status %d: %s", req.path, r.Status, r.Body)
			}
			var resp struct {
				Choices []struct {
					Text         string                   `json:"text"`
					Message      struct{ Content string } `json:"message"`
					FinishReason string                   `json:"finish_reason"`
				}
			}
			if err := json.Unmarshal([]byte(r.Body), &resp); err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			out := c.Text + c.Message.Content
			var obj map[string]any
			if c.FinishReason == "stop" && json.Unmarshal([]byte(out), &obj) != nil {
				t.Errorf("%s seed %d: %q is not a JSON object", req.path, seed, out)
			}
		}
	}
	m := s.do(t, "GET", "/metrics", "", "Authorization", "Bearer "+apiKey).Body
	// The engine's series carry the model label; the server's do not.
	for _, re := range []string{`(?m)^hexserve_constraint_seconds_per_token_count\{model="[^"]+"\} [1-9]`, `(?m)^hexserve_schema_compile_seconds_count [1-9]`} {
		if !regexp.MustCompile(re).MatchString(m) {
			t.Errorf("metric %s missing or zero", re)
		}
	}
}

// TestForcedToolCallsCut: a forced tool call that max_tokens cuts off comes
// back as a call with the arguments it got to and the API's length reason,
// never as text holding the call's syntax, alike streamed and not, on chat
// completions, the Messages API and the Responses API.
func TestForcedToolCallsCut(t *testing.T) {
	s := sharedServer(t)
	params := `{"type":"object","properties":{"city":{"type":"string"}}}`
	for _, max := range []int{1, 6, 30} {
		// Chat completions.
		chat := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Weather?"}],"temperature":0,"max_tokens":%d,"tool_choice":"required","tools":[{"type":"function","function":{"name":"get_weather","parameters":%s}}]`, s.Model, max, params)
		var c struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content   *string
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		json.Unmarshal([]byte(s.authPost(t, "/v1/chat/completions", chat+`}`)), &c)
		m := c.Choices[0]
		if m.FinishReason != "length" || m.Message.Content != nil || len(m.Message.ToolCalls) != 1 || m.Message.ToolCalls[0].Function.Name != "get_weather" {
			t.Fatalf("chat, max_tokens %d: %+v", max, m)
		}
		args := m.Message.ToolCalls[0].Function.Arguments
		streamed, finish := "", ""
		for _, f := range dataLines(t, s.authPost(t, "/v1/chat/completions", chat+`,"stream":true}`)) {
			ch := f["choices"].([]any)[0].(map[string]any)
			d := ch["delta"].(map[string]any)
			if d["content"] != nil && d["content"] != "" {
				t.Errorf("chat stream, max_tokens %d: content %q", max, d["content"])
			}
			for _, tc := range asList(d["tool_calls"]) {
				if a, ok := tc.(map[string]any)["function"].(map[string]any)["arguments"].(string); ok {
					streamed += a
				}
			}
			if r, ok := ch["finish_reason"].(string); ok {
				finish = r
			}
		}
		if streamed != args || finish != "length" {
			t.Errorf("chat stream, max_tokens %d: arguments %q finish %q, not streamed %q", max, streamed, finish, args)
		}

		// The Messages API.
		msgs := fmt.Sprintf(`{"model":%q,"max_tokens":%d,"temperature":0,"messages":[{"role":"user","content":"Weather?"}],"tool_choice":{"type":"any"},"tools":[{"name":"get_weather","input_schema":%s}]`, s.Model, max, params)
		var a struct {
			StopReason string `json:"stop_reason"`
			Content    []struct {
				Type, Name string
				Input      json.RawMessage
			}
		}
		json.Unmarshal([]byte(s.authPost(t, "/v1/messages", msgs+`}`)), &a)
		if a.StopReason != "max_tokens" || len(a.Content) != 1 || a.Content[0].Type != "tool_use" || a.Content[0].Name != "get_weather" || !json.Valid(a.Content[0].Input) {
			t.Errorf("messages, max_tokens %d: %+v", max, a)
		}
		partial, stop := "", ""
		for _, e := range dataLines(t, s.authPost(t, "/v1/messages", msgs+`,"stream":true}`)) {
			if d, ok := e["delta"].(map[string]any); ok {
				if d["type"] == "text_delta" {
					t.Errorf("messages stream, max_tokens %d: text %q", max, d["text"])
				}
				if p, ok := d["partial_json"].(string); ok {
					partial += p
				}
				if r, ok := d["stop_reason"].(string); ok {
					stop = r
				}
			}
		}
		if partial != args || stop != "max_tokens" {
			t.Errorf("messages stream, max_tokens %d: partial_json %q stop %q, chat's arguments %q", max, partial, stop, args)
		}

		// The Responses API (max_output_tokens is at least 16).
		if max < 16 {
			continue
		}
		var rs struct {
			Status string
			Output []struct{ Type, Status, Name, Arguments string }
		}
		json.Unmarshal([]byte(s.authPost(t, "/v1/responses", fmt.Sprintf(`{"model":%q,"max_output_tokens":%d,"temperature":0,"input":"Weather?","tool_choice":"required","tools":[{"type":"function","name":"get_weather","parameters":%s}]}`, s.Model, max, params))), &rs)
		if rs.Status != "incomplete" || len(rs.Output) != 1 || rs.Output[0].Type != "function_call" || rs.Output[0].Name != "get_weather" || rs.Output[0].Status != "incomplete" {
			t.Errorf("responses, max_output_tokens %d: %+v", max, rs)
		}
	}
}

// TestForcedNamedToolCut: a named tool_choice cut by max_tokens before the
// name is complete (two tools begin "get_") is a call of the named tool on
// chat completions and the Messages API, as OpenAI always returns one; not
// cut, the chat call ends with "stop", the Messages tool_use with
// "tool_use" and the Responses call completes.
func TestForcedNamedToolCut(t *testing.T) {
	s := sharedServer(t)
	params := `{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"],"additionalProperties":false}`
	for _, max := range []int{1, 2, 3, 4, 5, 6, 60} {
		chat := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Weather?"}],"temperature":0,"max_tokens":%d,`+
			`"tool_choice":{"type":"function","function":{"name":"get_weather"}},"tools":[{"type":"function","function":{"name":"get_time","parameters":%s}},`+
			`{"type":"function","function":{"name":"get_weather","parameters":%s}}]}`, s.Model, max, params, params)
		var c struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content   *string
					ToolCalls []struct{ Function struct{ Name string } } `json:"tool_calls"`
				}
			}
		}
		json.Unmarshal([]byte(s.authPost(t, "/v1/chat/completions", chat)), &c)
		m := c.Choices[0]
		if m.FinishReason == "length" && max == 60 {
			t.Fatalf("max_tokens 60 cut the call: %+v", m)
		}
		want := map[bool]string{true: "stop", false: "length"}[max == 60]
		if m.FinishReason != want || m.Message.Content != nil || len(m.Message.ToolCalls) != 1 || m.Message.ToolCalls[0].Function.Name != "get_weather" {
			t.Errorf("chat, max_tokens %d: %+v", max, m)
		}

		msgs := fmt.Sprintf(`{"model":%q,"max_tokens":%d,"temperature":0,"messages":[{"role":"user","content":"Weather?"}],"tool_choice":{"type":"tool","name":"get_weather"},`+
			`"tools":[{"name":"get_time","input_schema":%s},{"name":"get_weather","input_schema":%s}]}`, s.Model, max, params, params)
		var a struct {
			StopReason string `json:"stop_reason"`
			Content    []struct{ Type, Name string }
		}
		json.Unmarshal([]byte(s.authPost(t, "/v1/messages", msgs)), &a)
		stop := map[bool]string{true: "tool_use", false: "max_tokens"}[max == 60]
		if a.StopReason != stop || len(a.Content) != 1 || a.Content[0].Type != "tool_use" || a.Content[0].Name != "get_weather" {
			t.Errorf("messages, max_tokens %d: %+v", max, a)
		}
	}
	var rs struct {
		Status string
		Output []struct{ Type, Status, Name string }
	}
	json.Unmarshal([]byte(s.authPost(t, "/v1/responses", fmt.Sprintf(`{"model":%q,"max_output_tokens":60,"temperature":0,"input":"Weather?",`+
		`"tool_choice":{"type":"function","name":"get_weather"},"tools":[{"type":"function","name":"get_time","parameters":%s},{"type":"function","name":"get_weather","parameters":%s}]}`,
		s.Model, params, params))), &rs)
	if rs.Status != "completed" || len(rs.Output) != 1 || rs.Output[0].Type != "function_call" || rs.Output[0].Name != "get_weather" || rs.Output[0].Status != "completed" {
		t.Errorf("responses: %+v", rs)
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }

// TestOllamaFormatClosed: an Ollama format schema with properties and no
// additionalProperties allows no other keys, as Ollama's does; the OpenAI
// endpoints keep JSON Schema's default. Over seeds, every output that
// stops is an object of the declared keys only.
func TestOllamaFormatClosed(t *testing.T) {
	s := sharedServer(t)
	stopped := 0
	for seed := range 12 {
		r := s.do(t, "POST", "/api/chat", fmt.Sprintf(`{"model":%q,"stream":false,"messages":[{"role":"user","content":"hi"}],"options":{"num_predict":48,"temperature":1,"seed":%d},"format":{"type":"object","properties":{"a":{"type":"string","maxLength":6},"b":{"type":"integer","minimum":0,"maximum":9}},"required":["a"]}}`, s.Model, seed), "Authorization", "Bearer "+apiKey)
		var out struct {
			Message    struct{ Content string }
			DoneReason string `json:"done_reason"`
		}
		if r.Status != 200 || json.Unmarshal([]byte(r.Body), &out) != nil {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if out.DoneReason != "stop" {
			continue
		}
		stopped++
		var obj map[string]any
		if err := json.Unmarshal([]byte(out.Message.Content), &obj); err != nil {
			t.Fatalf("seed %d: %q: %v", seed, out.Message.Content, err)
		}
		for k := range obj {
			if k != "a" && k != "b" {
				t.Errorf("seed %d: undeclared key %q in %s", seed, k, out.Message.Content)
			}
		}
	}
	if stopped == 0 {
		t.Error("no output stopped")
	}
}
