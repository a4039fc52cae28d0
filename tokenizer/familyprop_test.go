package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFamilySpecials(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bos     int32
		vocab   int
		special map[string]int32 // content -> id, all special
		plain   map[string]int32 // added, not special
	}{
		{"qwen3", -1, 151669, map[string]int32{"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645},
			map[string]int32{"<tool_call>": 151657, "</tool_call>": 151658, "<think>": 151667, "</think>": 151668}},
		{"qwen2.5", -1, 151665, map[string]int32{"<|endoftext|>": 151643, "<|im_end|>": 151645}, map[string]int32{"<tool_call>": 151657}},
		{"llama2", 1, 32000, map[string]int32{"<unk>": 0, "<s>": 1, "</s>": 2}, nil},
		{"llama3", 128000, 128256, map[string]int32{"<|begin_of_text|>": 128000, "<|eot_id|>": 128009}, nil},
	} {
		tok := family(t, tc.name)
		if got := tok.Specials().BOS; got != tc.bos {
			t.Errorf("%s: BOS = %d, want %d", tc.name, got, tc.bos)
		}
		if got := tok.VocabSize(); got != tc.vocab {
			t.Errorf("%s: VocabSize = %d, want %d", tc.name, got, tc.vocab)
		}
		for s, id := range tc.special {
			if got, ok := tok.TokenID(s); !ok || got != id || !tok.IsSpecial(id) {
				t.Errorf("%s: TokenID(%q) = %d, %v, special %v; want %d, special", tc.name, s, got, ok, tok.IsSpecial(id), id)
			}
		}
		for s, id := range tc.plain {
			if got, ok := tok.TokenID(s); !ok || got != id || tok.IsSpecial(id) {
				t.Errorf("%s: TokenID(%q) = %d, %v, special %v; want %d, not special", tc.name, s, got, ok, tok.IsSpecial(id), id)
			}
		}
		if bos := tok.Encode("hi", true, false); tc.bos >= 0 != (len(bos) > 0 && bos[0] == tc.bos) {
			t.Errorf("%s: Encode with BOS = %v", tc.name, bos)
		}
	}
	// SentencePiece pieces: "▁" is a space, a byte token its byte.
	tok := family(t, "llama2")
	for s, want := range map[string]string{"▁Hello": " Hello", "<0x0A>": "\n", "<0xE4>": "\xe4", "<s>": "<s>"} {
		id, _ := tok.TokenID(s)
		if got := string(tok.Piece(id)); got != want {
			t.Errorf("llama2: Piece(%q) = %q, want %q", s, got, want)
		}
	}
}

// familyNames are the tokenizers of the family tests.
var familyNames = []string{"qwen3", "qwen2.5", "llama2", "llama2-metaspace-first", "llama2-metaspace-always-split", "llama3-gpt2", "qwen3-strip"}

// TestFamiliesKeepUserTextPlain: with parseSpecial off (plain segments),
// every added token's text stays text, for every tokenizer kind.
func TestFamiliesKeepUserTextPlain(t *testing.T) {
	for _, name := range familyNames {
		tok := family(t, name)
		var b strings.Builder
		for s := range tok.added {
			b.WriteString(s)
			b.WriteString(" x")
			b.WriteString(s)
		}
		text := b.String()
		ids := tok.EncodeSegments([]Segment{{Text: "<|im_start|>", Special: true}, {Text: text}, {Text: text}}, false)
		n := 0
		for _, id := range ids {
			if tok.IsSpecial(id) {
				n++
			}
		}
		want := 0
		if id, ok := tok.TokenID("<|im_start|>"); ok && tok.IsSpecial(id) {
			want = 1
		}
		if n != want {
			t.Errorf("%s: %d special ids from plain text, want %d", name, n, want)
		}
	}
}

// TestFamiliesStreamDecoder: the stream's pieces add up to Decode.
func TestFamiliesStreamDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, name := range familyNames {
		tok := family(t, name)
		for range 300 {
			ids := make([]int32, r.IntN(12))
			for i := range ids {
				ids[i] = int32(r.IntN(tok.VocabSize() + 5))
				if r.IntN(3) == 0 && !tok.byteLevel {
					ids[i] = tok.byteTok[128+r.IntN(128)] // mostly broken UTF-8
				}
			}
			skip := r.IntN(2) == 0
			parts, tail := streamAll(tok.NewStreamDecoder(skip), ids)
			if got, want := strings.Join(parts, "")+tail, tok.Decode(ids, skip); got != want {
				t.Fatalf("%s %v: stream %q, Decode %q", name, ids, got, want)
			}
		}
	}
}

// roundTrip is the text Decode(Encode(s)) must give for a family whose
// round trip is exact up to its normalizer.
var roundTrip = map[string]func(string) string{
	"qwen3":       nfc, // TestFamilyGoldens checks it against HF
	"qwen2.5":     nfc,
	"llama3-gpt2": func(s string) string { return s },
	"llama2":      func(s string) string { return strings.ReplaceAll(s, "▁", " ") },
}

func FuzzFamiliesRoundTrip(f *testing.F) {
	for _, s := range []string{"", "Hello world", " lead", "cafe\u0301", "e" + strings.Repeat("\u0301", 40), "中文 😀", "<|im_end|><s>", "a▁b", "12345", "\t\n\r\n  x"} {
		f.Add(s)
	}
	toks := map[string]*Tokenizer{}
	for name := range roundTrip {
		toks[name] = family(f, name)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, tok := range toks {
			ids := tok.Encode(s, false, false) // must not panic, even on invalid UTF-8
			_ = tok.Decode(tok.Encode(s, true, true), true)
			if !utf8.ValidString(s) {
				continue
			}
			if got, want := tok.Decode(ids, false), roundTrip[name](s); got != want {
				t.Errorf("%s: Decode(Encode(%q)) = %q, want %q", name, s, got, want)
			}
			if slices.ContainsFunc(ids, tok.IsSpecial) {
				t.Errorf("%s: Encode(%q) without parseSpecial gave special ids %v", name, s, ids)
			}
		}
	})
}

// FuzzLlama3MatchesLegacy checks the general loader's Llama-3 path against
// the encoder it replaced.
func FuzzLlama3MatchesLegacy(f *testing.F) {
	for _, s := range []string{"", "Hello world", "I'M HE'LL", "1234567 ²½Ⅻ", "<|eot_id|>x<|begin_of_text|>", "\r\n\r\n\t\u3000", "😀👋🏽"} {
		f.Add(s, true)
	}
	tok := llama3(f)
	f.Fuzz(func(t *testing.T, s string, parseSpecial bool) {
		if got, want := tok.Encode(s, false, parseSpecial), legacyEncode(tok, s, parseSpecial); !slices.Equal(got, want) {
			t.Errorf("Encode(%q, %v) = %v, legacy %v", s, parseSpecial, got, want)
		}
	})
}

// TestLlama3MatchesLegacy runs FuzzLlama3MatchesLegacy's check on random
// text.
func TestLlama3MatchesLegacy(t *testing.T) {
	tok := llama3(t)
	r := rand.New(rand.NewPCG(13, 14))
	for k := range 20000 {
		s := randomText(r, 2+k%40)
		if got, want := tok.Encode(s, false, k%2 == 0), legacyEncode(tok, s, k%2 == 0); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, legacy %v", s, got, want)
		}
	}
}

// phi3 is Phi-3.5-mini's tokenizer form: Llama 2's SentencePiece BPE with
// Phi-3's eleven added tokens, all but <|endoftext|> with rstrip (as in
// Phi-3.5-mini-instruct's tokenizer.json).
func phi3(t *testing.T) (*Tokenizer, []byte) {
	var f map[string]any
	if err := json.Unmarshal(familyJSON(t, "llama2"), &f); err != nil {
		t.Fatal(err)
	}
	added := f["added_tokens"].([]any)
	for i, c := range []string{"<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
		"<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"} {
		added = append(added, map[string]any{"id": 32000 + i, "content": c, "single_word": false, "lstrip": false,
			"rstrip": i > 0, "normalized": false, "special": true})
	}
	f["added_tokens"] = added
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok, data
}

// TestSegmentsStripAcross: an added token's rstrip and lstrip take the
// whitespace of the segments beside it, so the segments encode as the
// joined text does (HF's encoding of it: Encode, checked by the goldens and,
// for Phi-3, by HF tokenizers when HEXSERVE_HF_TOKENIZERS is set). A Phi-3.5
// chat prompt is 8 tokens, not 13 with a "▁\n" after each of its tokens.
func TestSegmentsStripAcross(t *testing.T) {
	p, s := func(text string) Segment { return Segment{Text: text} }, func(text string) Segment { return Segment{Text: text, Special: true} }
	phiPrompt := []Segment{s("<|user|>"), p("\nWeather in Paris?"), s("<|end|>"), p("\n"), s("<|assistant|>"), p("\n")}
	phi, phiData := phi3(t)
	cases := []struct {
		tok  string
		segs []Segment
	}{
		{"phi3", phiPrompt},
		{"phi3", []Segment{s("<|system|>"), p("\n \n"), p(" \t"), p(" Be brief.  "), s("<|end|>"), p("\n"), s("<|endoftext|>"), p("\n x")}},
		{"phi3", []Segment{s("<|user|>\n"), p("\nhi"), s("<|end|> x")}},
		{"phi3", []Segment{p("  "), s("<|user|>")}}, // no lstrip: the spaces stay
		{"qwen3-strip", []Segment{s("<|im_end|>"), p("\n  hi"), s("<think>"), p(" x")}},
		{"qwen3-strip", []Segment{p("a \n"), p(" "), s("<think>"), p("b "), s("</think>"), p(" \n"), p("c")}},
		{"qwen3-strip", []Segment{p("a\n"), s("x</think>"), p(" b")}},
	}
	for _, c := range cases {
		tok := phi
		if c.tok != "phi3" {
			tok = family(t, c.tok)
		}
		var joined strings.Builder
		for _, sg := range c.segs {
			joined.WriteString(sg.Text)
		}
		got, want := tok.EncodeSegments(c.segs, false), tok.Encode(joined.String(), false, true)
		if !slices.Equal(got, want) {
			t.Errorf("%s %q: segments %v, joined %v", c.tok, joined.String(), got, want)
		}
	}
	if got := phi.EncodeSegments(phiPrompt, false); len(got) != 8 {
		t.Errorf("Phi-3.5 chat prompt: %d tokens %v, want 8", len(got), got)
	}
	if os.Getenv("HEXSERVE_HF_TOKENIZERS") == "" {
		return
	}
	texts := []string{"<|user|>\nWeather in Paris?<|end|>\n<|assistant|>\n", "<|system|>\n \n \t Be brief.  <|end|>\n<|endoftext|>\n x"}
	ids, _ := hfReference(t, hfDir(t), phiData, texts, nil)
	for i, text := range texts {
		if got := phi.Encode(text, false, true); !slices.Equal(got, ids[i]) {
			t.Errorf("phi3 %q: %v, HF %v", text, got, ids[i])
		}
	}
}

// TestStartPiece: a text's first token reads as HF decodes it alone (no
// leading space for SentencePiece-style tokenizers), and is Piece for
// byte-level BPE, byte tokens and special tokens.
func TestStartPiece(t *testing.T) {
	phi, _ := phi3(t)
	cases := []struct {
		tok        *Tokenizer
		token      string
		start, mid string
	}{
		{phi, "▁Paris", "Paris", " Paris"},
		{phi, "▁", "", " "},
		{phi, "ather", "ather", "ather"},
		{phi, "<0x0A>", "\n", "\n"},
		{phi, "<|end|>", "<|end|>", "<|end|>"},
		{family(t, "llama2-metaspace-first"), "▁Paris", "Paris", " Paris"},
		{llama3(t), "ĠParis", " Paris", " Paris"},
	}
	for _, c := range cases {
		id, ok := c.tok.TokenID(c.token)
		if !ok {
			t.Fatalf("no token %q", c.token)
		}
		if got, mid := string(c.tok.StartPiece(id)), string(c.tok.Piece(id)); got != c.start || mid != c.mid {
			t.Errorf("%q: StartPiece %q, Piece %q; want %q, %q", c.token, got, mid, c.start, c.mid)
		}
	}
}
