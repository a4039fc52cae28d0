package apiconv

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/inference"
)

// TestToolNames: the one check of OpenAI-form tools, for chat completions
// and the Ollama API alike; a tool without a type is refused, as OpenAI
// refuses it.
func TestToolNames(t *testing.T) {
	for _, tc := range []struct {
		name, tools string
		want        []string
		param, msg  string // of the error
	}{
		{"functions", `[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]`, []string{"a", "b"}, "", ""},
		{"none", `[]`, []string{}, "", ""},
		{"missing type", `[{"function":{"name":"a"}}]`, nil, "tools[0].type", "Missing required parameter: 'tools[0].type'."},
		{"other type", `[{"type":"function","function":{"name":"a"}},{"type":"web_search"}]`, nil, "tools[1].type", `tool type "web_search" is not supported`},
		{"empty type", `[{"type":"","function":{"name":"a"}}]`, nil, "tools[0].type", `tool type "" is not supported`},
		{"no name", `[{"type":"function","function":{}}]`, nil, "tools[0].function.name", "no function name"},
		{"not an object", `[[1]]`, nil, "tools[0]", "must be an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tools []json.RawMessage
			if err := json.Unmarshal([]byte(tc.tools), &tools); err != nil {
				t.Fatal(err)
			}
			got, err := ToolNames(tools)
			var ie *inference.InvalidRequestError
			switch {
			case tc.param == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.param == "" && strings.Join(got, ",") != strings.Join(tc.want, ","):
				t.Errorf("names %v, want %v", got, tc.want)
			case tc.param != "" && (!errors.As(err, &ie) || ie.Param != tc.param || !strings.Contains(ie.Message, tc.msg)):
				t.Errorf("error %#v, want param %s saying %q", err, tc.param, tc.msg)
			}
		})
	}
}

func TestParseToolCalls(t *testing.T) {
	text := `{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}}`
	for _, tc := range []struct {
		name     string
		offered  []string
		parallel bool
		want     []string // call names; nil: not calls
	}{
		{"both", []string{"a", "b"}, true, []string{"a", "b"}},
		{"at most one", []string{"a", "b"}, false, []string{"a"}},
		{"not offered", []string{"a"}, true, nil},
		{"no tools", nil, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, ok := ParseToolCalls(text, tc.offered, tc.parallel, false)
			var names []string
			for _, c := range calls {
				names = append(names, c.Name)
			}
			if ok != (tc.want != nil) || strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("calls %v ok %v, want %v", names, ok, tc.want)
			}
		})
	}
}

func TestFunctionTool(t *testing.T) {
	d := "adds"
	for _, tc := range []struct {
		name        string
		description *string
		parameters  string
		want        string
	}{
		{"all", &d, ` {"type":"object"} `, `{"type":"function","function":{"name":"add","description":"adds","parameters":{"type":"object"}}}`},
		{"bare", nil, `null`, `{"type":"function","function":{"name":"add"}}`},
	} {
		if got := string(FunctionTool("add", tc.description, json.RawMessage(tc.parameters))); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestCallGate: text that cannot be a call passes (what was held first, in
// one piece); a call is held to the end; without tools everything passes.
func TestCallGate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tools  bool
		deltas []string
		sent   []string // what Pass let through, in order
		held   string   // what End returned; "" none
	}{
		{"text", true, []string{"  ", "Hel", "lo"}, []string{"  Hel", "lo"}, ""},
		{"call", true, []string{`{"name": "f", `, `"parameters": {}}`}, nil, `{"name": "f", "parameters": {}}`},
		{"no tools", false, []string{`{"name": `, "x"}, []string{`{"name": `, "x"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewCallGate(tc.tools)
			var sent []string
			for _, d := range tc.deltas {
				if text, ok := g.Pass(d); ok {
					sent = append(sent, text)
				}
			}
			held, ok := g.End()
			if strings.Join(sent, "|") != strings.Join(tc.sent, "|") || held != tc.held || ok != (tc.held != "") || g.Holding() {
				t.Errorf("sent %q, held %q %v", sent, held, ok)
			}
		})
	}
}

// TestCutToolCalls: a forced call cut off by the token limit reads as the
// calls it completed and the one it cut, arguments as far as they came;
// before the first name is whole it is not a call.
func TestCutToolCalls(t *testing.T) {
	offered := []string{"get_weather", "get_time"}
	for _, tc := range []struct {
		name, text string
		parallel   bool
		want       []string // name=arguments per call; nil: not calls
	}{
		{"in the name", ` { "name": "get_wea`, true, []string{"get_weather="}},
		{"in a name two begin", ` { "name": "get_`, true, nil},
		{"before the name", ` { "na`, true, nil},
		{"before the name, one offered", ` { "na`, true, []string{"get_weather="}},
		{"before its colon, one offered", "{\"name\" \n", true, []string{"get_weather="}},
		{"name whole", "{ \n\t\"name\":\r\n \"get_weather\"", true, []string{"get_weather="}},
		{"in the arguments", `{"name": "get_weather", "parameters": {"city": "Par`, true, []string{`get_weather={"city": "Par`}},
		{"a brace inside a string", `{"name": "get_weather", "parameters": {"city": "a}b\"}`, true, []string{`get_weather={"city": "a}b\"}`}},
		{"arguments whole, object not", `{"name": "get_weather", "parameters": {"city": "Paris"}`, true, []string{`get_weather={"city": "Paris"}`}},
		{"second call cut", `[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_time", "parameters": {"tz`, true,
			[]string{`get_weather={"city": "Paris"}`, `get_time={"tz`}},
		{"one call kept", `[{"name": "get_weather", "parameters": {}}, {"name": "get_time"`, false, []string{`get_weather={}`}},
		{"not offered", `{"name": "rm_rf", "parameters": {"`, true, nil},
		{"not a call", `Hello`, true, nil},
		{"not a call, one offered", `{"nombre": "x"`, true, nil},
		{"empty", ``, true, nil},
		{"empty, one offered", ` `, true, []string{"get_weather="}},
		{"before the array's first call, one offered", ` [ `, true, []string{"get_weather="}},
		{"before the first call", `[`, true, nil},
		{"after a call, before the next", `[{"name": "get_weather", "parameters": {}}, `, true, []string{`get_weather={}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, ok := CutToolCalls(tc.text, offered, tc.parallel)
			if strings.HasSuffix(tc.name, "one offered") {
				calls, ok = CutToolCalls(tc.text, offered[:1], tc.parallel)
			}
			var got []string
			for _, c := range calls {
				if !strings.HasPrefix(c.ID, "call_") {
					t.Errorf("id %q", c.ID)
				}
				got = append(got, c.Name+"="+string(c.Arguments))
			}
			if ok != (tc.want != nil) || strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("%v %q, want %q", ok, got, tc.want)
			}
		})
	}
}
