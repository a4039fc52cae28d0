package inference

import (
	"strings"
	"testing"
	"unicode/utf8"
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

// FuzzDetokReasoning cuts a text into tokens at arbitrary points and checks
// the streamed split against a direct one: the reasoning between the
// markers (trimmed), the answer after them (leading whitespace dropped), or
// all answer when the text does not start with the start marker.
func FuzzDetokReasoning(f *testing.F) {
	f.Add("<think>\nplan\n</think>\n\nanswer", false, []byte{1, 3, 2, 7})
	f.Add("plan </thi", true, []byte{2, 2})
	f.Add("  <thin", false, []byte{1})
	f.Add("a</think>b</think>c", true, []byte{0, 1, 2, 3})
	f.Add("caf\u00e9 \u20ac</think> \u65e5", true, []byte{1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, text string, open bool, cuts []byte) {
		if len(text) > 512 || !utf8.ValidString(text) {
			t.Skip()
		}
		vocab := cutVocab(text, cuts)
		var d detok
		d.reset(vocab, nil)
		d.startThink(&Reasoning{Start: "<think>", End: "</think>", Open: open})
		var reasoning, answer strings.Builder
		n := 0
		for id := range vocab {
			out, _ := d.add(int32(id), nil)
			reasoning.WriteString(out.reasoning)
			answer.WriteString(out.text)
			n += len(out.ids)
		}
		out := d.flush()
		reasoning.WriteString(out.reasoning)
		answer.WriteString(out.text)
		n += len(out.ids)

		wantR, wantA := "", text
		rest, inside := text, open
		if lead := strings.TrimLeft(text, spaces); !open && strings.HasPrefix(lead, "<think>") {
			rest, inside = lead[len("<think>"):], true
		}
		if inside {
			before, after, ok := strings.Cut(rest, "</think>")
			wantR, wantA = strings.Trim(before, spaces), ""
			if ok {
				wantA = strings.TrimLeft(after, spaces)
			}
		}
		if reasoning.String() != wantR || answer.String() != wantA || n != len(vocab) {
			t.Fatalf("pieces %q open %v: reasoning %q answer %q (%d ids); want %q %q (%d)", vocab, open, reasoning.String(), answer.String(), n, wantR, wantA, len(vocab))
		}
	})
}
