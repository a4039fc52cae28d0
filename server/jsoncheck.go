package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/hexserve/hexserve/internal/jsonkind"
	"github.com/hexserve/hexserve/openai"
)

// checkDecoded refuses what encoding/json accepts silently in a body that
// decoded into v: invalid UTF-8 inside a string, or an escaped lone
// surrogate such as "\ud800" (either would become U+FFFD, so the user's
// text would change unseen), and JSON null where a value is required (an
// array element or a map value, which would become 0 or "").
func checkDecoded(body []byte, v any) error {
	if !utf8.Valid(body) {
		off := firstInvalidUTF8(body)
		if p := jsonPathAt(body, int64(off)+1); p != "" {
			return invalid(p, "Invalid value for '%s': the string is not valid UTF-8 (byte offset %d).", p, off)
		}
		return invalid("", "The request body is not valid UTF-8 (byte offset %d).", off)
	}
	if off := loneSurrogate(body); off >= 0 {
		esc := string(body[off : off+6])
		if p := jsonPathAt(body, int64(off)+1); p != "" {
			return invalid(p, "Invalid value for '%s': the string holds a lone surrogate %s (byte offset %d); escape a character outside the BMP as a surrogate pair.", p, esc, off)
		}
		return invalid("", "The request body holds a lone surrogate %s (byte offset %d).", esc, off)
	}
	if !bytes.Contains(body, []byte("null")) {
		return nil // the common case: no walk
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if p, want := findNull(dec, reflect.TypeOf(v), "", false); p != "" {
		return invalid(p, "Invalid value for '%s': expected %s, got null.", p, want)
	}
	return nil
}

// loneSurrogate returns the offset of the first \uXXXX escape inside a
// JSON string that is a surrogate without its pair, -1 if none.
func loneSurrogate(b []byte) int {
	if !bytes.Contains(b, []byte(`\u`)) {
		return -1
	}
	// hexAt is the code unit of a \uXXXX escape at i, -1 if there is none.
	hexAt := func(i int) int {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return -1
		}
		v := 0
		for _, c := range b[i+2 : i+6] {
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | int(c-'0')
			case c|0x20 >= 'a' && c|0x20 <= 'f':
				v = v<<4 | int(c|0x20-'a'+10)
			default:
				return -1
			}
		}
		return v
	}
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			in = !in
		case c == '\\' && in:
			u := hexAt(i)
			switch {
			case u >= 0xd800 && u <= 0xdbff:
				if l := hexAt(i + 6); l >= 0xdc00 && l <= 0xdfff {
					i += 11 // the pair
					continue
				}
				return i
			case u >= 0xdc00 && u <= 0xdfff:
				return i
			}
			i++ // the escaped character
		}
	}
	return -1
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// rawTypes hold any JSON value, null included; their insides are not checked.
var rawTypes = map[reflect.Type]bool{
	reflect.TypeFor[json.RawMessage]():  true,
	reflect.TypeFor[openai.Arguments](): true,
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// findNull reads one JSON value of Go type t (nil: inside a type with its
// own decoder, where every array element is required) and returns the path
// of the first null that stands for a required value (an array element or a
// map value), with what was expected. A null struct field or top-level value
// means "absent" and is allowed, as in the OpenAI API.
func findNull(dec *json.Decoder, t reflect.Type, path string, required bool) (string, string) {
	tok, err := dec.Token()
	if err != nil {
		return "", ""
	}
	if tok == nil {
		if required && !nullType(t) {
			return path, jsonkind.Want(t)
		}
		return "", ""
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (rawTypes[t] || t.Kind() == reflect.Interface) {
		skipRest(dec, tok)
		return "", ""
	}
	if t != nil && reflect.PointerTo(t).Implements(unmarshaler) {
		t = nil
	}
	switch tok {
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := range elements(dec) {
			if p, want := findNull(dec, elem, fmt.Sprintf("%s[%d]", path, i), true); p != "" {
				return p, want
			}
		}
	case json.Delim('{'):
		for key := range members(dec) {
			p := joinKey(path, key)
			var ft reflect.Type
			isMap := t != nil && t.Kind() == reflect.Map
			switch {
			case isMap:
				ft = t.Elem()
			case t != nil && t.Kind() == reflect.Struct:
				f, ok := field(t, key)
				if !ok {
					skipValue(dec) // unknown keys are ignored
					continue
				}
				ft = f
			}
			if p, want := findNull(dec, ft, p, isMap); p != "" {
				return p, want
			}
		}
	}
	return "", ""
}

// nullType reports whether null is a valid element or map value of type t
// (nil: inside a type with its own decoder). A null raw JSON element is
// refused too: the request types hold objects there (tools[i]).
func nullType(t reflect.Type) bool {
	if t == nil || rawTypes[t] {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return true
	}
	return false
}

// field finds the struct field encoding/json would fill for key (tag or
// name, case-insensitively, through embedded structs).
func field(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if typ, ok := field(ft, key); ok {
					return typ, true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return f.Type, true
		}
	}
	return nil, false
}

// skipValue consumes one JSON value without recursion.
func skipValue(dec *json.Decoder) {
	if tok, err := dec.Token(); err == nil {
		skipRest(dec, tok)
	}
}

// skipRest consumes the rest of the value that began with tok.
func skipRest(dec *json.Decoder, tok json.Token) {
	for depth := 0; ; {
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
		if depth == 0 {
			return
		}
		var err error
		if tok, err = dec.Token(); err != nil {
			return
		}
	}
}

// typeError is the 400 of a value of the wrong JSON type in body, naming it
// by its path with array indices (messages[0].content) and saying what was
// expected and given in JSON's terms, as OpenAI's does; encoding/json names
// the field without indices and the types in Go's.
func typeError(body []byte, e *json.UnmarshalTypeError) *APIError {
	p := jsonParam(e.Field)
	if e.Field == "" {
		return invalid("", "Invalid type for the request body: expected an object, but got %s instead.", jsonkind.Got(e.Value))
	}
	if p == "" {
		return invalid("", "We could not parse the JSON body of your request (%v).", e)
	}
	want, got := jsonkind.Want(e.Type), jsonkind.Got(e.Value)
	if other, ok := strings.CutPrefix(e.Value, "a value other than "); ok {
		want, got = other, "" // a type with its own decoder says what it takes
	}
	// encoding/json's offset finds the value, except after a type's own
	// decoder (offset 0): then the first value at that path that does not
	// decode is the one.
	full, raw := "", []byte(nil)
	if e.Offset > 0 {
		if f := jsonPathAt(body, e.Offset); strings.HasSuffix(f, "."+lastKey(p)) || f == p {
			full = f
		}
	} else if e.Type != nil {
		full, raw = findUndecodable(json.NewDecoder(bytes.NewReader(body)), e.Type, p, "", "", 0)
	}
	if full != "" {
		p = full
	}
	if got == "" && len(raw) > 0 {
		got = rawKind(raw)
	}
	if got == "" {
		return invalid(p, "Invalid type for '%s': expected %s.", p, want)
	}
	return invalid(p, "Invalid type for '%s': expected %s, but got %s instead.", p, want, got)
}

// rawKind is the kind of the JSON value raw in a message's words.
func rawKind(raw []byte) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// findUndecodable reads one JSON value from dec, at path (with array
// indices) and bare (without), and returns the path and bytes of the first
// value inside it at key path want (without indices) that does not decode
// into a t; "" when there is none. Only keys on the way to want are
// entered, and no deeper than 64 levels.
func findUndecodable(dec *json.Decoder, t reflect.Type, want, path, bare string, depth int) (string, []byte) {
	if bare == want {
		var raw json.RawMessage
		if dec.Decode(&raw) != nil || json.Unmarshal(raw, reflect.New(t).Interface()) == nil {
			return "", nil
		}
		return path, raw
	}
	if depth >= 64 {
		skipValue(dec)
		return "", nil
	}
	tok, err := dec.Token()
	if err != nil {
		return "", nil
	}
	switch tok {
	case json.Delim('['):
		for i := range elements(dec) {
			if p, raw := findUndecodable(dec, t, want, fmt.Sprintf("%s[%d]", path, i), bare, depth+1); p != "" {
				return p, raw
			}
		}
	case json.Delim('{'):
		for key := range members(dec) {
			kb := joinKey(bare, key)
			if !strings.HasPrefix(want+".", kb+".") {
				skipValue(dec)
				continue
			}
			if p, raw := findUndecodable(dec, t, want, joinKey(path, key), kb, depth+1); p != "" {
				return p, raw
			}
		}
	}
	return "", nil
}

// elements yields the indices of the array dec has just opened and then
// reads its ']'; the loop body reads each element.
func elements(dec *json.Decoder) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := 0; dec.More(); i++ {
			if !yield(i) {
				return
			}
		}
		dec.Token() // ]
	}
}

// members yields the keys of the object dec has just opened and then reads
// its '}'; the loop body reads each member's value.
func members(dec *json.Decoder) iter.Seq[string] {
	return func(yield func(string) bool) {
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return
			}
			key, _ := kt.(string)
			if !yield(key) {
				return
			}
		}
		dec.Token() // }
	}
}

// joinKey is the path of key inside the value at path ("": the top level).
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
