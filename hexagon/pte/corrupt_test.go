package pte_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/pte"
	"github.com/hexserve/hexserve/hexagon/pte/ptewrite"
)

// shardedProgram is a two-shard static-llama layout as ExecuTorch's sharded
// exports have it: per method, DelegateCall(shard 0), a llama::fallback
// identity copy of the hidden state, DelegateCall(shard 1); the delegate at
// index i of both methods shares context i. Context 1 uses the legacy
// 20-byte payload header.
func shardedProgram() ptewrite.Program {
	opts := pte.HTPOptions(pte.SM8750, pte.V79)
	opts.UseMultiContexts, opts.MaxSpillFill = true, 1<<20
	method := func(name string, ar int32) ptewrite.Method {
		return ptewrite.Method{
			Name: name,
			Values: []pte.Value{
				pte.TensorValue(pte.Int, 1, ar),               // 0 tokens
				pte.TensorValue(pte.UInt16, 1, 1, ar, 64),     // 1 mask
				pte.TensorValue(pte.Int, 1, ar),               // 2 input_pos
				pte.TensorValue(pte.UInt16, 1, ar, 16),        // 3 hidden out of shard 0
				pte.TensorValue(pte.UInt16, 1, ar, 16),        // 4 hidden into shard 1
				pte.TensorValue(pte.UInt16, 1, ar, 100),       // 5 logits
				pte.TensorValue(pte.Byte, 1, 2, 8, 64-ar),     // 6 K cache
				pte.TensorValue(pte.Byte, 1, 2, 8, ar),        // 7 new K
				{Kind: pte.KindNull},                          // 8
				{Kind: pte.KindIntList, List: []int64{1, -1}}, // 9
			},
			Inputs:  []int32{0, 1, 2, 6},
			Outputs: []int32{5, 7},
			Instructions: []pte.Instruction{
				{Kind: pte.DelegateCall, Delegate: 0, Args: []int32{0, 1, 2, 6, 3, 7}},
				{Kind: pte.KernelCall, Op: 0, Args: []int32{3, 4, 4}},
				{Kind: pte.DelegateCall, Delegate: 1, Args: []int32{4, 1, 2, 5}},
			},
			Operators: []pte.Operator{pte.FallbackOp},
			Delegates: []ptewrite.Delegate{{Context: 0, Options: opts}, {Context: 1, Options: opts}},
		}
	}
	return ptewrite.Program{
		Methods: []ptewrite.Method{method(pte.MethodPrefill, 16), method(pte.MethodDecode, 1)},
		Metadata: map[string][]pte.Value{
			"get_vocab_size": {pte.IntValue(100)}, "get_logits_scale": {pte.DoubleValue(0.25)},
			"get_use_kv_cache": {pte.BoolValue(true)}, "get_kv_output_0_quant_attr": {pte.DoubleValue(0.5), pte.IntValue(128), pte.StringValue("torch.uint8")},
		},
		Contexts: []ptewrite.Context{
			{Binary: bytes.Repeat([]byte("shard zero "), 40), Signature: 42},
			{Binary: []byte("shard one context binary"), Legacy: true},
		},
	}
}

func TestWriteShardedRoundTrip(t *testing.T) {
	p := shardedProgram()
	f := open(t, write(t, p))
	if len(f.Segments) != 3 || f.Segments[0] != (pte.DataSegment{}) {
		t.Fatalf("segments %v, want the empty constant segment and one per context", f.Segments)
	}
	for _, wm := range p.Methods {
		m := f.Method(wm.Name)
		if m == nil {
			t.Fatalf("method %s missing", wm.Name)
		}
		if len(m.Values) != len(wm.Values) || len(m.Instructions) != 3 || m.Instructions[1].Kind != pte.KernelCall ||
			m.Operators[0] != pte.FallbackOp || !slices.Equal(m.Instructions[1].Args, []int32{3, 4, 4}) {
			t.Errorf("%s: %+v", m.Name, m)
		}
		if m.Values[9].Kind != pte.KindIntList || !slices.Equal(m.Values[9].List, []int64{1, -1}) || m.Values[8].Kind != pte.KindNull {
			t.Errorf("%s: values 8, 9 = %+v %+v", m.Name, m.Values[8], m.Values[9])
		}
		for i, d := range m.Delegates {
			c := p.Contexts[i]
			if d.Index != uint32(i+1) || !bytes.Equal(d.Binary, c.Binary) || *d.QNN != wm.Delegates[i].Options {
				t.Errorf("%s delegate %d: segment %d, binary %q, options %+v", m.Name, i, d.Index, d.Binary, d.QNN)
			}
			wantLen := map[bool]int{false: 256, true: 20}[c.Legacy]
			if d.Header.Len != wantLen || d.BinaryOffset != d.PayloadOffset+int64(wantLen) || d.PayloadOffset%128 != 0 {
				t.Errorf("%s delegate %d: header %+v at %d, binary at %d", m.Name, i, d.Header, d.PayloadOffset, d.BinaryOffset)
			}
		}
		if m.Delegates[0].Header.Signature != 42 || m.Delegates[1].Header.Signature <= 0 {
			t.Errorf("signatures %d, %d; want 42 and a derived positive one", m.Delegates[0].Header.Signature, m.Delegates[1].Header.Signature)
		}
	}
	if got := f.Metadata["get_kv_output_0_quant_attr"]; len(got) != 3 || got[2].String != "torch.uint8" || got[0].Double != 0.5 {
		t.Errorf("metadata %+v", got)
	}
	if len(f.Metadata) != 4 {
		t.Errorf("metadata %v, want 4 methods", f.Metadata)
	}
}

func TestWriteRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *ptewrite.Program)
		want string
	}{
		{"unnamed method", func(p *ptewrite.Program) { p.Methods[0].Name = "" }, "no name"},
		{"duplicate method", func(p *ptewrite.Program) { p.Methods[1].Name = p.Methods[0].Name }, "listed twice"},
		{"output index", func(p *ptewrite.Program) { p.Methods[0].Outputs = []int32{99} }, "output index 99"},
		{"delegate index", func(p *ptewrite.Program) { p.Methods[0].Instructions[0].Delegate = 5 }, "delegate 5 of 2"},
		{"operator index", func(p *ptewrite.Program) { p.Methods[0].Instructions[1].Op = 1 }, "operator 1 of 1"},
		{"context index", func(p *ptewrite.Program) { p.Methods[0].Delegates[1].Context = 2 }, "context 2 of 2"},
		{"tensor metadata", func(p *ptewrite.Program) {
			p.Metadata["get_x"] = []pte.Value{pte.TensorValue(pte.Int, 1)}
		}, "not a constant"},
		{"move call", func(p *ptewrite.Program) { p.Methods[0].Instructions[1].Kind = pte.MoveCall }, "MoveCall is not written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := shardedProgram()
			tc.edit(&p)
			err := ptewrite.Write(new(bytes.Buffer), p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Write: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// patch returns a copy of b with every occurrence of old replaced (old must
// occur).
func patch(t *testing.T, b []byte, old, new []byte) []byte {
	t.Helper()
	if !bytes.Contains(b, old) {
		t.Fatalf("% x not found", old)
	}
	return bytes.ReplaceAll(b, old, new)
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// TestCorruptFiles: each corruption of the real file gets its own error
// naming the file.
func TestCorruptFiles(t *testing.T) {
	real, err := os.ReadFile(realPTE)
	if err != nil {
		t.Fatal(err)
	}
	set := func(off int, v []byte) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			b := bytes.Clone(real)
			copy(b[off:], v)
			return b
		}
	}
	prog := func(old, new []byte) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			b := bytes.Clone(real)
			copy(b[40:], patch(t, b[40:18688], old, new)) // after the file header
			return b
		}
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T) []byte
		want string
	}{
		{"empty", func(*testing.T) []byte { return nil }, "0 bytes is too short"},
		{"identifier", set(4, []byte("ET11")), `file identifier "ET11" is not ET12`},
		{"extended header length", set(12, le32(8)), "extended header length 8 is invalid"},
		{"truncated in the program", func(*testing.T) []byte { return real[:10000] }, "program_size 18688 does not fit the 10000-byte file"},
		{"truncated in the segments", func(*testing.T) []byte { return real[:len(real)-100] }, "segment_data_size 1331456 = 1350144, but the file has 1350044 bytes"},
		{"trailing bytes", func(*testing.T) []byte { return append(bytes.Clone(real), 0) }, "but the file has 1350145 bytes"},
		{"segment base before program end", set(24, le64(100)), "segment_base_offset 100 is not between program_size 18688"},
		{"root offset", set(0, le32(1<<30)), "root table offset 1073741824 is outside"},
		{"root vtable", set(60, le32(1<<31-1)), "corrupt program flatbuffer: Program: vtable offset"},
		{"segment size", prog(le64(1331456), le64(1331457)), "segment 1 (offset 0, size 1331457) ends past the end"},
		{"payload magic", set(18688, le32(0x1234ABCD)), "magic 0x1234ABCD is not the context protocol's 0x5678ABCD"},
		{"payload size", set(18688+12, le64(1331201)), "QNN payload of 1331456 bytes does not hold a 1331201-byte context binary"},
		{"missing prefill_forward", prog([]byte("prefill_forward"), []byte("prefill_forwarX")), "method prefill_forward is missing"},
		{"missing kv_forward", prog([]byte("\x00kv_forward"), []byte("\x00kv_forwarX")), "method kv_forward is missing"},
		{"not a QNN delegate", prog([]byte("QnnBackend"), []byte("XnnBackend")), `calls delegate 0 of backend "XnnBackend", not QnnBackend`},
		{"compile spec root offset", func(t *testing.T) []byte {
			// The first plan's qnn_compile_spec bytes: point their root
			// table past their end.
			spec := open(t, realPTE).Methods[0].Delegates[0].CompileSpecs[0].Value
			b := bytes.Clone(real)
			at := bytes.Index(b[:18688], spec)
			if at < 0 {
				t.Fatal("compile spec bytes not found")
			}
			copy(b[at:], le32(4096))
			return b
		}, "delegate 0: qnn_compile_spec: corrupt QnnExecuTorchOptions: QnnExecuTorchOptions offset points past the compile spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/bad.pte"
			if err := os.WriteFile(path, tc.make(t), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := pte.Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("Open succeeded, want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open: %v\nwant an error naming %s and containing %q", err, path, tc.want)
			}
		})
	}
}

// FuzzParse feeds mutated .pte files to the reader: it must return an
// error or a file whose slices are consistent, never panic.
func FuzzParse(f *testing.F) {
	// The real file's program (its 1.3 MB context binary cut to 64 bytes so
	// that mutations stay fast), the real file truncated after the payload
	// header, and the sharded layout.
	real := open(f, realPTE)
	small := program(f, real)
	small.Contexts[0].Binary = small.Contexts[0].Binary[:64]
	raw, err := os.ReadFile(realPTE)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw[:18688+512])
	for _, p := range []ptewrite.Program{small, shardedProgram()} {
		var b bytes.Buffer
		if err := ptewrite.Write(&b, p); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := pte.Parse("fuzz.pte", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "pte: fuzz.pte: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, m := range file.Methods {
			for _, d := range m.Delegates {
				if d.ID == pte.QNNBackendID && uint64(len(d.Binary)) != d.Header.Size {
					t.Fatalf("%s: binary of %d bytes, header says %d", m.Name, len(d.Binary), d.Header.Size)
				}
			}
		}
		if file.Method(pte.MethodPrefill) == nil || file.Method(pte.MethodDecode) == nil {
			t.Fatal("parsed without the static-llama methods")
		}
	})
}
