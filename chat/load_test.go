package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadTemplate: where LoadTemplate finds a template and which one it
// renders: chat_template.jinja before tokenizer_config.json, the list form's
// "default" and "tool_use" (with tools), specials from tokenizer.json when
// the config lists none, and the official Llama-3.2 template natively; each
// carries the text it was loaded from (Source).
func TestLoadTemplate(t *testing.T) {
	llama, err := os.ReadFile("../testdata/tokenizer/llama3.2/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var llamaCfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(llama, &llamaCfg); err != nil || llamaCfg.ChatTemplate == "" {
		t.Fatalf("the Llama-3.2 chat_template: %v", err)
	}
	tests := []struct {
		name      string
		files     map[string]string
		ok        bool
		native    bool
		plain     string // rendered without tools
		withTools string
		source    string
	}{
		{"none", map[string]string{"tokenizer.json": `{}`}, false, false, "", "", ""},
		{"string", map[string]string{"tokenizer_config.json": `{"chat_template":"{{ bos_token }}{{ messages[0].content }}","bos_token":{"content":"<s>"}}`},
			true, false, "<s>hi", "<s>hi", "{{ bos_token }}{{ messages[0].content }}"},
		{"jinja file first", map[string]string{"tokenizer_config.json": `{"chat_template":"config"}`, "chat_template.jinja": "file {{ eos_token }}"},
			true, false, "file ", "file ", "file {{ eos_token }}"},
		{"named", map[string]string{"tokenizer_config.json": `{"chat_template":[{"name":"default","template":"D"},{"name":"tool_use","template":"T{{ tools|length }}"}]}`},
			true, false, "D", "T1", "D\nT{{ tools|length }}\n"},
		{"specials from tokenizer.json", map[string]string{"chat_template.jinja": "<|x|>{{ messages[0].content }}",
			"tokenizer.json": `{"added_tokens":[{"id":1,"content":"<|x|>","special":true}]}`}, true, false, "<|x|>hi", "<|x|>hi", "<|x|>{{ messages[0].content }}"},
		{"llama native", map[string]string{"tokenizer_config.json": string(llama)}, true, true, "", "", llamaCfg.ChatTemplate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tmpl, ok, err := LoadTemplate(os.ReadFile, dir)
			if err != nil || ok != tt.ok || (ok && tmpl.Native() != tt.native) {
				t.Fatalf("ok %v native %v err %v", ok, ok && tmpl.Native(), err)
			}
			if got := tmpl.Source(); got != tt.source {
				t.Errorf("Source() = %q, want %q", got, tt.source)
			}
			if !ok || tt.native {
				return
			}
			msgs := []Message{{Role: "user", Content: "hi"}}
			got, err := Render(msgs, Options{Template: tmpl})
			if err != nil || got != tt.plain {
				t.Errorf("without tools: %q, %v; want %q", got, err, tt.plain)
			}
			got, err = Render(msgs, Options{Template: tmpl, Tools: []Tool{Tool(`{"type":"function"}`)}})
			if err != nil || got != tt.withTools {
				t.Errorf("with tools: %q, %v; want %q", got, err, tt.withTools)
			}
			if tt.name == "specials from tokenizer.json" {
				segs, _ := RenderSegments(msgs, Options{Template: tmpl})
				if len(segs) != 2 || !segs[0].Special {
					t.Errorf("segments %+v", segs)
				}
			}
		})
	}
}
