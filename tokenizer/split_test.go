package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// splitAll returns the pre-tokens of s.
func splitAll(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := splitNext(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"  two", []string{" ", " two"}},
		{"a  ", []string{"a", "  "}},
		{"a   b", []string{"a", "  ", " b"}},
		{"a \tb", []string{"a", " ", "\tb"}},
		{"a\t\tb", []string{"a", "\t", "\tb"}},
		// contractions: ASCII apostrophe only, letters case-insensitive
		{"I'm you're he'll she'd it's", []string{"I", "'m", " you", "'re", " he", "'ll", " she", "'d", " it", "'s"}},
		{"I'M YOU'RE HE'LL IT'S DON'T WE'VE", []string{"I", "'M", " YOU", "'RE", " HE", "'LL", " IT", "'S", " DON", "'T", " WE", "'VE"}},
		{"we'Ve 'rE 'lL", []string{"we", "'Ve", " '", "rE", " '", "lL"}},
		{"it’s", []string{"it", "’s"}},
		{"'sound", []string{"'s", "ound"}},
		{"'hello", []string{"'hello"}},
		{"'r", []string{"'r"}},
		{"'l", []string{"'l"}},
		{"x'ſ", []string{"x", "'ſ"}}, // U+017F case-folds to s under (?i)
		{"''s", []string{"''", "s"}},
		// letters with an optional non-letter/number prefix
		{"(hello)", []string{"(hello", ")"}},
		{"$x", []string{"$x"}},
		{"\u00a0word", []string{"\u00a0word"}},
		{"\nword", []string{"\n", "word"}},
		{"\r\nword", []string{"\r\n", "word"}},
		{"1abc", []string{"1", "abc"}},
		{"é中文", []string{"é中文"}},
		{"e\u0301", []string{"e", "\u0301"}}, // combining mark is not \p{L}
		// numbers in groups of up to three
		{"1234567", []string{"123", "456", "7"}},
		{"x²½Ⅻ٣", []string{"x", "²½Ⅻ", "٣"}},
		{"3.14", []string{"3", ".", "14"}},
		// punctuation runs absorb trailing newlines, with one optional space
		{"!!\n\nx", []string{"!!\n\n", "x"}},
		{" ...\r\n", []string{" ...\r\n"}},
		{"  ...", []string{" ", " ..."}},
		{"a ,b", []string{"a", " ,", "b"}},
		{"😀😀 👋🏽", []string{"😀😀", " 👋🏽"}},
		// whitespace runs
		{"a\n\n  b", []string{"a", "\n\n", " ", " b"}},
		{"a \n \n b", []string{"a", " \n \n", " b"}},
		{"a\n \t", []string{"a", "\n", " \t"}},
		{"a \n  \t", []string{"a", " \n", "  \t"}},
		{"x\u0085's", []string{"x", "\u0085", "'s"}},
		{"\ufeff's", []string{"\ufeff'", "s"}}, // BOM is not \s
		{"\ufeffab", []string{"\ufeffab"}},
		{"a\u3000\u3000b", []string{"a", "\u3000", "\u3000b"}},
		{"a\u2028b", []string{"a", "\u2028b"}},
		{" ", []string{" "}},
		{"\x1c\x1fx", []string{"\x1c\x1f", "x"}}, // separators are not White_Space
		{"\x1cx", []string{"\x1cx"}},
		// letters and digits newer than Go's Unicode 15.0 tables
		{"x\U0002EBF0\U00016D43", []string{"x\U0002EBF0\U00016D43"}},     // CJK Ext I (15.1), Kirat Rai (16.0)
		{"x\U00010D40\U00010D41", []string{"x", "\U00010D40\U00010D41"}}, // Garay digits (16.0)
	} {
		if got := splitAll(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// fragments mixes the characters the split regex treats specially.
var fragments = []string{
	"'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'lL", "'d", "'D", "'", "’", "ſ", "'ſ",
	" ", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u0085", "\u00a0", "\u1680", "\u2000", "\u200a", "\u2028",
	"\u2029", "\u202f", "\u205f", "\u3000", "\ufeff", "\u200b", "\x1c", "\x00", "\x7f",
	"a", "Z", "hello", "Wörld", "é", "ß", "İ", "中文", "ひらがな", "한국어", "Ωμέγα", "мир", "עברית", "مرحبا", "ก", "\u0301", "\u0903",
	"0", "7", "123", "4567", "²", "½", "Ⅻ", "٣", "१२", "①",
	"▁", "\u1100\u1161", "\u0345", "!", ".", ",", "...", "-", "—", "\"", "(", ")", "$", "_", "#", "<|eot_id|>", "😀", "👋🏽", "\u200d", "🇫🇷", "\ue000", "\uffff",
}

func randomText(r *rand.Rand, maxParts int) string {
	var b strings.Builder
	for range r.IntN(maxParts) + 1 {
		b.WriteString(fragments[r.IntN(len(fragments))])
	}
	return b.String()
}

// TestSplitMatchesOniguruma compares the scanner with Oniguruma itself (the
// engine behind HF tokenizers) on random strings. It needs a C compiler and
// libonig-dev (Debian: apt-get install libonig-dev) and is skipped without,
// except under CI=true, where .ci/run installs both and a failed build fails.
func TestSplitMatchesOniguruma(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	bin := filepath.Join(t.TempDir(), "onigsplit")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if out, err := exec.Command(cc, "-O2", "-o", bin, "testdata/onigsplit.c", "-lonig").CombinedOutput(); err != nil {
		skipOutsideCI(t, "cannot build the Oniguruma helper (needs cc and libonig-dev): %v\n%s", err, out)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var inputs []string
	for k := range 40000 {
		inputs = append(inputs, randomText(r, 4+k%40))
	}
	for _, pat := range []struct {
		name  string
		split func(string, int) int
	}{{"llama3", splitNext}, {"qwen2", splitQwen2}, {"gpt2", splitGPT2}} {
		t.Run(pat.name, func(t *testing.T) { compareOniguruma(t, bin, pat.name, pat.split, inputs) })
	}
}

func compareOniguruma(t *testing.T, bin, pattern string, split func(string, int) int, inputs []string) {
	var stdin bytes.Buffer
	for _, s := range inputs {
		stdin.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
		stdin.WriteString(s)
	}
	cmd := exec.Command(bin, pattern)
	cmd.Stdin = &stdin
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	bad := 0
	i := 0
	for ; sc.Scan(); i++ {
		var b strings.Builder
		for p, j := range splitEnds(inputs[i], split) {
			if p > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprint(&b, j)
		}
		if got, want := b.String(), strings.TrimSpace(sc.Text()); got != want {
			if bad++; bad <= 10 {
				t.Errorf("%q: ends %s, Oniguruma %s", inputs[i], got, want)
			}
		}
	}
	if i != len(inputs) {
		t.Errorf("helper answered %d of %d strings", i, len(inputs))
	}
	if bad > 0 {
		t.Errorf("%d of %d strings differ", bad, len(inputs))
	}
}

func splitEnds(s string, split func(string, int) int) []int {
	var ends []int
	for i := 0; i < len(s); {
		i = split(s, i)
		ends = append(ends, i)
	}
	return ends
}

func TestSplitQwen2AndGPT2(t *testing.T) {
	for _, tc := range []struct {
		split func(string, int) int
		in    string
		want  []string
	}{
		{splitQwen2, "abc 1234 x²½", []string{"abc", " ", "1", "2", "3", "4", " x", "²", "½"}},
		{splitQwen2, "I'M it's  \n\nok", []string{"I", "'M", " it", "'s", "  \n\n", "ok"}},
		{splitGPT2, "Hello world 1234 ab12", []string{"Hello", " world", " 1234", " ab", "12"}},
		{splitGPT2, "I'M it's 'Tis", []string{"I", "'", "M", " it", "'s", " '", "Tis"}},
		{splitGPT2, "a  \n\nb!!", []string{"a", "  \n", "\n", "b", "!!"}},
		{splitGPT2, "x \t", []string{"x", " \t"}},
	} {
		var got []string
		for i := 0; i < len(tc.in); {
			j := tc.split(tc.in, i)
			got = append(got, tc.in[i:j])
			i = j
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
