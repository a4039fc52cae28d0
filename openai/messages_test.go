package openai

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference"
)

// TestToChatMessages: the messages each body becomes, or the param a
// refusal names.
func TestToChatMessages(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		want  []chat.Message
		param string // of the refusal; "": accepted
	}{
		{"string content", `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`,
			[]chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}, ""},
		{"developer is system", `[{"role":"developer","content":"Be brief."},{"role":"user","content":"Hi"}]`,
			[]chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}, ""},
		{"text parts joined", `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`,
			[]chat.Message{{Role: "user", Content: "a\nb"}}, ""},
		{"null content with tool call (string arguments)",
			`[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}]}]`,
			[]chat.Message{{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "f", Arguments: json.RawMessage(`{"x": 1}`)}}}}, ""},
		{"object arguments", `[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":{"x":1}}}]}]`,
			[]chat.Message{{Role: "assistant", ToolCalls: []chat.ToolCall{{Name: "f", Arguments: json.RawMessage(`{"x":1}`)}}}}, ""},
		{"empty arguments", `[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":""}}]}]`,
			[]chat.Message{{Role: "assistant", ToolCalls: []chat.ToolCall{{Name: "f"}}}}, ""},
		{"tool result", `[{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f"}}]},` +
			`{"role":"tool","tool_call_id":"call_1","name":"f","content":"{\"ok\":true}"},{"role":"tool","tool_call_id":"call_2","content":"2"}]`,
			[]chat.Message{{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "f"}}},
				{Role: "tool", ToolCallID: "call_1", Name: "f", Content: `{"ok":true}`}, {Role: "tool", ToolCallID: "call_2", Content: "2"}}, ""},
		// As OpenAI's API: a tool message answers an assistant's tool_calls.
		{"tool result first", `[{"role":"tool","tool_call_id":"call_1","content":"x"}]`, nil, "messages.[0].role"},
		{"tool result after a user turn", `[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}}]},{"role":"user","content":"x"},` +
			`{"role":"tool","tool_call_id":"call_1","content":"x"}]`, nil, "messages.[2].role"},
		{"tool result after text", `[{"role":"user","content":"x"},{"role":"assistant","content":"y"},{"role":"tool","content":"x"}]`, nil, "messages.[2].role"},
		{"empty content array", `[{"role":"user","content":[]}]`, nil, "messages[0].content"},
		{"no messages", `[]`, nil, "messages"},
		{"image part", `[{"role":"user","content":"x"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:"}}]}]`, nil, "messages[1].content[0].type"},
		{"audio part", `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"input_audio"}]}]`, nil, "messages[0].content[1].type"},
		{"part without type", `[{"role":"user","content":[{"text":"a"}]}]`, nil, "messages[0].content[0].type"},
		{"unknown part type", `[{"role":"user","content":[{"type":"video"}]}]`, nil, "messages[0].content[0].type"},
		{"arguments not JSON", `[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{oops"}}]}]`, nil, "messages[0].tool_calls[0].function.arguments"},
		{"call without name", `[{"role":"assistant","tool_calls":[{"type":"function","function":{"arguments":"{}"}}]}]`, nil, "messages[0].tool_calls[0].function.name"},
		{"call of another type", `[{"role":"assistant","tool_calls":[{"type":"retrieval","function":{"name":"f"}}]}]`, nil, "messages[0].tool_calls[0].type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var msgs []Message
			if err := json.Unmarshal([]byte(tt.json), &msgs); err != nil {
				t.Fatal(err)
			}
			err := checkMessages(msgs)
			var got []chat.Message
			if err == nil {
				got, err = ToChatMessages(msgs)
			}
			if tt.param != "" {
				var inv *inference.InvalidRequestError
				if !errors.As(err, &inv) || inv.Param != tt.param {
					t.Fatalf("err = %v, want param %q", err, tt.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestContentJSON(t *testing.T) {
	for _, in := range []string{`"hi"`, `[{"type":"text","text":"hi"}]`, `null`, `[]`} {
		var c Content
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		out, _ := json.Marshal(c)
		if string(out) != in {
			t.Errorf("round trip %s → %s", in, out)
		}
	}
	var m Message
	if err := json.Unmarshal([]byte(`{"role":"user","content":42}`), &m); err == nil {
		t.Error("numeric content accepted")
	}
}
