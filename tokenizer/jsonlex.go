package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The BPE vocab and merges are most of a tokenizer.json (9 MB for Llama 3),
// so they are decoded by this small scanner instead of reflection. The
// encoding/json decoder has already validated the document's syntax when it
// calls these UnmarshalJSON methods.

// vocabJSON is the model's vocab object in file order.
type vocabJSON struct {
	tokens []string
	ids    []int32
}

func (v *vocabJSON) UnmarshalJSON(b []byte) error {
	l := lexer{b: b}
	if !l.consume('{') {
		return fmt.Errorf("BPE vocab is not an object")
	}
	for !l.consume('}') {
		if len(v.tokens) > 0 && !l.consume(',') {
			return l.fail("vocab")
		}
		tok, ok := l.str()
		if !ok || !l.consume(':') {
			return l.fail("vocab")
		}
		id, ok := l.int32()
		if !ok {
			return fmt.Errorf("BPE vocab token %q: id is not a 32-bit integer", tok)
		}
		v.tokens = append(v.tokens, tok)
		v.ids = append(v.ids, id)
	}
	return nil
}

// mergesJSON holds merges given as "a b" strings or as ["a", "b"] pairs.
type mergesJSON [][2]string

func (m *mergesJSON) UnmarshalJSON(b []byte) error {
	l := lexer{b: b}
	if !l.consume('[') {
		return fmt.Errorf("BPE merges is not an array")
	}
	for n := 0; !l.consume(']'); n++ {
		if n > 0 && !l.consume(',') {
			return l.fail("merges")
		}
		var p [2]string
		if l.consume('[') {
			var ok1, ok2 bool
			p[0], ok1 = l.str()
			ok := ok1 && l.consume(',')
			p[1], ok2 = l.str()
			if !ok || !ok2 || !l.consume(']') {
				return fmt.Errorf("BPE merge %d is not a pair of strings", n)
			}
		} else {
			s, ok := l.str()
			if !ok {
				return fmt.Errorf("BPE merge %d is neither \"a b\" nor [\"a\", \"b\"]", n)
			}
			a, c, ok := cutSpace(s)
			if !ok {
				return fmt.Errorf("BPE merge %d %q is not two tokens separated by a space", n, s)
			}
			p = [2]string{a, c}
		}
		*m = append(*m, p)
	}
	return nil
}

type lexer struct {
	b []byte
	i int
}

func (l *lexer) fail(what string) error {
	return fmt.Errorf("malformed BPE %s near byte %d", what, l.i)
}

func (l *lexer) skipSpace() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

func (l *lexer) consume(c byte) bool {
	l.skipSpace()
	if l.i < len(l.b) && l.b[l.i] == c {
		l.i++
		return true
	}
	return false
}

func (l *lexer) str() (string, bool) {
	l.skipSpace()
	if l.i >= len(l.b) || l.b[l.i] != '"' {
		return "", false
	}
	start, escaped := l.i, false
	for l.i++; l.i < len(l.b); l.i++ {
		switch l.b[l.i] {
		case '\\':
			escaped = true
			l.i++
		case '"':
			l.i++
			lit := l.b[start:l.i]
			if !escaped {
				return string(lit[1 : len(lit)-1]), true
			}
			var s string
			if err := json.Unmarshal(lit, &s); err != nil {
				return "", false
			}
			return s, true
		}
	}
	return "", false
}

func (l *lexer) int32() (int32, bool) {
	l.skipSpace()
	start := l.i
	for l.i < len(l.b) && (l.b[l.i] == '-' || (l.b[l.i] >= '0' && l.b[l.i] <= '9')) {
		l.i++
	}
	n, err := strconv.ParseInt(string(l.b[start:l.i]), 10, 32)
	return int32(n), err == nil
}
