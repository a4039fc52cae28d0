package qnn

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/hostsim/simfile"
	"github.com/hexserve/hexserve/internal/tinyllama"
)

// The ExecuTorch static-llama graphs (docs/executorch-pte.md §3) of the public tiny model, driven the way
// ExecuTorch's runner drives them: SmartMask KV (slot = absolute position), prefill in AR chunks,
// then kv_forward one token at a time, every shard in turn.

const (
	etCL = 32 // context (mask columns)
	etAR = 8  // prefill rows per call
)

// etHyper is the whole tiny model's header with its RoPE.
func etHyper(c tinyllama.Config) simfile.Hyper {
	return simfile.Hyper{Hidden: c.HiddenSize, Layers: c.NumHiddenLayers, Heads: c.NumAttentionHeads,
		KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim, FFN: c.IntermediateSize, Vocab: c.VocabSize, Ctx: etCL,
		RMSEps: float32(c.RMSNormEps), TiedLMHead: c.TieWordEmbeddings,
		Rope: simfile.Rope{Theta: float32(c.RopeTheta), Scaling: c.Rope()}}
}

// tinyRef returns the tiny golden model's config and its float64 reference.
func tinyRef(t testing.TB) (tinyllama.Config, *tinyllama.Model) {
	t.Helper()
	c := tinyllama.Tiny()
	ref, err := tinyllama.NewModel(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, ref
}

// etSpec builds a spec with ranges calibrated on the reference (25% headroom).
func etSpec(t testing.TB, r tinyllama.Ranges, kv, logits, mask simfile.DType, shards int) simfile.ETSpec {
	s := simfile.ETSpec{PrefillAR: etAR, KV: kv, Logits: logits, Mask: mask, Shards: shards,
		LogitsRange: float32(1.25 * r.Logits), HiddenRange: float32(1.25 * r.Hidden)}
	for l := range r.K {
		s.KRange = append(s.KRange, float32(1.25*r.K[l]))
		s.VRange = append(s.VRange, float32(1.25*r.V[l]))
	}
	return s
}

// writeET writes every shard's context binary (what mkmodel --format pte puts in the .pte's
// delegates; cmd/server checks they are the same bytes) and returns their paths.
func writeET(t testing.TB, dir string, c tinyllama.Config, s simfile.ETSpec) []string {
	t.Helper()
	var paths []string
	for i := range s.Shards {
		p := filepath.Join(dir, fmt.Sprintf("shard%d.bin", i))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		err = simfile.WriteETShard(f, etHyper(c), s, i, simfile.WeightF16, func(name string, start int, dst []uint16) error {
			return tinyllama.Fill(c, name, start, dst)
		})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		paths = append(paths, p)
	}
	return paths
}

// etHost is the host side: per-layer caches indexed by absolute slot, and the loaded shards.
type etHost struct {
	t      testing.TB
	r      *Runtime
	ctxs   []*Context
	c      tinyllama.Config
	first  []int
	k, v   [][]byte // per model layer: [n_kv][hd][CL] and [n_kv][CL][hd] elements of es bytes
	es     int
	mask   func(codes []byte, i int, attend bool) // writes element i of a mask buffer
	tamper func(graph string, mask []byte)        // optional: corrupt the mask before execute
}

func newETHost(t testing.TB, r *Runtime, c tinyllama.Config, paths []string, s simfile.ETSpec) *etHost {
	h := &etHost{t: t, r: r, c: c, es: s.KV.Size()}
	h.first, _ = simfile.ShardLayers(c.NumHiddenLayers, s.Shards)
	for _, p := range paths {
		ctx := loadContext(t, r, p)
		t.Cleanup(func() { ctx.Close() })
		h.ctxs = append(h.ctxs, ctx)
	}
	n := c.NumKeyValueHeads * c.HeadDim * etCL * h.es
	for range c.NumHiddenLayers {
		h.k, h.v = append(h.k, make([]byte, n)), append(h.v, make([]byte, n))
	}
	switch s.Mask {
	case simfile.UFixed16:
		h.mask = func(b []byte, i int, a bool) { binary.LittleEndian.PutUint16(b[2*i:], map[bool]uint16{true: 65535}[a]) }
	case simfile.UFixed8:
		h.mask = func(b []byte, i int, a bool) { b[i] = map[bool]byte{true: 255}[a] }
	default:
		h.mask = func(b []byte, i int, a bool) {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(map[bool]float32{true: 0, false: -65535}[a]))
		}
	}
	return h
}

// node is the <node> of an input name input_<k>_<node>@0.
func node(name string) string {
	rest := strings.TrimSuffix(strings.TrimPrefix(name, "input_"), "@0")
	_, n, _ := strings.Cut(rest, "_")
	return n
}

// step runs one call of graph on every shard for tokens at positions npast.. (AR rows, the
// first len(tokens) real) and returns the dequantised logits rows of the real tokens.
func (h *etHost) step(graph string, tokens []int, npast int) [][]float32 {
	t, c := h.t, h.c
	nkv, hd := c.NumKeyValueHeads, c.HeadDim
	var carry map[string][]byte // hidden_state, freqs_cos, freqs_sin from the previous shard
	var logits [][]float32
	for si, ctx := range h.ctxs {
		g, err := ctx.Graph(graph)
		if err != nil {
			t.Fatal(err)
		}
		info := g.Info()
		var maskT TensorInfo
		for _, ti := range info.Inputs {
			if node(ti.Name) == "atten_mask" {
				maskT = ti
			}
		}
		ar := int(maskT.Dims[len(maskT.Dims)-2])
		S := etCL - ar
		bufs := map[string]*Buffer{}
		buf := func(ti TensorInfo) []byte {
			b, err := h.r.Alloc(ti.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Free() })
			bufs[ti.Name] = b
			return b.Bytes()
		}
		L := (len(info.Outputs) - 1) / 2 // V,K per layer + logits
		if si < len(h.ctxs)-1 {
			L = (len(info.Outputs) - 3) / 2 // V,K per layer + hidden_state, cos, sin
		}
		for _, ti := range info.Inputs {
			b := buf(ti)
			switch n := node(ti.Name); {
			case n == "tokens" || n == "input_pos":
				for i := range ar {
					v := npast + i
					if n == "tokens" {
						v = 0 // padding slots keep a stale (here: 0) token
						if i < len(tokens) {
							v = tokens[i]
						}
					}
					binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
				}
			case n == "atten_mask":
				for i := range ar {
					for j := range etCL {
						h.mask(b, i*etCL+j, j < npast || (j >= S && j-S <= i))
					}
				}
				if h.tamper != nil {
					h.tamper(graph, b)
				}
			case strings.HasPrefix(n, "args_"):
				var j int
				fmt.Sscanf(n, "args_%d", &j)
				if j < L { // K, transposed: row (h·hd + d) holds S slots
					src := h.k[h.first[si]+j]
					for r := range nkv * hd {
						copy(b[r*S*h.es:(r+1)*S*h.es], src[r*etCL*h.es:])
					}
				} else { // V: per head, S rows of hd
					src := h.v[h.first[si]+j-L]
					for hh := range nkv {
						copy(b[hh*S*hd*h.es:(hh+1)*S*hd*h.es], src[hh*etCL*hd*h.es:])
					}
				}
			default: // what crosses shards
				copy(b, carry[n])
			}
		}
		for _, ti := range info.Outputs {
			buf(ti)
		}
		var ins, outs []Binding
		for _, ti := range info.Inputs {
			ins = append(ins, Binding{Name: ti.Name, Buffer: bufs[ti.Name]})
		}
		for _, ti := range info.Outputs {
			outs = append(outs, Binding{Name: ti.Name, Buffer: bufs[ti.Name]})
		}
		call, err := g.Bind(ins, outs)
		if err != nil {
			t.Fatal(err)
		}
		if err := call.Execute(); err != nil {
			t.Fatalf("%s shard %d: %v", graph, si, err)
		}
		call.Close()
		// New entries of the real rows go to their slots (raw bytes: same quantisation).
		for l := range L {
			vo, ko := bufs[info.Outputs[2*l].Name].Bytes(), bufs[info.Outputs[2*l+1].Name].Bytes()
			kc, vc := h.k[h.first[si]+l], h.v[h.first[si]+l]
			for r := range nkv * hd {
				copy(kc[(r*etCL+npast)*h.es:], ko[r*ar*h.es:(r*ar+len(tokens))*h.es])
			}
			for hh := range nkv {
				copy(vc[(hh*etCL+npast)*hd*h.es:], vo[hh*ar*hd*h.es:(hh*ar+len(tokens))*hd*h.es])
			}
		}
		if si < len(h.ctxs)-1 {
			carry = map[string][]byte{}
			for i, n := range []string{"hidden_state", "freqs_cos", "freqs_sin"} {
				carry[n] = append([]byte(nil), bufs[info.Outputs[2*L+i].Name].Bytes()...)
			}
			continue
		}
		lt := info.Outputs[2*L]
		lb := bufs[lt.Name].Bytes()
		V := c.VocabSize
		for i := range tokens {
			row := make([]float32, V)
			for j := range row {
				if lt.DataType == Float32 {
					row[j] = math.Float32frombits(binary.LittleEndian.Uint32(lb[4*(i*V+j):]))
				} else {
					row[j] = lt.Quant.Scale * (float32(binary.LittleEndian.Uint16(lb[2*(i*V+j):])) + float32(lt.Quant.Offset))
				}
			}
			logits = append(logits, row)
		}
	}
	return logits
}

// run prefills prompt (chunks of etAR) and decodes the rest of seq one token at a time; it
// returns the logits at every position of seq.
func (h *etHost) run(seq []int, nprompt int) [][]float32 {
	var out [][]float32
	for c := 0; c < nprompt; c += etAR {
		out = append(out, h.step("prefill_forward", seq[c:min(c+etAR, nprompt)], c)...)
	}
	for p := nprompt; p < len(seq); p++ {
		out = append(out, h.step("kv_forward", seq[p:p+1], p)...)
	}
	return out
}

func maxDiff(a [][]float32, b [][]float64) (float64, int) {
	worst, agree := 0.0, 0
	for i := range a {
		best := 0
		for j := range a[i] {
			worst = max(worst, math.Abs(float64(a[i][j])-b[i][j]))
			if a[i][j] > a[i][best] {
				best = j
			}
		}
		if best == tinyllama.Argmax(b[i]) {
			agree++
		}
	}
	return worst, agree
}

func TestHostsimExecuTorchTiny(t *testing.T) {
	dir := hostsimDir(t)
	c, ref := tinyRef(t)
	// A 13-token prompt (two prefill chunks, the second padded) and 5 decode steps.
	seq := []int{128000}
	for _, d := range tinyllama.Draws(42, 12) {
		seq = append(seq, d%128000)
	}
	greedy, err := ref.Greedy(seq, 5)
	if err != nil {
		t.Fatal(err)
	}
	nprompt := len(seq)
	seq = append(seq, greedy...)
	want, err := ref.Forward(seq)
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := ref.Calibrate(seq)
	if err != nil {
		t.Fatal(err)
	}
	r := openRuntime(t, hostsimConfig(dir), nil)
	t.Logf("calibrated ranges: K %.3g V %.3g hidden %.3g logits %.3g", ranges.K, ranges.V, ranges.Hidden, ranges.Logits)
	u8, u16, f32 := simfile.UFixed8, simfile.UFixed16, simfile.F32
	// tol is the documented bound (FORMAT.md) on |logit − reference| over the whole vocabulary,
	// with logits up to ±23 here. float32 I/O is exact up to float32 arithmetic (measured 1.5e-5);
	// uint8 KV (per-layer scale 2·1.25·max|K| / 255) measured 0.66, uint16 KV 2.1e-3.
	cases := []struct {
		name             string
		kv, logits, mask simfile.DType
		shards           int
		tol              float64
	}{
		{"f32", f32, f32, f32, 1, 1e-4},
		{"f32-shards2", f32, f32, f32, 2, 1e-4},
		{"u8", u8, u16, u16, 1, 1.0},
		{"u8-shards2", u8, u16, u16, 2, 1.0},
		{"u8-mask-u8", u8, u16, u8, 1, 1.0},
		{"u16", u16, u16, u16, 1, 5e-3},
	}
	// -short (make test's -race run, arm64 under qemu) runs the float32 pair and
	// uint8 KV; make test runs every case without -race.
	inShort := map[string]bool{"f32": true, "f32-shards2": true, "u8": true}
	got := map[string][][]float32{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && !inShort[tc.name] {
				t.Skip("-short: the f32 pair and u8 only")
			}
			s := etSpec(t, ranges, tc.kv, tc.logits, tc.mask, tc.shards)
			h := newETHost(t, r, c, writeET(t, t.TempDir(), c, s), s)
			out := h.run(seq, nprompt)
			got[tc.name] = out
			if len(out) != len(seq) {
				t.Fatalf("%d logits rows, want %d", len(out), len(seq))
			}
			d, agree := maxDiff(out, want)
			t.Logf("max |logit − reference| = %.3g, top-1 agrees at %d/%d positions", d, agree, len(seq))
			if d > tc.tol {
				t.Errorf("max logit error %.3g > %.3g", d, tc.tol)
			}
			if agree != len(seq) {
				t.Errorf("top-1 agrees at %d of %d positions", agree, len(seq))
			}
		})
	}
	// Shards chain exactly: with float32 I/O the hidden state crosses unchanged.
	for _, pair := range [][2]string{{"f32", "f32-shards2"}} {
		a, b := got[pair[0]], got[pair[1]]
		for i := range a {
			for j := range a[i] {
				if a[i][j] != b[i][j] {
					t.Fatalf("%s and %s differ at row %d id %d: %g vs %g", pair[0], pair[1], i, j, a[i][j], b[i][j])
				}
			}
		}
	}
}

// TestHostsimExecuTorchStrict: the mask is read through its scale/offset (a wrong code changes
// the result), mis-shaped tensors are refused, and HOSTSIM_SCRIPT / HOSTSIM_FAIL_EXECUTE_AT act
// on these graphs.
func TestHostsimExecuTorchStrict(t *testing.T) {
	dir := hostsimDir(t)
	hs := openHostsimLib(t, dir)
	c, ref := tinyRef(t)
	seq := []int{128000, 9906, 1917, 11, 1234, 5678, 42, 7, 99, 100}
	ranges, err := ref.Calibrate(seq)
	if err != nil {
		t.Fatal(err)
	}
	r := openRuntime(t, hostsimConfig(dir), nil)
	s := etSpec(t, ranges, simfile.UFixed8, simfile.UFixed16, simfile.UFixed16, 1)
	paths := writeET(t, t.TempDir(), c, s)
	base := newETHost(t, r, c, paths, s).run(seq, 8)

	t.Run("mask codes", func(t *testing.T) {
		for _, tc := range []struct {
			code uint16
			what string
		}{{65534, "65534 (-0.0039)"}, {32768, "32768 (-127.5: blocks)"}} {
			h := newETHost(t, r, c, paths, s)
			h.tamper = func(graph string, m []byte) {
				if graph == "kv_forward" {
					binary.LittleEndian.PutUint16(m, tc.code) // column 0: the BOS slot
				}
			}
			out := h.run(seq, 8)
			if d, _ := maxDiff(out[8:], toF64(base[8:])); d == 0 {
				t.Errorf("mask code %s on an attended column changed nothing", tc.what)
			}
			if d, _ := maxDiff(out[:8], toF64(base[:8])); d != 0 {
				t.Errorf("prefill rows changed (%g) though only kv_forward's mask was touched", d)
			}
		}
	})

	t.Run("wrong sizes", func(t *testing.T) {
		sh, gs, err := simfile.ETShard(etHyper(c), s, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			edit func(g *simfile.Graph)
			want string
		}{
			{"K cache one slot long", func(g *simfile.Graph) { g.Inputs[0].Dims[3]++ }, "want [1,2,16,"},
			{"V not transposed", func(g *simfile.Graph) { d := g.Inputs[1].Dims; d[2], d[3] = d[3], d[2] }, "want [1,2,"},
			{"tokens int16", func(g *simfile.Graph) {
				for i := range g.Inputs {
					if strings.HasSuffix(g.Inputs[i].Name, "_tokens@0") {
						g.Inputs[i].DType = simfile.UInt16
					}
				}
			}, "not allowed here"},
			{"logits rows", func(g *simfile.Graph) { g.Outputs[len(g.Outputs)-1].Dims[1] = 3 }, "want [1,"},
			{"mask columns", func(g *simfile.Graph) { g.Inputs[len(g.Inputs)-1].Dims[3] = etCL - 1 }, "want [1,1,"},
		} {
			bad := make([]simfile.Graph, len(gs))
			for i, g := range gs {
				bad[i] = g
				bad[i].Inputs = cloneTensors(g.Inputs)
				bad[i].Outputs = cloneTensors(g.Outputs)
			}
			tc.edit(&bad[1])
			ws, names := simfile.ETWeightSpecs(sh, true)
			p := filepath.Join(t.TempDir(), "bad.bin")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			err = simfile.WriteWith(f, sh, bad, ws, simfile.Options{Format: simfile.WeightF16,
				SourceRows: func(j int, w simfile.Weight, row0 int, dst []uint16) error {
					return tinyllama.Fill(c, names[j], row0*w.Cols, dst)
				}})
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			// hostsim prints the reason (tc.want) on stderr; QNN reports a malformed binary.
			if _, err = r.LoadContext(p, ContextOptions{}); CodeOf(err) != 30010 {
				t.Errorf("%s: LoadContext error %v, want code 30010", tc.name, err)
			}
		}
	})

	t.Run("script and faults", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "script")
		if err := os.WriteFile(script, []byte("7 9 11"), 0o644); err != nil {
			t.Fatal(err)
		}
		hs.reset()
		hs.Set(t, "HOSTSIM_SCRIPT", script)
		defer hs.Set(t, "HOSTSIM_SCRIPT", "")
		// Two prefill chunks (the second one sampled), then two decode steps that feed the sampled
		// tokens back: the reply is the script, 7 9 11.
		h := newETHost(t, r, c, paths, s)
		out := h.run(seq, 10)[9:] // row 9 (the last prompt row)
		rows := [][]float32{out[0], h.step("kv_forward", []int{7}, 10)[0], h.step("kv_forward", []int{9}, 11)[0]}
		// A new prompt read row by row through kv_forward (as a runner does when that is cheaper):
		// the reply after it starts at the script's next token, not one token per prompt row later.
		for p := range 4 {
			rows = append(rows, h.step("kv_forward", seq[p:p+1], p)[0])
		}
		rows = append(rows, h.step("kv_forward", []int{7}, 4)[0])
		// The same prompt read again (a re-read from row 0): the offer 9 was the reply's last token.
		rows = append(rows, h.run(seq, 10)[9])
		// A new script path starts its script afresh, whatever the previous one offered.
		script2 := filepath.Join(t.TempDir(), "script2")
		if err := os.WriteFile(script2, []byte("5 6 8 10"), 0o644); err != nil {
			t.Fatal(err)
		}
		hs.Set(t, "HOSTSIM_SCRIPT", script2)
		rows = append(rows, h.run(seq, 10)[9])
		// A verify call (speculative decoding): the sampled 5 and two drafts, the first right (6), the
		// second wrong (99). Its rows follow the script while the drafts do: 6, 8, then 8 again; the
		// correction 8 fed back at position 12 takes the script on to 10.
		verify := h.step("prefill_forward", []int{5, 6, 99}, 10)
		rows = append(rows, verify[0], verify[1], verify[2], h.step("kv_forward", []int{8}, 12)[0])
		for i, want := range []int{7, 9, 11, 7, 7, 7, 7, 9, 11, 5, 6, 8, 8, 10} {
			if got := tinyllama.Argmax(rows[i]); got != want {
				t.Errorf("sample %d: argmax %d, want scripted %d", i, got, want)
			}
		}
		st := hs.Stats(t)
		hs.Set(t, "HOSTSIM_FAIL_EXECUTE_AT", fmt.Sprint(st.ExecCalls+1))
		defer hs.Set(t, "HOSTSIM_FAIL_EXECUTE_AT", "")
		g, _ := h.ctxs[0].Graph("kv_forward")
		if err := executeZero(t, r, g); CodeOf(err) != 1007 {
			t.Errorf("injected failure: %v, want code 1007", err)
		}
		if st2 := hs.Stats(t); st2.ExecInjected != st.ExecInjected+1 || st2.ExecDecode != st.ExecDecode {
			t.Errorf("stats after injected failure: %+v (before %+v)", st2, st)
		}
	})
}

func cloneTensors(ts []simfile.Tensor) []simfile.Tensor {
	out := make([]simfile.Tensor, len(ts))
	for i, t := range ts {
		out[i] = t
		out[i].Dims = append([]int(nil), t.Dims...)
	}
	return out
}

func toF64(a [][]float32) [][]float64 {
	out := make([][]float64, len(a))
	for i := range a {
		for _, v := range a[i] {
			out[i] = append(out[i], float64(v))
		}
	}
	return out
}

// executeZero runs g once with zero-filled buffers (tokens 0, positions 0).
func executeZero(t testing.TB, r *Runtime, g *Graph) error {
	var bufs []*Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	bind := func(tensors []TensorInfo) []Binding {
		var bs []Binding
		for _, ti := range tensors {
			b, err := r.Alloc(ti.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			bufs = append(bufs, b)
			bs = append(bs, Binding{Name: ti.Name, Buffer: b})
		}
		return bs
	}
	info := g.Info()
	call, err := g.Bind(bind(info.Inputs), bind(info.Outputs))
	if err != nil {
		t.Fatal(err)
	}
	defer call.Close()
	return call.Execute()
}

// TestLoadContextDataGroup creates contexts from bytes (as a .pte's delegates hold them) in one
// multi-context spill-fill group: the first starts it, the next names it (hostsim refuses a
// handle that is not a live context), and a group whose first context was closed is refused.
func TestLoadContextDataGroup(t *testing.T) {
	dir := hostsimDir(t)
	c, ref := tinyRef(t)
	ranges, err := ref.Calibrate([]int{128000, 9906, 1917})
	if err != nil {
		t.Fatal(err)
	}
	s := etSpec(t, ranges, simfile.F32, simfile.F32, simfile.F32, 2)
	paths := writeET(t, t.TempDir(), c, s)
	var bins [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bins = append(bins, b)
	}
	r := openRuntime(t, hostsimConfig(dir), nil)
	g := &Group{SpillFill: 1 << 20}
	first, err := r.LoadContextData("shard0", bins[0], ContextOptions{Group: g})
	if err != nil || g.First != first {
		t.Fatalf("first context: %v (group first %p)", err, g.First)
	}
	second, err := r.LoadContextData("shard1", bins[1], ContextOptions{Group: g})
	if err != nil {
		t.Fatalf("second context in the group: %v", err)
	}
	if _, err := second.Graph("kv_forward"); err != nil {
		t.Fatal(err)
	}
	second.Close()
	first.Close()
	if _, err := r.LoadContextData("shard1", bins[1], ContextOptions{Group: g}); err == nil || !strings.Contains(err.Error(), "first context of its group (shard0) is closed") {
		t.Errorf("a group whose first context is closed: %v", err)
	}
	if _, err := r.LoadContextData("empty", nil, ContextOptions{}); err == nil {
		t.Error("an empty binary was accepted")
	}
}
