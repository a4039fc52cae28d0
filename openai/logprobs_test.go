package openai

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/inference/sample"
)

// TestCompletionLogprobsOffsets: text_offset counts characters, not bytes,
// from the echoed prompt on; a token that ends inside a character adds it
// with the token that completes it, across calls (stream deltas) too.
func TestCompletionLogprobsOffsets(t *testing.T) {
	tok := func(b ...byte) sample.Logprob { return sample.Logprob{TokenLogprob: sample.TokenLogprob{Bytes: b}} }
	str := func(s string) sample.Logprob { return tok([]byte(s)...) }
	euro := []byte("€") // 3 bytes, one character
	for _, tc := range []struct {
		name  string
		echo  string
		calls [][]sample.Logprob
		want  []int
	}{
		{"ascii", "", [][]sample.Logprob{{str("Hi"), str(" there")}}, []int{0, 2}},
		{"after an echo in characters", "né", [][]sample.Logprob{{str(" ça"), str(" va")}}, []int{2, 5}},
		{"a character split over tokens", "", [][]sample.Logprob{{str("a"), tok(euro[:2]...), tok(euro[2]), str("b")}}, []int{0, 1, 1, 2}},
		{"split over stream deltas", "", [][]sample.Logprob{{str("a"), tok(euro[:1]...)}, {tok(euro[1:]...), str("b")}}, []int{0, 1, 1, 2}},
		{"an invalid byte is one character", "", [][]sample.Logprob{{tok(0xff), str("b")}}, []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := &textOffset{chars: len([]rune(tc.echo))}
			var got []int
			for _, lps := range tc.calls {
				got = append(got, completionLogprobs(lps, at).TextOffset...)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("text_offset %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTopTokensOrder: top_logprobs objects keep the sampler's order (most
// likely first), not the keys' sorted order, drop a repeated token, and read
// back in order.
func TestTopTokensOrder(t *testing.T) {
	top := TopTokens{{Token: "z", Logprob: -0.1}, {Token: "a", Logprob: -2.5}, {Token: "z", Logprob: -3}, {Token: "\"q\"", Logprob: -4}}
	b, err := json.Marshal(top)
	if want := `{"z":-0.1,"a":-2.5,"\"q\"":-4}`; err != nil || string(b) != want {
		t.Fatalf("%s %v, want %s", b, err, want)
	}
	var back TopTokens
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 3 || back[0].Token != "z" || back[1].Token != "a" || back[2].Logprob != -4 {
		t.Fatalf("%+v %v", back, err)
	}
}
