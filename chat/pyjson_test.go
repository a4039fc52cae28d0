package chat

import (
	"math"
	"strings"
	"testing"
)

func pyDumps(t *testing.T, in string, indent int) string {
	t.Helper()
	v, err := parseJSON(in)
	if err != nil {
		t.Fatalf("parseJSON(%q): %v", in, err)
	}
	var b strings.Builder
	writePyJSON(&b, v, indent, 0)
	return b.String()
}

// Expected values are Python 3.11 json.dumps(json.loads(in), ensure_ascii=False[, indent=4]).
func TestPyJSONCompact(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a":1,"b":[true,false,null]}`, `{"a": 1, "b": [true, false, null]}`},
		{`{}`, `{}`},
		{`[]`, `[]`},
		{`{"a":{},"b":[]}`, `{"a": {}, "b": []}`},
		{`{"z":1,"a":2}`, `{"z": 1, "a": 2}`},
		{`{"a":1,"b":2,"a":3}`, `{"a": 3, "b": 2}`},
		{`"<>&\u00e9\u4f60\ud83d\udc4b"`, `"<>&é你👋"`},
		{`"\u0001\u001f\u007f\b\f\n\r\t\"\\\/"`, `"\u0001\u001f` + "\x7f" + `\b\f\n\r\t\"\\/"`},
		{`"\u2028\u2029"`, "\"\u2028\u2029\""},
		{`"\ud800x"`, `"` + "\ufffd" + `x"`}, // Python would keep the lone surrogate
		{` [ 1 , 2 ] `, `[1, 2]`},
	}
	for _, tt := range tests {
		if got := pyDumps(t, tt.in, -1); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestPyJSONIndent(t *testing.T) {
	in := `{"a":[],"b":{},"c":[1,{"d":null}],"e":"x"}`
	want := "{\n    \"a\": [],\n    \"b\": {},\n    \"c\": [\n        1,\n        {\n            \"d\": null\n        }\n    ],\n    \"e\": \"x\"\n}"
	if got := pyDumps(t, in, 4); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestPyNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"-17", "-17"},
		{"123456789012345678901234567890", "123456789012345678901234567890"},
		{"1.0", "1.0"}, {"1.50", "1.5"}, {"1E2", "100.0"}, {"0.1e1", "1.0"}, {"100.000", "100.0"},
		{"1e16", "1e+16"}, {"1e15", "1000000000000000.0"}, {"1e-5", "1e-05"}, {"0.0001", "0.0001"},
		{"-0.0", "-0.0"}, {"3.14159", "3.14159"}, {"2.5e-7", "2.5e-07"},
		{"1e400", "Infinity"}, {"-1e400", "-Infinity"}, {"1e-400", "0.0"},
		{"5e-324", "5e-324"}, {"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"6.02214076e23", "6.02214076e+23"}, {"123456789012345678.0", "1.2345678901234568e+17"},
		{"0.1", "0.1"}, {"1e22", "1e+22"}, {"12345.678e-3", "12.345678"},
	}
	for _, tt := range tests {
		if got := pyNumber(tt.in); got != tt.want {
			t.Errorf("pyNumber(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got := pyFloatRepr(math.NaN()); got != "NaN" {
		t.Errorf("NaN: %s", got)
	}
}

func TestParseJSONErrors(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `1e`, `-`, `+1`,
		`"abc`, "\"a\x01\"", `"\x"`, `"\u12"`, `tru`, `NaN`, `{} {}`, `{'a':1}`,
		strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
	} {
		if _, err := parseJSON(in); err == nil {
			t.Errorf("parseJSON(%q) succeeded", in)
		}
	}
	deep := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	if _, err := parseJSON(deep); err != nil {
		t.Errorf("depth %d: %v", maxJSONDepth, err)
	}
}

func TestPyStrip(t *testing.T) {
	// Python: " \t\n\v\f\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000" are
	// whitespace; "\u200b" and "\ufeff" are not.
	ws := " \t\n\v\f\r\x1c\x1d\x1e\x1f\u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
	if got := pyStrip(ws + "a b" + ws); got != "a b" {
		t.Errorf("got %q", got)
	}
	if got := pyStrip("\u200bx\ufeff"); got != "\u200bx\ufeff" {
		t.Errorf("got %q", got)
	}
}
