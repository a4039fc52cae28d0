package inference

import (
	"math/rand/v2"
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

// For any split of a text into tokens, the released text is the text up to
// the first stop string (or all of it), and the tokens released are those
// that start before that point. A choice stops as soon as a token completes
// a stop string (as OpenAI does), so with overlapping stop strings the one
// completed first wins, cut at its earliest occurrence.
func FuzzDetok(f *testing.F) {
	f.Add("Hello, wörld€ and more<end> tail", "<end>", "ld€", uint64(1))
	f.Add("aaaa", "aa", "x", uint64(2))
	f.Add("日本語のテキスト", "のテ", "", uint64(3))
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, seed uint64) {
		if len(text) > 200 || !utf8.ValidString(text) {
			return
		}
		var stops []string
		for _, s := range []string{stop1, stop2} {
			if s != "" {
				stops = append(stops, s)
			}
		}
		// split at random byte offsets (possibly inside characters)
		r := rand.New(rand.NewPCG(seed, seed))
		var parts []string
		for rest := text; rest != ""; {
			n := 1 + r.IntN(min(len(rest), 6))
			parts = append(parts, rest[:n])
			rest = rest[n:]
		}
		v, ids := pieces(parts...)
		var d detok
		d.reset(v, stops)
		var got strings.Builder
		nids, stopped := 0, false
		for _, id := range ids {
			out, st := d.add(id, nil)
			got.WriteString(out.text)
			nids += len(out.ids)
			if st {
				stopped = true
				break
			}
		}
		if !stopped {
			out := d.flush()
			got.WriteString(out.text)
			nids += len(out.ids)
		}
		// The choice stops after the first token that completes a stop
		// string, cut at the earliest stop string in the text so far.
		cut := len(text)
		for off, i := 0, 0; i < len(parts) && cut == len(text); i++ {
			off += len(parts[i])
			for _, s := range stops {
				if j := strings.Index(text[:off], s); j >= 0 && j < cut {
					cut = j
				}
			}
		}
		want := strings.ToValidUTF8(text[:cut], "\uFFFD")
		if got.String() != want || stopped != (cut < len(text)) {
			t.Fatalf("parts %q stops %q: got %q (stopped %v), want %q", parts, stops, got.String(), stopped, want)
		}
		wantIDs := 0
		for off, i := 0, 0; i < len(parts); i++ {
			if off < cut || cut == len(text) {
				wantIDs++
			}
			off += len(parts[i])
		}
		if nids != wantIDs {
			t.Fatalf("parts %q stops %q: %d ids released, want %d", parts, stops, nids, wantIDs)
		}
	})
}
