package inference

import (
	"strings"
	"testing"
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
