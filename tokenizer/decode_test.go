package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLossyString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", "abc"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"\xf0\x9f\x98", "\uFFFD"},             // truncated emoji: one maximal subpart
		{"\xf0\x9f\x98a", "\uFFFDa"},           // followed by ASCII
		{"\xe2\x82\xe2\x82\xac", "\uFFFD€"},    // broken then whole euro sign
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED then A0 is invalid
		{"\xc0\x80", "\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
	} {
		if got := lossyString([]byte(tc.in)); got != tc.want {
			t.Errorf("lossyString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// streamAll decodes ids one by one and returns the pieces Add returned and
// the final Flush.
func streamAll(d *StreamDecoder, ids []int32) ([]string, string) {
	var parts []string
	for _, id := range ids {
		parts = append(parts, d.Add(id))
	}
	return parts, d.Flush()
}

func TestStreamDecoder(t *testing.T) {
	tok := llama3(t)
	for _, text := range []string{
		"Hello, world!",
		"😀👋🏽🇫🇷 family: 👨‍👩‍👧‍👦",
		"中文字符 and 日本語のテキスト",
		"naïve café — ½ ² Ⅻ",
		"<|eot_id|>x😀<|python_tag|>",
	} {
		ids := tok.Encode(text, true, true)
		for _, skip := range []bool{false, true} {
			d := tok.NewStreamDecoder(skip)
			parts, tail := streamAll(d, ids)
			for i, p := range parts {
				if !utf8.ValidString(p) {
					t.Errorf("%q: Add #%d returned invalid UTF-8 %q", text, i, p)
				}
			}
			if got, want := strings.Join(parts, "")+tail, tok.Decode(ids, skip); got != want {
				t.Errorf("%q skip=%v: stream %q, Decode %q", text, skip, got, want)
			}
			if tail != "" {
				t.Errorf("%q: Flush after complete text = %q", text, tail)
			}
		}
	}
}

// TestStreamDecoderSplitsCharacters feeds single-byte tokens so every
// multi-byte character arrives in pieces.
func TestStreamDecoderSplitsCharacters(t *testing.T) {
	tok := llama3(t)
	byteTok := func(b byte) int32 { return tok.byteID[b] }
	d := tok.NewStreamDecoder(false)
	emoji := "😀" // F0 9F 98 80
	for i := 0; i < 3; i++ {
		if got := d.Add(byteTok(emoji[i])); got != "" {
			t.Fatalf("Add of byte %d of an emoji = %q, want held", i, got)
		}
	}
	if got := d.Add(byteTok(emoji[3])); got != emoji {
		t.Fatalf("completing the emoji gave %q", got)
	}
	// An unfinished character is flushed as one U+FFFD.
	d.Add(byteTok(0xE2))
	d.Add(byteTok(0x82))
	if got := d.Flush(); got != "\uFFFD" {
		t.Errorf("Flush = %q, want U+FFFD", got)
	}
	if got := d.Flush(); got != "" {
		t.Errorf("second Flush = %q", got)
	}
	// A broken sequence followed by ASCII comes out at once.
	d.Add(byteTok(0xE2))
	if got := d.Add(byteTok('a')); got != "\uFFFDa" {
		t.Errorf("broken sequence then 'a' = %q", got)
	}
	// An invalid byte is never held.
	if got := d.Add(byteTok(0xFF)); got != "\uFFFD" {
		t.Errorf("0xFF = %q", got)
	}
}

func TestStreamDecoderRandomIDs(t *testing.T) {
	tok := llama3(t)
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		ids := make([]int32, r.IntN(12))
		for i := range ids {
			if r.IntN(2) == 0 {
				ids[i] = tok.byteID[128+r.IntN(128)] // mostly broken UTF-8
			} else {
				ids[i] = int32(r.IntN(tok.VocabSize() + 10))
			}
		}
		parts, tail := streamAll(tok.NewStreamDecoder(true), ids)
		if got, want := strings.Join(parts, "")+tail, tok.Decode(ids, true); got != want {
			t.Fatalf("%v: stream %q, Decode %q", ids, got, want)
		}
	}
}

// TestMergeHeapMatchesScan checks the two BPE implementations agree.
func TestMergeHeapMatchesScan(t *testing.T) {
	tok := llama3(t)
	e := tok.encoder()
	r := rand.New(rand.NewPCG(5, 6))
	words := []string{"internationalization", strings.Repeat("a", 300), strings.Repeat("ab", 77), "Ġ"}
	for range 3000 {
		words = append(words, randomText(r, 1+r.IntN(30)))
	}
	bytes := func(w string) []int32 {
		var sym []int32
		for i := 0; i < len(w); i++ {
			sym = append(sym, tok.byteID[w[i]])
		}
		return sym
	}
	for _, w := range words {
		a := slices.Clone(e.mergeScan(bytes(w)))
		b := e.mergeHeap(bytes(w))
		if !slices.Equal(a, b) {
			t.Fatalf("%q: scan %v, heap %v", w, a, b)
		}
	}
}

func TestLongWords(t *testing.T) {
	tok := llama3(t)
	for _, s := range []string{strings.Repeat("a", 5000), strings.Repeat("ab", 3000), strings.Repeat("中", 2000)} {
		if got := tok.Decode(tok.Encode(s, false, false), false); got != s {
			t.Errorf("round trip of %d-byte word failed", len(s))
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{
		"", "Hello world", "  two  spaces  ", "I'M HE'LL it’s", "x\u0085's", "\ufeff's", "1234567 ²½Ⅻ",
		"\r\n\r\n\t\u3000\u2028", "😀👋🏽🇫🇷👨‍👩‍👧‍👦", "e\u0301\u0301", "<|eot_id|><|begin_of_text|>", "ſ'ſ", "\x00\x7f",
		strings.Repeat("ab", 200),
	} {
		f.Add(s)
	}
	tok := llama3(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, false, false) // must not panic, even on invalid UTF-8
		withSp := tok.Encode(s, true, true)
		_ = tok.Decode(withSp, true)
		if !utf8.ValidString(s) {
			return
		}
		if got := tok.Decode(ids, false); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
		if slices.ContainsFunc(ids, tok.IsSpecial) {
			t.Errorf("Encode(%q) without parseSpecial gave special ids %v", s, ids)
		}
	})
}
