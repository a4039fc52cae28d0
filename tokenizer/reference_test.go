package tokenizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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

// hfDir returns the node_modules directory holding tokenizers@0.23.2 for
// the tests that compare with HF's own code: HEXSERVE_HF_TOKENIZERS (make
// test sets it when testdata/hf is installed), else skip, or fail under
// CI=true.
func hfDir(t *testing.T) string {
	dir := os.Getenv("HEXSERVE_HF_TOKENIZERS")
	if dir == "" {
		skipOutsideCI(t, "set HEXSERVE_HF_TOKENIZERS to a node_modules directory with tokenizers@0.23.2 to compare with HF")
	}
	if _, err := os.Stat(dir + "/tokenizers/package.json"); err != nil {
		t.Fatalf("HEXSERVE_HF_TOKENIZERS=%s: %v", dir, err)
	}
	return dir
}

// hfReference encodes texts and decodes idLists with HF tokenizers
// (testdata/hfencode.js) and the tokenizer.json data.
func hfReference(t *testing.T, dir string, data []byte, texts []string, idLists [][]int32) (ids [][]int32, decoded []string) {
	file := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if idLists == nil {
		idLists = [][]int32{}
	}
	req, _ := json.Marshal(map[string]any{"texts": texts, "idLists": idLists})
	cmd := exec.Command("node", "testdata/hfencode.js", file)
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
	return resp.IDs, resp.Decoded
}

// TestAgainstHFTokenizers compares Encode and Decode with the reference
// implementation on random text, for Llama 3 and each family of the goldens
// (Qwen3, the Llama-2 form, a Metaspace form, GPT-2's split). It needs node
// and testdata/hf installed (npm ci; see hfDir). CI runs about 4,000
// strings per tokenizer; -hf-full runs ten times as many.
func TestAgainstHFTokenizers(t *testing.T) {
	dir := hfDir(t)
	for _, name := range []string{"llama3", "qwen3", "llama2", "llama2-metaspace-always-split", "llama3-gpt2-prefix"} {
		t.Run(name, func(t *testing.T) {
			var data []byte
			if name == "llama3" {
				data, _ = os.ReadFile(tokenizerPath)
			} else {
				data = variantJSON(t, name)
			}
			compareWithHF(t, dir, family(t, name), data)
		})
	}
}

func compareWithHF(t *testing.T, dir string, tok *Tokenizer, data []byte) {
	scale := 10
	if *hfFull {
		scale = 1
	}
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
			switch {
			case r.IntN(2) == 1:
				ids[i] = int32(r.IntN(tok.VocabSize()))
			case tok.byteLevel:
				ids[i] = tok.byteID[128+r.IntN(128)]
			default:
				ids[i] = tok.byteTok[r.IntN(256)]
			}
		}
		idLists = append(idLists, ids)
	}
	ref, decoded := hfReference(t, dir, data, texts, idLists)
	bad := 0
	for i, s := range texts {
		if got := tok.Encode(s, false, true); !slices.Equal(got, ref[i]) {
			if bad++; bad <= 10 {
				t.Errorf("Encode(%q) = %v, HF %v", s, got, ref[i])
			}
		}
	}
	for i, ids := range idLists {
		if got := tok.Decode(ids, false); got != decoded[i] {
			if bad++; bad <= 10 {
				t.Errorf("Decode(%v) = %q, HF %q", ids, got, decoded[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d differences", bad)
	}
	t.Logf("%d encodings and %d decodings equal to HF tokenizers", len(texts), len(idLists))
}

// TestNFCMatchesHF checks nfc against HF's NFC normalizer (through Qwen3's
// tokenizer, whose decoding gives back the normalized text) on every
// character Go's NFC does not leave alone: decomposed, alone, and after or
// before a combining mark, and on random runs of such characters.
func TestNFCMatchesHF(t *testing.T) {
	dir := hfDir(t)
	tok := family(t, "qwen3")
	var active []rune
	var texts []string
	for r := rune(0xA0); r <= unicode.MaxRune; r++ {
		s := string(r)
		if !utf8.ValidRune(r) || norm.NFC.IsNormalString("a"+s+"a") && norm.NFD.String(s) == s && norm.NFC.PropertiesString(s).BoundaryBefore() {
			continue
		}
		active = append(active, r)
		texts = append(texts, norm.NFD.String(s), s, "a\u0301"+s, "a"+s+"\u0334")
	}
	rnd := rand.New(rand.NewPCG(15, 16))
	for range 3000 {
		var b strings.Builder
		for range 1 + rnd.IntN(6) {
			b.WriteString([]string{"", "a", "e", "\u1100", "\u3099"}[rnd.IntN(5)])
			for range rnd.IntN(4) {
				b.WriteString(norm.NFD.String(string(active[rnd.IntN(len(active))])))
			}
		}
		texts = append(texts, b.String())
	}
	texts = append(texts, "\U00011935\U00011930", "e"+strings.Repeat("\u0316\u0301", 20))
	ref, _ := hfReference(t, dir, familyJSON(t, "qwen3"), texts, nil)
	bad := 0
	for i, s := range texts {
		if got, want := nfc(s), tok.Decode(ref[i], false); got != want {
			if bad++; bad <= 10 {
				t.Errorf("nfc(%+q) = %+q, HF %+q", s, got, want)
			}
		}
	}
	t.Logf("%d texts over %d characters; %d differ", len(texts), len(active), bad)
}
