package pte_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/pte/ptewrite"
)

// realPTE is ExecuTorch CI's stories260K hybrid export (testdata/SOURCE.md).
const realPTE = "testdata/stories260k_hybrid_llama_qnn.pte"

func open(t testing.TB, path string) *pte.File {
	t.Helper()
	f, err := pte.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestRealFile checks every value docs/executorch-pte.md §1.1, §1.3, §1.4 and §2.1
// lists for the real file.
func TestRealFile(t *testing.T) {
	f := open(t, realPTE)
	wantHdr := pte.Header{RootOffset: 60, Extended: true, ExtendedLen: 32, ProgramSize: 18688, SegmentBase: 18688, SegmentDataSize: 1331456}
	if f.Header != wantHdr || f.Size != 1350144 {
		t.Errorf("header %+v size %d, want %+v size 1350144", f.Header, f.Size, wantHdr)
	}
	if f.Version != 0 || len(f.Methods) != 29 {
		t.Errorf("version %d, %d plans; want 0, 29", f.Version, len(f.Methods))
	}
	if want := []pte.DataSegment{{0, 0}, {0, 1331456}}; !slices.Equal(f.Segments, want) {
		t.Errorf("segments %v, want %v", f.Segments, want)
	}
	if cs := f.ConstantSegment; cs == nil || cs.Segment != 0 || !slices.Equal(cs.Offsets, []uint64{0}) {
		t.Errorf("constant_segment %+v, want {0 [0]}", cs)
	}
	if f.ConstantBuffers+f.MutableSegments+f.NamedData != 0 {
		t.Errorf("constant buffers %d, mutable segments %d, named data %d; want none", f.ConstantBuffers, f.MutableSegments, f.NamedData)
	}

	wantOpts := pte.QNNOptions{SocModel: pte.SM8650, HtpArch: pte.V75, VTCMMB: 8, Backend: pte.HtpBackend,
		PerformanceMode: pte.HtpBurst, Precision: pte.HtpQuantized, PdSession: pte.HtpUnsignedPd,
		UseConvHMX: true, UseFoldReLU: true, LogLevel: pte.LogLevelError, ProfileLevel: pte.ProfileOff,
		SaverOutputDir: "saver_output", UseMHA2SHA: true}
	var specs [][]byte
	var binaries [][]byte
	for _, tc := range []struct {
		name string
		ar   int32
	}{{pte.MethodDecode, 1}, {pte.MethodPrefill, 32}} {
		m := f.Method(tc.name)
		if m == nil {
			t.Fatalf("no method %s", tc.name)
		}
		ar, cache := tc.ar, 128-tc.ar
		want := map[int32]pte.Value{
			0: pte.TensorValue(pte.Int, 1, ar), 1: pte.TensorValue(pte.UInt16, 1, 1, ar, 128), 2: pte.TensorValue(pte.Int, 1, ar),
			23: pte.TensorValue(pte.UInt16, 1, ar, 512),
		}
		for l := int32(0); l < 5; l++ {
			want[3+l] = pte.TensorValue(pte.Byte, 1, 4, 8, cache)
			want[8+l] = pte.TensorValue(pte.Byte, 1, 4, cache, 8)
			want[14+2*l] = pte.TensorValue(pte.Byte, 1, 4, 8, ar)
			want[13+2*l] = pte.TensorValue(pte.Byte, 1, 4, ar, 8)
		}
		if len(m.Values) != 24 {
			t.Fatalf("%s: %d values, want 24", tc.name, len(m.Values))
		}
		for i, v := range m.Values {
			if !reflect.DeepEqual(v, want[int32(i)]) {
				t.Errorf("%s value %d = %v %+v, want %+v", tc.name, i, v.Kind, v.Tensor, want[int32(i)].Tensor)
			}
		}
		if want := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; !slices.Equal(m.Inputs, want) {
			t.Errorf("%s inputs %v, want %v", tc.name, m.Inputs, want)
		}
		if want := []int32{23, 14, 16, 18, 20, 22, 13, 15, 17, 19, 21}; !slices.Equal(m.Outputs, want) {
			t.Errorf("%s outputs %v, want %v", tc.name, m.Outputs, want)
		}
		wantCall := pte.Instruction{Kind: pte.DelegateCall, Delegate: 0,
			Args: []int32{2, 0, 3, 8, 1, 4, 9, 5, 10, 6, 11, 7, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}}
		if len(m.Instructions) != 1 || !reflect.DeepEqual(m.Instructions[0], wantCall) {
			t.Errorf("%s instructions %+v, want [%+v]", tc.name, m.Instructions, wantCall)
		}
		if len(m.Operators) != 0 || len(m.Delegates) != 1 {
			t.Fatalf("%s: %d operators, %d delegates; want 0, 1", tc.name, len(m.Operators), len(m.Delegates))
		}
		d := m.Delegates[0]
		if d.ID != "QnnBackend" || d.Location != pte.Segment || d.Index != 1 {
			t.Errorf("%s delegate %s %v %d, want QnnBackend SEGMENT 1", tc.name, d.ID, d.Location, d.Index)
		}
		if len(d.CompileSpecs) != 1 || d.CompileSpecs[0].Key != "qnn_compile_spec" || len(d.CompileSpecs[0].Value) != 200 {
			t.Fatalf("%s compile specs %d, want one 200-byte qnn_compile_spec", tc.name, len(d.CompileSpecs))
		}
		specs = append(specs, d.CompileSpecs[0].Value)
		if d.QNN == nil || *d.QNN != wantOpts {
			t.Errorf("%s options\n%+v, want\n%+v", tc.name, d.QNN, wantOpts)
		}
		// §2.1: the payload header and where the context binary starts.
		wantH := pte.PayloadHeader{Magic: 0x5678ABCD, Signature: 1780651886543080982, Size: 1331200, Len: 256}
		if d.Header != wantH {
			t.Errorf("%s payload header %+v, want %+v", tc.name, d.Header, wantH)
		}
		if d.PayloadOffset != 18688 || len(d.Payload) != 256+1331200 || d.BinaryOffset != 18944 || len(d.Binary) != 1331200 {
			t.Errorf("%s payload at %d (%d B), binary at %d (%d B); want 18688 (1331456 B), 18944 (1331200 B)",
				tc.name, d.PayloadOffset, len(d.Payload), d.BinaryOffset, len(d.Binary))
		}
		if !bytes.Equal(d.Payload[20:256], make([]byte, 236)) {
			t.Errorf("%s payload header padding is not zero", tc.name)
		}
		binaries = append(binaries, d.Binary)
	}
	if !bytes.Equal(specs[0], specs[1]) {
		t.Error("the two plans' qnn_compile_spec bytes differ")
	}
	// Dedup: both methods share segment 1, handed out as the same slice of
	// the map, whose first bytes are the context binary's own header.
	if &binaries[0][0] != &binaries[1][0] {
		t.Error("the two methods' context binaries are different slices")
	}
	raw, err := os.ReadFile(realPTE)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(binaries[0], raw[18944:]) || !bytes.Equal(binaries[0][:16], []byte{0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1}) {
		t.Errorf("context binary is not file[18944:] starting 00000002 00000003 00000000 00000001: % x", binaries[0][:16])
	}

	kv := func(scale float64) []pte.Value {
		return []pte.Value{pte.DoubleValue(scale), pte.IntValue(128), pte.IntValue(0), pte.IntValue(255), pte.StringValue("torch.uint8")}
	}
	wantMeta := map[string][]pte.Value{
		"get_ar_len": {pte.IntValue(1)}, "get_bos_id": {pte.IntValue(1)}, "get_eos_id": {pte.IntValue(2)},
		"get_n_bos": {pte.IntValue(1)}, "get_n_eos": {pte.IntValue(1)}, "get_dim": {pte.IntValue(64)},
		"get_head_dim": {pte.IntValue(8)}, "get_max_batch_size": {pte.IntValue(1)},
		"get_max_seq_len": {pte.IntValue(128)}, "get_max_context_len": {pte.IntValue(128)},
		"get_n_kv_heads": {pte.IntValue(4)}, "get_n_layers": {pte.IntValue(5)}, "get_vocab_size": {pte.IntValue(512)},
		"get_use_kv_cache": {pte.BoolValue(true)}, "get_kv_io_bit_width": {pte.IntValue(8)},
		"get_logits_scale": {pte.DoubleValue(0.0006798750255256891)}, "get_logits_zero_point": {pte.IntValue(31143)},
		// V0, K0, V1, K1, ... (graph-node order), scales as in §1.3/§3.3.
		"get_kv_output_0_quant_attr": kv(0.01207786239683628), "get_kv_output_1_quant_attr": kv(0.18736502528190613),
		"get_kv_output_2_quant_attr": kv(0.013705749996006489), "get_kv_output_3_quant_attr": kv(0.22636917233467102),
		"get_kv_output_4_quant_attr": kv(0.018856976181268692), "get_kv_output_5_quant_attr": kv(0.2007288783788681),
		"get_kv_output_6_quant_attr": kv(0.02285970374941826), "get_kv_output_7_quant_attr": kv(0.22539734840393066),
		"get_kv_output_8_quant_attr": kv(0.027828656136989594), "get_kv_output_9_quant_attr": kv(0.14956776797771454),
	}
	if !reflect.DeepEqual(f.Metadata, wantMeta) {
		for k, v := range f.Metadata {
			if !reflect.DeepEqual(v, wantMeta[k]) {
				t.Errorf("metadata %s = %+v, want %+v", k, v, wantMeta[k])
			}
		}
		for k := range wantMeta {
			if _, ok := f.Metadata[k]; !ok {
				t.Errorf("metadata %s missing", k)
			}
		}
	}
	// The docs/executorch-pte.md values, rounded as printed there.
	for _, c := range []struct {
		got, want, tol float64
	}{{f.Metadata["get_logits_scale"][0].Double, 0.000679875026, 1e-12}, {f.Metadata["get_kv_output_0_quant_attr"][0].Double, 0.0120779, 1e-7}} {
		if d := c.got - c.want; d > c.tol || d < -c.tol {
			t.Errorf("metadata %v, docs/executorch-pte.md says %v", c.got, c.want)
		}
	}
}

// program turns a parsed file back into a writer Program: the same
// methods, metadata and context binaries (with their signatures).
func program(t testing.TB, f *pte.File) ptewrite.Program {
	t.Helper()
	var p ptewrite.Program
	ctx := map[*byte]int{}
	for _, m := range f.Methods {
		if _, ok := f.Metadata[m.Name]; ok {
			continue
		}
		wm := ptewrite.Method{Name: m.Name, Values: m.Values, Inputs: m.Inputs, Outputs: m.Outputs,
			Instructions: m.Instructions, Operators: m.Operators}
		for _, d := range m.Delegates {
			i, ok := ctx[&d.Binary[0]]
			if !ok {
				i = len(p.Contexts)
				ctx[&d.Binary[0]] = i
				p.Contexts = append(p.Contexts, ptewrite.Context{Binary: d.Binary, Signature: d.Header.Signature,
					Legacy: d.Header.Len == pte.LegacyPayloadHeaderSize})
			}
			wm.Delegates = append(wm.Delegates, ptewrite.Delegate{Context: i, Options: *d.QNN})
		}
		p.Methods = append(p.Methods, wm)
	}
	p.Metadata = f.Metadata
	return p
}

func write(t testing.TB, p ptewrite.Program) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.pte")
	var b bytes.Buffer
	if err := ptewrite.Write(&b, p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameProgram compares two parsed files method by method, ignoring the
// layout (offsets, method order, compile-spec bytes).
func sameProgram(t *testing.T, got, want *pte.File) {
	t.Helper()
	if len(got.Methods) != len(want.Methods) {
		t.Errorf("%d methods, want %d", len(got.Methods), len(want.Methods))
	}
	for _, w := range want.Methods {
		g := got.Method(w.Name)
		if g == nil {
			t.Errorf("method %s missing", w.Name)
			continue
		}
		if !reflect.DeepEqual(g.Values, w.Values) || !slices.Equal(g.Inputs, w.Inputs) || !slices.Equal(g.Outputs, w.Outputs) ||
			!reflect.DeepEqual(g.Instructions, w.Instructions) || !reflect.DeepEqual(g.Operators, w.Operators) {
			t.Errorf("method %s differs:\n got %+v\nwant %+v", w.Name, g, w)
		}
		if len(g.Delegates) != len(w.Delegates) {
			t.Errorf("method %s: %d delegates, want %d", w.Name, len(g.Delegates), len(w.Delegates))
			continue
		}
		for i, wd := range w.Delegates {
			gd := g.Delegates[i]
			if gd.ID != wd.ID || gd.Location != wd.Location || gd.Index != wd.Index || !reflect.DeepEqual(gd.QNN, wd.QNN) ||
				gd.Header != wd.Header || !bytes.Equal(gd.Binary, wd.Binary) {
				t.Errorf("method %s delegate %d: got %s %v %d %+v %+v, want %s %v %d %+v %+v", w.Name, i,
					gd.ID, gd.Location, gd.Index, gd.QNN, gd.Header, wd.ID, wd.Location, wd.Index, wd.QNN, wd.Header)
			}
			if gd.BinaryOffset%128 != int64(gd.Header.Len)%128 {
				t.Errorf("method %s delegate %d: payload at %d is not 128-aligned", w.Name, i, gd.PayloadOffset)
			}
		}
	}
	if !reflect.DeepEqual(got.Metadata, want.Metadata) {
		t.Errorf("metadata differs:\n got %v\nwant %v", got.Metadata, want.Metadata)
	}
	if !slices.Equal(got.Segments[:1], []pte.DataSegment{{0, 0}}) || !reflect.DeepEqual(got.ConstantSegment, want.ConstantSegment) {
		t.Errorf("constant segment %v %+v, want the empty segment 0", got.Segments, got.ConstantSegment)
	}
}

// The writer reproduces the real file: reading it, writing what was read
// and reading that again gives the same program through the same reader.
func TestWriteRealProgram(t *testing.T) {
	real := open(t, realPTE)
	written := open(t, write(t, program(t, real)))
	sameProgram(t, written, real)
	// The flatbuffer part is smaller (no container metadata strings), the
	// segment data is the same.
	if written.Header.SegmentDataSize != real.Header.SegmentDataSize || written.Size != int64(written.Header.SegmentBase+written.Header.SegmentDataSize) {
		t.Errorf("written segment data %d B (file %d B), real %d B", written.Header.SegmentDataSize, written.Size, real.Header.SegmentDataSize)
	}
	if m := written.Method(pte.MethodDecode); uint64(m.Delegates[0].BinaryOffset) != written.Header.SegmentBase+256 {
		t.Errorf("binary at %d, want segment base %d + 256", m.Delegates[0].BinaryOffset, written.Header.SegmentBase)
	}
}
