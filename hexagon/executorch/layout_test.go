package executorch

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/qnn"
)

// storiesGraph is the tensor table of docs/executorch-pte.md §3.3 (the real stories260K context binary, in
// its stored order) for one graph with ar rows: a fake binary-info source.
func storiesGraph(name string, ar int) qnn.GraphInfo {
	const cl, nkv, hd, vocab = 128, 4, 8, 512
	S := uint32(cl - ar)
	kScale := []float32{0.187365, 0.226369, 0.200729, 0.225397, 0.149568}
	vScale := []float32{0.0120779, 0.0137057, 0.0188570, 0.0228597, 0.0278287}
	u8 := func(name string, scale float32, dims ...uint32) qnn.TensorInfo {
		return qnn.TensorInfo{Name: name, DataType: qnn.UFixed8, Dims: dims, Quant: qnn.Quant{Scale: scale, Offset: -128}}
	}
	g := qnn.GraphInfo{Name: name}
	kIn := func(l int) qnn.TensorInfo { return u8("", kScale[l], 1, nkv, hd, S) }
	vIn := func(l int) qnn.TensorInfo { return u8("", vScale[l], 1, nkv, S, hd) }
	names := []string{"input_2_args_0@0", "input_3_args_5@0", "input_5_args_1@0", "input_6_args_6@0", "input_7_args_2@0",
		"input_8_args_7@0", "input_9_args_3@0", "input_10_args_8@0", "input_11_args_4@0", "input_12_args_9@0"}
	for l := range 5 {
		k, v := kIn(l), vIn(l)
		k.Name, v.Name = names[2*l], names[2*l+1]
		g.Inputs = append(g.Inputs, k, v)
	}
	g.Inputs = append(g.Inputs,
		qnn.TensorInfo{Name: "input_0_input_pos@0", DataType: qnn.Int32, Dims: []uint32{1, uint32(ar)}},
		qnn.TensorInfo{Name: "input_1_tokens@0", DataType: qnn.Int32, Dims: []uint32{1, uint32(ar)}},
		qnn.TensorInfo{Name: "input_4_atten_mask@0", DataType: qnn.UFixed16, Dims: []uint32{1, 1, uint32(ar), cl},
			Quant: qnn.Quant{Scale: 0.00389105, Offset: -65535}})
	for l := range 5 {
		g.Outputs = append(g.Outputs,
			u8(fmt.Sprintf("output_aten_permute_copy_default_%d_sha_concat@0", 6+13*l), vScale[l], 1, nkv, uint32(ar), hd),
			u8(fmt.Sprintf("output_aten_permute_copy_default_%d_sha_concat@0", 7+13*l), kScale[l], 1, nkv, hd, uint32(ar)))
	}
	g.Outputs = append(g.Outputs, qnn.TensorInfo{Name: "output_aten_squeeze_copy_dims_15@0", DataType: qnn.UFixed16,
		Dims: []uint32{1, uint32(ar), vocab}, Quant: qnn.Quant{Scale: 0.000679875, Offset: -31143}})
	return g
}

// TestBindStories binds the real stories260K plans (docs/executorch-pte.md §1.3: DelegateCall args
// [2,0,3,8,1,4,9,5,10,6,11,7,12 | 13…23]) to the §3.3 tensor table.
func TestBindStories(t *testing.T) {
	f := openStories(t)
	for _, tc := range []struct {
		method string
		ar     int
	}{{pte.MethodDecode, 1}, {pte.MethodPrefill, 32}} {
		t.Run(tc.method, func(t *testing.T) {
			g := storiesGraph(tc.method, tc.ar)
			l, err := resolveMethod(f.Method(tc.method), 5, func(int) (qnn.GraphInfo, error) { return g, nil })
			if err != nil {
				t.Fatal(err)
			}
			if l.ar != tc.ar || l.cl != 128 || l.tokens != 0 || l.mask != 1 || l.pos != 2 || l.logits != 23 {
				t.Errorf("ar %d cl %d tokens %d mask %d pos %d logits %d", l.ar, l.cl, l.tokens, l.mask, l.pos, l.logits)
			}
			if !slices.Equal(l.kIn, []int32{3, 4, 5, 6, 7}) || !slices.Equal(l.vIn, []int32{8, 9, 10, 11, 12}) {
				t.Errorf("cache inputs K %v V %v, want K 3..7, V 8..12", l.kIn, l.vIn)
			}
			if !slices.Equal(l.kNew, []int32{14, 16, 18, 20, 22}) || !slices.Equal(l.vNew, []int32{13, 15, 17, 19, 21}) {
				t.Errorf("new entries K %v V %v", l.kNew, l.vNew)
			}
			// Binary order kept for execute; each tensor bound to its role's value.
			want := map[string]int32{"input_2_args_0@0": 3, "input_3_args_5@0": 8, "input_12_args_9@0": 12,
				"input_0_input_pos@0": 2, "input_1_tokens@0": 0, "input_4_atten_mask@0": 1}
			for _, a := range l.steps[0].in {
				if v, ok := want[a.t.Name]; ok && a.value != v {
					t.Errorf("%s bound to value %d, want %d", a.t.Name, a.value, v)
				}
			}
			if l.steps[0].in[0].t.Name != "input_2_args_0@0" {
				t.Errorf("inputs reordered: first is %s", l.steps[0].in[0].t.Name)
			}
			m, err := maskOf(l.maskT)
			if err != nil {
				t.Fatal(err)
			}
			codes := make([]byte, 4)
			m.Row(codes, 1, 2)
			if got := graphio.U16(codes); got[0] != 65535 || got[1] != 0 {
				t.Errorf("mask codes %v; want 65535 attend, 0 blocked", got)
			}
		})
	}
}

// TestBindErrors: bindings that cannot work are refused with the reason.
func TestBindErrors(t *testing.T) {
	f := openStories(t)
	m := f.Method(pte.MethodPrefill)
	for _, tc := range []struct {
		name   string
		layers int
		edit   func(g *qnn.GraphInfo)
		want   string
	}{
		{"layer count", 4, nil, "plan outputs"},
		{"requantised new K", 5, func(g *qnn.GraphInfo) { g.Outputs[1].Quant.Scale *= 2 }, "is not quantised like its cache input"},
		{"no tokens", 5, func(g *qnn.GraphInfo) { g.Inputs[11].Name = "input_1_ids@0" }, "tokens, input_pos and atten_mask"},
		{"bad name", 5, func(g *qnn.GraphInfo) { g.Inputs[0].Name = "k_cache_0" }, "not named input_<k>_<node>"},
		{"int64 tokens", 5, func(g *qnn.GraphInfo) { g.Inputs[11].DataType = qnn.Int64 }, "must be 32-bit integers"},
		{"mask without attend code", 5, func(g *qnn.GraphInfo) { g.Inputs[12].Quant.Offset = 0 }, ""},
		{"cache slots", 5, func(g *qnn.GraphInfo) {
			for i := 0; i < 10; i += 2 {
				g.Inputs[i].Dims, g.Inputs[i+1].Dims = []uint32{1, 4, 8, 95}, []uint32{1, 4, 95, 8}
			}
		}, "want CL − AR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := storiesGraph(m.Name, 32)
			if tc.edit != nil {
				tc.edit(&g)
			}
			l, err := resolveMethod(m, tc.layers, func(int) (qnn.GraphInfo, error) { return g, nil })
			if tc.want == "" { // refused later, by the mask codes
				if err == nil {
					_, err = maskOf(l.maskT)
				}
				tc.want = "cannot express attend"
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBinderAlone runs the binder without the layout check: it binds roles,
// steps and sizes, refuses what it cannot bind, and leaves graph-shape
// faults (here caches one slot short) to the check.
func TestBinderAlone(t *testing.T) {
	f := openStories(t)
	m := f.Method(pte.MethodPrefill)
	short := storiesGraph(m.Name, 32)
	for i := 0; i < 10; i += 2 {
		short.Inputs[i].Dims, short.Inputs[i+1].Dims = []uint32{1, 4, 8, 95}, []uint32{1, 4, 95, 8}
	}
	l, err := bindMethod(m, 5, func(int) (qnn.GraphInfo, error) { return short, nil })
	if err != nil {
		t.Fatalf("the binder refused a bindable graph: %v", err)
	}
	if l.bound != 5 || l.tokens != 0 || l.mask != 1 || l.pos != 2 || len(l.steps) != 1 || l.ar != 0 {
		t.Errorf("bound %d tokens %d mask %d pos %d steps %d ar %d", l.bound, l.tokens, l.mask, l.pos, len(l.steps), l.ar)
	}
	if got, want := l.sizes[3], 4*8*95; got != want {
		t.Errorf("K cache value 3 sized %d bytes, want %d", got, want)
	}
	if err := l.check(5); err == nil || !strings.Contains(err.Error(), "want CL − AR") {
		t.Errorf("check: %v, want the slot count refused", err)
	}
	for _, tc := range []struct {
		name string
		edit func(g *qnn.GraphInfo)
		want string
	}{
		{"bad name", func(g *qnn.GraphInfo) { g.Inputs[0].Name = "k_cache_0" }, "not named input_<k>_<node>"},
		{"odd cache inputs", func(g *qnn.GraphInfo) { g.Inputs[1].Name = "input_3_other@0" }, "do not make whole layers"},
		{"arg count", func(g *qnn.GraphInfo) { g.Outputs = g.Outputs[:10] }, "args for a graph of"},
	} {
		g := storiesGraph(m.Name, 32)
		tc.edit(&g)
		if _, err := bindMethod(m, 5, func(int) (qnn.GraphInfo, error) { return g, nil }); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestLayoutCheckAlone runs the check on a bound layout edited field by
// field: each fault is found without the binder.
func TestLayoutCheckAlone(t *testing.T) {
	f := openStories(t)
	m := f.Method(pte.MethodDecode)
	g := storiesGraph(m.Name, 1)
	for _, tc := range []struct {
		name string
		edit func(l *layout)
		want string
	}{
		{"good", func(*layout) {}, ""},
		{"missing layer", func(l *layout) { l.bound = 4 }, "hold 4 layers' caches"},
		{"no mask", func(l *layout) { l.mask = -1 }, "tokens, input_pos and atten_mask"},
		{"no logits", func(l *layout) { l.logitsT = qnn.TensorInfo{} }, "produces the logits"},
		{"no V cache", func(l *layout) { l.vIn[2] = -1 }, "layer 2 has no K or V cache input"},
		{"mask rank", func(l *layout) { l.maskT.Dims = []uint32{128} }, "want [..., AR, CL]"},
		{"float positions", func(l *layout) { l.posT.DataType = qnn.Float32 }, "32-bit integers"},
		{"V shape", func(l *layout) { l.vT.Dims = []uint32{1, 4, 8, 127} }, "does not match K cache"},
		{"new K size", func(l *layout) { l.sizes[l.kNew[0]]++ }, "new entries of"},
		{"logits rows", func(l *layout) { l.logitsT.Dims = []uint32{1, 2, 512} }, "one row per token"},
	} {
		l, err := bindMethod(m, 5, func(int) (qnn.GraphInfo, error) { return g, nil })
		if err != nil {
			t.Fatal(err)
		}
		tc.edit(l)
		err = l.check(5)
		if tc.want == "" {
			if err != nil || l.ar != 1 || l.cl != 128 {
				t.Errorf("%s: %v, ar %d cl %d", tc.name, err, l.ar, l.cl)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// openStories opens the real stories260k .pte of hexagon/pte/testdata for
// the test.
func openStories(t *testing.T) *pte.File {
	t.Helper()
	f, err := pte.Open(filepath.Join("..", "pte", "testdata", "stories260k_hybrid_llama_qnn.pte"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
