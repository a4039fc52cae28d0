package inference

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzVocab is a Vocab whose ids index a slice of pieces.
type fuzzVocab [][]byte

func (v fuzzVocab) Piece(id int32) []byte { return v[id] }
func (v fuzzVocab) IsSpecial(int32) bool  { return false }

// FuzzStopMatcher splits a valid UTF-8 text into tokens at arbitrary byte
// positions (so tokens may hold partial characters) and streams them
// through the stop matcher. The emitted text is valid UTF-8, never contains
// a stop string, is the text cut before the first stop that completes (the
// first occurrence when no stop lies inside another), and is the whole text
// when no stop occurs; every token id is released at most once, in order.
func FuzzStopMatcher(f *testing.F) {
	f.Add("Hello world, stop here please", "stop", "", []byte{3, 1, 4, 1, 5, 9, 2, 6})
	f.Add("café €uro END done", "€uro", "END", []byte{1, 1, 1, 1, 2, 1, 1, 1})
	f.Add("aaab", "aab", "", []byte{1, 1, 1, 1})
	f.Add("<|eot|> tail", "<|eot|>", "|>", []byte{2, 3})
	f.Add("x\n\nUser:", "\n\nUser:", "\n", []byte{1, 2, 3})
	f.Add("abcd", "abcd", "bc", []byte{1, 1, 1, 1})
	f.Add("no stops in here at all", "", "", []byte{7})
	f.Add("日本語のテキスト", "の", "", []byte{2, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, cuts []byte) {
		if !utf8.ValidString(text) || !utf8.ValidString(stop1) || !utf8.ValidString(stop2) || len(text) > 512 || len(stop1)+len(stop2) > 256 {
			t.Skip()
		}
		var stops []string
		for _, s := range []string{stop1, stop2} {
			if s != "" {
				stops = append(stops, s)
			}
		}
		// Split text into tokens of the lengths in cuts (1 + b%8), the rest last.
		var vocab fuzzVocab
		for rest, i := []byte(text), 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(n, 1+int(cuts[i]%8))
			}
			vocab = append(vocab, rest[:n])
			rest = rest[n:]
		}

		var d detok
		d.reset(vocab, stops)
		var out strings.Builder
		var ids []int32
		stopped := false
		for id := range vocab {
			o, st := d.add(int32(id), nil)
			out.WriteString(o.text)
			ids = append(ids, o.ids...)
			if st {
				stopped = true
				break
			}
		}
		if !stopped {
			o := d.flush()
			out.WriteString(o.text)
			ids = append(ids, o.ids...)
		}
		got := out.String()

		if !utf8.ValidString(got) {
			t.Fatalf("emitted invalid UTF-8 %q", got)
		}
		for _, s := range stops {
			if strings.Contains(got, s) {
				t.Fatalf("emitted %q contains stop %q", got, s)
			}
		}
		if !strings.HasPrefix(text, got) {
			t.Fatalf("emitted %q is not a prefix of %q", got, text)
		}
		for i, id := range ids {
			if id != int32(i) {
				t.Fatalf("released ids %v: not each token once in order", ids)
			}
		}
		if !stopped {
			if got != text {
				t.Fatalf("not stopped but emitted %q of %q", got, text)
			}
			if len(ids) != len(vocab) {
				t.Fatalf("released %d of %d ids", len(ids), len(vocab))
			}
			for _, s := range stops {
				if strings.Contains(text, s) {
					t.Fatalf("stop %q in %q was missed", s, text)
				}
			}
			return
		}
		rest := text[len(got):]
		startsWithStop := false
		for _, s := range stops {
			startsWithStop = startsWithStop || strings.HasPrefix(rest, s)
		}
		if !startsWithStop {
			t.Fatalf("stopped, but the cut %q is not followed by a stop (%q)", got, rest)
		}
		nested := len(stops) == 2 && (strings.Contains(stops[0], stops[1]) || strings.Contains(stops[1], stops[0]))
		if !nested {
			cut := len(text)
			for _, s := range stops {
				if i := strings.Index(text, s); i >= 0 && i < cut {
					cut = i
				}
			}
			if got != text[:cut] {
				t.Fatalf("emitted %q, reference cut %q (stops %q)", got, text[:cut], stops)
			}
		}
		// The stop that ended generation completes within the token that
		// triggered it: nothing after that token was consumed.
		var consumed []byte
		for _, p := range vocab {
			consumed = append(consumed, p...)
			found := false
			for _, s := range stops {
				found = found || bytes.Contains(consumed, []byte(s))
			}
			if found {
				break
			}
		}
		if len(got) > len(consumed) {
			t.Fatalf("emitted beyond the first stop's token")
		}
	})
}
