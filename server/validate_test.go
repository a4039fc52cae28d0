package server

import (
	"strings"
	"testing"

	"github.com/hexserve/hexserve/inference"
)

// TestCompletionValidation sends every kind of bad parameter and checks the
// status and the OpenAI error fields.
func TestCompletionValidation(t *testing.T) {
	g := newGenServer(t, "ok", Options{}, inference.Config{})
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	chatReq := func(extra string) string {
		b := `{"model":"` + model + `",` + msgs
		if extra != "" {
			b += "," + extra
		}
		return b + "}"
	}
	cmplReq := func(extra string) string { return `{"model":"` + model + `","prompt":"Hi",` + extra + `}` }
	const chatPath, cmplPath = "/v1/chat/completions", "/v1/completions"
	for _, tc := range []struct {
		path, body  string
		status      int
		param, code string
	}{
		{chatPath, `[1,2]`, 400, "", ""},
		{chatPath, `{"model":`, 400, "", ""},
		{chatPath, ``, 400, "", ""},
		{chatPath, `{` + msgs + `}`, 400, "model", ""},
		{chatPath, `{"model":"gpt-5",` + msgs + `}`, 404, "model", "model_not_found"},
		{chatPath, `{"model":"` + model + `"}`, 400, "messages", ""},
		{chatPath, `{"model":"` + model + `","messages":[]}`, 400, "messages", ""},
		{chatPath, `{"model":"` + model + `","messages":"hi"}`, 400, "messages", ""},
		{chatPath, `{"model":"` + model + `","messages":[{"role":"wizard","content":"x"}]}`, 400, "messages[0].role", ""},
		{chatPath, `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages[0].content[0].type", ""},
		{chatPath, chatReq(`"temperature":2.5`), 400, "temperature", ""},
		{chatPath, chatReq(`"temperature":-0.1`), 400, "temperature", ""},
		{chatPath, chatReq(`"temperature":"hot"`), 400, "temperature", ""},
		{chatPath, chatReq(`"top_p":0`), 400, "top_p", ""},
		{chatPath, chatReq(`"top_p":1.5`), 400, "top_p", ""},
		{chatPath, chatReq(`"presence_penalty":3`), 400, "presence_penalty", ""},
		{chatPath, chatReq(`"frequency_penalty":-2.5`), 400, "frequency_penalty", ""},
		{chatPath, chatReq(`"n":0`), 400, "n", ""},
		{chatPath, chatReq(`"n":9`), 400, "n", ""},
		{chatPath, chatReq(`"n":1.5`), 400, "n", ""},
		{chatPath, chatReq(`"max_tokens":0`), 400, "max_tokens", ""},
		{chatPath, chatReq(`"max_completion_tokens":-1`), 400, "max_completion_tokens", ""},
		{chatPath, chatReq(`"top_logprobs":3`), 400, "top_logprobs", ""},
		{chatPath, chatReq(`"logprobs":true,"top_logprobs":21`), 400, "top_logprobs", ""},
		{chatPath, chatReq(`"logprobs":"yes"`), 400, "logprobs", ""},
		{chatPath, chatReq(`"stop":5`), 400, "stop", ""},
		{chatPath, chatReq(`"stop":["a",1]`), 400, "stop", ""},
		{chatPath, chatReq(`"stop":[""]`), 400, "stop", ""},
		{chatPath, chatReq(`"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]`), 400, "stop", ""},
		{chatPath, chatReq(`"logit_bias":{"abc":1}`), 400, "logit_bias", ""},
		{chatPath, chatReq(`"logit_bias":{"999999":1}`), 400, "logit_bias", ""},
		{chatPath, chatReq(`"logit_bias":{"15":101}`), 400, "logit_bias", ""},
		{chatPath, chatReq(`"logit_bias":{"15":"x"}`), 400, "logit_bias", ""},
		{chatPath, chatReq(`"seed":"x"`), 400, "seed", ""},
		{chatPath, chatReq(`"top_k":-2`), 400, "top_k", ""},
		{chatPath, chatReq(`"min_p":1.5`), 400, "min_p", ""},
		{chatPath, chatReq(`"repetition_penalty":0`), 400, "repetition_penalty", ""},
		{chatPath, chatReq(`"stream_options":{"include_usage":true}`), 400, "stream_options", ""},
		{chatPath, chatReq(`"stream":"yes"`), 400, "stream", ""},
		{chatPath, chatReq(`"response_format":{"type":"yaml"}`), 400, "response_format.type", ""},
		{chatPath, chatReq(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"properties":{"x":{"not":{}}}}}}`), 400, "response_format.json_schema.schema.properties.x.not", ""},
		{chatPath, chatReq(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"http://example.com/s"}}}`), 400, "response_format.json_schema.schema.$ref", ""},
		{chatPath, chatReq(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"properties":{"x":{"type":"string","pattern":"(a)\\1"}}}}}`), 400, "response_format.json_schema.schema.properties.x.pattern", ""},
		{chatPath, chatReq(`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"properties":{"x":{"type":"string","format":"idn-email"}}}}}`), 400, "response_format.json_schema.schema.properties.x.format", ""},
		{chatPath, chatReq(`"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`), 400, "response_format.json_schema.name", ""},
		{chatPath, chatReq(`"tool_choice":"required"`), 400, "tool_choice", ""},
		{chatPath, chatReq(`"tool_choice":{"type":"function","function":{"name":"nope"}},` + weatherTool), 400, "tool_choice.function.name", ""},
		{chatPath, chatReq(`"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","patternProperties":{"a":{}}}}}]`), 400, "tools[0].function.parameters.patternProperties", ""},
		{chatPath, chatReq(`"tools":[{"type":"retrieval"}]`), 400, "tools[0].type", ""},
		{chatPath, chatReq(`"tools":[]`), 400, "tools", ""},
		{chatPath, `{"model":"` + model + `","messages":[{"role":"user","content":[]}]}`, 400, "messages[0].content", ""},
		{chatPath, `{"model":"` + model + `","messages":[{"role":"user","content":"Hi"},{"role":"tool","tool_call_id":"call_1","content":"x"}]}`, 400, "messages.[1].role", ""},
		{chatPath, chatReq(`"tools":[{"type":"function","function":{}}]`), 400, "tools[0].function.name", ""},
		{chatPath, chatReq(`"audio":{"voice":"alloy","format":"mp3"}`), 400, "audio", ""},
		{chatPath, chatReq(`"modalities":["text","audio"]`), 400, "modalities[1]", ""},
		{chatPath, chatReq(`"functions":[{"name":"f"}]`), 400, "functions", ""},
		{chatPath, chatReq(`"parallel_tool_calls":"x"`), 400, "parallel_tool_calls", ""},
		{cmplPath, `{"model":"` + model + `"}`, 400, "prompt", ""},
		{cmplPath, `{"model":"` + model + `","prompt":["a","b"]}`, 400, "prompt", ""},
		{cmplPath, `{"model":"` + model + `","prompt":[[1,2],[3]]}`, 400, "prompt", ""},
		{cmplPath, `{"model":"` + model + `","prompt":[]}`, 400, "prompt", ""},
		{cmplPath, `{"model":"` + model + `","prompt":[1,128256]}`, 400, "prompt", ""},
		{cmplPath, `{"model":"` + model + `","prompt":[-1]}`, 400, "prompt", ""},
		{cmplPath, `{"model":"` + model + `","prompt":{"a":1}}`, 400, "prompt", ""},
		{cmplPath, cmplReq(`"suffix":"x"`), 400, "suffix", ""},
		{cmplPath, cmplReq(`"best_of":2`), 400, "best_of", ""},
		{cmplPath, cmplReq(`"logprobs":21`), 400, "logprobs", ""},
		{cmplPath, cmplReq(`"logprobs":1,"echo":true`), 400, "echo", ""},
		{cmplPath, cmplReq(`"echo":1`), 400, "echo", ""},
		{cmplPath, cmplReq(`"temperature":"x"`), 400, "temperature", ""},
		{cmplPath, cmplReq(`"stop":{}`), 400, "stop", ""},
		{chatPath, `{"model":"` + model + `","messages":[{"role":"user","content":5}]}`, 400, "messages[0].content", ""},
		{cmplPath, cmplReq(`"max_tokens":0`), 400, "max_tokens", ""},
		{cmplPath, `{"model":"nope","prompt":"x"}`, 404, "model", "model_not_found"},
		{cmplPath, `{"model":"` + model + `","prompt":"` + strings.Repeat("word ", 600) + `"}`, 400, "prompt", "context_length_exceeded"},
		{chatPath, `{"model":"` + model + `","messages":[{"role":"user","content":"` + strings.Repeat("word ", 600) + `"}]}`, 400, "messages", "context_length_exceeded"},
	} {
		resp, body := g.post(t, tc.path, tc.body)
		name := tc.path + " " + tc.body
		if len(name) > 120 {
			name = name[:120]
		}
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d: %s", name, resp.StatusCode, tc.status, body)
			continue
		}
		checkShape(t, body, map[string]any{"error": map[string]any{"message": "string", "type": "string",
			"param": "string|null", "code": "string|null"}})
		e := apiErrBody(t, body)
		if e.Type != TypeInvalidRequest || str(e.Param) != orNull(tc.param) || tc.code != "" && str(e.Code) != tc.code {
			t.Errorf("%s: error %s", name, body)
		}
	}
}

func orNull(s string) string {
	if s == "" {
		return "<null>"
	}
	return s
}

// TestAcceptedOptions checks options that are accepted without effect.
func TestAcceptedOptions(t *testing.T) {
	g := newGenServer(t, "ok", Options{}, inference.Config{})
	for _, extra := range []string{
		`"user":"u1"`, `"parallel_tool_calls":false`, `"response_format":{"type":"text"}`, `"modalities":["text"]`,
		`"unknown_field":{"x":1}`, `"top_k":-1`, `"seed":42,"temperature":1`, `"logit_bias":{"15":-100}`,
		`"chat_template_kwargs":{"date_string":"01 Jan 2025"}`, `"tool_choice":"auto"`, `"stop":null`,
	} {
		resp, body := g.post(t, "/v1/chat/completions", chatBody(extra))
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", extra, resp.StatusCode, body)
		}
	}
	for _, extra := range []string{`"best_of":1`, `"suffix":""`, `"echo":false`, `"logprobs":0`} {
		resp, body := g.post(t, "/v1/completions", `{"model":"`+model+`","prompt":"Hi",`+extra+`}`)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", extra, resp.StatusCode, body)
		}
	}
}
