package tokenizer

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// miniConfig returns a small tokenizer.json of the Llama-3 layout as a
// generic JSON tree: the 256 byte symbols, "ab", "abc" (reachable only
// through ignore_merges) and " a", with merges "a b" and "Ġ a".
func miniConfig() map[string]any {
	vocab := map[string]any{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	vocab["ab"] = 256
	vocab["abc"] = 257
	vocab["Ġa"] = 258
	return map[string]any{
		"version":    "1.0",
		"truncation": nil,
		"padding":    nil,
		"added_tokens": []any{
			map[string]any{"id": 300, "content": "<|eot_id|>", "special": true, "normalized": false},
			map[string]any{"id": 301, "content": "<tool>", "special": false, "normalized": true},
			map[string]any{"id": 302, "content": "<|begin_of_text|>", "special": true, "normalized": false},
		},
		"normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": Llama3Pattern}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
		}},
		"post_processor": map[string]any{"type": "Sequence", "processors": []any{
			map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
			map[string]any{
				"type":   "TemplateProcessing",
				"single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<|begin_of_text|>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
				"pair":   []any{},
				"special_tokens": map[string]any{"<|begin_of_text|>": map[string]any{
					"id": "<|begin_of_text|>", "ids": []any{302}, "tokens": []any{"<|begin_of_text|>"}}},
			},
		}},
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": true,
			"vocab":  vocab,
			"merges": []any{"a b", "Ġ a"},
		},
	}
}

func parseMini(t *testing.T, edit func(c map[string]any)) (*Tokenizer, error) {
	t.Helper()
	c := miniConfig()
	if edit != nil {
		edit(c)
	}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return Parse(data)
}

func model(c map[string]any) map[string]any { return c["model"].(map[string]any) }

func TestParseMini(t *testing.T) {
	b := func(s string) int32 { return int32(s[0]) } // printable ASCII maps to itself
	for _, tc := range []struct {
		name         string
		edit         func(c map[string]any)
		text         string
		addBOS, spec bool
		want         []int32
	}{
		{"ignore_merges hits the vocab", nil, "abc", false, false, []int32{257}},
		{"merges", nil, "abd a", false, false, []int32{256, b("d"), 258}},
		{"ignore_merges off", func(c map[string]any) { model(c)["ignore_merges"] = false }, "abc", false, false, []int32{256, b("c")}},
		{"pair merges", func(c map[string]any) { model(c)["merges"] = []any{[]any{"a", "b"}, []any{"Ġ", "a"}} }, "ab a", false, false, []int32{256, 258}},
		{"BOS", nil, "ab", true, false, []int32{302, 256}},
		{"special parsed", nil, "ab<|eot_id|>", false, true, []int32{256, 300}},
		{"special as text", nil, "<|eot_id|>", false, false, nil}, // checked by decoding
		{"non-special added token always parsed", nil, "a<tool>b", false, false, []int32{b("a"), 301, b("b")}},
	} {
		tok, err := parseMini(t, tc.edit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := tok.Encode(tc.text, tc.addBOS, tc.spec)
		if tc.name == "special as text" {
			if tok.Decode(got, false) != tc.text || slices.ContainsFunc(got, tok.IsSpecial) {
				t.Errorf("%s: %v", tc.name, got)
			}
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", tc.name, tc.text, got, tc.want)
		}
		if dec := tok.Decode(got, true); !utf8.ValidString(dec) {
			t.Errorf("%s: invalid decode", tc.name)
		}
	}
}

// TestAddedTokenOverlap: as in HF, a special token that is not parsed still
// hides an overlapping non-special added token.
func TestAddedTokenOverlap(t *testing.T) {
	tok, err := parseMini(t, func(c map[string]any) {
		c["added_tokens"] = append(c["added_tokens"].([]any),
			map[string]any{"id": 303, "content": "<|eot", "special": false, "normalized": false})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		spec bool
		want int32 // added id expected in the output, or -1 for none
	}{
		{"x<|eot_id|>", true, 300},
		{"x<|eot_id|>", false, -1},
		{"x<|eot", false, 303},
		{"x<|eot", true, 303},
	} {
		ids := tok.Encode(tc.text, false, tc.spec)
		var got int32 = -1
		for _, id := range ids {
			if id >= 300 {
				got = id
			}
		}
		if got != tc.want || tok.Decode(ids, false) != tc.text {
			t.Errorf("Encode(%q, parseSpecial=%v) = %v", tc.text, tc.spec, ids)
		}
	}
}

func TestParseErrors(t *testing.T) {
	pre := func(c map[string]any, i int) map[string]any {
		return c["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[i].(map[string]any)
	}
	for _, tc := range []struct {
		name string
		edit func(c map[string]any)
		want string // substring of the error
	}{
		{"normalizer", func(c map[string]any) { c["normalizer"] = map[string]any{"type": "NFKC"} }, `normalizer.type "NFKC" is not supported`},
		{"normalizer in a sequence", func(c map[string]any) {
			c["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Lowercase"}}}
		}, `normalizer.type "Lowercase" is not supported`},
		{"regex replace", func(c map[string]any) {
			c["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " +"}, "content": " "}
		}, "only a String pattern"},
		{"truncation", func(c map[string]any) { c["truncation"] = map[string]any{"max_length": 5} }, "truncation"},
		{"padding", func(c map[string]any) { c["padding"] = map[string]any{"strategy": "BatchLongest"} }, "padding"},
		{"pre-tokenizer", func(c map[string]any) { c["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, `pre_tokenizer.type "Whitespace" is not supported`},
		{"digits step", func(c map[string]any) {
			c["pre_tokenizer"].(map[string]any)["pretokenizers"] = append([]any{map[string]any{"type": "Digits", "individual_digits": true}}, c["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)...)
		}, `pre_tokenizer.type "Digits" is not supported`},
		{"three steps", func(c map[string]any) {
			c["pre_tokenizer"].(map[string]any)["pretokenizers"] = append(c["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any), map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})
		}, `pre_tokenizer Sequence ["Split" "ByteLevel" "ByteLevel"] is not supported`},
		{"metaspace with a byte-level decoder", func(c map[string]any) {
			c["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
		}, `decoder.type "ByteLevel" is not supported`},
		{"metaspace scheme", func(c map[string]any) {
			c["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"}
		}, `prepend_scheme "sometimes"`},
		{"other regex", func(c map[string]any) { pre(c, 0)["pattern"] = map[string]any{"Regex": `\s+`} }, "Split pattern"},
		{"string pattern", func(c map[string]any) { pre(c, 0)["pattern"] = map[string]any{"String": " "} }, "Split pattern"},
		{"split behavior", func(c map[string]any) { pre(c, 0)["behavior"] = "Removed" }, "Split behavior"},
		{"prefix space", func(c map[string]any) { pre(c, 1)["add_prefix_space"] = true }, "add_prefix_space"},
		{"bytelevel regex", func(c map[string]any) { pre(c, 1)["use_regex"] = true }, "use_regex"},
		{"metaspace", func(c map[string]any) { pre(c, 1)["type"] = "Metaspace" }, `"Metaspace"`},
		{"decoder", func(c map[string]any) { c["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder.type "WordPiece" is not supported`},
		{"SentencePiece decoder", func(c map[string]any) {
			c["pre_tokenizer"] = nil
			c["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{map[string]any{"type": "ByteFallback"}, map[string]any{"type": "CTC"}}}
		}, `decoder.type "CTC" is not supported`},
		{"unk not in vocab", func(c map[string]any) {
			c["pre_tokenizer"] = nil
			c["decoder"] = map[string]any{"type": "Fuse"}
			model(c)["unk_token"] = "<unk>"
		}, `unk_token "<unk>" is not in the vocab`},
		{"no decoder", func(c map[string]any) { c["decoder"] = nil }, "decoder null"},
		{"model", func(c map[string]any) { model(c)["type"] = "Unigram" }, `model.type "Unigram" is not supported`},
		{"dropout", func(c map[string]any) { model(c)["dropout"] = 0.1 }, "dropout"},
		{"suffix", func(c map[string]any) { model(c)["end_of_word_suffix"] = "</w>" }, "end_of_word_suffix"},
		{"prefix", func(c map[string]any) { model(c)["continuing_subword_prefix"] = "##" }, "continuing_subword_prefix"},
		{"missing byte", func(c map[string]any) { delete(model(c)["vocab"].(map[string]any), "Ġ") }, "byte 0x20"},
		{"bad merge", func(c map[string]any) { model(c)["merges"] = []any{"a zz"} }, "merge 0"},
		{"merge without space", func(c map[string]any) { model(c)["merges"] = []any{"ab"} }, "merge 0"},
		{"merge with two spaces", func(c map[string]any) { model(c)["merges"] = []any{"a b c"} }, "merge 0"},
		{"post-processor", func(c map[string]any) { c["post_processor"] = map[string]any{"type": "RobertaProcessing"} }, `post_processor "RobertaProcessing"`},
		{"huge id", func(c map[string]any) { c["added_tokens"].([]any)[0].(map[string]any)["id"] = 1 << 30 }, "outside"},
		{"not json", func(c map[string]any) { c["model"] = "x" }, "model"},
	} {
		_, err := parseMini(t, tc.edit)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	if _, err := Parse([]byte("{")); err == nil {
		t.Error("Parse of broken JSON succeeded")
	}
	if _, err := Load("testdata/does-not-exist.json"); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}
