package grammar

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FuzzCompile: any schema compiles or fails with an *Error, and whatever a
// compiled schema accepts is JSON that the reference validator accepts.
func FuzzCompile(f *testing.F) {
	for _, s := range walkSchemas {
		f.Add(s, `{"name":"a","age":1}`)
	}
	f.Add(`{"$ref":"#"}`, `1`)
	f.Add(`{"anyOf":[{"$ref":"#"},{"type":"string"}]}`, `"x"`)
	f.Add(`{"allOf":[{"minimum":1},{"maximum":3}],"type":"integer"}`, `2`)
	f.Add(`{"enum":[1.0,"a",[1]]}`, `1`)
	f.Add(`{"type":"string","format":"date-time"}`, `"2024-02-29T12:00:00Z"`)
	f.Add(`{"type":"string","pattern":"^[a-c]{2,}x?$","maxLength":4}`, `"abx"`)
	f.Add(`{"type":"string","pattern":"(a|b\\d)+"}`, `"\\nb7"`)
	f.Add(`{"type":"string","format":"email"}`, `"a@b.co"`)
	f.Add(`{"type":"string","format":"ipv6"}`, `"::1"`)
	f.Fuzz(func(t *testing.T, schema, inst string) {
		g, err := Compile([]byte(schema), Options{})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if !g.MatchString(inst) {
			return
		}
		if !json.Valid([]byte(inst)) {
			t.Fatalf("accepted %q, which is not JSON", inst)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err != nil {
			return
		}
		c := jsonschema.NewCompiler()
		if c.AddResource("s.json", doc) != nil {
			return
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			return // the reference refuses the schema
		}
		v, _ := jsonschema.UnmarshalJSON(strings.NewReader(inst))
		if err := sch.Validate(v); err != nil {
			t.Fatalf("accepted %q, which does not validate: %v", inst, err)
		}
	})
}

// byteVocab has every single byte as a token plus a few multi-byte ones,
// and EOS as the last id.
func byteVocab() *Vocab {
	var pieces [][]byte
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`{"`, `":`, `",`, `"}`, `ab`, " \"", "é", "\xe2\x82", "\xac\"", `\u`, `12.`, `true`, `null}`} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil)
	return NewVocab(pieces, []int32{int32(len(pieces) - 1)})
}

// FuzzMatcher feeds arbitrary tokens to a matcher: the mask always agrees
// with Allowed, and Accept succeeds exactly for allowed tokens.
func FuzzMatcher(f *testing.F) {
	v := byteVocab()
	names := []string{"person", "numbers", "enum", "tree", "anyof", "strings"}
	var gs []*Grammar
	for _, n := range names {
		gs = append(gs, mustCompile(f, walkSchemas[n], n == "person"))
	}
	f.Add(uint8(0), []byte(`{"name":"x","age":3}`))
	f.Add(uint8(3), []byte(`{"v":1,"kids":[{"v":2}]}`))
	f.Fuzz(func(t *testing.T, which uint8, ids []byte) {
		m := gs[int(which)%len(gs)].NewMatcher(v)
		mask := make([]uint64, (v.Size()+63)/64)
		for i, b := range ids {
			id := int32(b)
			if i%3 == 2 { // sometimes a multi-byte token or EOS
				id = 256 + int32(b)%int32(v.Size()-256)
			}
			m.Mask(mask)
			in := mask[id>>6]&(1<<(id&63)) != 0
			if in != m.Allowed(id) {
				t.Fatalf("token %d: mask %v, Allowed %v", id, in, !in)
			}
			if err := m.Accept(id); (err == nil) != in {
				t.Fatalf("token %d: allowed %v, Accept %v", id, in, err)
			}
			if !in || v.isEOS(id) {
				return
			}
		}
	})
}
