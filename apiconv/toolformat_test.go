package apiconv

import (
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/chat"
)

// toolFormatCase is a reply in one format and what it parses to: content
// and calls as name=arguments; calls nil: all of it is content.
type toolFormatCase struct {
	name, text string
	content    string
	calls      []string
}

var offeredTools = []string{"get_weather", "get_time"}

var toolFormatCases = map[string][]toolFormatCase{
	"hermes": {
		{"one call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []string{`get_weather={"city":"Paris"}`}},
		{"two calls, text before", "Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
			"Let me check.", []string{`get_weather={"city":"Paris"}`, `get_time={}`}},
		{"no closing tag at the end", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}", "", []string{`get_time={"tz":"UTC"}`}},
		{"arguments first, other keys ignored", "<tool_call>{\"arguments\": {\"a\": [1, 2]}, \"name\": \"get_time\", \"id\": 7}</tool_call>", "", []string{`get_time={"a":[1,2]}`}},
		{"arguments missing", "<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>", "", []string{`get_time={}`}},
		{"unknown tool is still a call", "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", "", []string{`rm_rf={}`}},
		{"text after the calls dropped", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\nDone.", "", []string{`get_time={}`}},
		{"malformed JSON", "Sure <tool_call>\n{\"name\": \"get_time\", \"arguments\": {\n</tool_call>", "", nil},
		{"one bad block spoils all", "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call><tool_call>[1]</tool_call>", "", nil},
		{"arguments not an object", "<tool_call>{\"name\": \"get_time\", \"arguments\": \"x\"}</tool_call>", "", nil},
		{"a list in a block", "<tool_call>[{\"name\": \"get_time\", \"arguments\": {}}]</tool_call>", "", nil},
		{"plain text", "The weather is fine.", "", nil},
		{"a bare call object is text", `{"name": "get_time", "arguments": {}}`, "", nil},
		{"a partial marker at the end", "Hello <tool_ca", "", nil},
		{"trailing whitespace, no call", "Fine.\n\n", "", nil},
		{"a marker-like tag", "Use <tool_calls> here", "", nil},
	},
	"granite": {
		{"two calls", `<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}]`, "",
			[]string{`get_weather={"city":"Paris"}`, `get_time={}`}},
		{"text before", "Checking.\n<|tool_call|>[{\"name\": \"get_time\", \"arguments\": {}}]\n", "Checking.", []string{`get_time={}`}},
		{"one object", `<|tool_call|>{"name": "get_time", "arguments": {}}`, "", []string{`get_time={}`}},
		{"malformed", `<|tool_call|>[{"name": "get_time", "arguments": {}}`, "", nil},
		{"empty list", `<|tool_call|>[]`, "", nil},
		{"no marker", `[{"name": "get_time", "arguments": {}}]`, "", nil},
	},
	"json": {
		{"one call", ` {"name": "get_weather", "arguments": {"city": "Paris"}} `, "", []string{`get_weather={"city":"Paris"}`}},
		{"a list", `[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "parameters": {}}]`, "",
			[]string{`get_weather={"city":"Paris"}`, `get_time={}`}},
		{"unknown tool is text", `{"name": "rm_rf", "arguments": {}}`, "", nil},
		{"text before is text", `Here: {"name": "get_time", "arguments": {}}`, "", nil},
		{"malformed", `{"name": "get_time", "arguments": {}`, "", nil},
	},
	"llama3_json": {
		{"python tag", `<|python_tag|>{"name": "get_time", "parameters": {}}`, "", []string{`get_time={}`}},
		{"two with ;", `{"name": "get_time", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "Oslo"}}`, "",
			[]string{`get_time={}`, `get_weather={"city":"Oslo"}`}},
		{"unknown tool is text", `{"name": "rm_rf", "parameters": {}}`, "", nil},
		{"other keys make it text", `{"name": "get_time", "parameters": {}, "id": 1}`, "", nil},
	},
}

func callStrings(calls []chat.ToolCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Name+"="+string(c.Arguments))
	}
	return out
}

// TestToolFormats parses each format's replies whole: content, calls in
// order, and the cases that are all content.
func TestToolFormats(t *testing.T) {
	for name, cases := range toolFormatCases {
		f, err := ToolFormatNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				content, calls, ok := ParseReply(f, tc.text, offeredTools, true, false)
				if got := callStrings(calls); ok != (tc.calls != nil) || content != tc.content || !slices.Equal(got, tc.calls) {
					t.Errorf("content %q calls %q ok %v, want %q %q", content, got, ok, tc.content, tc.calls)
				}
				for _, c := range calls {
					if !strings.HasPrefix(c.ID, "call_") {
						t.Errorf("id %q", c.ID)
					}
				}
				if _, calls, _ := ParseReply(f, tc.text, offeredTools, false, false); len(calls) > 1 {
					t.Errorf("parallel off kept %d calls", len(calls))
				}
				if _, _, ok := ParseReply(f, tc.text, nil, true, false); ok {
					t.Error("parsed with no tools offered")
				}
			})
		}
	}
}

// stream feeds text to f's gate in the pieces cut at cuts and returns the
// content a stream sends and its calls, read as the APIs' streams do: the
// text released, then what End holds parsed (or sent as text).
func stream(f ToolFormat, text string, cuts []int) (string, []string) {
	g := NewFormatGate(f, true)
	var sent strings.Builder
	at := 0
	for _, c := range append(cuts, len(text)) {
		if d, ok := g.Pass(text[at:c]); ok {
			sent.WriteString(d)
		}
		at = c
	}
	held, ok := g.End()
	if !ok {
		return sent.String(), nil
	}
	content, calls, ok := ParseReply(f, held, offeredTools, true, false)
	if !ok {
		return sent.String() + held, nil
	}
	return sent.String() + content, callStrings(calls)
}

// TestToolFormatStreaming streams every case cut at every byte boundary,
// and byte by byte: the content sent and the calls are the whole parse's
// (all the text as content when it is not calls).
func TestToolFormatStreaming(t *testing.T) {
	for name, cases := range toolFormatCases {
		f, _ := ToolFormatNamed(name)
		for _, tc := range cases {
			want := tc.content
			if tc.calls == nil {
				want = tc.text
			}
			splits := [][]int{nil}
			var bytewise []int
			for i := 1; i < len(tc.text); i++ {
				splits = append(splits, []int{i})
				bytewise = append(bytewise, i)
			}
			for _, cuts := range append(splits, bytewise) {
				content, calls := stream(f, tc.text, cuts)
				if content != want || !slices.Equal(calls, tc.calls) {
					t.Errorf("%s/%s cut at %v: content %q calls %q, want %q %q", name, tc.name, cuts, content, calls, want, tc.calls)
					break
				}
			}
		}
	}
}

// TestGateReleasesContent: with a marker format the content before a call
// streams as it comes, holding back only what may begin the marker.
func TestGateReleasesContent(t *testing.T) {
	g := NewFormatGate(hermes{}, true)
	for _, step := range []struct{ delta, sent string }{
		{"Let me ", "Let me"}, {"check <", " check"}, {"b> now", " <b> now"}, {"\n\n<tool", ""}, {"_call>\n{", ""},
	} {
		if got, _ := g.Pass(step.delta); got != step.sent {
			t.Fatalf("Pass(%q) = %q, want %q", step.delta, got, step.sent)
		}
	}
	if held, ok := g.End(); !ok || held != "\n\n<tool_call>\n{" {
		t.Errorf("held %q %v", held, ok)
	}
}

// TestCutCallsFormats: a forced call in each format that the token limit
// cut is read as far as it came.
func TestCutCallsFormats(t *testing.T) {
	for _, tc := range []struct {
		format, text string
		want         []string
	}{
		{"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", []string{`get_weather={"city": "Par`}},
		{"hermes", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_wea", []string{`get_time={}`, `get_weather=`}},
		{"hermes", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_ca", []string{`get_time={}`}},
		{"hermes", "<tool_ca", nil},
		{"hermes", "<tool_ca", []string{"get_time="}}, // one tool offered
		{"hermes", "<tool_call>\n", []string{"get_time="}},
		{"granite", "<|tool_call|>[", []string{"get_time="}},
		{"granite", `<|tool_call|>[{"name": "get_time", "arguments": {}}, {"name": "get_weather", "arguments": {"ci`, []string{`get_time={}`, `get_weather={"ci`}},
		{"granite", `<|tool_`, nil},
		{"json", `{"name": "get_weather", "arguments": {"city": "Pa`, []string{`get_weather={"city": "Pa`}},
		{"json", `{"name": "get_weather", "parameters": {"city": "Pa`, []string{`get_weather=`}}, // not its key: as far as the name
	} {
		f, _ := ToolFormatNamed(tc.format)
		offered := offeredTools
		if len(tc.want) == 1 && tc.want[0] == "get_time=" {
			offered = offered[1:]
		}
		_, calls, ok := ParseReply(f, tc.text, offered, true, true)
		if got := callStrings(calls); ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: %q %v, want %q", tc.format, tc.text, got, ok, tc.want)
		}
	}
}

// TestDetectToolFormat: the template's markers decide, config.json's
// model_type only without them; with neither, no template is the built-in
// Llama one's format and a template is json.
func TestDetectToolFormat(t *testing.T) {
	for _, tc := range []struct{ template, modelType, want string }{
		{"", "", "llama3_json"},
		{"", "qwen3", "hermes"},
		{"{{- '<tool_call>\\n' }}{{ tool_call | tojson }}", "llama", "hermes"}, // Falcon3
		{"<|im_start|>{% if tools %}<tool_call>{% endif %}", "qwen2", "hermes"},
		{"{{ '<|tool_call|>' }}<tool_call>", "", "granite"},
		{"<|start_header_id|>{{ '<|python_tag|>' }}", "", "llama3_json"},
		{"<|start_header_id|>system<|end_header_id|>", "", "llama3_json"}, // Llama 3.2
		{"<|user|>{{ content }}<|end|>", "phi3", "json"},                  // Phi-3.5
		{"<|user|>{{ content }}<|end|>", "Qwen3", "hermes"},
		{"<|user|>{{ content }}<|end|>", "granite", "granite"},
		{"<|user|>{{ content }}<|end|>", "", "json"},
	} {
		if got := DetectToolFormat(tc.template, tc.modelType); got != tc.want {
			t.Errorf("DetectToolFormat(%q, %q) = %s, want %s", tc.template, tc.modelType, got, tc.want)
		}
	}
}

// TestToolFormatNamed: an unknown name is an error listing the formats.
func TestToolFormatNamed(t *testing.T) {
	if _, err := ToolFormatNamed("pythonic"); err == nil || !strings.Contains(err.Error(), "llama3_json, hermes, granite, json") {
		t.Errorf("err %v", err)
	}
}
