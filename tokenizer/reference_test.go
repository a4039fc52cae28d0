package tokenizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var hfFull = flag.Bool("hf-full", false, "TestAgainstHFTokenizers: compare 40,300 texts and 5,000 id lists instead of about a tenth")

// skipOutsideCI skips the test, or fails it under CI=true, where .ci/run
// installs everything the optional cross-checks need.
func skipOutsideCI(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: "+format, args...)
	}
	t.Skipf(format, args...)
}

// TestAgainstHFTokenizers compares Encode and Decode with the reference
// implementation on random text. It needs node and the npm package
// tokenizers@0.23.2 (tokenizer/testdata/hf: npm ci) and runs when
// HEXSERVE_HF_TOKENIZERS names the node_modules directory holding it (make
// test sets it when that install exists). CI runs about 4,000 strings;
// -hf-full runs ten times as many.
func TestAgainstHFTokenizers(t *testing.T) {
	dir := os.Getenv("HEXSERVE_HF_TOKENIZERS")
	if dir == "" {
		skipOutsideCI(t, "set HEXSERVE_HF_TOKENIZERS to a node_modules directory with tokenizers@0.23.2 to compare with HF")
	}
	if _, err := os.Stat(dir + "/tokenizers/package.json"); err != nil {
		t.Fatalf("HEXSERVE_HF_TOKENIZERS=%s: %v", dir, err)
	}
	scale := 10
	if *hfFull {
		scale = 1
	}
	tok := llama3(t)
	r := rand.New(rand.NewPCG(11, 12))
	var texts []string
	for k := range 30000 / scale {
		texts = append(texts, randomText(r, 2+k%30))
	}
	for range 10000 / scale { // random code points anywhere, between ASCII context
		var b strings.Builder
		for range 1 + r.IntN(8) {
			c := rune(r.IntN(0x110000))
			if !utf8.ValidRune(c) {
				c = 'q'
			}
			b.WriteString([]string{"", " ", "x", "1", "!", "\n"}[r.IntN(6)])
			b.WriteRune(c)
		}
		texts = append(texts, b.String())
	}
	letters := []string{"a", "Z", "hello", "Wörld", "é", "ß", "中文", "ひらがな", "한국어", "Ωμέγα", "мир", "ſ", "ab", "ing", "tion"}
	for range 300 / scale { // long words take the heap BPE path
		var b strings.Builder
		for b.Len() < 150+r.IntN(3000) {
			b.WriteString(letters[r.IntN(len(letters))])
		}
		texts = append(texts, b.String())
	}
	var idLists [][]int32
	for range 5000 / scale {
		ids := make([]int32, 1+r.IntN(6))
		for i := range ids {
			if r.IntN(2) == 0 {
				ids[i] = tok.byteID[128+r.IntN(128)]
			} else {
				ids[i] = int32(r.IntN(tok.VocabSize()))
			}
		}
		idLists = append(idLists, ids)
	}
	req, _ := json.Marshal(map[string]any{"texts": texts, "idLists": idLists})
	cmd := exec.Command("node", "testdata/hfencode.js", tokenizerPath)
	cmd.Env = append(os.Environ(), "HEXSERVE_HF_TOKENIZERS="+dir)
	cmd.Stdin = bytes.NewReader(req)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var resp struct {
		IDs     [][]int32 `json:"ids"`
		Decoded []string  `json:"decoded"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.IDs) != len(texts) || len(resp.Decoded) != len(idLists) {
		t.Fatalf("reference answered %d/%d, want %d/%d", len(resp.IDs), len(resp.Decoded), len(texts), len(idLists))
	}
	bad := 0
	for i, s := range texts {
		if got := tok.Encode(s, false, true); !slices.Equal(got, resp.IDs[i]) {
			if bad++; bad <= 10 {
				t.Errorf("Encode(%q) = %v, HF %v", s, got, resp.IDs[i])
			}
		}
	}
	for i, ids := range idLists {
		if got := tok.Decode(ids, false); got != resp.Decoded[i] {
			if bad++; bad <= 10 {
				t.Errorf("Decode(%v) = %q, HF %q", ids, got, resp.Decoded[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d differences", bad)
	}
	t.Logf("%d encodings and %d decodings equal to HF tokenizers", len(texts), len(idLists))
}
