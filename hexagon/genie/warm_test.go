package genie

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// TestFirstCallsWarm: a fresh runner's first prompt call (100 rows, an AR-128 call whose logits
// alone are 26 MB of hostsim's working memory) faults in almost no pages: hostsim maps registered
// buffers at registration and sizes its working memory for a full call when the context is
// created, as the NPU has both from the start. Before, the first calls faulted in their pages (14k
// minor faults for a 40-row call on the tiny bundle, and as many again in the next call), so a
// fresh server's first AR-128 calls were priced cold and its first burst round missed its goal.
func TestFirstCallsWarm(t *testing.T) {
	dir := t.TempDir()
	if err := geniesim.Write(dir, geniesim.Options{Config: tinyllama.Tiny(), Name: "tiny", Precision: "w4a16",
		Weights: simfile.WeightF16, Parts: 3, PromptAR: 128, Ctx: 512}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := openRunner(t, openRuntime(t), dir)
	id, err := r.Open(200)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([]int32, 100)
	for i := range toks {
		toks[i] = int32(1000 + i)
	}
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	rows, err := r.Step(context.Background(), []inference.Run{{Seq: id, Tokens: toks}})
	if err == nil {
		_, err = rows[0].Logits(context.Background(), len(toks)-1)
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	if err != nil {
		t.Fatal(err)
	}
	// The call's own working memory is ~27 MB (6,800 pages); the Go side may fault a few hundred.
	if n := after.Minflt - before.Minflt; n > 1500 {
		t.Errorf("the first prompt call faulted in %d pages", n)
	}
}
