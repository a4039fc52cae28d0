package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// inSubset reports whether a compact instance uses only what the grammar
// documents it produces: numbers without exponent, at most FracDigits
// fraction digits, not all zero (1.0 is written 1) and maxDigits digits, and object keys without escapes.
var (
	numRE = regexp.MustCompile(`(?:^|[\[,:])(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)`)
	keyRE = regexp.MustCompile(`"((?:[^"\\]|\\.)*)":`)
)

func inSubset(s string) bool {
	for _, m := range numRE.FindAllStringSubmatch(s, -1) {
		n := strings.TrimPrefix(m[1], "-")
		intPart, frac, _ := strings.Cut(n, ".")
		if strings.ContainsAny(n, "eE") || frac != "" && strings.Trim(frac, "0") == "" || len(frac) > FracDigits || len(intPart)+FracDigits > maxDigits {
			return false
		}
	}
	for _, m := range keyRE.FindAllStringSubmatch(s, -1) {
		if strings.Contains(m[1], `\`) {
			return false
		}
	}
	return true
}

func compact(v any) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSpace(b.String())
}

// matchTokens feeds s to a matcher token by token (the Llama-3.2 encoding)
// and reports whether every token is allowed and the value complete.
func matchTokens(t *testing.T, g *Grammar, s string) bool {
	tok, v := llama(t)
	m := g.NewMatcher(v)
	for _, id := range tok.Encode(s, false, false) {
		if !m.Allowed(id) {
			return false
		}
		if err := m.Accept(id); err != nil {
			t.Fatalf("Allowed(%d) but Accept: %v", id, err)
		}
	}
	return m.Complete()
}

// TestSuite runs the JSON-Schema-Test-Suite (draft 2020-12): for each schema
// the grammar supports, valid instances (compact, within the documented
// number subset) are accepted token by token and invalid ones rejected.
func TestSuite(t *testing.T) {
	files, _ := filepath.Glob("../testdata/jsonschema-test-suite/draft2020-12/*.json")
	// The formats the grammar asserts (format assertion is optional in the suite).
	more, _ := filepath.Glob("../testdata/jsonschema-test-suite/draft2020-12/optional/format/*.json")
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatal("no suite files")
	}
	// Where ajv-formats (whose definitions the grammar asserts) and the
	// suite disagree, ajv-formats' verdict is expected.
	devData, err := os.ReadFile("../testdata/jsonschema-test-suite/ajv-formats-deviations.txt")
	if err != nil {
		t.Fatal(err)
	}
	deviates := map[string]bool{}
	for _, l := range strings.Split(string(devData), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			deviates[l] = false
		}
	}
	var groups, unsupported, valid, invalid, outside int
	var slowest string // the compile with the most steps (under the default Limits)
	var most int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cases []struct {
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Tests       []struct {
				Description string          `json:"description"`
				Data        json.RawMessage `json:"data"`
				Valid       bool            `json:"valid"`
			} `json:"tests"`
		}
		if err := json.Unmarshal(data, &cases); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			groups++
			g, err := Compile(c.Schema, Options{})
			if err != nil {
				unsupported++
				t.Logf("%s / %s: unsupported: %v", filepath.Base(f), c.Description, err)
				if strings.Contains(err.Error(), "allows no value") { // refused as unsatisfiable: rightly?
					for _, tc := range c.Tests {
						var v any
						d := json.NewDecoder(bytes.NewReader(tc.Data))
						d.UseNumber()
						if d.Decode(&v) == nil && tc.Valid && inSubset(compact(v)) {
							t.Errorf("%s / %s: refused as unsatisfiable, but %s is valid", filepath.Base(f), c.Description, tc.Data)
						}
					}
				}
				continue
			}
			if g.CompileSteps() > most {
				most, slowest = g.CompileSteps(), fmt.Sprintf("%s / %s (%v)", filepath.Base(f), c.Description, g.CompileTime())
			}
			for _, tc := range c.Tests {
				d := json.NewDecoder(bytes.NewReader(tc.Data))
				d.UseNumber()
				var v any
				if err := d.Decode(&v); err != nil {
					t.Fatal(err)
				}
				s := compact(v)
				got := matchTokens(t, g, s)
				key := filepath.Base(f) + " / " + c.Description + " / " + tc.Description
				if _, ok := deviates[key]; ok {
					deviates[key] = true
					tc.Valid = !tc.Valid
				}
				switch {
				case !tc.Valid:
					invalid++
					if got {
						t.Errorf("%s / %s / %s: invalid %s accepted", filepath.Base(f), c.Description, tc.Description, s)
					}
				case !inSubset(s):
					outside++
				default:
					valid++
					if !got {
						t.Errorf("%s / %s / %s: valid %s rejected", filepath.Base(f), c.Description, tc.Description, s)
					}
				}
			}
		}
	}
	for k, used := range deviates {
		if !used {
			t.Errorf("deviation %q matches no suite test", k)
		}
	}
	t.Logf("slowest compile: %s, %d steps of the default budget of %d", slowest, most, DefaultSteps)
	t.Logf("%d schemas (%d unsupported), %d valid and %d invalid instances checked (%d with ajv-formats' verdict), %d valid outside the number/key subset", groups, unsupported, valid, invalid, len(deviates), outside)
}

// walkSchemas are the property test's schemas (also the benchmark's).
var walkSchemas = map[string]string{
	"person":   `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":20},"age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","maxLength":40},"tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},"required":["name","age"],"additionalProperties":false}`,
	"numbers":  `{"type":"array","minItems":1,"maxItems":4,"items":{"type":"number","minimum":-2.5,"exclusiveMaximum":1000}}`,
	"enum":     `{"type":"object","properties":{"color":{"enum":["red","green","blue"]},"ok":{"type":"boolean"},"n":{"type":["integer","null"],"minimum":10,"maximum":99}},"required":["color","ok","n"],"additionalProperties":false}`,
	"tree":     `{"$defs":{"t":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},"kids":{"type":"array","maxItems":2,"items":{"$ref":"#/$defs/t"}}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/t"}`,
	"anyof":    `{"anyOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"string","maxLength":5}},"required":["kind","y"],"additionalProperties":false}]}`,
	"strings":  `{"type":"object","properties":{"s":{"type":"string","maxLength":12},"t":{"type":"string"}},"required":["s","t"],"additionalProperties":false}`,
	"patterns": `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3,5}$"},"slug":{"type":"string","pattern":"^[a-z0-9]+(-[a-z0-9]+)*$","maxLength":12},"has":{"type":"string","pattern":"(x|y\\.)+","minLength":2,"maxLength":6}},"required":["code","slug","has"],"additionalProperties":false}`,
	"netfmts":  `{"type":"object","properties":{"e":{"type":"string","format":"email","maxLength":24},"h":{"type":"string","format":"hostname","maxLength":20},"ip":{"type":"string","format":"ipv6"},"u":{"type":"string","format":"uri","maxLength":30}},"required":["e","h","ip","u"],"additionalProperties":false}`,
	"formats":  `{"type":"object","properties":{"d":{"type":"string","format":"date"},"dt":{"type":"string","format":"date-time"},"t":{"type":"string","format":"time"},"u":{"type":"string","format":"uuid"},"ip":{"type":"string","format":"ipv4"}},"required":["d","dt","t","u","ip"],"additionalProperties":false}`,
}

// TestRandomWalks picks uniformly among the allowed tokens (EOS included
// once allowed) and checks every finished output with an independent
// validator; Mask must agree with Allowed at every step. In -short mode
// (make test's -race run) each schema takes its first 4 walks; make test
// runs all 20 without -race.
func TestRandomWalks(t *testing.T) {
	walks := 20
	if testing.Short() {
		walks = 4
	}
	tok, v := llama(t)
	mask := make([]uint64, (v.Size()+63)/64)
	for name, schema := range walkSchemas {
		g := mustCompile(t, schema, true)
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, uint64(len(name))))
		done := 0
		var peak int64
		for walk := range walks {
			m := g.NewMatcher(v)
			var out []int32
			finished := false
			for step := 0; step < 300 && !finished; step++ {
				m.Mask(mask)
				var ids []int32
				for id := range v.Size() {
					if mask[id>>6]&(1<<(id&63)) != 0 {
						ids = append(ids, int32(id))
					}
				}
				if walk == 0 && step%8 == 0 && step < 40 { // the mask is exactly Allowed
					for id := range int32(v.Size()) {
						if got := m.Allowed(id); got != (mask[id>>6]&(1<<(id&63)) != 0) {
							t.Fatalf("%s step %d: Allowed(%d %q) = %v, mask says otherwise", name, step, id, tok.Piece(id), got)
						}
					}
				}
				if len(ids) == 0 {
					t.Fatalf("%s: dead end after %q", name, tok.Decode(out, false))
				}
				id := ids[rng.IntN(len(ids))]
				if err := m.Accept(id); err != nil {
					t.Fatal(err)
				}
				if v.isEOS(id) {
					finished = true
					break
				}
				out = append(out, id)
			}
			peak = max(peak, m.PeakMaskSteps())
			if !finished {
				continue
			}
			done++
			text := tok.Decode(out, false)
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				t.Errorf("%s: output %q is not JSON: %v", name, text, err)
				continue
			}
			if err := sch.Validate(inst); err != nil {
				t.Errorf("%s: output %q does not validate: %v", name, text, err)
			}
		}
		t.Logf("%s: %d of %d walks finished within 300 tokens; compile %d steps, the costliest mask %d steps (budget %d)", name, done, walks, g.CompileSteps(), peak, DefaultSteps)
		if done == 0 {
			t.Errorf("%s: no walk finished", name)
		}
	}
}
