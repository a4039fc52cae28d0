package costtest

import (
	"fmt"
	"strings"
)

// The builders of issue #32's hostile schemas, shared by the grammar's and
// the server's cost tests.

// ByteClass is a regex class of the printable ASCII bytes 33–126 with odd
// (or even) codes, written as \xNN with the backslash escaped for a JSON
// string.
func ByteClass(odd bool) string {
	var b strings.Builder
	b.WriteByte('[')
	for c := 33; c <= 126; c++ {
		if c%2 == 1 == odd {
			fmt.Fprintf(&b, `\\x%02x`, c)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// RepeatJoin is n copies of s joined by commas.
func RepeatJoin(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s+",", n), ",") }

// NestedAnyOf is issue #32's F3: s = {"type":"string"} wrapped levels
// times in {"anyOf":[{"type":"object"}]×4, "properties":{"x": s}}.
func NestedAnyOf(levels int) string {
	s := `{"type":"string"}`
	for range levels {
		s = `{"anyOf":[` + RepeatJoin(`{"type":"object"}`, 4) + `],"properties":{"x":` + s + `}}`
	}
	return s
}
