package chat

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds container nesting in JSON we re-serialise. CPython's
// json module fails at about the same depth (its recursion limit is 1000).
const maxJSONDepth = 1000

type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is a parsed JSON value that keeps object key order, the way a
// Python dict built by json.loads does.
type jsonValue struct {
	kind jsonKind
	str  string      // string value; number literal; "true"/"false"
	elem []jsonValue // array elements, or object values
	keys []string    // object keys, parallel to elem
}

// parseJSON parses one complete JSON text (RFC 8259, surrounding whitespace
// allowed). Duplicate object keys behave like Python's json.loads: the last
// value wins but the key keeps its first position.
func parseJSON(s string) (jsonValue, error) { return parseJSONDepth(s, maxJSONDepth) }

// parseJSONDepth is parseJSON with containers nested at most maxDepth deep.
func parseJSONDepth(s string, maxDepth int) (jsonValue, error) {
	p := jsonParser{s: s, maxDepth: maxDepth}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return jsonValue{}, err
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return jsonValue{}, p.errorf("unexpected %q after JSON value", p.s[p.i])
	}
	return v, nil
}

type jsonParser struct {
	s        string
	i        int
	maxDepth int
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *jsonParser) skipSpace() {
	for p.i < len(p.s) && isJSONSpace(p.s[p.i]) {
		p.i++
	}
}

func (p *jsonParser) value(depth int) (jsonValue, error) {
	if p.i >= len(p.s) {
		return jsonValue{}, p.errorf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.string()
		return jsonValue{kind: jsonString, str: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return jsonValue{kind: jsonBool, str: "true"}, nil
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return jsonValue{kind: jsonBool, str: "false"}, nil
	case strings.HasPrefix(p.s[p.i:], "null"):
		p.i += 4
		return jsonValue{kind: jsonNull}, nil
	default:
		return jsonValue{}, p.errorf("unexpected %q", c)
	}
}

func (p *jsonParser) object(depth int) (jsonValue, error) {
	v := jsonValue{kind: jsonObject}
	var index map[string]int
	err := p.items(depth, '}', "object", func() error {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return p.errorf("expected object key")
		}
		k, err := p.string()
		if err != nil {
			return err
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return p.errorf("expected ':'")
		}
		p.i++
		p.skipSpace()
		e, err := p.value(depth)
		if err != nil {
			return err
		}
		if index == nil && len(v.keys) >= 8 {
			index = make(map[string]int, 2*len(v.keys))
			for j, k := range v.keys {
				index[k] = j
			}
		}
		if j, dup := lookupKey(v.keys, index, k); dup {
			v.elem[j] = e
		} else {
			if index != nil {
				index[k] = len(v.keys)
			}
			v.keys = append(v.keys, k)
			v.elem = append(v.elem, e)
		}
		return nil
	})
	if err != nil {
		return jsonValue{}, err
	}
	return v, nil
}

// next reads what follows a member or an element: ',' (more follow) or
// end (done); of names the object or array in the error.
func (p *jsonParser) next(end byte, of string) (done bool, err error) {
	p.skipSpace()
	if p.i >= len(p.s) {
		return false, p.errorf("unexpected end of %s", of)
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		return false, nil
	case end:
		p.i++
		return true, nil
	}
	return false, p.errorf("expected ',' or '%c'", end)
}

func lookupKey(keys []string, index map[string]int, k string) (int, bool) {
	if index != nil {
		j, ok := index[k]
		return j, ok
	}
	for j, kk := range keys {
		if kk == k {
			return j, true
		}
	}
	return 0, false
}

// items reads the object or array at p.i (of names it in errors) up to
// its end byte: each member or element by item, called at its first
// non-space byte.
func (p *jsonParser) items(depth int, end byte, of string, item func() error) error {
	if depth > p.maxDepth {
		return p.errorf("nesting deeper than %d", p.maxDepth)
	}
	p.i++
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == end {
		p.i++
		return nil
	}
	for {
		p.skipSpace()
		if err := item(); err != nil {
			return err
		}
		if done, err := p.next(end, of); err != nil || done {
			return err
		}
	}
}

func (p *jsonParser) array(depth int) (jsonValue, error) {
	v := jsonValue{kind: jsonArray}
	err := p.items(depth, ']', "array", func() error {
		e, err := p.value(depth)
		v.elem = append(v.elem, e)
		return err
	})
	if err != nil {
		return jsonValue{}, err
	}
	return v, nil
}

func (p *jsonParser) number() (jsonValue, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return jsonValue{}, p.errorf("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return jsonValue{}, p.errorf("invalid number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return jsonValue{}, p.errorf("invalid number")
		}
	}
	return jsonValue{kind: jsonNumber, str: p.s[start:p.i]}, nil
}

// string parses a JSON string literal at p.i. Invalid UTF-8 and unpaired
// surrogate escapes become U+FFFD, as in encoding/json.
func (p *jsonParser) string() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes, all valid UTF-8.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			if utf8.ValidString(s) {
				p.i++
				return s, nil
			}
			break
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	p.i = start
	var b strings.Builder
	for {
		if p.i >= len(p.s) {
			return "", p.errorf("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			b.WriteRune(r) // RuneError for invalid bytes
			p.i += size
		}
	}
}

// jsonEscapes are the one-character escapes' values.
var jsonEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape writes the escape sequence at p.i (its backslash) to b; a \u
// surrogate pair is one rune, an unpaired surrogate U+FFFD.
func (p *jsonParser) escape(b *strings.Builder) error {
	if p.i+1 >= len(p.s) {
		return p.errorf("unterminated string")
	}
	e := p.s[p.i+1]
	p.i += 2
	if v := jsonEscapes[e]; v != 0 {
		b.WriteByte(v)
		return nil
	}
	if e != 'u' {
		return p.errorf("invalid escape %q", e)
	}
	r, ok := p.hex4()
	if !ok {
		return p.errorf("invalid \\u escape")
	}
	if utf16.IsSurrogate(r) {
		if strings.HasPrefix(p.s[p.i:], `\u`) {
			save := p.i
			p.i += 2
			r2, ok := p.hex4()
			if !ok {
				return p.errorf("invalid \\u escape")
			}
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				b.WriteRune(dec)
				return nil
			}
			p.i = save
		}
		r = utf8.RuneError
	}
	b.WriteRune(r)
	return nil
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(n), true
}

// pyWriter is what the JSON writers write to (a strings.Builder or the
// renderer). A writer with a failed method that reports true stops them.
type pyWriter interface {
	WriteString(string) (int, error)
	WriteByte(byte) error
}

func stopped(b pyWriter) bool {
	f, ok := b.(interface{ failed() bool })
	return ok && f.failed()
}

// writePyJSON appends v formatted like Python's
// json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0 means
// indent=None), which is what the template's tojson filter produces in
// transformers.
func writePyJSON(b pyWriter, v jsonValue, indent, level int) {
	switch v.kind {
	case jsonNull:
		b.WriteString("null")
	case jsonBool:
		b.WriteString(v.str)
	case jsonNumber:
		b.WriteString(pyNumber(v.str))
	case jsonString:
		writePyString(b, v.str)
	case jsonArray, jsonObject:
		open, closing := byte('['), byte(']')
		if v.kind == jsonObject {
			open, closing = '{', '}'
		}
		b.WriteByte(open)
		if len(v.elem) == 0 {
			b.WriteByte(closing)
			return
		}
		for i, e := range v.elem {
			if stopped(b) {
				return
			}
			if i > 0 {
				if indent >= 0 {
					b.WriteByte(',')
				} else {
					b.WriteString(", ")
				}
			}
			if indent >= 0 {
				b.WriteByte('\n')
				writeSpaces(b, indent*(level+1))
			}
			if v.kind == jsonObject {
				writePyString(b, v.keys[i])
				b.WriteString(": ")
			}
			writePyJSON(b, e, indent, level+1)
		}
		if indent >= 0 {
			b.WriteByte('\n')
			writeSpaces(b, indent*level)
		}
		b.WriteByte(closing)
	}
}

const spaces = "                                                                " // 64

// writeSpaces writes n spaces without allocating.
func writeSpaces(b pyWriter, n int) {
	for ; n > len(spaces); n -= len(spaces) {
		b.WriteString(spaces)
	}
	b.WriteString(spaces[:n])
}

// writePyString writes s as Python's json.dumps(s, ensure_ascii=False):
// only '"', '\\' and C0 controls are escaped; '<', '>', '&', DEL and
// non-ASCII are written as they are.
func writePyString(b pyWriter, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b.WriteString(s[last:i])
		last = i + 1
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	b.WriteString(s[last:])
	b.WriteByte('"')
}

// pyNumber formats a JSON number literal the way a Python json.loads →
// json.dumps round trip does: integers keep their digits ("-0" becomes "0"),
// anything with a fraction or exponent is a float printed with repr
// ("1E2" → "100.0", "1e16" → "1e+16"), and overflow prints "Infinity".
func pyNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if lit == "-0" {
			return "0"
		}
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return lit // unreachable for literals accepted by the parser
	}
	return pyFloatRepr(f)
}

// pyFloatRepr returns Python's repr(f) for a float64.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d[.ddd]e±XX, shortest round trip
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1 // value = 0.digits × 10^decpt
	if decpt > 16 || decpt < -3 {
		var b strings.Builder
		b.WriteString(sign)
		b.WriteString(digits[:1])
		if len(digits) > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if exp < 0 {
			b.WriteByte('-')
			exp = -exp
		} else {
			b.WriteByte('+')
		}
		if exp < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(exp))
		return b.String()
	}
	switch {
	case decpt <= 0:
		return sign + "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		return sign + digits[:decpt] + "." + digits[decpt:]
	}
}
