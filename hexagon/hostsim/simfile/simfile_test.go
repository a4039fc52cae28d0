package simfile

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/internal/half"
)

var small = Hyper{Hidden: 8, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 4, FFN: 12, Vocab: 40, Ctx: 16, RMSEps: 1e-5, TiedLMHead: true}

// f16 converts small exactly-representable test values to float16 bits.
func f16(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	if b&0x7fffffff == 0 {
		return sign
	}
	exp := int(b>>23&0xff) - 127 + 15
	return sign | uint16(exp)<<10 | uint16(b>>13&0x3ff)
}

func testData(w Weight, i int) []uint16 {
	out := make([]uint16, w.Rows*w.Cols)
	for k := range out {
		out[k] = f16(float32((k*7+i*3)%19-9) / 16)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		format   WeightFormat
		contract Contract
		io, kv   DType
		mask     MaskKind
		scales   Scales // Granite's multipliers: a 144-byte header
	}{
		{"f16/qhexrt/f32", WeightF16, QHexRT, F32, F32, MaskAdditive, Scales{}},
		{"int8/chunked/f16", WeightInt8, Chunked, F16, F16, MaskU16, Scales{}},
		{"f32/chunked/ufixed16", WeightF32, Chunked, UFixed16, F16, MaskAdditive, Scales{}},
		{"f16/chunked/granite", WeightF16, Chunked, F32, F32, MaskAdditive, Scales{Embedding: 12, Attention: 0.0078125, Residual: 0.22, Logits: 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			small := small
			small.Scales = tc.scales
			pre, dec, lm := DefaultGraphs(small, tc.contract, 4, tc.io, tc.kv, tc.mask)
			graphs := []Graph{pre, dec, lm}
			ws := WeightSpecs(small, true, true)
			for i := range ws {
				ws[i].F16 = testData(ws[i], i)
			}
			var buf bytes.Buffer
			if err := Write(&buf, small, graphs, ws, tc.format); err != nil {
				t.Fatal(err)
			}
			f, err := Read(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if f.Hyper != small {
				t.Errorf("hyper = %+v, want %+v", f.Hyper, small)
			}
			if hs := binary.LittleEndian.Uint32(buf.Bytes()[12:]); hs != uint32(small.headerSize()) || (hs == 144) != tc.scales.On() {
				t.Errorf("header size %d with multipliers %+v", hs, tc.scales)
			}
			if f.Size != int64(buf.Len()) {
				t.Errorf("size %d, file %d", f.Size, buf.Len())
			}
			if !reflect.DeepEqual(f.Graphs, graphs) {
				t.Errorf("graphs differ:\n got %+v\nwant %+v", f.Graphs, graphs)
			}
			if len(f.Weights) != len(ws) {
				t.Fatalf("%d weights, want %d", len(f.Weights), len(ws))
			}
			data := buf.Bytes()
			for i, wi := range f.Weights {
				w := ws[i]
				if wi.Name != w.Name || wi.Rows != w.Rows || wi.Cols != w.Cols || wi.Offset%64 != 0 {
					t.Fatalf("weight %d = %+v, want %s [%d,%d] 64-aligned", i, wi, w.Name, w.Rows, w.Cols)
				}
				for k, want := range w.F16 {
					got := decodeWeight(t, data, wi, k)
					tol := float32(0)
					if wi.Format == WeightInt8 {
						tol = float32(math.Float32frombits(binary.LittleEndian.Uint32(data[wi.ScalesOffset+int64(4*(k/w.Cols)):])))/2 + 1e-7
					}
					if d := got - half.ToFloat32(want); d > tol || d < -tol {
						t.Fatalf("%s[%d] = %g, want %g (±%g)", w.Name, k, got, half.ToFloat32(want), tol)
					}
				}
				if wantFmt := storageOf(tc.format, w); wi.Format != wantFmt {
					t.Errorf("%s stored as %d, want %d", w.Name, wi.Format, wantFmt)
				}
			}
		})
	}
}

func decodeWeight(t *testing.T, data []byte, wi WeightInfo, k int) float32 {
	t.Helper()
	switch wi.Format {
	case WeightF16:
		return half.ToFloat32(binary.LittleEndian.Uint16(data[wi.Offset+int64(2*k):]))
	case WeightF32:
		return math.Float32frombits(binary.LittleEndian.Uint32(data[wi.Offset+int64(4*k):]))
	case WeightInt8:
		s := math.Float32frombits(binary.LittleEndian.Uint32(data[wi.ScalesOffset+int64(4*(k/wi.Cols)):]))
		return float32(int8(data[wi.Offset+int64(k)])) * s
	}
	t.Fatalf("format %d", wi.Format)
	return 0
}

func TestStreamingSourceAndProgress(t *testing.T) {
	ws := WeightSpecs(small, true, false)
	next := 0
	var last, total int64
	src := func(i int, w Weight) ([]uint16, error) {
		if i != next || w.Name != ws[i].Name {
			t.Fatalf("Source(%d, %s), want %d in order", i, w.Name, next)
		}
		next++
		return testData(w, i), nil
	}
	_, dec, _ := DefaultGraphs(small, QHexRT, 1, F32, F32, MaskAdditive)
	var buf bytes.Buffer
	err := WriteWith(&buf, small, []Graph{dec}, ws, Options{Format: WeightInt8, Source: src, Progress: func(done, tot int64) {
		if done < last {
			t.Errorf("progress went back: %d after %d", done, last)
		}
		last, total = done, tot
	}})
	if err != nil {
		t.Fatal(err)
	}
	if next != len(ws) || last != total || total != int64(buf.Len()) {
		t.Errorf("source calls %d/%d, progress %d/%d, file %d", next, len(ws), last, total, buf.Len())
	}
}

func TestWriteErrors(t *testing.T) {
	pre, _, _ := DefaultGraphs(small, QHexRT, 4, F32, F32, MaskAdditive)
	good := WeightSpecs(small, true, false)
	for i := range good {
		good[i].F16 = testData(good[i], i)
	}
	badFixed := pre
	badFixed.Inputs = append([]Tensor{{Name: "x", DType: UFixed16, Dims: []int{4, 8}}}, pre.Inputs[1:]...)
	badType := pre
	badType.Outputs = append([]Tensor{{Name: "y", DType: 0x0032, Dims: []int{4, 8}}}, pre.Outputs[1:]...)
	short := append([]Weight{}, good...)
	short[1].F16 = short[1].F16[:3]
	noData := append([]Weight{}, good...)
	noData[0].F16 = nil
	badHyper := small
	badHyper.KVHeads = 3
	for _, tc := range []struct {
		name   string
		h      Hyper
		graphs []Graph
		ws     []Weight
		want   string
	}{
		{"no graphs", small, nil, good, "no graphs"},
		{"fixed without scale", small, []Graph{badFixed}, good, "scale"},
		{"unsupported type", small, []Graph{badType}, good, "unsupported data type"},
		{"short data", small, []Graph{pre}, short, "values"},
		{"no data", small, []Graph{pre}, noData, "no data"},
		{"bad hyper", badHyper, []Graph{pre}, good, "kv heads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(&bytes.Buffer{}, tc.h, tc.graphs, tc.ws, WeightF16)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDefaultGraphsShapes(t *testing.T) {
	kv := small.KVDim()
	for _, tc := range []struct {
		contract  Contract
		window    int
		maskDims  []int
		preInputs int
	}{
		{QHexRT, 4, []int{4, 4}, 4},
		{Chunked, 4, []int{4, small.Ctx + 4}, 4 + 2*small.Layers},
	} {
		pre, dec, lm := DefaultGraphs(small, tc.contract, tc.window, F32, F16, MaskAdditive)
		if len(pre.Inputs) != tc.preInputs || !reflect.DeepEqual(pre.Inputs[3].Dims, tc.maskDims) || pre.Inputs[3].Name != "cmask" {
			t.Errorf("contract %d: prefill inputs %+v", tc.contract, pre.Inputs)
		}
		if len(pre.Outputs) != 1+2*small.Layers || !reflect.DeepEqual(pre.Outputs[1].Dims, []int{tc.window, kv}) || pre.Outputs[1].DType != F16 {
			t.Errorf("contract %d: prefill outputs %+v", tc.contract, pre.Outputs)
		}
		if !reflect.DeepEqual(dec.Inputs[3].Dims, []int{small.Ctx}) || dec.Inputs[4].Name != "past_k_0" ||
			!reflect.DeepEqual(dec.Inputs[4].Dims, []int{small.Ctx, kv}) {
			t.Errorf("decode inputs %+v", dec.Inputs)
		}
		if len(lm.Inputs) != 1 || len(lm.Outputs) != 1 || lm.Outputs[0].Dims[1] != small.Vocab || lm.Kind != LMHead {
			t.Errorf("lmhead %+v", lm)
		}
	}
	_, dec, _ := DefaultGraphs(small, QHexRT, 4, UFixed16, F16, MaskU16)
	// code 65535 dequantises to 0 (attend), code 0 to −65535 (blocked)
	if m := dec.Inputs[3]; m.DType != UFixed16 || m.Offset != -65535 || m.Scale != 1 || m.Role != RoleCMask {
		t.Errorf("u16 mask tensor %+v", m)
	}
	if k, v := dec.Inputs[6], dec.Outputs[4]; k.Role != RolePastK || k.Layer != 1 || v.Role != RoleNewV || v.Layer != 1 {
		t.Errorf("roles: %+v, %+v", k, v)
	}
	if lm := lm0(); lm.Inputs[0].Role != RoleX || lm.Outputs[0].Role != RoleLogits {
		t.Errorf("lmhead roles %+v", lm)
	}
	if x := dec.Inputs[0]; x.Scale <= 0 || x.Offset != -32768 {
		t.Errorf("ufixed16 x tensor %+v", x)
	}
}

func lm0() Graph {
	_, _, lm := DefaultGraphs(small, QHexRT, 4, F32, F32, MaskAdditive)
	return lm
}

func TestReadRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{[]byte("short"), bytes.Repeat([]byte{0}, 200), append([]byte("HSIMCTX\x00\x07\x00\x00\x00"), make([]byte, 120)...)} {
		if _, err := Read(bytes.NewReader(b)); err == nil {
			t.Errorf("Read(%q...) succeeded", b[:min(len(b), 12)])
		}
	}
}

func TestSourceRowsMatchesInMemory(t *testing.T) {
	defer func(v int) { chunkValues = v }(chunkValues)
	chunkValues = 20 // 2 rows of 8 values per fetch, 1 row for wider tensors
	_, dec, lm := DefaultGraphs(small, QHexRT, 1, F32, F32, MaskAdditive)
	specs := WeightSpecs(small, true, true)
	full := make([]Weight, len(specs))
	for i, w := range specs {
		full[i] = w
		full[i].F16 = testData(w, i)
	}
	for _, f := range []WeightFormat{WeightF16, WeightInt8, WeightF32} {
		var a, b bytes.Buffer
		if err := Write(&a, small, []Graph{dec, lm}, full, f); err != nil {
			t.Fatal(err)
		}
		calls := 0
		err := WriteWith(&b, small, []Graph{dec, lm}, specs, Options{Format: f, SourceRows: func(i int, w Weight, row0 int, dst []uint16) error {
			calls++
			if len(dst)%w.Cols != 0 || row0*w.Cols+len(dst) > len(full[i].F16) {
				t.Fatalf("SourceRows(%s, %d, %d values)", w.Name, row0, len(dst))
			}
			copy(dst, full[i].F16[row0*w.Cols:])
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("format %d: SourceRows output differs from in-memory output", f)
		}
		if calls <= len(specs) {
			t.Errorf("format %d: %d SourceRows calls for %d weights, want chunking", f, calls, len(specs))
		}
	}
}
