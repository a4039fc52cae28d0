package inference

import (
	"testing"
)

// TestDetokReasoning splits each text into tokens at every pair of byte
// boundaries (and byte by byte): the reasoning and the answer come out the
// same however the markers fall across tokens, and nothing of a marker or
// a stop string leaks into either.
func TestDetokReasoning(t *testing.T) {
	qwen := Reasoning{Start: "<think>", End: "</think>"}
	open := Reasoning{Start: "<think>", End: "</think>", Open: true}
	cases := []struct {
		name             string
		r                Reasoning
		stops            []string
		text             string
		reasoning, reply string
		stopped          bool
	}{
		{"qwen3", qwen, nil, "<think>\nFirst, 2+2.\n</think>\n\nIt is 4.", "First, 2+2.", "It is 4.", false},
		{"leading space before start", qwen, nil, "\n <think>a b</think>c", "a b", "c", false},
		{"no reasoning", qwen, nil, "Hello <think>x</think>", "", "Hello <think>x</think>", false},
		{"prefix of start then not", qwen, nil, "<thin and more", "", "<thin and more", false},
		{"empty reasoning", qwen, nil, "<think>\n\n</think>\n\nok", "", "ok", false},
		{"open", open, nil, "plan it\n</think>\n\nanswer", "plan it", "answer", false},
		{"open, never ended", open, nil, "still thinking  \n", "still thinking", "", false},
		{"open, partial end at the end", open, nil, "x </thi", "x </thi", "", false},
		{"inner whitespace kept", open, nil, "a \n\n b</think>c  d ", "a \n\n b", "c  d ", false},
		{"stop only in the answer", qwen, []string{"STOP"}, "<think>STOP? no</think>go STOP here", "STOP? no", "go ", true},
		{"stop right after the end", open, []string{"x"}, "r</think>x", "r", "", true},
		{"unicode split", open, nil, "caf\xc3\xa9 \xe2\x82\xac</think>\xe2\x82\xac", "café €", "€", false},
		{"end twice", open, nil, "a</think>b</think>c", "a", "b</think>c", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.text)
			splits := [][]string{bytesOf(tc.text)}
			for i := 0; i <= len(b); i++ {
				for j := i; j <= len(b); j++ {
					splits = append(splits, []string{tc.text[:i], tc.text[i:j], tc.text[j:]})
				}
			}
			for _, p := range splits {
				v, ids := pieces(p...)
				var d detok
				d.reset(v, tc.stops)
				d.startThink(&tc.r)
				var reasoning, reply string
				n, stopped := 0, false
				for _, id := range ids {
					out, s := d.add(id, nil)
					reasoning, reply, n = reasoning+out.reasoning, reply+out.text, n+len(out.ids)
					if s {
						stopped = true
						break
					}
				}
				if !stopped {
					out := d.flush()
					reasoning, reply, n = reasoning+out.reasoning, reply+out.text, n+len(out.ids)
				}
				if reasoning != tc.reasoning || reply != tc.reply || stopped != tc.stopped {
					t.Fatalf("pieces %q: reasoning %q, reply %q, stopped %v; want %q, %q, %v", p, reasoning, reply, stopped, tc.reasoning, tc.reply, tc.stopped)
				}
				if !stopped && n != len(ids) {
					t.Fatalf("pieces %q: %d ids released, want %d", p, n, len(ids))
				}
			}
		})
	}
}

// bytesOf splits s into single bytes.
func bytesOf(s string) []string {
	var p []string
	for i := range len(s) {
		p = append(p, s[i:i+1])
	}
	return p
}
