package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/chat"
)

func TestHostedType(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want bool
	}{
		{"web_search", true}, {"web_search_preview", true}, {"web_search_preview_2025_03_11", true},
		{"web_search_2025_08_26", true}, {"file_search", true}, {"code_interpreter", true},
		{"computer_use_preview", true}, {"image_generation", true}, {"mcp", true},
		{"function", false}, {"namespace", false}, {"custom", false}, {"local_shell", false},
		{"web_search_x", false}, {"mcp_2025_1_01", false}, {"file_search_2025_08_2x", false},
	} {
		if got := hostedType(tc.typ); got != tc.want {
			t.Errorf("hostedType(%q) = %v, want %v", tc.typ, got, tc.want)
		}
	}
}

// TestNamespaceTools: a namespace's functions are offered under qualified
// names with the namespace's description first; hosted tools are left out,
// each type once.
func TestNamespaceTools(t *testing.T) {
	rt, err := responseTools([]json.RawMessage{
		json.RawMessage(`{"type":"function","name":"f","description":"F."}`),
		json.RawMessage(`{"type":"web_search"}`),
		json.RawMessage(`{"type":"namespace","name":"crm","description":"Customer records.","tools":[{"type":"function","name":"find","description":"Find one.","parameters":{"type":"object"}},{"type":"function","name":"f"}]}`),
		json.RawMessage(`{"type":"web_search","search_context_size":"low"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rt.names, ","); got != "f,crm.find,crm.f" {
		t.Errorf("names %s", got)
	}
	if want := `{"type":"function","function":{"name":"crm.find","description":"Customer records. Find one.","parameters":{"type":"object"}}}`; string(rt.tools[1]) != want {
		t.Errorf("tool %s, want %s", rt.tools[1], want)
	}
	if len(rt.hosted) != 1 || rt.hosted[0] != "web_search" {
		t.Errorf("hosted %v", rt.hosted)
	}
	g := &ResponseGeneration{namespaced: rt.namespaced}
	it := g.functionCallItem(chat.ToolCall{ID: "call_1", Name: "crm.find", Arguments: json.RawMessage(`{}`)})
	if it.Namespace != "crm" || it.Name != "find" {
		t.Errorf("item %+v", it)
	}
	if it := g.functionCallItem(chat.ToolCall{ID: "call_2", Name: "f", Arguments: json.RawMessage(`{}`)}); it.Namespace != "" || it.Name != "f" {
		t.Errorf("plain item %+v", it)
	}
}
