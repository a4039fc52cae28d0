package openai

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
)

// TestTemplateKwargsTools: custom_tools replaces tools in the prompt and in
// the names recognised as tool calls; null means none; tool_choice "none"
// still turns them off.
func TestTemplateKwargsTools(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"req"}}]`
	tests := []struct {
		name, body string
		want       []string
	}{
		{"tools", tools, []string{"req"}},
		{"custom tools, both forms", tools + `,"chat_template_kwargs":{"custom_tools":[{"name":"a"},{"type":"function","function":{"name":"b"}}]}`, []string{"a", "b"}},
		{"custom tools null", tools + `,"chat_template_kwargs":{"custom_tools":null}`, nil},
		{"tool_choice none", tools + `,"tool_choice":"none","chat_template_kwargs":{"custom_tools":[{"name":"a"}]}`, nil},
	}
	for _, tt := range tests {
		var r ChatCompletionRequest
		if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":"hi"}],`+tt.body+`}`), &r); err != nil {
			t.Fatal(err)
		}
		g, err := FromChatCompletionRequest(&r, apiconv.Params{Tokenizer: testTok(t)})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !slices.Equal(g.Tools, tt.want) {
			t.Errorf("%s: tools %q, want %q", tt.name, g.Tools, tt.want)
		}
	}
}

// TestTemplateKwargsOther: chat_template_kwargs other than the Llama-3.2
// three reach the model's template as variables, key order kept.
func TestTemplateKwargsOther(t *testing.T) {
	tmpl, err := chat.ParseTemplate(`{% if enable_thinking is false %}off{% endif %} {{ opts | tojson }} {{ messages[0].content }}`, nil, chat.TemplateTokens{})
	if err != nil {
		t.Fatal(err)
	}
	var r ChatCompletionRequest
	body := `{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false,"opts":{"z":1,"a":[1.0]},"date_string":"x"}}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	tok := testTok(t)
	g, err := FromChatCompletionRequest(&r, apiconv.Params{Tokenizer: tok, Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tok.Decode(g.Request.Prompt, false), `off {"z": 1, "a": [1.0]} hi`; got != want {
		t.Errorf("prompt %q, want %q", got, want)
	}
}
