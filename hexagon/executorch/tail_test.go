package executorch

import (
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/inferencetest"
)

// TestOpenCheap: a request whose sequence would reach the window's last AR
// slots (only kv_forward sees them, so every step would go row by row) above
// another owner's retained sequence gets the low slots instead: the engine
// releases the retained one (inference.CheapOpener). A sequence that needs
// the tail still gets it.
func TestOpenCheap(t *testing.T) {
	const ar, ctx = 16, 256
	rt := openRuntime(t)
	r := openRunner(t, rt, writePTE(t, pteOpts{ctx: ctx, ar: ar, shards: 1, kv: simfile.UFixed8, logits: simfile.UFixed16}))
	S := ctx - ar
	req := func(owner string, tok int32, n int) inference.Request {
		p := append([]int32{128000}, slices.Repeat([]int32{tok}, n)...)
		return inference.Request{Prompt: p, MaxTokens: 8, IgnoreEOS: true, Owner: owner}
	}
	for _, tt := range []struct {
		name   string
		second int // prompt tokens of bob's request
		beyond bool
	}{
		{"fits below the tail", 115, false}, // above alice: [124, 248)
		{"needs the tail", 235, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := inference.New(r, byteVocab{}, inference.Config{MaxSequences: 4})
			defer e.Close()
			inferencetest.Run(t, e, req("alice", 300, 115)) // retained in [0, 124): 116 rows and 8 more
			inferencetest.Run(t, e, req("bob", 301, tt.second))
			if got := r.Pool.Beyond(S); got != tt.beyond {
				t.Fatalf("rows in the tail (slots %d…): %v, want %v", S, got, tt.beyond)
			}
			if r.Pool.Open() != 1 {
				t.Fatalf("%d sequences in the pool, want bob's alone (alice's released)", r.Pool.Open())
			}
		})
	}
}
