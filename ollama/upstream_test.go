package ollama

import (
	"encoding/json"
	"testing"

	"github.com/hexserve/hexserve/upstream/chatwire/chatwiretest"
)

func TestChatToOpenAI(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string // in the OpenAI request
		err        string
	}{
		{"tools round trip", `{"model":"m","messages":[{"role":"user","content":"weather?"},
			{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get","arguments":{"city":"Oslo"}}}]},
			{"role":"tool","content":"5C","tool_name":"get"}],"tools":[{"type":"function","function":{"name":"get"}}]}`,
			[]string{`{"role":"assistant","content":"","tool_calls":[{"id":"call_1_0","type":"function","function":{"name":"get","arguments":"{\"city\":\"Oslo\"}"}}]}`,
				`{"role":"tool","content":"5C","name":"get"}`, `"tools":[{"type":"function","function":{"name":"get"}}]`}, ""},
		{"schema", `{"model":"m","messages":[{"role":"user","content":"x"}],"format":{"type":"object"},"options":{"num_predict":-1,"stop":["\n"]}}`,
			[]string{`"response_format":{"json_schema":{"name":"format","schema":{"type":"object"}},"type":"json_schema"}`, `"stop":["\n"]`}, ""},
		{"bad format", `{"model":"m","messages":[],"format":"yaml"}`, nil, "format must be"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var req ChatRequest
			if err := json.Unmarshal([]byte(c.body), &req); err != nil {
				t.Fatal(err)
			}
			out, err := ChatToOpenAI(&req)
			// None asks for a limit (num_predict -1 is none): no max_tokens.
			chatwiretest.Check(t, out, err, c.err, c.want, []string{"max_tokens"})
		})
	}
}

// TestRelayToolCalls: a call streamed in pieces is one ToolCall with its
// arguments as an object.
func TestRelayToolCalls(t *testing.T) {
	r := &Relay{}
	for _, c := range []string{
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"get","arguments":"{\"ci"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}]}`,
	} {
		if _, err := r.Chunk([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := json.Marshal(r.ToolCalls())
	if want := `[{"id":"call_1","function":{"index":0,"name":"get","arguments":{"city":"Oslo"}}}]`; string(got) != want {
		t.Errorf("tool calls %s, want %s", got, want)
	}
	if _, err := r.Chunk([]byte(`{"error":{"message":"boom"}}`)); err == nil {
		t.Error("an error chunk is not an error")
	}
}
