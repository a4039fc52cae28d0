package openai

import (
	"encoding/json"
	"github.com/hexserve/hexserve/front"
	"slices"
	"testing"
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
		g, err := FromChatCompletionRequest(&r, front.Params{Tokenizer: testTok(t)})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !slices.Equal(g.Tools, tt.want) {
			t.Errorf("%s: tools %q, want %q", tt.name, g.Tools, tt.want)
		}
	}
}
