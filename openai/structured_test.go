package openai

import (
	"errors"
	"testing"

	"github.com/hexserve/hexserve/grammar"
	"github.com/hexserve/hexserve/inference"
)

func TestFormatGrammar(t *testing.T) {
	tests := []struct {
		raw   string
		flat  bool
		nilG  bool   // plain text
		param string // the error's param; "" for success
		match string // an instance the grammar accepts
	}{
		{raw: `{"type":"text"}`, nilG: true},
		{raw: `null`, nilG: true},
		{raw: `{"type":"json_object"}`, match: `{"a":[1]}`},
		{raw: `{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}}`, match: `{"a":3}`},
		{raw: `{"type":"json_schema","name":"p","schema":{"type":"string","format":"uuid"}}`, flat: true, match: `"123e4567-e89b-12d3-a456-426614174000"`},
		{raw: `{"type":"json_schema","json_schema":{"name":"p","schema":{"properties":{"x":{"not":{}}}}}}`, param: "response_format.json_schema.schema.properties.x.not"},
		{raw: `{"type":"json_schema","name":"p","schema":{"$ref":"other.json"}}`, flat: true, param: "response_format.schema.$ref"},
		{raw: `{"type":"json_schema","json_schema":{"schema":{}}}`, param: "response_format.json_schema.name"},
		{raw: `{"type":"json_schema"}`, param: "response_format.json_schema"},
		{raw: `{"type":"xml"}`, param: "response_format.type"},
		{raw: `[1]`, param: "response_format"},
	}
	for _, tc := range tests {
		g, err := FormatGrammar([]byte(tc.raw), "response_format", tc.flat, grammar.Options{})
		var ie *inference.InvalidRequestError
		switch {
		case tc.param != "":
			if !errors.As(err, &ie) || ie.Param != tc.param {
				t.Errorf("%s: got %v, want a 400 naming %s", tc.raw, err, tc.param)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.raw, err)
		case tc.nilG != (g == nil):
			t.Errorf("%s: grammar %v", tc.raw, g)
		case g != nil && !g.MatchString(tc.match):
			t.Errorf("%s: %s rejected", tc.raw, tc.match)
		}
	}
}
