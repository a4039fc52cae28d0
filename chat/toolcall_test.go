package chat

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

var callIDPattern = regexp.MustCompile(`^call_[A-Za-z0-9]{24}$`)

func TestParseToolCalls(t *testing.T) {
	type call struct{ name, args string }
	tests := []struct {
		name string
		text string
		want []call // nil: not a tool call
	}{
		{"parameters", `{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}`,
			[]call{{"get_weather", `{"city":"Paris","unit":"celsius"}`}}},
		{"arguments variant", `{"name":"f","arguments":{"b":1,"a":[1.50,true,null]}}`, []call{{"f", `{"b":1,"a":[1.50,true,null]}`}}},
		{"python tag and whitespace", "\n <|python_tag|> {\"name\": \"f\", \"parameters\": {}}\n\n", []call{{"f", `{}`}}},
		{"no parameters", `{"name": "now"}`, []call{{"now", `{}`}}},
		{"type function", `{"type": "function", "name": "f", "parameters": {"x": "y"}}`, []call{{"f", `{"x":"y"}`}}},
		{"nested braces in strings", `{"name": "f", "parameters": {"q": "a } b { \"c\" ]", "n": {"m": [{}]}}}`,
			[]call{{"f", `{"q":"a } b { \"c\" ]","n":{"m":[{}]}}`}}},
		{"unicode and html kept", `{"name": "f", "parameters": {"s": "<é>&\u00e9\n"}}`, []call{{"f", `{"s":"<é>&é\n"}`}}},
		{"array", `[{"name": "a", "parameters": {}}, {"name": "b", "arguments": {"x": 1}}]`, []call{{"a", `{}`}, {"b", `{"x":1}`}}},
		{"semicolons", `{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": 1}}`, []call{{"a", `{}`}, {"b", `{"x":1}`}}},

		{"plain text", `The weather is nice.`, nil},
		{"empty", "  ", nil},
		{"python tag only", "<|python_tag|>", nil},
		{"python code", "<|python_tag|>print(1)", nil},
		{"mentions JSON later", `Sure: {"name": "f", "parameters": {}}`, nil},
		{"trailing text", `{"name": "f", "parameters": {}} and then some`, nil},
		{"truncated", `{"name": "f", "parameters": {"a": 1}`, nil},
		{"malformed", `{"name": "f", "parameters": {a: 1}}`, nil},
		{"single quotes", `{'name': 'f', 'parameters': {}}`, nil},
		{"parameters not object", `{"name": "f", "parameters": "{}"}`, nil},
		{"both parameters and arguments", `{"name": "f", "parameters": {}, "arguments": {}}`, nil},
		{"extra key", `{"name": "Bob", "age": 3}`, nil},
		{"no name", `{"parameters": {}}`, nil},
		{"empty name", `{"name": "", "parameters": {}}`, nil},
		{"name not string", `{"name": 1, "parameters": {}}`, nil},
		{"wrong type", `{"type": "tool", "name": "f"}`, nil},
		{"empty array", `[]`, nil},
		{"array with non-call", `[{"name": "a"}, 3]`, nil},
		{"trailing semicolon", `{"name": "a"};`, nil},
		{"number", `42`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, ok := ParseToolCalls(tt.text)
			if ok != (tt.want != nil) {
				t.Fatalf("ok = %v, calls %+v", ok, calls)
			}
			if !ok {
				if calls != nil {
					t.Errorf("calls = %+v with ok=false", calls)
				}
				return
			}
			if len(calls) != len(tt.want) {
				t.Fatalf("got %d calls, want %d", len(calls), len(tt.want))
			}
			ids := map[string]bool{}
			for i, c := range calls {
				if c.Name != tt.want[i].name || string(c.Arguments) != tt.want[i].args {
					t.Errorf("call %d = %s %s, want %s %s", i, c.Name, c.Arguments, tt.want[i].name, tt.want[i].args)
				}
				if !callIDPattern.MatchString(c.ID) || ids[c.ID] {
					t.Errorf("bad or repeated ID %q", c.ID)
				}
				ids[c.ID] = true
			}
			// Every accepted output must be a detector candidate.
			var d ToolCallDetector
			if got := d.Feed(tt.text); got != MaybeCall {
				t.Errorf("detector says %v for a valid call", got)
			}
		})
	}
}

func TestDetector(t *testing.T) {
	tests := []struct {
		text string
		want Decision
	}{
		{"", Undecided},
		{" \n\t\u3000", Undecided},
		{"\xe3\x80", Undecided}, // first two bytes of U+3000
		{"\xe3\x80\x80x", Text},
		{"{", Undecided},
		{" {\n ", Undecided},
		{"{\"", MaybeCall},
		{"\n{ \"name\"", MaybeCall},
		{"{x", Text},
		{"{}", Text},
		{"[", Undecided},
		{"[ {", Undecided},
		{"[{\"", MaybeCall},
		{"[1", Text},
		{"[{1", Text},
		{"<|py", Undecided},
		{"<|python_tag|>", MaybeCall},
		{"<|python_tag|>print(1)", MaybeCall},
		{"<|eot", Text},
		{"<b>", Text},
		{"Hello", Text},
		{"\x80", Text},
		{"\u200b{\"", Text}, // U+200B is not whitespace
	}
	for _, tt := range tests {
		var d ToolCallDetector
		if got := d.Feed(tt.text); got != tt.want {
			t.Errorf("Feed(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

// TestDetectorSplits feeds the same texts in random pieces (splitting
// multi-byte characters too) and checks the decision never changes once made
// and ends where feeding the whole text ends.
func TestDetectorSplits(t *testing.T) {
	texts := []string{
		`{"name": "f", "parameters": {"a": "}"}}`,
		"  \u3000\n<|python_tag|>{\"name\": \"f\"}",
		"\u2028 [ {\"name\": \"a\"} ]",
		"Sure! {\"name\": \"f\"}",
		"{ not json",
		"\u3000\u3000 plain answer with 你好",
		"<|pyth0n",
		"   ",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, text := range texts {
		var whole ToolCallDetector
		want := whole.Feed(text)
		for trial := 0; trial < 200; trial++ {
			var d ToolCallDetector
			var got Decision
			first := Undecided
			for rest := text; rest != ""; {
				n := 1 + r.IntN(min(len(rest), 4))
				got = d.Feed(rest[:n])
				rest = rest[n:]
				if first == Undecided {
					first = got
				} else if got != first {
					t.Fatalf("%q: decision changed from %v to %v", text, first, got)
				}
			}
			if got != want || d.Buffered() != text {
				t.Fatalf("%q: split decision %v (buffer %q), whole %v", text, got, d.Buffered(), want)
			}
		}
	}
}

func TestNewCallID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewCallID()
		if !callIDPattern.MatchString(id) || seen[id] {
			t.Fatalf("bad or repeated ID %q", id)
		}
		seen[id] = true
	}
	if strings.Count(strings.Join(mapKeys(seen), ""), "A") == 0 {
		t.Error("alphabet never produced 'A' in 24000 characters")
	}
}

func mapKeys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestOfferedToolCalls(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		offered    []string
		want       string // the calls' names and arguments; "" with ok false
	}{
		{"offered", `{"name": "f", "parameters": {"a": 1}}<|eot_id|>`, []string{"f"}, `f{"a":1}`},
		{"no arguments", `{"name": "f"}`, []string{"g", "f"}, `f{}`},
		{"not offered", `{"name": "g", "parameters": {}}`, []string{"f"}, ""},
		{"no tools", `{"name": "f", "parameters": {}}`, nil, ""},
		{"text", `hello`, []string{"f"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, ok := OfferedToolCalls(tc.text, tc.offered)
			var got string
			for _, c := range calls {
				got += c.Name + string(c.Arguments)
			}
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("OfferedToolCalls(%q, %q) = %q, %v; want %q", tc.text, tc.offered, got, ok, tc.want)
			}
		})
	}
}
