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

func TestMeasuredCosts(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		stats [3]plan.GraphStats // prefill, decode, lm-head
		want  plan.Costs
	}{
		{"nothing measured", [3]plan.GraphStats{}, plan.V79Costs},
		// Prefill measured at 1/10 of v79: decode follows it, the lm-head too.
		{"prefill only", [3]plan.GraphStats{{Calls: 2, Time: 2 * 6450 * time.Microsecond, Recent: 6450 * time.Microsecond}}, plan.Costs{Prefill: 6450 * time.Microsecond, Decode: 5500 * time.Microsecond, LMHead: 750 * time.Microsecond}},
		{"all measured", [3]plan.GraphStats{{Calls: 1, Time: 9 * ms, Recent: 9 * ms}, {Calls: 4, Time: 4 * ms, Recent: ms}, {Calls: 5, Time: 10 * ms, Recent: 2 * ms}}, plan.Costs{Prefill: 9 * ms, Decode: ms, LMHead: 2 * ms}},
		// The recent average wins over the lifetime mean (100 ms).
		{"recent, not lifetime", [3]plan.GraphStats{{Calls: 1, Time: 9 * ms, Recent: 9 * ms}, {Calls: 100, Time: 10 * time.Second, Recent: 3 * ms}, {Calls: 1, Time: ms, Recent: ms}}, plan.Costs{Prefill: 9 * ms, Decode: 3 * ms, LMHead: ms}},
		{"failures only", [3]plan.GraphStats{{Calls: 1, Failed: 1, Time: ms}}, plan.V79Costs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Runner{spec: &spec{graphs: [nRoles]graphRef{{"p.bin", "prefill"}, {"d.bin", "decode"}, {"d.bin", "lm_head"}}}}
			for i, g := range tt.stats {
				if g.Calls > 0 {
					r.stats.Observe(r.spec.key(i), 0, 0, false) // creates the map
					r.stats.Graphs[r.spec.key(i)] = g
				}
			}
			got, _ := r.measuredCosts()
			if got != tt.want {
				t.Errorf("costs = %+v, want %+v", got, tt.want)
			}
		})
	}
}
