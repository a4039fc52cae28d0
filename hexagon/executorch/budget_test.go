package executorch

import (
	"os"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/costtest"
	"github.com/hexserve/hexserve/internal/testerr"
)

// TestMemoryBudget: a .pte whose file fits engine.model_memory but whose KV cache and graph I/O do
// not is refused before the cache is allocated, saying how much it needs; at twice that it opens.
func TestMemoryBudget(t *testing.T) {
	costtest.SkipNumericUnderRace(t, "writes a .pte and opens it twice")
	rt := openRuntime(t)
	path := writePTE(t, pteOpts{ctx: 512, ar: 8, shards: 1, kv: simfile.F32, logits: simfile.F32})
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{Path: path, Runtime: rt, EOS: []int32{128009}, Memory: st.Size() + 1})
	testerr.Mentions(t, err, "KV cache (", "more than the budget of")
	r, err := Open(Config{Path: path, Runtime: rt, EOS: []int32{128009}, Memory: 4 * st.Size()})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}
