package inference

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// mapVocab is a fake Vocab: pieces by id, <|…|> pieces are special.
type mapVocab map[int32]string

func (v mapVocab) Piece(id int32) []byte { return []byte(v[id]) }
func (v mapVocab) IsSpecial(id int32) bool {
	return strings.HasPrefix(v[id], "<|") && strings.HasSuffix(v[id], "|>")
}

// pieces builds a vocab whose ids 1… are the given pieces.
func pieces(p ...string) (mapVocab, []int32) {
	v := mapVocab{}
	var ids []int32
	for i, s := range p {
		v[int32(i+1)] = s
		ids = append(ids, int32(i+1))
	}
	return v, ids
}

func TestDetok(t *testing.T) {
	cases := []struct {
		name    string
		pieces  []string
		stops   []string
		deltas  []string // text released after each token ("" when held)
		final   string   // released by flush (unless stopped)
		stopped bool
		ids     int // ids released in total
	}{
		{"plain", []string{"Hel", "lo", " world"}, nil, []string{"Hel", "lo", " world"}, "", false, 3},
		{"stop across tokens", []string{"Hel", "lo", " wor"}, []string{"o w"},
			[]string{"Hel", "l", ""}, "", true, 2},
		{"held prefix released", []string{"a", "<", "b", "c"}, []string{"<end>"},
			[]string{"a", "", "<b", "c"}, "", false, 4},
		{"held prefix flushed", []string{"a", "<e"}, []string{"<end>"}, []string{"a", ""}, "<e", false, 2},
		{"stop at first token", []string{"STOP here"}, []string{"STOP"}, []string{""}, "", true, 0},
		{"stop inside first token", []string{"ab##cd"}, []string{"##"}, []string{"ab"}, "", true, 1},
		{"earliest of two stops", []string{"xyz"}, []string{"z", "y"}, []string{"x"}, "", true, 1},
		// "é" is C3 A9, "€" is E2 82 AC
		{"utf8 split", []string{"caf\xc3", "\xa9!", "\xe2", "\x82", "\xac"}, nil,
			[]string{"caf", "é!", "", "", "€"}, "", false, 5},
		{"utf8 incomplete at end", []string{"a\xe2\x82"}, nil, []string{"a"}, "\uFFFD", false, 1},
		{"invalid byte", []string{"a\xff", "b"}, nil, []string{"a\uFFFD", "b"}, "", false, 2},
		{"special not emitted", []string{"x", "<|python_tag|>", "y"}, nil, []string{"x", "", "y"}, "", false, 3},
		{"stop split mid character", []string{"é", "\xe2\x82", "\xacEND"}, []string{"€END"},
			[]string{"é", "", ""}, "", true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, ids := pieces(tc.pieces...)
			var d detok
			d.reset(v, tc.stops)
			nids := 0
			stopped := false
			for i, id := range ids {
				out, st := d.add(id, nil)
				nids += len(out.ids)
				if out.text != tc.deltas[i] {
					t.Fatalf("token %d: released %q, want %q", i, out.text, tc.deltas[i])
				}
				if st {
					stopped = true
					if i != len(ids)-1 {
						t.Fatalf("stopped at token %d", i)
					}
					break
				}
			}
			if stopped != tc.stopped {
				t.Fatalf("stopped = %v", stopped)
			}
			if !stopped {
				out := d.flush()
				nids += len(out.ids)
				if out.text != tc.final {
					t.Fatalf("flush %q, want %q", out.text, tc.final)
				}
			}
			if nids != tc.ids {
				t.Fatalf("released %d ids, want %d", nids, tc.ids)
			}
		})
	}
}

// byteVocab is a Vocab whose ids index a slice of pieces; none is special.
type byteVocab [][]byte

func (v byteVocab) Piece(id int32) []byte { return v[id] }
func (v byteVocab) IsSpecial(int32) bool  { return false }

// cutVocab cuts text into the pieces of a byteVocab, token i of
// 1+cuts[i]%8 bytes (the rest: one token).
func cutVocab(text string, cuts []byte) byteVocab {
	var vocab byteVocab
	for rest, i := []byte(text), 0; len(rest) > 0; i++ {
		n := len(rest)
		if i < len(cuts) {
			n = min(n, 1+int(cuts[i]%8))
		}
		vocab = append(vocab, rest[:n])
		rest = rest[n:]
	}
	return vocab
}

// FuzzDetok splits a valid UTF-8 text into tokens of fuzzer-chosen lengths
// (1 + cuts[i]%8 bytes, the rest last, so tokens may hold partial
// characters) and streams them through the detokenizer with up to two stop
// strings (any bytes). The released text is the text up to the first stop
// string, or all of it. A choice stops as soon as a token completes a stop
// string (as OpenAI does), so with overlapping stop strings the one
// completed first wins, cut at the earliest stop occurrence in the text so
// far. The ids released are those of the tokens that start before the cut,
// each once, in order.
func FuzzDetok(f *testing.F) {
	f.Add("Hello, wörld€ and more<end> tail", "<end>", "ld€", []byte{0, 5, 2, 3, 1, 4})
	f.Add("aaaa", "aa", "x", []byte{1, 0, 1})
	f.Add("日本語のテキスト", "のテ", "", []byte{2, 2, 2, 2, 2})
	f.Add("Hello world, stop here please", "stop", "", []byte{3, 1, 4, 1, 5, 9, 2, 6})
	f.Add("café €uro END done", "€uro", "END", []byte{1, 1, 1, 1, 2, 1, 1, 1})
	f.Add("aaab", "aab", "", []byte{1, 1, 1, 1})
	f.Add("<|eot|> tail", "<|eot|>", "|>", []byte{2, 3})
	f.Add("x\n\nUser:", "\n\nUser:", "\n", []byte{1, 2, 3})
	f.Add("abcd", "abcd", "bc", []byte{1, 1, 1, 1})
	f.Add("日本語のテキスト", "の", "", []byte{2, 2, 2, 2, 2})
	f.Add("no stops in here at all", "", "", []byte{7})
	f.Add("café", "\xa9", "", []byte{3, 0})
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, cuts []byte) {
		if len(text) > 512 || len(stop1)+len(stop2) > 256 || !utf8.ValidString(text) {
			t.Skip()
		}
		var stops []string
		for _, s := range []string{stop1, stop2} {
			if s != "" {
				stops = append(stops, s)
			}
		}
		vocab := cutVocab(text, cuts)
		var d detok
		d.reset(vocab, stops)
		var got strings.Builder
		var ids []int32
		stopped := false
		for id := range vocab {
			out, st := d.add(int32(id), nil)
			got.WriteString(out.text)
			ids = append(ids, out.ids...)
			if st {
				stopped = true
				break
			}
		}
		if !stopped {
			out := d.flush()
			got.WriteString(out.text)
			ids = append(ids, out.ids...)
		}
		// Reference: the earliest stop in the text up to the first token
		// after which any stop occurs.
		cut := len(text)
		for off, i := 0, 0; i < len(vocab) && cut == len(text); i++ {
			off += len(vocab[i])
			for _, s := range stops {
				if j := strings.Index(text[:off], s); j >= 0 && j < cut {
					cut = j
				}
			}
		}
		want := strings.ToValidUTF8(text[:cut], "\uFFFD")
		if got.String() != want || stopped != (cut < len(text)) {
			t.Fatalf("pieces %q stops %q: got %q (stopped %v), want %q", vocab, stops, got.String(), stopped, want)
		}
		wantIDs := 0
		for off, i := 0, 0; i < len(vocab); i++ {
			if off < cut || cut == len(text) {
				wantIDs++
			}
			off += len(vocab[i])
		}
		if len(ids) != wantIDs {
			t.Fatalf("pieces %q stops %q: %d ids released, want %d", vocab, stops, len(ids), wantIDs)
		}
		for i, id := range ids {
			if id != int32(i) {
				t.Fatalf("released ids %v: not each token once in order", ids)
			}
		}
	})
}

// spVocab is a mapVocab whose text's first token drops its leading space,
// as a SentencePiece decoder's Strip does.
type spVocab struct{ mapVocab }

func (v spVocab) StartPiece(id int32) []byte { return []byte(strings.TrimPrefix(v.mapVocab[id], " ")) }

// TestDetokStartText: a reply that starts the text (after a control token)
// reads its first text token with StartPiece; a special token before it
// does not count, and a continuation keeps the space.
func TestDetokStartText(t *testing.T) {
	cases := []struct {
		name   string
		vocab  Vocab
		start  bool
		pieces []string
		want   string
	}{
		{"starts text", spVocab{}, true, []string{" Paris", " is"}, "Paris is"},
		{"special first", spVocab{}, true, []string{"<|x|>", " Paris", " is"}, "Paris is"},
		{"lone space first", spVocab{}, true, []string{" ", " Hi"}, " Hi"},
		{"continues text", spVocab{}, false, []string{" Paris", " is"}, " Paris is"},
		{"no StartPiece", mapVocab{}, true, []string{" Paris", " is"}, " Paris is"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ids := pieces(tc.pieces...)
			v := tc.vocab
			if _, ok := v.(spVocab); ok {
				v = spVocab{m}
			} else {
				v = m
			}
			var d detok
			d.reset(v, nil)
			if tc.start {
				d.startText()
			}
			var got strings.Builder
			for _, id := range ids {
				out, _ := d.add(id, nil)
				got.WriteString(out.text)
			}
			got.WriteString(d.flush().text)
			if got.String() != tc.want {
				t.Errorf("text %q, want %q", got.String(), tc.want)
			}
		})
	}
}
