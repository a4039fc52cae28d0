package server

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/internal/testjsonl"
)

func TestTokenize(t *testing.T) {
	s, _ := newTest(t, Options{})
	tests := []struct {
		name, body string
		want       string
	}{
		{"content", `{"content":"Hello world"}`, `{"tokens":[9906,1917],"count":2,"max_model_len":512}`},
		{"prompt alias", `{"prompt":"Hello world"}`, `{"tokens":[9906,1917],"count":2,"max_model_len":512}`},
		{"bos", `{"content":"Hello world","add_special_tokens":true}`, `{"tokens":[128000,9906,1917],"count":3,"max_model_len":512}`},
		{"special parsed by default", `{"content":"<|eot_id|>"}`, `{"tokens":[128009],"count":1,"max_model_len":512}`},
		{"empty", `{"content":""}`, `{"tokens":[],"count":0,"max_model_len":512}`},
		{"pieces", `{"content":"Hello world","with_pieces":true}`, `{"tokens":[9906,1917],"count":2,"max_model_len":512,"pieces":["Hello"," world"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(s, "POST", "/tokenize", tt.body)
			if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != tt.want {
				t.Fatalf("%d %s, want %s", rec.Code, rec.Body, tt.want)
			}
		})
	}
	// parse_special false: the special-token text is plain text.
	rec := do(s, "POST", "/tokenize", `{"content":"<|eot_id|>","parse_special":false}`)
	var resp tokenizeResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != 200 || resp.Count < 2 {
		t.Fatalf("parse_special=false: %d %s", rec.Code, rec.Body)
	}
	for _, id := range resp.Tokens {
		if id == 128009 {
			t.Fatalf("special id with parse_special=false: %v", resp.Tokens)
		}
	}
}

func TestTokenizeErrors(t *testing.T) {
	s, _ := newTest(t, Options{})
	tests := []struct {
		path, body string
		param      string
	}{
		{"/tokenize", `{}`, "content"},
		{"/tokenize", `{"content":42}`, "content"},
		{"/tokenize", `{"content":`, "<null>"},
		{"/tokenize", ``, "<null>"},
		{"/tokenize", `{"content":"a"} {}`, "<null>"},
		{"/detokenize", `{}`, "tokens"},
		{"/detokenize", `{"tokens":[9906,-1]}`, "tokens[1]"},
		{"/detokenize", `{"tokens":[9906,1917,128256]}`, "tokens[2]"},
		{"/detokenize", `{"tokens":[99999999999]}`, "tokens[0]"},
		{"/detokenize", `{"tokens":"abc"}`, "tokens"},
		{"/detokenize", longTokens(t, 1<<20), "tokens"}, // a reply of about 20 MB, past the reply limit
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.body[:min(len(tt.body), 40)], func(t *testing.T) {
			rec := do(s, "POST", tt.path, tt.body)
			e := apiErr(t, rec)
			if rec.Code != 400 || e.Type != TypeInvalidRequest || str(e.Param) != tt.param {
				t.Fatalf("%d %s, want param %s", rec.Code, rec.Body, tt.param)
			}
		})
	}
	rec := do(s, "POST", "/detokenize", `{"tokens":[128256]}`)
	if msg := apiErr(t, rec).Message; !strings.Contains(msg, "128256") {
		t.Errorf("message does not name the id: %q", msg)
	}
}

// The reply limit counts the reply's bytes, escapes included: 1M ids of the
// byte 0x00 are 1 MB of text but 6 MB of JSON (\u0000 each).
func TestDetokenizeReplyLimit(t *testing.T) {
	s, _ := newTest(t, Options{BodyLimit: 8 << 20})
	escaped := `{"tokens":[` + strings.Repeat("188,", 1<<20) + `188]}`
	rec := do(s, "POST", "/detokenize", escaped)
	if e := apiErr(t, rec); rec.Code != 400 || str(e.Param) != "tokens" || !strings.Contains(e.Message, "reply limit of 4194304 bytes") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// Just under the limit: decoded.
	n := (detokenizeReplyLimit - len(`{"content":""}`+"\n")) / 6
	under := `{"tokens":[` + strings.Repeat("188,", n-1) + `188]}`
	if rec := do(s, "POST", "/detokenize", under); rec.Code != 200 || rec.Body.Len() > detokenizeReplyLimit {
		t.Fatalf("%d ids: %d, %d bytes", n, rec.Code, rec.Body.Len())
	}
}

// longTokens is a /detokenize body of size bytes repeating the id of the
// vocabulary's longest token.
func longTokens(t *testing.T, size int) string {
	tok := testTokenizer(t)
	long := int32(0)
	for id := range int32(tok.VocabSize()) {
		if len(tok.Piece(id)) > len(tok.Piece(long)) {
			long = id
		}
	}
	ids := strings.Repeat(strconv.Itoa(int(long))+",", (size-len(`{"tokens":[0]}`))/(len(strconv.Itoa(int(long)))+1))
	return `{"tokens":[` + ids + `0]}`
}

// Every tokenizer golden case decodes, however many ids: /detokenize is
// bounded by the request body and the reply's bytes, not by the context
// (4,716 ids here; the tiny model's context is 512).
func TestDetokenizeGoldens(t *testing.T) {
	s, _ := newTest(t, Options{})
	type golden struct {
		IDs     []int32 `json:"ids"`
		Decoded string  `json:"decoded"`
	}
	most := 0
	for i, g := range testjsonl.Read[golden](t, "../testdata/tokenizer/golden_public.jsonl") {
		body, _ := json.Marshal(map[string]any{"tokens": g.IDs})
		rec := do(s, "POST", "/detokenize", string(body))
		var resp struct{ Content *string }
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != 200 || resp.Content == nil {
			t.Errorf("case %d (%d ids): %d %.200s", i, len(g.IDs), rec.Code, rec.Body)
			continue
		}
		if *resp.Content != g.Decoded {
			t.Errorf("case %d: got %.80q, want %.80q", i, *resp.Content, g.Decoded)
		}
		most = max(most, len(g.IDs))
	}
	if most <= testModel(t).ContextLen {
		t.Fatalf("the longest case has %d ids: none past the context", most)
	}
}

// replyLen counts what writeJSON writes, for every escape encoding/json makes.
func TestReplyLen(t *testing.T) {
	tok := testTokenizer(t)
	texts := []string{"", "plain", "\"\\\b\f\n\r\t", "\x00\x01\x1f <>&", "\u2028\u2029", "\xff\xfe", "\ufffd", "é😀"}
	for id := range int32(tok.VocabSize()) {
		texts = append(texts, string(tok.Piece(id)))
	}
	for _, text := range texts {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(detokenizeReply{Content: text}); err != nil {
			t.Fatal(err)
		}
		if got := replyLen(text); got != b.Len() {
			t.Fatalf("replyLen(%q) = %d, want %d", text, got, b.Len())
		}
	}
}

func TestDetokenize(t *testing.T) {
	s, _ := newTest(t, Options{})
	rec := do(s, "POST", "/detokenize", `{"tokens":[128000,9906,11,1917,0]}`)
	if want := `{"content":"<|begin_of_text|>Hello, world!"}`; rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// The chat goldens go through /apply-template byte for byte.
func TestApplyTemplateGoldens(t *testing.T) {
	s, _ := newTest(t, Options{DateString: func() string { return "26 Jul 2024" }})
	type golden struct {
		Name                string            `json:"name"`
		Messages            json.RawMessage   `json:"messages"`
		Tools               []json.RawMessage `json:"tools"`
		AddGenerationPrompt bool              `json:"add_generation_prompt"`
		DateString          *string           `json:"date_string"`
		Rendered            string            `json:"rendered"`
	}
	for _, g := range testjsonl.Read[golden](t, "../testdata/chat/golden_public.jsonl") {
		req := map[string]any{"messages": g.Messages, "tools": g.Tools, "add_generation_prompt": g.AddGenerationPrompt}
		if g.DateString != nil {
			req["chat_template_kwargs"] = map[string]any{"date_string": *g.DateString}
		}
		body, _ := json.Marshal(req)
		rec := do(s, "POST", "/apply-template", string(body))
		var resp struct{ Prompt string }
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != 200 {
			t.Errorf("%s: %d %s", g.Name, rec.Code, rec.Body)
			continue
		}
		if resp.Prompt != g.Rendered {
			t.Errorf("%s:\n got  %q\n want %q", g.Name, resp.Prompt, g.Rendered)
		}
	}
}

func TestApplyTemplate(t *testing.T) {
	s, _ := newTest(t, Options{DateString: func() string { return "01 Feb 2027" }})
	rec := do(s, "POST", "/apply-template", `{"messages":[{"role":"user","content":"Hi"}]}`)
	var resp struct{ Prompt string }
	_ = json.Unmarshal(rec.Body.Bytes(), &resp)
	if rec.Code != 200 || !strings.Contains(resp.Prompt, "Today Date: 01 Feb 2027") ||
		!strings.HasSuffix(resp.Prompt, "<|start_header_id|>assistant<|end_header_id|>\n\n") {
		t.Fatalf("configured date / generation prompt: %d %q", rec.Code, resp.Prompt)
	}
	// "developer" renders exactly as "system".
	var dev, sys struct{ Prompt string }
	_ = json.Unmarshal(do(s, "POST", "/apply-template", `{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}]}`).Body.Bytes(), &dev)
	_ = json.Unmarshal(do(s, "POST", "/apply-template", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`).Body.Bytes(), &sys)
	if dev.Prompt == "" || dev.Prompt != sys.Prompt || !strings.Contains(dev.Prompt, "2027\n\nBe brief.<|eot_id|>") {
		t.Fatalf("developer role: %q, system: %q", dev.Prompt, sys.Prompt)
	}
	tests := []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[]}`, "messages"},
		{`{"messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role"},
	}
	for _, tt := range tests {
		rec := do(s, "POST", "/apply-template", tt.body)
		if e := apiErr(t, rec); rec.Code != 400 || str(e.Param) != tt.param {
			t.Errorf("%s: %d %s, want param %s", tt.body, rec.Code, rec.Body, tt.param)
		}
	}
}

// TestApplyTemplateKwargs: chat_template_kwargs custom_tools (replacing
// tools; null: none) and tools_in_user_message reach the template.
func TestApplyTemplateKwargs(t *testing.T) {
	s, _ := newTest(t, Options{DateString: func() string { return "26 Jul 2024" }})
	const msgs = `"messages":[{"role":"system","content":"S"},{"role":"user","content":"U"}]`
	const tools = `"tools":[{"type":"function","function":{"name":"req_tool"}}]`
	tests := []struct {
		name, body  string
		has, hasNot []string
		status      int
		param       string
	}{
		{"custom tools replace tools", `{` + msgs + `,` + tools + `,"chat_template_kwargs":{"custom_tools":[{"name":"custom_tool"}]}}`,
			[]string{"custom_tool", "Environment: ipython", "Given the following functions"}, []string{"req_tool"}, 200, ""},
		{"custom tools null: none", `{` + msgs + `,` + tools + `,"chat_template_kwargs":{"custom_tools":null}}`,
			nil, []string{"req_tool", "Environment: ipython"}, 200, ""},
		{"tools in the system block", `{` + msgs + `,` + tools + `,"chat_template_kwargs":{"tools_in_user_message":false}}`,
			[]string{"Today Date: 26 Jul 2024\n\nYou have access to the following functions.", "\"req_tool\"\n    }\n}\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"},
			[]string{"Given the following functions"}, 200, ""},
		{"custom tools not an array", `{` + msgs + `,"chat_template_kwargs":{"custom_tools":{"name":"x"}}}`, nil, nil, 400, "chat_template_kwargs.custom_tools"},
		{"custom tool not an object", `{` + msgs + `,"chat_template_kwargs":{"custom_tools":[{"name":"x"},"f"]}}`, nil, nil, 400, "chat_template_kwargs.custom_tools[1]"},
		{"tools_in_user_message not a bool", `{` + msgs + `,"chat_template_kwargs":{"tools_in_user_message":"no"}}`, nil, nil, 400, "chat_template_kwargs.tools_in_user_message"},
	}
	for _, tt := range tests {
		prompt, ok := applyTemplate(t, s, tt.name, tt.body, tt.status, tt.param)
		if !ok {
			continue
		}
		for _, h := range tt.has {
			if !strings.Contains(prompt, h) {
				t.Errorf("%s: prompt lacks %q:\n%s", tt.name, h, prompt)
			}
		}
		for _, h := range tt.hasNot {
			if strings.Contains(prompt, h) {
				t.Errorf("%s: prompt has %q:\n%s", tt.name, h, prompt)
			}
		}
	}
}
