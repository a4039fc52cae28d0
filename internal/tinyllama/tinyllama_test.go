package tinyllama

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/internal/half"
)

const goldenPath = "../../testdata/tinyllama/golden_tiny_public.json"

type golden struct {
	Config       json.RawMessage `json:"config"`
	TensorChecks map[string]struct {
		Shape  []int     `json:"shape"`
		SHA256 string    `json:"sha256_f16le"`
		First4 []float64 `json:"first4"`
	} `json:"tensor_checks"`
	InvFreq []float64 `json:"inv_freq"`
}

func loadGolden(t *testing.T) golden {
	t.Helper()
	var g golden
	readJSON(t, goldenPath, &g)
	return g
}

// readJSON decodes the JSON file at path into v, failing t on an error.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

func TestTinyMatchesGoldenConfig(t *testing.T) {
	g := loadGolden(t)
	c, err := ParseConfig(g.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Tiny()) {
		t.Errorf("golden config = %+v\nTiny() = %+v", c, Tiny())
	}
	// The whole golden file is accepted too (its `config` key is used).
	c2, err := LoadConfig(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c2, c) {
		t.Errorf("LoadConfig(golden) = %+v, want %+v", c2, c)
	}
}

func TestGenerateMatchesGoldenChecksums(t *testing.T) {
	g := loadGolden(t)
	c := Tiny()
	ts := Tensors(c)
	if len(ts) != len(g.TensorChecks) {
		t.Errorf("%d tensors, golden has %d", len(ts), len(g.TensorChecks))
	}
	for _, tn := range ts {
		want, ok := g.TensorChecks[tn.Name]
		if !ok {
			t.Errorf("%s: not in golden", tn.Name)
			continue
		}
		if !reflect.DeepEqual(tn.Shape, want.Shape) {
			t.Errorf("%s: shape %v, golden %v", tn.Name, tn.Shape, want.Shape)
		}
		bits, err := Generate(c, tn.Name)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2*len(bits))
		for i, b := range bits {
			binary.LittleEndian.PutUint16(buf[2*i:], b)
		}
		sum := sha256.Sum256(buf)
		if got := hex.EncodeToString(sum[:]); got != want.SHA256 {
			t.Errorf("%s: sha256 %s, golden %s", tn.Name, got, want.SHA256)
		}
		for i, w := range want.First4 {
			if got := float64(half.ToFloat32(bits[i])); got != w {
				t.Errorf("%s[%d] = %v, golden %v", tn.Name, i, got, w)
			}
		}
	}
}

func TestFillRangesMatchWholeTensor(t *testing.T) {
	c := Tiny()
	for _, name := range []string{"model.embed_tokens.weight", "model.layers.1.mlp.down_proj.weight", "model.norm.weight"} {
		whole, err := Generate(c, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range [][2]int{{0, 1}, {5, 17}, {len(whole) - 9, len(whole)}} {
			part := make([]uint16, r[1]-r[0])
			if err := Fill(c, name, r[0], part); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(part, whole[r[0]:r[1]]) {
				t.Errorf("%s[%d:%d] differs from the whole tensor", name, r[0], r[1])
			}
			f := make([]float32, len(part))
			if err := FillFloat32(c, name, r[0], f); err != nil {
				t.Fatal(err)
			}
			for i := range f {
				if half.FromFloat32(f[i]) != part[i] {
					t.Fatalf("%s: FillFloat32 and Fill disagree at %d", name, r[0]+i)
				}
			}
		}
	}
	if err := Fill(c, "model.norm.weight", 60, make([]uint16, 5)); err == nil {
		t.Error("Fill past the end: no error")
	}
	if _, err := Generate(c, "nope"); err == nil {
		t.Error("unknown tensor: no error")
	}
}

func TestLlama32_1BShapes(t *testing.T) {
	c := Llama32_1B()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, tn := range Tensors(c) {
		total += tn.Len()
	}
	// Llama-3.2-1B has 1,235,814,400 parameters with tied embeddings.
	if total != 1235814400 {
		t.Errorf("parameters = %d, want 1235814400", total)
	}
	// A projection with in_features 8192 uses 2^-16 steps: float16 subnormals, still exact.
	v := make([]float32, 4096)
	if err := FillFloat32(c, "model.layers.3.mlp.down_proj.weight", 1<<20, v); err != nil {
		t.Fatal(err)
	}
	for _, x := range v {
		if m := float64(x) * 65536; m != math.Trunc(m) || m < -1024 || m > 1023 {
			t.Fatalf("down_proj value %v is not m×2^-16", x)
		}
		if half.ToFloat32(half.FromFloat32(x)) != x {
			t.Fatalf("%v not exact in float16", x)
		}
	}
}

func TestInvFreq(t *testing.T) {
	g := loadGolden(t)
	checkClose(t, "tiny", InvFreq(Tiny()), g.InvFreq)

	var r struct {
		InvFreq []float64 `json:"inv_freq"`
	}
	readJSON(t, "../../testdata/tinyllama/rope_llama32_1b.json", &r)
	checkClose(t, "1b", InvFreq(Llama32_1B()), r.InvFreq)
}

func checkClose(t *testing.T, label string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d frequencies, want %d", label, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(got[i]-want[i]) / want[i]; d > 1e-12 {
			t.Errorf("%s: inv_freq[%d] = %v, want %v (rel %g)", label, i, got[i], want[i], d)
		}
	}
}

func TestFloat16RoundTripsEveryValue(t *testing.T) {
	for h := range 1 << 16 {
		f := half.ToFloat32(uint16(h))
		if f != f { // NaN
			continue
		}
		if got := half.FromFloat32(f); got != uint16(h) {
			t.Fatalf("FromFloat32(ToFloat32(%#04x)=%v) = %#04x", h, f, got)
		}
	}
	cases := []struct {
		in   float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},           // tie to even (down)
		{1 + 3.0/2048, 0x3c02},           // tie to even (up)
		{65520, 0x7c00},                  // rounds to Inf
		{float32(math.Ldexp(1, -25)), 0}, // half the smallest subnormal: ties to 0
		{float32(math.Ldexp(3, -26)), 1}, // 0.75 of the smallest subnormal
		{-2, 0xc000},
	}
	for _, c := range cases {
		if got := half.FromFloat32(c.in); got != c.want {
			t.Errorf("FromFloat32(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestParseConfigDefaultsAndErrors(t *testing.T) {
	c, err := ParseConfig([]byte(`{"hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":100,"eos_token_id":7}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 8 || c.NumKeyValueHeads != 4 || !reflect.DeepEqual(c.EOSTokenIDs, TokenIDs{7}) {
		t.Errorf("defaults: %+v", c)
	}
	for _, bad := range []string{
		`{"hidden_size":32}`,
		`{"hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":3,"num_key_value_heads":2,"vocab_size":100}`,
		`not json`,
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("ParseConfig(%s): no error", bad)
		}
	}
}

func TestDraws(t *testing.T) {
	a, b := Draws(42, 10), Draws(42, 10)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("not deterministic")
	}
	for _, v := range a {
		if v < 0 || v >= 128000 {
			t.Fatalf("token %d out of range", v)
		}
	}
}

func BenchmarkFill(b *testing.B) {
	c := Llama32_1B()
	dst := make([]uint16, 1<<20)
	b.SetBytes(2 << 20)
	for b.Loop() {
		if err := Fill(c, "model.embed_tokens.weight", 1<<24, dst); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPhi3Fused: Phi-3's checkpoint lists the fused qkv_proj and gate_up_proj, and the split
// tensors the graphs take are their row ranges (q, k, v; gate, up); the phi-3.5-mini preset has
// Phi-3.5's shape and all 48 LongRoPE factors, and its attention factor is √(1 + ln 32 / ln 4096).
func TestPhi3Fused(t *testing.T) {
	c, err := FamilyPreset("phi3", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	names := TensorNames(c)
	for _, n := range []string{"model.layers.0.self_attn.qkv_proj.weight", "model.layers.1.mlp.gate_up_proj.weight", "lm_head.weight"} {
		if !slices.Contains(names, n) {
			t.Errorf("checkpoint tensors lack %s: %v", n, names)
		}
	}
	if slices.Contains(names, "model.layers.0.self_attn.q_proj.weight") {
		t.Errorf("checkpoint tensors list the split q_proj: %v", names)
	}
	H, q, kv, f := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize
	for _, p := range []struct {
		fused, part string
		row, rows   int
	}{
		{"self_attn.qkv_proj.weight", "self_attn.q_proj.weight", 0, q}, {"self_attn.qkv_proj.weight", "self_attn.k_proj.weight", q, kv},
		{"self_attn.qkv_proj.weight", "self_attn.v_proj.weight", q + kv, kv}, {"mlp.gate_up_proj.weight", "mlp.gate_proj.weight", 0, f},
		{"mlp.gate_up_proj.weight", "mlp.up_proj.weight", f, f},
	} {
		whole, err := Generate(c, "model.layers.1."+p.fused)
		if err != nil {
			t.Fatal(err)
		}
		part, err := Generate(c, "model.layers.1."+p.part)
		if err != nil {
			t.Fatal(err)
		}
		if len(part) != p.rows*H || !slices.Equal(part, whole[p.row*H:(p.row+p.rows)*H]) {
			t.Errorf("%s is not rows [%d, %d) of %s", p.part, p.row, p.row+p.rows, p.fused)
		}
	}
	m, err := FamilyPreset("phi3", "phi-3.5-mini")
	if err != nil {
		t.Fatal(err)
	}
	s := m.Rope()
	if m.HiddenSize != 3072 || m.NumKeyValueHeads != 32 || m.HeadDim != 96 || m.VocabSize != 32064 || s.Factor != 32 ||
		!slices.Equal(s.ShortFactor, phi35Short) || !slices.Equal(s.LongFactor, phi35Long) || math.Abs(s.Attention()-1.1902380714) > 1e-9 {
		t.Errorf("phi-3.5-mini: %+v, rope %+v (attention %g)", m, s, s.Attention())
	}
}
