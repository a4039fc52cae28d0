package server

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/tokenizer/tokenizertest"
)

// applyTemplate posts body (case name) to /apply-template and checks the
// status, and for an error the param; it returns the prompt of a 200.
func applyTemplate(t *testing.T, s *Server, name, body string, status int, param string) (string, bool) {
	t.Helper()
	rec := do(s, "POST", "/apply-template", body)
	if rec.Code != status {
		t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		return "", false
	}
	if status != 200 {
		if e := apiErr(t, rec); str(e.Param) != param {
			t.Errorf("%s: param %s, want %s", name, str(e.Param), param)
		}
		return "", false
	}
	var resp struct{ Prompt string }
	_ = json.Unmarshal(rec.Body.Bytes(), &resp)
	return resp.Prompt, true
}

// TestApplyTemplateQwen3: /apply-template renders the model's own template
// (Qwen3's, from ../shared) with tools, chat_template_kwargs and
// reasoning_effort, and a template's raise_exception is a 400 with its message.
func TestApplyTemplateQwen3(t *testing.T) {
	dir := tokenizertest.FamilyDir(t, "qwen3")
	tmpl, ok, err := chat.LoadTemplate(os.ReadFile, dir)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	s, _ := newTest(t, Options{})
	m := testModel(t)
	m.Template = tmpl
	s.SetModel(m)
	const msgs = `"messages":[{"role":"user","content":"hi <|im_end|>"}]`
	const off = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
	tests := []struct {
		name, body string
		suffix     string
		has        string
		status     int
	}{
		{"plain", `{` + msgs + `}`, "hi <|im_end|><|im_end|>\n<|im_start|>assistant\n", "", 200},
		{"effort none", `{` + msgs + `,"reasoning_effort":"none"}`, off, "", 200},
		{"effort minimal", `{` + msgs + `,"reasoning_effort":"minimal"}`, off, "", 200},
		{"effort high", `{` + msgs + `,"reasoning_effort":"high"}`, "<|im_start|>assistant\n", "", 200},
		{"kwargs win", `{` + msgs + `,"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true}}`, "<|im_start|>assistant\n", "", 200},
		{"kwarg off", `{` + msgs + `,"chat_template_kwargs":{"enable_thinking":false}}`, off, "", 200},
		{"tools", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"b":1.0,"a":2}}}]}`, "",
			`<tools>` + "\n" + `{"type": "function", "function": {"name": "get_weather", "parameters": {"b": 1.0, "a": 2}}}` + "\n</tools>", 200},
		{"bad effort", `{` + msgs + `,"reasoning_effort":"max"}`, "", "", 400},
	}
	for _, tt := range tests {
		prompt, ok := applyTemplate(t, s, tt.name, tt.body, tt.status, "reasoning_effort")
		if ok && (!strings.HasSuffix(prompt, tt.suffix) || !strings.Contains(prompt, tt.has)) {
			t.Errorf("%s: prompt %q", tt.name, prompt)
		}
	}

	raising, err := chat.ParseTemplate(`{{ raise_exception('Only user and assistant roles are supported!') }}`, nil, chat.TemplateTokens{})
	if err != nil {
		t.Fatal(err)
	}
	m = testModel(t)
	m.Template = raising
	s.SetModel(m)
	rec := do(s, "POST", "/apply-template", `{`+msgs+`}`)
	if e := apiErr(t, rec); rec.Code != 400 || !strings.Contains(e.Message, "Only user and assistant roles are supported!") {
		t.Errorf("raise_exception: %d %s", rec.Code, rec.Body)
	}
}
