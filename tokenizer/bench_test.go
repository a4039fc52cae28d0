package tokenizer

import (
	"os"
	"strings"
	"testing"
)

// BenchmarkEncode encodes the 20,495-byte golden paragraph repeated 256
// times in 20 KB chunks, like the reference measurement in
// testdata/tokenizer/SOURCE.md (HF Rust ≈ 2.6 MB/s on one core).
func BenchmarkEncode(b *testing.B) {
	b.Run("cache", func(b *testing.B) { benchmarkEncode(b) })
	b.Run("nocache", func(b *testing.B) {
		defer func(n int) { maxCacheWords = n }(maxCacheWords)
		maxCacheWords = 0 // every miss empties the cache first
		benchmarkEncode(b)
	})
}

// BenchmarkEncodeQwen3 is BenchmarkEncode/cache with Qwen3's tokenizer
// (testdata/hfbench.js measures HF on the same text).
func BenchmarkEncodeQwen3(b *testing.B) { benchmarkEncodeWith(b, family(b, "qwen3")) }

// BenchmarkEncodeLlama2 is BenchmarkEncode/cache with the Llama-2 form of
// SentencePiece BPE, which has no pre-tokenizer.
func BenchmarkEncodeLlama2(b *testing.B) { benchmarkEncodeWith(b, family(b, "llama2")) }

// BenchmarkSplit runs only the split scanners over BenchmarkEncode's text.
func BenchmarkSplit(b *testing.B) {
	text := strings.Repeat(paragraph(b), 256)
	for _, tc := range []struct {
		name  string
		split func(string, int) int
	}{{"llama3", splitNext}, {"qwen2", splitQwen2}, {"gpt2", splitGPT2}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				for i := 0; i < len(text); {
					i = tc.split(text, i)
				}
			}
		})
	}
}

func benchmarkEncode(b *testing.B) { benchmarkEncodeWith(b, llama3(b)) }

func benchmarkEncodeWith(b *testing.B, tok *Tokenizer) {
	para := paragraph(b)
	if len(para) != 20495 {
		b.Fatalf("paragraph is %d bytes, want 20495", len(para))
	}
	text := strings.Repeat(para, 256)
	const chunk = 20 << 10
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	ntok := 0
	for b.Loop() {
		ntok = 0
		for i := 0; i < len(text); i += chunk {
			ntok += len(tok.Encode(text[i:min(i+chunk, len(text))], false, false))
		}
	}
	b.ReportMetric(float64(ntok)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncodeParagraph encodes the single golden paragraph in one call.
func BenchmarkEncodeParagraph(b *testing.B) {
	tok, para := llama3(b), paragraph(b)
	b.SetBytes(int64(len(para)))
	for b.Loop() {
		tok.Encode(para, false, false)
	}
}

func BenchmarkDecode(b *testing.B) {
	tok := llama3(b)
	ids := tok.Encode(goldens(b)[3].Text, false, false)
	for b.Loop() {
		tok.Decode(ids, false)
	}
}

func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(tokenizerPath)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// paragraph is the golden paragraph_20k text.
func paragraph(b *testing.B) string {
	for _, g := range goldens(b) {
		if g.Category == "paragraph_20k" {
			return g.Text
		}
	}
	b.Fatal("no paragraph_20k golden")
	return ""
}
