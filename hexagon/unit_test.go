package hexagon

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestFloatToHalf(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},
		{65520, 0x7bff},                    // would round to inf: saturates
		{float32(math.Inf(1)), 0x7bff},     // saturates
		{float32(math.Inf(-1)), 0xfbff},    // saturates
		{1 + 1.0/2048, 0x3c00},             // tie → even (down)
		{1 + 3.0/2048, 0x3c02},             // tie → even (up)
		{1 + 1.0/2048 + 1.0/65536, 0x3c01}, // above the tie
		{5.960464477539063e-08, 0x0001},    // smallest subnormal
		{2.9802322387695312e-08, 0x0000},   // half of it: tie → even (0)
		{8.940696716308594e-08, 0x0002},    // 1.5 × smallest: tie → even (2)
		{6.097555160522461e-05, 0x03ff},    // largest subnormal
		{6.103515625e-05, 0x0400},          // smallest normal
		{0.1, 0x2e66},
	}
	for _, tt := range tests {
		if got := floatToHalf(tt.in); got != tt.want {
			t.Errorf("floatToHalf(%g) = %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
	if h := floatToHalf(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN → %#04x", h)
	}
	// Every finite half round-trips exactly.
	for h := range uint32(0x10000) {
		if h&0x7c00 == 0x7c00 {
			continue
		}
		if got := floatToHalf(halfToFloat(uint16(h))); got != uint16(h) {
			t.Fatalf("round trip %#04x → %g → %#04x", h, halfToFloat(uint16(h)), got)
		}
	}
}

func TestElemTypeRoundTrip(t *testing.T) {
	vals := []float32{-3, -1.5, -0.01, 0, 0.26, 1, 2.5, 100}
	tests := []struct {
		name string
		et   elemType
		want []float32 // decoded values
	}{
		{"f32", elemType{code: dtFloat32}, vals},
		{"f16", elemType{code: dtFloat16}, []float32{-3, -1.5, -0.010002136, 0, 0.26000977, 1, 2.5, 100}},
		// ufixed16, scale 1/1024, offset -32768: range [-32, 32).
		{"ufixed16", elemType{code: dtUFixed16, scale: 1.0 / 1024, offset: -32768},
			[]float32{-3, -1.5, -0.009765625, 0, 0.259765625, 1, 2.5, 32767.0 / 1024}},
		{"sfixed16", elemType{code: dtSFixed16, scale: 1.0 / 256},
			[]float32{-3, -1.5, -0.01171875, 0, 0.26171875, 1, 2.5, 100}},
		// ufixed8, scale 0.5, offset -4: range [-2, 125.5].
		{"ufixed8", elemType{code: dtUFixed8, scale: 0.5, offset: -4},
			[]float32{-2, -1.5, 0, 0, 0.5, 1, 2.5, 100}},
		{"sfixed8", elemType{code: dtSFixed8, scale: 0.25},
			[]float32{-3, -1.5, 0, 0, 0.25, 1, 2.5, 31.75}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newElemType(tt.et.code, tt.et.scale, tt.et.offset); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len(vals)*tt.et.size())
			tt.et.put(buf, vals)
			got := make([]float32, len(vals))
			tt.et.get(got, buf)
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("%g → %g, want %g", vals[i], got[i], tt.want[i])
				}
			}
		})
	}
	if _, err := newElemType(0x0226, 0, 0); err == nil {
		t.Error("bfloat16 accepted")
	}
	if _, err := newElemType(dtUFixed16, 0, 0); err == nil {
		t.Error("ufixed16 with scale 0 accepted")
	}
}

func TestInvFreqTiny(t *testing.T) {
	var g struct {
		Config struct {
			HeadDim   int     `json:"head_dim"`
			RopeTheta float64 `json:"rope_theta"`
		} `json:"config"`
		InvFreq []float64 `json:"inv_freq"`
	}
	readJSON(t, "golden_tiny_public.json", &g)
	got := InvFreq(g.Config.HeadDim, g.Config.RopeTheta, Llama32Scaling)
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
		RopeScaling RopeScaling                             `json:"rope_scaling"`
		InvFreq     []float64                               `json:"inv_freq"`
		ByPos       map[string]struct{ Cos, Sin []float64 } `json:"cos_sin_by_position"`
	}
	readJSON(t, "rope_llama32_1b.json", &g)
	inv := InvFreq(g.HeadDim, g.RopeTheta, g.RopeScaling)
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
	tab := newRopeTable(inv, 130, elemType{code: dtFloat32})
	cos, sin := make([]float32, g.HeadDim), make([]float32, g.HeadDim)
	tab.rows(f32Bytes(cos), f32Bytes(sin), 128, 1)
	for d := range g.HeadDim / 2 {
		if math.Abs(float64(cos[d])-g.ByPos["128"].Cos[d]) > 1e-6 || math.Abs(float64(sin[d])-g.ByPos["128"].Sin[d]) > 1e-6 {
			t.Fatalf("table row 128 col %d: %g %g", d, cos[d], sin[d])
		}
	}
}

func TestMasks(t *testing.T) {
	f32 := elemType{code: dtFloat32}
	m, err := newMaskCodes(MaskAdditive, f32, 8)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 5)
	m.row(f32Bytes(row), 2, 5)
	if want := []float32{0, 0, maskBlocked, maskBlocked, maskBlocked}; !slices.Equal(row, want) {
		t.Errorf("decode row = %v, want %v", row, want)
	}
	// Chunked [2, 3+2]: past 3 slots with 1 open, then the causal window.
	c := make([]float32, 2*5)
	m.causal(f32Bytes(c), 2, 3, 1)
	b := float32(maskBlocked)
	if want := []float32{0, b, b, 0, b, 0, b, b, 0, 0}; !slices.Equal(c, want) {
		t.Errorf("chunked mask = %v, want %v", c, want)
	}
	u, err := newMaskCodes(MaskU16, elemType{code: dtUFixed16, scale: 1, offset: 0}, 4)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 2*3*3)
	u.causal(raw, 3, 0, 0)
	if got, want := u16View(raw), []uint16{65535, 0, 0, 65535, 65535, 0, 65535, 65535, 65535}; !slices.Equal(got, want) {
		t.Errorf("u16 causal = %v, want %v", got, want)
	}
	if _, err := newMaskCodes(MaskU16, f32, 4); err == nil {
		t.Error("u16 mask on a float32 tensor accepted")
	}
	h, _ := newMaskCodes(MaskAdditive, elemType{code: dtFloat16}, 2)
	if got := u16View(h.blocked)[0]; got != 0xfbff {
		t.Errorf("f16 blocked = %#04x, want -65504", got)
	}
}

func TestPlan(t *testing.T) {
	ms := time.Millisecond
	c := Costs{Prefill: 64 * ms, Decode: 60 * ms, LMHead: 2 * ms}
	q := &planner{window: 4, ctxLen: 32, costs: c}
	ch := &planner{chunked: true, window: 4, ctxLen: 32, costs: c}
	tests := []struct {
		name      string
		p         *planner
		n, valid  int
		wantFrom  int
		wantSteps []step
	}{
		{"qhexrt fresh short", q, 3, 0, 0, []step{{true, 0, 3}}},
		{"qhexrt fresh one token", q, 1, 0, 0, []step{{false, 0, 1}}},
		{"qhexrt fresh long", q, 6, 0, 0, []step{{true, 0, 4}, {false, 4, 1}, {false, 5, 1}}},
		{"qhexrt reuse one", q, 4, 3, 3, []step{{false, 3, 1}}},
		{"qhexrt reprefill", q, 4, 1, 0, []step{{true, 0, 4}}},
		{"qhexrt fully cached", q, 4, 4, 3, []step{{false, 3, 1}}},
		{"qhexrt long reuse", q, 8, 5, 5, []step{{false, 5, 1}, {false, 6, 1}, {false, 7, 1}}},
		{"chunked reuse", ch, 10, 3, 3, []step{{true, 3, 4}, {true, 7, 3}}},
		{"chunked tail decode", ch, 9, 3, 3, []step{{true, 3, 4}, {true, 7, 2}}},
		{"chunked one", ch, 9, 8, 8, []step{{false, 8, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := tt.p.from(tt.n, tt.valid)
			if from != tt.wantFrom {
				t.Fatalf("from = %d, want %d", from, tt.wantFrom)
			}
			var got []step
			tt.p.each(tt.n, from, func(s step) { got = append(got, s) })
			if len(got) != len(tt.wantSteps) {
				t.Fatalf("steps %v, want %v", got, tt.wantSteps)
			}
			for i := range got {
				if got[i] != tt.wantSteps[i] {
					t.Fatalf("steps %v, want %v", got, tt.wantSteps)
				}
			}
		})
	}
}

func TestEmbedMmap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "embed_f16.bin")
	data := make([]byte, 3*4*2)
	for i := range 12 {
		u16View(data)[i] = floatToHalf(float32(i) / 4)
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
	if err := e.put(f32Bytes(got), 2, elemType{code: dtFloat32}, make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	if want := []float32{2, 2.25, 2.5, 2.75}; !slices.Equal(got, want) {
		t.Errorf("row 2 = %v, want %v", got, want)
	}
	if err := e.put(f32Bytes(got), 3, elemType{code: dtFloat32}, make([]float32, 4)); err == nil {
		t.Error("token 3 of a 3-token vocabulary accepted")
	}
}

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "tinyllama", name))
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
		stats [3]GraphStats
		want  Costs
	}{
		{"nothing measured", [3]GraphStats{}, V79Costs},
		// Prefill measured at 1/10 of v79: decode follows it, the lm-head too.
		{"prefill only", [3]GraphStats{{Calls: 2, Time: 2 * 6450 * time.Microsecond, Recent: 6450 * time.Microsecond}}, Costs{Prefill: 6450 * time.Microsecond, Decode: 5500 * time.Microsecond, LMHead: 750 * time.Microsecond}},
		{"all measured", [3]GraphStats{{Calls: 1, Time: 9 * ms, Recent: 9 * ms}, {Calls: 4, Time: 4 * ms, Recent: ms}, {Calls: 5, Time: 10 * ms, Recent: 2 * ms}}, Costs{Prefill: 9 * ms, Decode: ms, LMHead: 2 * ms}},
		// The recent average wins over the lifetime mean (100 ms).
		{"recent, not lifetime", [3]GraphStats{{Calls: 1, Time: 9 * ms, Recent: 9 * ms}, {Calls: 100, Time: 10 * time.Second, Recent: 3 * ms}, {Calls: 1, Time: ms, Recent: ms}}, Costs{Prefill: 9 * ms, Decode: 3 * ms, LMHead: ms}},
		{"failures only", [3]GraphStats{{Calls: 1, Failed: 1, Time: ms}}, V79Costs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Runner{stats: Stats{Graphs: tt.stats}}
			got, _ := r.measuredCosts()
			if got != tt.want {
				t.Errorf("costs = %+v, want %+v", got, tt.want)
			}
		})
	}
}
