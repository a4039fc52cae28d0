package inference

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// thVocab has one token per byte and "th" as token 256.
type thVocab struct{}

func (thVocab) Piece(id int32) []byte {
	if id == 256 {
		return []byte("th")
	}
	return []byte{byte(id)}
}
func (thVocab) IsSpecial(int32) bool { return false }
func (thVocab) Encode(text string, _, _ bool) []int32 {
	var ids []int32
	for i := 0; i < len(text); i++ {
		if strings.HasPrefix(text[i:], "th") {
			ids = append(ids, 256)
			i++
			continue
		}
		ids = append(ids, int32(text[i]))
	}
	return ids
}

func textOf(v Vocab, ids []int32) string {
	var b []byte
	for _, id := range ids {
		b = append(b, v.Piece(id)...)
	}
	return string(b)
}

// TestDrafterPrediction: the draft follows the prediction on text: from the
// start, after tokens the prediction tokenises differently, after an edit
// once the output is back on the prediction's text, and not at all while it
// is off it.
func TestDrafterPrediction(t *testing.T) {
	const pred = "line one\nline two\nline three\nthe end\n"
	tests := []struct {
		name, out string // the output so far, pushed one byte-token at a time
		want      string // the draft's text ("" none)
	}{
		{"start", "", "line one\nl"},
		{"following", "line o", "ne\nline tw"},
		{"other tokenisation", "line one\nline two\nline three\nt", "he end\n"},
		{"inside an edit", "line one\nLINE 2", ""},
		{"after an edit", "line one\nLINE 2\nline th", "ree\nthe end"}, // "th" is one token
		{"past the end", pred, ""},
	}
	// The same with the prediction tokenised before the request was queued.
	for _, toks := range [][]int32{nil, thVocab{}.Encode(pred, false, false)} {
		for _, tc := range tests {
			var d drafter
			rates := ratePrior
			d.reset(thVocab{}, pred, toks, false, false, &rates)
			for i := range len(tc.out) {
				d.push(int32(tc.out[i]))
				d.draft(nil, 10) // realign after every token, as the engine does
			}
			draft, src := d.draft(nil, 10)
			if got := textOf(thVocab{}, draft); got != tc.want || len(draft) > 0 && src != srcPrediction {
				t.Errorf("%s (%d tokens given): draft %q (source %d), want %q", tc.name, len(toks), got, src, tc.want)
			}
		}
	}
}

// TestLookup: prompt lookup continues the latest earlier occurrence of the
// longest matching tail (3 tokens down to 1).
func TestLookup(t *testing.T) {
	tests := []struct {
		seq, want []int32
	}{
		{[]int32{1, 2, 3, 4, 5, 9, 2, 3}, []int32{4, 5, 9}},
		{[]int32{7, 1, 2, 8, 1, 2, 3, 6, 5, 1, 2, 3}, []int32{6, 5, 1}}, // 3 tokens beat the later 2
		{[]int32{4, 8, 4, 9, 4}, []int32{9, 4}},                         // latest occurrence of one token
		{[]int32{1, 2, 3}, nil},
		{[]int32{5}, nil},
	}
	for _, tc := range tests {
		if got := lookup(tc.seq, 3); !slices.Equal(got, tc.want) {
			t.Errorf("lookup(%v) = %v, want %v", tc.seq, got, tc.want)
		}
	}
}

// TestPlanDraft: the planner verifies more draft tokens the likelier they
// are accepted, and none when plain decoding is expected to be faster.
func TestPlanDraft(t *testing.T) {
	v := costVerifier{prefill: 64500, lmhead: 7500, decode: 55000} // v79, µs
	tests := []struct {
		rate        float64
		avail, rows int
		min, max    int
	}{
		{0, 8, 128, 0, 0},
		{0.1, 8, 128, 0, 0},
		{0.5, 8, 128, 1, 3},
		{0.9, 20, 128, 5, 20},
		{0.99, 60, 128, 30, 60},
		{0.99, 60, 4, 3, 3}, // the model's limit: 4 rows = 3 drafts
	}
	for _, tc := range tests {
		if k := planDraft(v, tc.rate, tc.avail, tc.rows); k < tc.min || k > tc.max {
			t.Errorf("rate %.2f, %d drafts, %d rows: k = %d, want %d…%d", tc.rate, tc.avail, tc.rows, k, tc.min, tc.max)
		}
	}
}

// costVerifier prices verify and decode calls (in µs).
type costVerifier struct{ prefill, lmhead, decode int64 }

func (c costVerifier) Costs(k int) (time.Duration, time.Duration) {
	return time.Duration(c.prefill+int64(k)*c.lmhead) * time.Microsecond, time.Duration(c.decode+c.lmhead) * time.Microsecond
}
