package chat

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ardanlabs/jinja"
)

// tojsonName is the filter a template's tojson is renamed to. The engine
// looks filters up in its own builtins first, with no way to replace one,
// and in the render's variables only for names it lacks: renaming the
// filter is how transformers' tojson replaces the engine's (which prints
// 1.0 as 1 and indents through encoding/json, escaping "<" and sorting keys).
const tojsonName = "hexserve_tojson"

// trimName is the filter a template's trim is renamed to: the engine's
// trim is Go's strings.TrimSpace, which keeps U+001C..U+001F, where
// Python's str.strip removes them.
const trimName = "hexserve_trim"

// renameFilters renames the filters transformers' setup defines
// differently from the engine.
func renameFilters(src string) string {
	return renameFilter(renameFilter(src, "tojson", tojsonName), "trim", trimName)
}

// trim is Jinja's trim filter: Python's str.strip(chars).
func trim(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("trim: no value")
	}
	s := args[0].String()
	if args[0].IsString() {
		s = args[0].AsString()
	}
	chars, ok := kw["chars"]
	if len(args) > 1 {
		chars, ok = args[1], true
	}
	if ok && chars.IsString() {
		return jinja.NewString(strings.Trim(s, chars.AsString())), nil
	}
	return jinja.NewString(pyStrip(s)), nil
}

// renameFilter renames filter old to repl wherever it is applied ("| old")
// inside the template's {{ }} and {% %} tags, outside string literals and
// comments.
func renameFilter(src, old, repl string) string {
	var b strings.Builder
	for {
		i := strings.Index(src, "{")
		if i < 0 || i+1 >= len(src) {
			b.WriteString(src)
			return b.String()
		}
		var end string
		switch src[i+1] {
		case '{':
			end = "}}"
		case '%':
			end = "%}"
		case '#':
			j := strings.Index(src[i+2:], "#}")
			if j < 0 {
				b.WriteString(src)
				return b.String()
			}
			b.WriteString(src[:i+2+j+2])
			src = src[i+2+j+2:]
			continue
		default:
			b.WriteString(src[:i+1])
			src = src[i+1:]
			continue
		}
		b.WriteString(src[:i+2])
		src = src[i+2:]
		n := renameInTag(&b, src, end, old, repl)
		src = src[n:]
	}
}

// renameInTag copies a tag's body up to and including end, renaming the
// filter; it returns the bytes of src consumed.
func renameInTag(b *strings.Builder, src, end, old, repl string) int {
	pipe := false // the last non-space byte was '|'
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case strings.HasPrefix(src[i:], end):
			b.WriteString(end)
			return i + len(end)
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			b.WriteString(src[i:j])
			i, pipe = j, false
			continue
		case pipe && strings.HasPrefix(src[i:], old) && !isIdentByte(src, i+len(old)):
			b.WriteString(repl)
			i, pipe = i+len(old), false
			continue
		case c == '|':
			pipe = true
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			pipe = false
		}
		b.WriteByte(c)
		i++
	}
	return len(src)
}

func isIdentByte(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// pyJSONValue is transformers' tojson: json.dumps(v, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), each keyword honoured.
// Dict keys keep their order; floats print as Python's repr.
func pyJSONValue(v jinja.Value, kw map[string]jinja.Value, marks *marker) (string, error) {
	e := pyEncoder{item: ", ", key: ": ", marks: marks}
	if ind, ok := kw["indent"]; ok && !ind.IsNone() && !ind.IsUndefined() {
		e.indented, e.item = true, ","
		switch {
		case ind.IsInt():
			e.indent = strings.Repeat(" ", int(max(0, min(ind.AsInt(), 64))))
		case ind.IsString():
			e.indent = ind.AsString()
		default:
			return "", errors.New("tojson: indent must be an integer or a string")
		}
	}
	if sep, ok := kw["separators"]; ok && !sep.IsNone() && !sep.IsUndefined() {
		if !sep.IsList() || sep.AsList().Len() != 2 || !sep.AsList().Get(0).IsString() || !sep.AsList().Get(1).IsString() {
			return "", errors.New("tojson: separators must be two strings")
		}
		e.item, e.key = sep.AsList().Get(0).AsString(), sep.AsList().Get(1).AsString()
	}
	e.ascii = kw["ensure_ascii"].IsTruthy()
	e.sortKeys = kw["sort_keys"].IsTruthy()
	var b strings.Builder
	if err := e.encode(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// bigIntPrefix starts a mark's text that stands for an integer beyond
// int64 (see jinjaRender.fromJSON); it cannot start request text, which is
// valid UTF-8.
const bigIntPrefix = "\xff"

// bigInt reports whether s is one mark standing for a big integer, and its digits.
func (e *pyEncoder) bigInt(s string) (string, bool) {
	if e.marks == nil || len(s) != 4 {
		return "", false
	}
	r, _ := utf8.DecodeRuneInString(s)
	if k := int(r) - markBase; k >= 0 && k < len(e.marks.texts) {
		return strings.CutPrefix(e.marks.texts[k], bigIntPrefix)
	}
	return "", false
}

type pyEncoder struct {
	marks           *marker
	indented        bool
	indent          string
	item, key       string
	ascii, sortKeys bool
}

func (e *pyEncoder) newline(b *strings.Builder, level int) {
	if e.indented {
		b.WriteByte('\n')
		for range level {
			b.WriteString(e.indent)
		}
	}
}

func (e *pyEncoder) encode(b *strings.Builder, v jinja.Value, level int) error {
	if level > maxJSONDepth {
		return errors.New("tojson: value nested too deeply")
	}
	switch {
	case v.IsNone(), v.IsUndefined():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pyFloatRepr(v.AsFloat()))
	case v.IsString():
		if lit, ok := e.bigInt(v.AsString()); ok {
			b.WriteString(lit)
			return nil
		}
		e.str(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(e.item)
			}
			e.newline(b, level+1)
			if err := e.encode(b, it, level+1); err != nil {
				return err
			}
		}
		e.newline(b, level)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if e.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(e.item)
			}
			e.newline(b, level+1)
			e.str(b, k)
			b.WriteString(e.key)
			val, _ := d.Get(k)
			if err := e.encode(b, val, level+1); err != nil {
				return err
			}
		}
		e.newline(b, level)
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: cannot serialise %s", v.String())
	}
	return nil
}

func (e *pyEncoder) str(b *strings.Builder, s string) {
	if !e.ascii {
		writePyString(b, s)
		return
	}
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
}
