package inferencetest

import (
	"slices"
	"testing"

	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/kvstore"
)

// StoredModel is a runner whose rows a KV store can keep.
type StoredModel interface {
	inference.Model
	KVLayout() inference.KVLayout
}

// KVStoreTurns checks a runner side by side with a KV store of memory
// bytes: turn 1 (prompt, 6 tokens, owner alice) runs, then turn 2 (turn 1's
// prompt and answer and two more tokens) restores turn 1's rows from the
// store (at least len(prompt)+5 cached tokens) and answers as plain does
// without a store; the same turn 2 of another owner restores nothing.
// plain and stored may be one runner.
func KVStoreTurns(t *testing.T, plain, stored StoredModel, v inference.Vocab, prompt []int32, memory int64) {
	t.Helper()
	turn1 := inference.Request{Prompt: prompt, MaxTokens: 6, IgnoreEOS: true, Owner: "alice"}
	turn2 := func(r inference.Result, owner string) inference.Request {
		p := append(slices.Clone(prompt), r.Choices[0].Tokens...)
		return inference.Request{Prompt: append(p, 40, 1093), MaxTokens: 6, IgnoreEOS: true, Owner: owner}
	}
	ep := inference.New(plain, v, inference.Config{MaxSequences: 4})
	r1 := Run(t, ep, turn1)
	want := Run(t, ep, turn2(r1, "alice"))
	ep.Close()

	store, err := kvstore.Open(kvstore.Config{Layout: stored.KVLayout(), Memory: memory})
	if err != nil {
		t.Fatal(err)
	}
	e := inference.New(stored, v, inference.Config{MaxSequences: 4, KVStore: store})
	defer e.Close()
	Run(t, e, turn1)
	got := Run(t, e, turn2(r1, "alice"))
	if !slices.Equal(got.Choices[0].Tokens, want.Choices[0].Tokens) {
		t.Fatalf("with the store %v, without %v", got.Choices[0].Tokens, want.Choices[0].Tokens)
	}
	if c, least := got.Usage.CachedTokens, len(prompt)+5; c < least {
		t.Fatalf("cached_tokens %d, want at least %d (turn 1's rows)", c, least)
	}
	if other := Run(t, e, turn2(r1, "mallory")); other.Usage.CachedTokens != 0 {
		t.Fatalf("another owner got %d cached tokens", other.Usage.CachedTokens)
	}
}
