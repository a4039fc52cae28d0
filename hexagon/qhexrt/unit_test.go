package qhexrt

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/plan"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/rope"
)

func TestInvFreqTiny(t *testing.T) {
	var g struct {
		Config struct {
			HeadDim   int     `json:"head_dim"`
			RopeTheta float64 `json:"rope_theta"`
		} `json:"config"`
		InvFreq []float64 `json:"inv_freq"`
	}
	readJSON(t, "golden_tiny_public.json", &g)
	got := rope.Llama32().InvFreq(g.Config.HeadDim, g.Config.RopeTheta, 131072)
	if len(got) != len(g.InvFreq) {
		t.Fatalf("%d frequencies, want %d", len(got), len(g.InvFreq))
	}
	for i := range got {
		if math.Abs(got[i]-g.InvFreq[i]) > 1e-12*math.Max(1, g.InvFreq[i]) {
			t.Errorf("inv_freq[%d] = %g, want %g", i, got[i], g.InvFreq[i])
		}
	}
}

func TestRopeLlama32(t *testing.T) {
	var g struct {
		HeadDim     int                                     `json:"head_dim"`
		RopeTheta   float64                                 `json:"rope_theta"`
		RopeScaling rope.Scaling                            `json:"rope_scaling"`
		InvFreq     []float64                               `json:"inv_freq"`
		ByPos       map[string]struct{ Cos, Sin []float64 } `json:"cos_sin_by_position"`
	}
	readJSON(t, "rope_llama32_1b.json", &g)
	inv := g.RopeScaling.InvFreq(g.HeadDim, g.RopeTheta, 131072)
	for i := range inv {
		if math.Abs(inv[i]-g.InvFreq[i]) > 1e-12 {
			t.Errorf("inv_freq[%d] = %g, want %g", i, inv[i], g.InvFreq[i])
		}
	}
	for _, pos := range []int{0, 1, 2, 127, 128, 511, 8191, 131071} {
		want, ok := g.ByPos[itoa(pos)]
		if !ok {
			t.Fatalf("no golden for position %d", pos)
		}
		cos, sin := make([]float32, g.HeadDim), make([]float32, g.HeadDim)
		ropeRow(cos, sin, inv, pos)
		h := g.HeadDim / 2
		for d := range h {
			for _, c := range []int{d, d + h} {
				if math.Abs(float64(cos[c])-want.Cos[d]) > 1e-6 || math.Abs(float64(sin[c])-want.Sin[d]) > 1e-6 {
					t.Errorf("pos %d col %d: cos %g sin %g, want %g %g", pos, c, cos[c], sin[c], want.Cos[d], want.Sin[d])
				}
			}
		}
	}
	// The encoded table holds the same rows.
	tab := newRopeTable(inv, 130, graphio.Elem{Type: qnn.Float32})
	cos, sin := make([]float32, g.HeadDim), make([]float32, g.HeadDim)
	tab.rows(graphio.F32Bytes(cos), graphio.F32Bytes(sin), 128, 1)
	for d := range g.HeadDim / 2 {
		if math.Abs(float64(cos[d])-g.ByPos["128"].Cos[d]) > 1e-6 || math.Abs(float64(sin[d])-g.ByPos["128"].Sin[d]) > 1e-6 {
			t.Fatalf("table row 128 col %d: %g %g", d, cos[d], sin[d])
		}
	}
}

func TestEmbedMmap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "embed_f16.bin")
	data := make([]byte, 3*4*2)
	for i := range 12 {
		graphio.U16(data)[i] = graphio.FloatToHalf(float32(i) / 4)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openEmbed(path, 3, 5); err == nil {
		t.Fatal("wrong size accepted")
	}
	e, err := openEmbed(path, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := make([]float32, 4)
	if err := e.put(graphio.F32Bytes(got), 2, graphio.Elem{Type: qnn.Float32}, make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	if want := []float32{2, 2.25, 2.5, 2.75}; !slices.Equal(got, want) {
		t.Errorf("row 2 = %v, want %v", got, want)
	}
	if err := e.put(graphio.F32Bytes(got), 3, graphio.Elem{Type: qnn.Float32}, make([]float32, 4)); err == nil {
		t.Error("token 3 of a 3-token vocabulary accepted")
	}
}

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tinyllama", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// TestStepCost: StepCost prices a Step by the runners' one policy from the
// graphs' recent measured costs (not their lifetime means), with
// Config.Costs for a graph not measured yet: on a chunked bundle one
// prefill call, or for one row the cheaper of decode and prefill; on a
// QHexRT-contract bundle a decode call per row; and an lm-head call per row.
func TestStepCost(t *testing.T) {
	ms := time.Millisecond
	v79 := plan.V79Costs
	tests := []struct {
		name     string
		contract string
		stats    [3]plan.GraphStats // prefill, decode, lm-head
		rows     int
		want     time.Duration
	}{
		{"nothing measured, one row", ContractChunked, [3]plan.GraphStats{}, 1, v79.Decode + v79.LMHead},
		{"nothing measured, four rows", ContractChunked, [3]plan.GraphStats{}, 4, v79.Prefill + 4*v79.LMHead},
		{"prefill measured", ContractChunked, [3]plan.GraphStats{{Calls: 2, Recent: 9 * ms}, {}, {Calls: 1, Recent: 2 * ms}}, 4, 9*ms + 8*ms},
		{"recent, not lifetime", ContractChunked, [3]plan.GraphStats{{Calls: 1, Time: 9 * ms, Recent: 9 * ms}, {Calls: 100, Time: 10 * time.Second, Recent: 3 * ms}, {Calls: 1, Recent: ms}}, 1, 4 * ms},
		{"one row, prefill cheaper", ContractChunked, [3]plan.GraphStats{{Calls: 1, Recent: 9 * ms}, {Calls: 5, Recent: 20 * ms}, {Calls: 1, Recent: ms}}, 1, 10 * ms},
		{"failures only", ContractChunked, [3]plan.GraphStats{{Calls: 1, Failed: 1, Time: ms}}, 2, v79.Prefill + 2*v79.LMHead},
		{"qhexrt: a decode call per row", ContractQHexRT, [3]plan.GraphStats{{Calls: 1, Recent: 9 * ms}, {Calls: 5, Recent: 3 * ms}, {Calls: 1, Recent: ms}}, 3, 12 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Runner{window: 16, spec: &spec{contract: tt.contract, graphs: [nRoles]graphRef{{"p.bin", "prefill"}, {"d.bin", "decode"}, {"d.bin", "lm_head"}}}}
			if tt.contract == ContractChunked {
				r.seqs = newPoolSeqs(r)
			} else {
				r.seqs = &kvSets{r: r}
			}
			for i, g := range tt.stats {
				if g.Calls > 0 {
					r.stats.Observe(r.spec.key(i), 0, 0, false) // creates the map
					r.stats.Graphs[r.spec.key(i)] = g
				}
			}
			if got := r.StepCost(tt.rows); got != tt.want {
				t.Errorf("StepCost(%d) = %v, want %v", tt.rows, got, tt.want)
			}
		})
	}
}
