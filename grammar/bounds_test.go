package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestUnrepresentableBounds (issue #39 finding 5): a bound past the digits
// a number may have, on the side that leaves no number, is a schema that
// allows no value (as minimum > maximum is), never a clamped bound that
// lets a value break it; the other side clamps and compiles.
func TestUnrepresentableBounds(t *testing.T) {
	tests := []struct {
		schema string
		ok     []string // values the grammar must take; nil: refused
		bad    []string // values it must not take
	}{
		{`{"type":"integer","minimum":1e19}`, nil, nil},
		{`{"type":"integer","minimum":1e300}`, nil, nil},
		{`{"type":"integer","maximum":-1e19}`, nil, nil},
		{`{"type":"integer","exclusiveMinimum":999999999999999999}`, nil, nil},
		{`{"type":"integer","exclusiveMaximum":-999999999999999999}`, nil, nil},
		{`{"type":"number","minimum":1e13}`, nil, nil},
		{`{"type":"number","maximum":-1e12}`, nil, nil},
		{`{"type":"integer","maximum":1e19}`, []string{"999999999999999999", "-5"}, nil},
		{`{"type":"integer","minimum":-1e300}`, []string{"0", "-999999999999999999"}, nil},
		{`{"type":"integer","exclusiveMinimum":999999999999999998}`, []string{"999999999999999999"}, []string{"999999999999999998"}},
		{`{"minimum":1e19}`, []string{`"s"`, "true"}, []string{"999999999999999999", "1"}},
		{`{"type":["integer","string"],"minimum":1e19}`, []string{`"s"`}, []string{"999999999999999999"}},
	}
	for _, tc := range tests {
		t.Run(tc.schema, func(t *testing.T) {
			g, err := Compile([]byte(tc.schema), Options{})
			if tc.ok == nil {
				var e *Error
				if !errors.As(err, &e) || !strings.Contains(e.Message, "allows no value") {
					t.Fatalf("Compile = %v, want \"the schema allows no value\"", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkMatches(t, g, tc.schema, tc.ok, tc.bad)
		})
	}
}
