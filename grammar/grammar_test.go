package grammar

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hexserve/hexserve/tokenizer"
)

var (
	llamaOnce  sync.Once
	llamaTok   *tokenizer.Tokenizer
	llamaVocab *Vocab
	llamaErr   error
)

// llama returns the Llama-3.2 tokenizer and its grammar vocabulary.
func llama(t testing.TB) (*tokenizer.Tokenizer, *Vocab) {
	t.Helper()
	llamaOnce.Do(func() {
		llamaTok, llamaErr = tokenizer.Load("../testdata/tokenizer/llama3.2/tokenizer.json")
		if llamaErr != nil {
			return
		}
		llamaVocab = VocabOf(llamaTok, llamaEOS(llamaTok))
	})
	if llamaErr != nil {
		t.Fatal(llamaErr)
	}
	return llamaTok, llamaVocab
}

func llamaEOS(tok *tokenizer.Tokenizer) []int32 {
	var eos []int32
	for _, s := range []string{"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"} {
		if id, ok := tok.TokenID(s); ok {
			eos = append(eos, id)
		}
	}
	return eos
}

func mustCompile(t testing.TB, schema string, strict bool) *Grammar {
	t.Helper()
	g, err := Compile([]byte(schema), Options{Strict: strict})
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return g
}

// checkMatches reports each string of ok that g rejects and each of bad
// that it accepts, after what names the case.
func checkMatches(t *testing.T, g *Grammar, what string, ok, bad []string) {
	t.Helper()
	for _, s := range ok {
		if !g.MatchString(s) {
			t.Errorf("%s: %q rejected", what, s)
		}
	}
	for _, s := range bad {
		if g.MatchString(s) {
			t.Errorf("%s: %q accepted", what, s)
		}
	}
}

func TestMatchString(t *testing.T) {
	tests := []struct {
		schema string
		strict bool
		ok     []string
		bad    []string
	}{
		{`{"type":"integer","minimum":-5,"maximum":120}`, false,
			[]string{"0", "-5", "120", "7", " 12 ", "-0"},
			[]string{"121", "-6", "1.5", "1e2", "01", "", "-", "1200"}},
		{`{"type":"number","exclusiveMinimum":0,"maximum":1.5}`, false,
			[]string{"0.000001", "1.5", "1.499999", "0.5"},
			[]string{"0", "0.0000001", "1.500001", "2", "-0.1", "1."}},
		{`{"type":"string","minLength":2,"maxLength":3}`, false,
			[]string{`"ab"`, `"abc"`, `"é€"`, `"\n\u00e9x"`, `"𝄞a"`},
			[]string{`"a"`, `"abcd"`, `"\ud800x"`, "\"a\x01\"", `"ab`, `"\x"`}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false}`, false,
			[]string{`{"b":"x"}`, `{"a":1,"b":""}`, `{"b":"x","a":2}`, `{ "b" : "x" }`},
			[]string{`{}`, `{"a":1}`, `{"b":"x","c":1}`, `{"b":"x","b":"y"}`, `{"b":1}`}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false}`, true,
			[]string{`{"b":"x"}`, `{"a":1,"b":""}`},
			[]string{`{"b":"x","a":2}`}},
		{`{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}`, false,
			[]string{`[true]`, `[true,false]`, `[ false , true ]`},
			[]string{`[]`, `[true,true,true]`, `[1]`, `[true,]`}},
		{`{"enum":["red","green",1,null,{"a":[1]}]}`, false,
			[]string{`"red"`, `"green"`, `1`, `null`, `{"a":[1]}`},
			[]string{`"blue"`, `2`, `"re"`, `10`}},
		{`{"$defs":{"node":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`, false,
			[]string{`{"next":null}`, `{"next":{"next":{"next":null}}}`},
			[]string{`{}`, `{"next":{}}`}},
		{`{"oneOf":[{"type":"string"},{"type":"integer"}]}`, false,
			[]string{`"x"`, `3`}, []string{`true`}},
		{`{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}}},{"required":["a"]}]}`, false,
			[]string{`{"a":1}`, `{"a":1,"z":[]}`}, []string{`{}`, `{"a":"x"}`}},
		{`true`, false, []string{`{"x":[1,"a",null,true,{}]}`, `-0.5`}, []string{`{`, `tru`, `[1,]`}},
		{`{"type":"string","format":"date"}`, false,
			[]string{`"2024-02-29"`, `"2023-12-31"`, `"0001-01-01"`},
			[]string{`"2023-02-29"`, `"2023-04-31"`, `"2023-13-01"`, `"2023-00-10"`, `"2023-01-00"`, `"2023-1-01"`, `"2023-01-01T"`}},
		{`{"type":"string","format":"date-time"}`, false,
			[]string{`"2024-02-29T23:59:59Z"`, `"2023-12-31T00:00:00.123+05:30"`, `"2023-01-01T10:20:30-00:00"`},
			[]string{`"2024-02-29T24:00:00Z"`, `"2024-02-29T23:60:00Z"`, `"2024-02-29T23:59:59"`, `"2024-02-29 23:59:59Z"`, `"2024-02-29T23:59:59.Z"`}},
		{`{"type":"string","format":"time"}`, false,
			[]string{`"23:59:59Z"`, `"00:00:00.5+01:00"`}, []string{`"23:59"`, `"25:00:00Z"`, `"12:00:00+1:00"`}},
		{`{"type":"string","format":"uuid"}`, false,
			[]string{`"123e4567-e89b-12d3-a456-426614174000"`, `"123E4567-E89B-12D3-A456-426614174000"`},
			[]string{`"123e4567e89b12d3a456426614174000"`, `"123e4567-e89b-12d3-a456-42661417400"`, `"g23e4567-e89b-12d3-a456-426614174000"`}},
		{`{"type":"string","format":"ipv4"}`, false,
			[]string{`"192.168.0.1"`, `"0.0.0.0"`, `"255.255.255.255"`},
			[]string{`"256.1.1.1"`, `"01.1.1.1"`, `"1.1.1"`, `"1.1.1.1.1"`, `"1..1.1"`, `"1.1.1."`}},
		{`{"type":"string","pattern":"^[a-z]+\\d?$"}`, false,
			[]string{`"abc"`, `"abc7"`}, []string{`""`, `"7"`, `"ab7c"`, `"AB"`, `"ab\\u0037"`}},
		{`{"type":"string","pattern":"b+"}`, false, // unanchored
			[]string{`"b"`, `"abba"`, `"ébb"`, `"b\\\""`}, []string{`""`, `"a"`, `"\u0062"`}}, // \u only for control characters
		{`{"type":"string","pattern":"^[\"\\\\/\n]{2}$"}`, false, // escapes are decoded
			[]string{`"\"\\"`, `"/\n"`, `"\u000a\/"`, `"\u000A\u000a"`}, []string{`"\"`, `"\t\n"`, `"\u0022\""`}},
		{`{"type":"string","pattern":"^(ab)*$","minLength":3,"maxLength":5}`, false, // exact with lengths
			[]string{`"abab"`}, []string{`"ab"`, `"ababab"`, `"aba"`}},
		{`{"type":"string","format":"email"}`, false,
			[]string{`"a.b+c@Example.COM"`, `"x@y.z"`}, []string{`"x@y"`, `"a..b@x.com"`, `"@x.com"`, `"a@-x.com"`, `"a@x."`}},
		{`{"type":"string","format":"hostname"}`, false,
			[]string{`"example.com"`, `"example.com."`, `"` + h253 + `"`, `"` + h253 + `."`},
			[]string{`"-a.com"`, `"a..b"`, `"` + h253 + `a"`, `"` + h253 + `.."`, `"` + strings.Repeat("a", 64) + `"`}},
		{`{"type":"string","format":"ipv6"}`, false,
			[]string{`"::1"`, `"2001:DB8::8:800:200C:417A"`, `"::ffff:192.168.0.1"`, `"1:2:3:4:5:6:7:8"`},
			[]string{`"1:2:3:4:5:6:7:8:9"`, `"::1::"`, `"12345::"`, `"::ffff:256.1.1.1"`}},
		{`{"type":"string","format":"uri"}`, false,
			[]string{`"https://example.com/a?b=c#d"`, `"urn:isbn:0451450523"`, `"mailto:a@b.c"`},
			[]string{`"//example.com"`, `"/path"`, `"http://exa mple.com"`, `"1http://x"`}},
		{`{"prefixItems":[{"type":"integer"},{"type":"string"}],"items":false}`, false,
			[]string{`[]`, `[1]`, `[1,"a"]`, `"any"`}, []string{`[1,"a",2]`, `["a"]`}},
	}
	for _, tc := range tests {
		g := mustCompile(t, tc.schema, tc.strict)
		checkMatches(t, g, fmt.Sprintf("%s (strict %v)", tc.schema, tc.strict), tc.ok, tc.bad)
	}
}

// TestClosed: with Options.Closed an object schema with properties and no
// additionalProperties allows no other keys (llama.cpp's default, so
// Ollama's); one without properties, or allowing more, is as without it.
func TestClosed(t *testing.T) {
	for _, tc := range []struct {
		schema      string
		open, shut  string // accepted without and with Closed
		shutRejects string // accepted without Closed only ("" if none)
	}{
		{`{"type":"object","properties":{"a":{"type":"integer"}}}`, `{"a":1}`, `{"a":1}`, `{"a":1,"b":2}`},
		{`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"integer"}}}}}`, `{"a":{"b":1}}`, `{"a":{"b":1}}`, `{"a":{"b":1,"c":2}}`},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true}`, `{"a":1,"b":2}`, `{"a":1,"b":2}`, ""},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}}`, `{"a":1,"b":"x"}`, `{"a":1,"b":"x"}`, ""},
		{`{"type":"object"}`, `{"b":2}`, `{"b":2}`, ""},
	} {
		open := mustCompile(t, tc.schema, false)
		shut, err := Compile([]byte(tc.schema), Options{Closed: true})
		if err != nil {
			t.Fatal(err)
		}
		if !open.MatchString(tc.open) || !shut.MatchString(tc.shut) {
			t.Errorf("%s: %q / %q rejected", tc.schema, tc.open, tc.shut)
		}
		if tc.shutRejects != "" && (!open.MatchString(tc.shutRejects) || shut.MatchString(tc.shutRejects)) {
			t.Errorf("%s: %q: open %v, closed %v; want true, false", tc.schema, tc.shutRejects, open.MatchString(tc.shutRejects), shut.MatchString(tc.shutRejects))
		}
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct{ schema, path string }{
		{`{"properties":{"x":{"not":{}}}}`, "properties.x.not"},
		{`{"$ref":"https://example.com/s.json"}`, "$ref"},
		{`{"items":{"$ref":"other.json#/a"}}`, "items.$ref"},
		{`{"type":"object","patternProperties":{"a":{}}}`, "patternProperties"},
		{`{"oneOf":[{"type":"integer"},{"type":"number"}]}`, "oneOf"},
		{`{"uniqueItems":true}`, "uniqueItems"},
		{`{"$ref":"#/$defs/missing"}`, "$ref"},
		{`{"type":"wat"}`, "type"},
		{`{"anyOf":[{"type":"string","format":"regex"}]}`, "anyOf.0.format"},
		{`{"format":"idn-email"}`, "format"},
		{`{"properties":{"p":{"pattern":"(a)\\1"}}}`, "properties.p.pattern"},
		{`{"pattern":"(?=a)"}`, "pattern"},
		{`{"pattern":"\\bx"}`, "pattern"},
		{`{"pattern":"a$b"}`, "pattern"},
		{`{"pattern":"a","format":"email"}`, "pattern"},
		{`{"pattern":3}`, "pattern"},
		{`{"anyOf":[{"$ref":"#"},{"type":"string"}]}`, "$ref"},
		{`{"$ref":"#"}`, "$ref"},
	}
	for _, tc := range tests {
		_, err := Compile([]byte(tc.schema), Options{})
		e, ok := err.(*Error)
		if !ok || e.Path != tc.path {
			t.Errorf("Compile(%s) = %v, want an error at %q", tc.schema, err, tc.path)
		}
	}
}

func TestTools(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"],"additionalProperties":false}`), Strict: true},
		{Name: "now"},
	}
	tests := []struct {
		parallel bool
		ok, bad  []string
	}{
		{false,
			[]string{`{"name":"get_weather","parameters":{"city":"Paris"}}`, `{"name": "now", "parameters": {}}`, `{"name":"get_weather","parameters":{"city":"x","days":7}}`},
			[]string{`{"parameters":{},"name":"now"}`, `{"name":"now","parameters":{"a":1}}`, `{"name":"get_weather","parameters":{}}`, `{"name":"other","parameters":{}}`, `[{"name":"now","parameters":{}}]`, `{"name":"get_weather","parameters":{"days":1,"city":"x"}}`}},
		{true,
			[]string{`{"name":"now","parameters":{}}`, `[{"name":"now","parameters":{}},{"name":"get_weather","parameters":{"city":""}}]`},
			[]string{`[]`}},
	}
	for _, tc := range tests {
		g, err := Tools(tools, tc.parallel, Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkMatches(t, g, fmt.Sprintf("parallel %v", tc.parallel), tc.ok, tc.bad)
	}
	_, err := Tools([]Tool{tools[1], {Name: "bad", Parameters: []byte(`{"properties":{"x":{"not":{}}}}`)}}, false, Options{})
	if e, ok := err.(*ToolError); !ok || e.Index != 1 || e.Err.Path != "properties.x.not" {
		t.Errorf("got %v, want tool 1 at properties.x.not", err)
	}
}

// h253 is a hostname of 253 characters, the format's limit.
var h253 = strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("a", 61)

// TestToolsSyntax checks the family syntaxes of forced calls: Hermes wraps
// each call in <tool_call> lines (several with parallel, one per block),
// Granite puts one JSON array after <|tool_call|>; both name the arguments
// "arguments". Each grammar accepts exactly its own syntax.
func TestToolsSyntax(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
		{Name: "now"},
	}
	hermes := CallSyntax{ArgsKey: "arguments", Open: "<tool_call>\n", Close: "\n</tool_call>", Sep: "\n"}
	granite := CallSyntax{ArgsKey: "arguments", Prefix: "<|tool_call|>"}
	call := `{"name": "get_weather", "arguments": {"city": "Paris"}}`
	now := `{"name": "now", "arguments": {}}`
	tests := []struct {
		name     string
		syntax   CallSyntax
		parallel bool
		ok, bad  []string
	}{
		{"hermes", hermes, false,
			[]string{"<tool_call>\n" + call + "\n</tool_call>", "<tool_call>\n" + now + "\n</tool_call>", " <tool_call>\n" + now + "\n</tool_call>\n"},
			[]string{call, "<tool_call>" + call + "</tool_call>", "<tool_call>\n" + call + "\n</tool_call>\n<tool_call>\n" + now + "\n</tool_call>",
				"<tool_call>\n" + call, "<tool_call>\n" + `{"name": "other", "arguments": {}}` + "\n</tool_call>",
				"<tool_call>\n" + `{"name": "now", "parameters": {}}` + "\n</tool_call>", "<tool_call>\n" + `{"arguments": {}, "name": "now"}` + "\n</tool_call>",
				"<tool_call>\n" + `{"name": "get_weather", "arguments": {}}` + "\n</tool_call>", "<tool_call>\n[" + now + "]\n</tool_call>"}},
		{"hermes parallel", hermes, true,
			[]string{"<tool_call>\n" + call + "\n</tool_call>", "<tool_call>\n" + call + "\n</tool_call>\n<tool_call>\n" + now + "\n</tool_call>",
				"<tool_call>\n" + now + "\n</tool_call>\n<tool_call>\n" + now + "\n</tool_call>\n<tool_call>\n" + call + "\n</tool_call>"},
			[]string{"<tool_call>\n" + call + "\n</tool_call><tool_call>\n" + now + "\n</tool_call>",
				"<tool_call>\n" + call + "\n</tool_call>\n\n<tool_call>\n" + now + "\n</tool_call>x", ""}},
		{"granite", granite, false,
			[]string{"<|tool_call|>[" + call + "]", "<|tool_call|>[ " + now + " ]"},
			[]string{"<|tool_call|>[" + call + "," + now + "]", "<|tool_call|>" + call, "[" + call + "]", "<|tool_call|>[]"}},
		{"granite parallel", granite, true,
			[]string{"<|tool_call|>[" + call + ", " + now + "]"},
			[]string{"<|tool_call|>[]", "<|tool_call|>" + now}},
		{"json", CallSyntax{ArgsKey: "arguments"}, true,
			[]string{call, "[" + call + "," + now + "]"},
			[]string{`{"name": "now", "parameters": {}}`, "<tool_call>\n" + now + "\n</tool_call>"}},
	}
	for _, tc := range tests {
		g, err := Tools(tools, tc.parallel, Options{Calls: tc.syntax})
		if err != nil {
			t.Fatal(err)
		}
		checkMatches(t, g, tc.name, tc.ok, tc.bad)
	}
}
