// Package simfile writes and reads hostsim context binaries: the stand-in for
// HTP context binaries that hostsim's libQnnHtp.so / libQnnSystem.so load
// (format: hexagon/hostsim/FORMAT.md). Writing streams the weights one tensor
// at a time, so a 1B-shaped model never needs to be in memory twice.
package simfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/hexserve/hexserve/internal/half"
	"github.com/hexserve/hexserve/internal/rope"
)

// DType is a QNN data type code (Qnn_DataType_t).
type DType uint32

// The data types hostsim accepts for graph I/O.
const (
	F32      DType = 0x0232
	F16      DType = 0x0216
	UFixed16 DType = 0x0416
	SFixed16 DType = 0x0316
	UFixed8  DType = 0x0408
	UInt16   DType = 0x0116
	Int32    DType = 0x0032 // ExecuTorch graphs' tokens and input_pos, Genie graphs' input_ids only
)

// Size is the element size in bytes (0 if unsupported).
func (d DType) Size() int {
	switch d {
	case F32, Int32:
		return 4
	case F16, UFixed16, SFixed16, UInt16:
		return 2
	case UFixed8:
		return 1
	}
	return 0
}

// Fixed reports whether d is a fixed-point type that needs a scale/offset.
func (d DType) Fixed() bool { return d&0xff00 == 0x0300 || d&0xff00 == 0x0400 }

// Kind is what a graph computes.
type Kind uint32

// Graph kinds.
const (
	Prefill Kind = 0
	Decode  Kind = 1
	LMHead  Kind = 2
	// ETPrefill and ETDecode are ExecuTorch static-llama graphs (prefill_forward, kv_forward); see ETGraphs.
	ETPrefill Kind = 3
	ETDecode  Kind = 4
	// Genie is a Qualcomm AI Hub Genie graph (prompt_ar{A}_cl{C}_{k}_of_{N} or token_ar1_…); see GeniePart.
	Genie Kind = 5
)

// Contract is the prefill graph contract (docs/architecture.md, "The graph contract").
type Contract uint32

// Contracts.
const (
	QHexRT  Contract = 0
	Chunked Contract = 1
)

// MaskKind is the attention mask encoding.
type MaskKind uint32

// Mask encodings: additive (0 attend, ≤ −1000 blocked) or u16 (UFIXED_POINT_16
// codes 65535 attend, 0 blocked with DefaultGraphs' scale 1, offset −65535).
const (
	MaskAdditive MaskKind = 0
	MaskU16      MaskKind = 1
)

// WeightFormat is how weights are stored in the file.
type WeightFormat uint32

// Weight storage formats. With Int8, 2-D tensors are quantised per output row;
// 1-D tensors stay float16.
const (
	WeightF16  WeightFormat = 1
	WeightInt8 WeightFormat = 2
	WeightF32  WeightFormat = 3
)

// Hyper holds the model hyper-parameters.
type Hyper struct {
	Hidden, Layers, Heads, KVHeads, HeadDim, FFN, Vocab, Ctx int
	RMSEps                                                   float32
	TiedLMHead                                               bool
	// QKNorm is Qwen3's per-head RMSNorm of q and k before RoPE (header flag bit 1, weights
	// self_attn.q_norm/k_norm [1,HeadDim]); QKVBias Qwen2's q/k/v biases (bit 2, weights
	// self_attn.{q,k,v}_proj.bias [1,out]).
	QKNorm, QKVBias bool
	// Scales are Granite's multipliers (header flag bit 4, a 144-byte header); the zero value is
	// none (Llama's arithmetic).
	Scales Scales
	// ExecuTorch graphs only (header bytes 96..123): Layers is then this shard's layer count,
	// FirstLayer the model layer it starts at, Shards the number of shards, and Rope the RoPE the
	// graphs compute themselves.
	FirstLayer, Shards int
	Rope               Rope
}

// Scales are Granite's multipliers: the embedding rows are multiplied by Embedding, the attention
// scores by Attention (in place of 1/√head_dim), each residual branch by Residual, and the logits
// divided by Logits (config.json's logits_scaling).
type Scales struct {
	Embedding, Attention, Residual, Logits float32
}

// On reports whether s is set.
func (s Scales) On() bool { return s != Scales{} }

// headerSize is the size of h's file header: 144 with the multipliers, else 128.
func (h Hyper) headerSize() int64 {
	if h.Scales.On() {
		return headerSize + 16
	}
	return headerSize
}

// Rope is the RoPE an ExecuTorch graph computes itself: theta and the scaling (nil: plain). The
// header holds theta and a llama3 scaling's parameters (plain RoPE: factor 1, low 1, high 4,
// original 8192), or, under LongRoPE (flag bit 3), the attention factor and the original context,
// with the per-frequency divisors for the file's context in the first shard's weight
// RopeExtWeight. The zero Rope (graphs that take cos/sin as inputs) leaves the fields zero.
type Rope struct {
	Theta   float32
	Scaling *rope.Scaling
}

// RopeExtWeight is the name of LongRoPE's per-frequency divisors [1, head_dim/2] (float32).
const RopeExtWeight = "rope.ext_factor"

// header returns the header's factor, low, high and original fields and flag bits for r (all
// zero for the zero Rope: graphs that take cos/sin as inputs).
func (r Rope) header() (f [3]float32, orig int, flags uint32) {
	switch s := r.Scaling; s.Kind() {
	case "":
		if r.Theta == 0 {
			return f, 0, 0
		}
	case rope.TypeLlama3:
		return [3]float32{float32(s.Factor), float32(s.LowFreqFactor), float32(s.HighFreqFactor)}, s.OriginalMaxPositions, 0
	case rope.TypeLongRoPE:
		return [3]float32{float32(s.Attention()), 0, 0}, s.OriginalMaxPositions, flagLongRoPE
	}
	return [3]float32{1, 1, 4}, 8192, 0
}

// KVDim is KVHeads·HeadDim.
func (h Hyper) KVDim() int { return h.KVHeads * h.HeadDim }

// Role is what a graph tensor is, whatever its name (FORMAT.md).
type Role uint32

// Tensor roles. PastK, PastV, NewK and NewV are per layer (Tensor.Layer).
const (
	RoleX Role = iota
	RoleCos
	RoleSin
	RoleCMask
	RoleY
	RolePastK
	RolePastV
	RoleNewK
	RoleNewV
	RoleLogits
)

// Tensor is one graph input or output.
type Tensor struct {
	Name   string
	Role   Role
	Layer  int // layer index for the per-layer roles, else 0
	DType  DType
	Dims   []int
	Scale  float32 // fixed point only: real = (q + Offset)·Scale
	Offset int32
}

// Graph is one graph of the context binary.
type Graph struct {
	Name            string
	Kind            Kind
	Contract        Contract
	Window          int // rows per call (AR); 1 for decode and lm-head
	Mask            MaskKind
	KV              DType
	Inputs, Outputs []Tensor
}

// Weight is one weight tensor: HF name, shape [Rows, Cols] (a 1-D tensor of n
// values is Rows 1, Cols n) and, optionally, its float16 bits row-major, or float32 values
// (stored as float32 whatever the file's format: LongRoPE's divisors are not float16 values).
type Weight struct {
	Name       string
	Rows, Cols int
	F16        []uint16
	F32        []float32
}

// Options control Write.
type Options struct {
	Format WeightFormat
	// Source supplies weight i's float16 data when Weight.F16 is nil; it is
	// called once per weight, in order, and the slice is not retained.
	Source func(i int, w Weight) ([]uint16, error)
	// SourceRows, if set (and Weight.F16 is nil), is preferred to Source: it fills
	// dst with rows [row0, row0+len(dst)/Cols) of weight i, so a large tensor
	// (a 1B model's embedding) is written in bounded memory.
	SourceRows func(i int, w Weight, row0 int, dst []uint16) error
	// Progress, if set, is called after each weight with bytes written so far and the total.
	Progress func(done, total int64)
}

// flagLongRoPE is header flag bit 3: the ExecuTorch graphs compute LongRoPE (Rope).
const flagLongRoPE = 8

// flagScales is header flag bit 4: the header is 144 bytes, with Granite's multipliers (Scales).
const flagScales = 16

const (
	headerSize = 128
	align      = 64
)

var magic = [8]byte{'H', 'S', 'I', 'M', 'C', 'T', 'X', 0}

// version is the format version Write writes and Read accepts.
const version = 2

// Write writes a context binary with weights taken from Weight.F16.
func Write(w io.Writer, h Hyper, graphs []Graph, weights []Weight, q WeightFormat) error {
	return WriteWith(w, h, graphs, weights, Options{Format: q})
}

type entry struct {
	storage            WeightFormat
	off, size, scalesO int64
}

func storageOf(f WeightFormat, w Weight) WeightFormat {
	if w.F32 != nil {
		return WeightF32
	}
	if f == WeightInt8 && w.Rows == 1 {
		return WeightF16
	}
	return f
}

func pad(n int64) int64 { return (n + align - 1) &^ (align - 1) }

func strLen(s string) int64 { return 4 + int64(len(s)+3)&^3 }

// WriteWith writes a context binary, streaming weight data through opt.Source.
func WriteWith(w io.Writer, h Hyper, graphs []Graph, weights []Weight, opt Options) error {
	if opt.Format == 0 {
		opt.Format = WeightF16
	}
	if opt.Format < WeightF16 || opt.Format > WeightF32 {
		return fmt.Errorf("simfile: unknown weight format %d", opt.Format)
	}
	if err := h.validate(); err != nil {
		return err
	}
	if len(graphs) == 0 {
		return errors.New("simfile: no graphs")
	}
	gsize, dataOff, entries, total, err := layout(h, graphs, weights, opt.Format)
	if err != nil {
		return err
	}

	bw := bufio.NewWriterSize(w, 1<<20)
	wr := &lew{w: bw}
	wr.header(h, len(graphs), len(weights), gsize, dataOff, total)
	for _, g := range graphs {
		wr.graph(g)
	}
	for i, wt := range weights {
		e := entries[i]
		wr.str(wt.Name)
		wr.u32(uint32(e.storage))
		wr.u32(uint32(wt.Rows))
		wr.u32(uint32(wt.Cols))
		wr.u64(uint64(e.off))
		wr.u64(uint64(e.size))
		wr.u64(uint64(e.scalesO))
	}
	wr.zeros(int(dataOff - wr.n))
	for i, wt := range weights {
		if wr.err != nil {
			return wr.err
		}
		if err := writeWeight(wr, i, wt, entries[i], opt); err != nil {
			return err
		}
		if opt.Progress != nil {
			opt.Progress(wr.n, total)
		}
	}
	if wr.err == nil && wr.n != total {
		return fmt.Errorf("simfile: internal error: wrote %d bytes, planned %d", wr.n, total)
	}
	if wr.err != nil {
		return wr.err
	}
	return bw.Flush()
}

// SizeWith is the size of the file WriteWith writes for the same arguments,
// without writing it (a container can lay out its segments first and then
// stream the file into place).
func SizeWith(h Hyper, graphs []Graph, weights []Weight, f WeightFormat) (int64, error) {
	if f == 0 {
		f = WeightF16
	}
	if err := h.validate(); err != nil {
		return 0, err
	}
	_, _, _, total, err := layout(h, graphs, weights, f)
	return total, err
}

// layout is the file's layout: header, graphs, index, then data.
func layout(h Hyper, graphs []Graph, weights []Weight, f WeightFormat) (gsize, dataOff int64, entries []entry, total int64, err error) {
	if gsize, err = graphsSize(graphs); err != nil {
		return 0, 0, nil, 0, err
	}
	isize := int64(0)
	for _, wt := range weights {
		if wt.Rows <= 0 || wt.Cols <= 0 {
			return 0, 0, nil, 0, fmt.Errorf("simfile: weight %s: bad shape [%d,%d]", wt.Name, wt.Rows, wt.Cols)
		}
		isize += strLen(wt.Name) + 3*4 + 3*8
	}
	dataOff = pad(h.headerSize() + gsize + isize)
	entries, total = layoutWeights(f, weights, dataOff)
	return gsize, dataOff, entries, total, nil
}

// graphsSize checks the graphs' tensors and returns the size of their
// section.
func graphsSize(graphs []Graph) (int64, error) {
	gsize := int64(0)
	for _, g := range graphs {
		gsize += strLen(g.Name) + 7*4
		for _, t := range append(append([]Tensor{}, g.Inputs...), g.Outputs...) {
			if t.DType.Size() == 0 || (t.DType == Int32 && g.Kind != ETPrefill && g.Kind != ETDecode && g.Kind != Genie) {
				return 0, fmt.Errorf("simfile: graph %s tensor %s: unsupported data type %#x", g.Name, t.Name, uint32(t.DType))
			}
			if t.DType.Fixed() && !(t.Scale > 0) {
				return 0, fmt.Errorf("simfile: graph %s tensor %s: fixed point needs a scale > 0", g.Name, t.Name)
			}
			gsize += strLen(t.Name) + 6*4 + 4*int64(len(t.Dims))
		}
	}
	return gsize, nil
}

// layoutWeights places each weight's data (and int8 scales) from offset
// off, in format f, and returns the entries and the file's total size.
func layoutWeights(f WeightFormat, weights []Weight, off int64) ([]entry, int64) {
	entries := make([]entry, len(weights))
	for i, wt := range weights {
		st := storageOf(f, wt)
		n := int64(wt.Rows) * int64(wt.Cols)
		e := entry{storage: st, off: off}
		switch st {
		case WeightF16:
			e.size = 2 * n
		case WeightF32:
			e.size = 4 * n
		case WeightInt8:
			e.size = n
			e.scalesO = off + pad(n)
			off = e.scalesO + pad(4*int64(wt.Rows)) - pad(e.size)
		}
		off += pad(e.size)
		entries[i] = e
	}
	return entries, off
}

// header writes the file header.
func (wr *lew) header(h Hyper, ngraphs, nweights int, gsize, dataOff, total int64) {
	wr.bytes(magic[:])
	wr.u32(version)
	wr.u32(uint32(h.headerSize()))
	for _, v := range []int{h.Hidden, h.Layers, h.Heads, h.KVHeads, h.HeadDim, h.FFN, h.Vocab, h.Ctx} {
		wr.u32(uint32(v))
	}
	wr.f32(h.RMSEps)
	flags := uint32(0)
	if h.TiedLMHead {
		flags |= 1
	}
	if h.QKNorm {
		flags |= 2
	}
	if h.QKVBias {
		flags |= 4
	}
	if h.Scales.On() {
		flags |= flagScales
	}
	rf, orig, rflags := h.Rope.header()
	wr.u32(flags | rflags)
	wr.u32(uint32(ngraphs))
	wr.u32(uint32(nweights))
	wr.u64(uint64(h.headerSize()))
	wr.u64(uint64(h.headerSize() + gsize))
	wr.u64(uint64(dataOff))
	wr.u64(uint64(total))
	wr.u32(uint32(h.FirstLayer))
	wr.u32(uint32(h.Shards))
	for _, v := range []float32{h.Rope.Theta, rf[0], rf[1], rf[2]} {
		wr.f32(v)
	}
	wr.u32(uint32(orig))
	wr.zeros(4)
	if h.Scales.On() {
		for _, v := range []float32{h.Scales.Embedding, h.Scales.Attention, h.Scales.Residual, h.Scales.Logits} {
			wr.f32(v)
		}
	}
}

// graph writes one graph record and its tensors.
func (wr *lew) graph(g Graph) {
	wr.str(g.Name)
	for _, v := range []uint32{uint32(g.Kind), uint32(g.Contract), uint32(g.Window), uint32(g.Mask), uint32(g.KV),
		uint32(len(g.Inputs)), uint32(len(g.Outputs))} {
		wr.u32(v)
	}
	for _, t := range append(append([]Tensor{}, g.Inputs...), g.Outputs...) {
		wr.str(t.Name)
		wr.u32(uint32(t.Role))
		wr.u32(uint32(t.Layer))
		wr.u32(uint32(t.DType))
		wr.f32(t.Scale)
		wr.u32(uint32(t.Offset))
		wr.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			wr.u32(uint32(d))
		}
	}
}

// chunkValues bounds how many values writeWeight fetches at a time (at least one row).
var chunkValues = 1 << 22

// writeWeight writes one weight's data (and int8 scales) plus padding, fetching rows in chunks.
func writeWeight(wr *lew, i int, wt Weight, e entry, opt Options) error {
	var fetch func(row0, n int) ([]uint16, error)
	switch {
	case wt.F32 != nil:
		if len(wt.F32) != wt.Rows*wt.Cols {
			return fmt.Errorf("simfile: weight %s: %d values, want %d", wt.Name, len(wt.F32), wt.Rows*wt.Cols)
		}
		for _, v := range wt.F32 {
			wr.f32(v)
		}
		wr.zeros(int(e.off + pad(e.size) - wr.n))
		return wr.err
	case wt.F16 != nil:
		if len(wt.F16) != wt.Rows*wt.Cols {
			return fmt.Errorf("simfile: weight %s: %d values, want %d", wt.Name, len(wt.F16), wt.Rows*wt.Cols)
		}
		fetch = func(row0, n int) ([]uint16, error) { return wt.F16[row0*wt.Cols : (row0+n)*wt.Cols], nil }
	case opt.SourceRows != nil:
		buf := make([]uint16, min(wt.Rows, max(1, chunkValues/wt.Cols))*wt.Cols)
		fetch = func(row0, n int) ([]uint16, error) {
			b := buf[:n*wt.Cols]
			return b, opt.SourceRows(i, wt, row0, b)
		}
	case opt.Source != nil:
		data, err := opt.Source(i, wt)
		if err != nil {
			return fmt.Errorf("simfile: weight %s: %w", wt.Name, err)
		}
		if len(data) != wt.Rows*wt.Cols {
			return fmt.Errorf("simfile: weight %s: %d values, want %d", wt.Name, len(data), wt.Rows*wt.Cols)
		}
		fetch = func(row0, n int) ([]uint16, error) { return data[row0*wt.Cols : (row0+n)*wt.Cols], nil }
	default:
		return fmt.Errorf("simfile: weight %s has no data and no Source", wt.Name)
	}
	var scales []float32
	if e.storage == WeightInt8 {
		scales = make([]float32, 0, wt.Rows)
	}
	row := make([]byte, wt.Cols)
	step := min(wt.Rows, max(1, chunkValues/wt.Cols))
	for r0 := 0; r0 < wt.Rows; r0 += step {
		n := min(step, wt.Rows-r0)
		data, err := fetch(r0, n)
		if err != nil {
			return fmt.Errorf("simfile: weight %s: %w", wt.Name, err)
		}
		switch e.storage {
		case WeightF16:
			wr.u16s(data)
		case WeightF32:
			for _, v := range data {
				wr.f32(half.ToFloat32(v))
			}
		case WeightInt8:
			for r := range n {
				scales = append(scales, quantRow(data[r*wt.Cols:(r+1)*wt.Cols], row))
				wr.bytes(row)
			}
		}
	}
	end := e.off + pad(e.size)
	if e.storage == WeightInt8 {
		wr.zeros(int(e.scalesO - wr.n))
		for _, s := range scales {
			wr.f32(s)
		}
		end = e.scalesO + pad(4*int64(wt.Rows))
	}
	wr.zeros(int(end - wr.n))
	return wr.err
}

// quantRow quantises one row to int8 with a symmetric per-row scale.
func quantRow(src []uint16, dst []byte) float32 {
	mx := float32(0)
	for _, v := range src {
		mx = max(mx, float32(math.Abs(float64(half.ToFloat32(v)))))
	}
	if mx == 0 {
		clear(dst)
		return 1
	}
	s := mx / 127
	for i, v := range src {
		q := math.Round(float64(half.ToFloat32(v) / s))
		dst[i] = byte(int8(max(-127, min(127, q))))
	}
	return s
}

func (h Hyper) validate() error {
	switch {
	case h.Hidden <= 0 || h.Heads <= 0 || h.KVHeads <= 0 || h.HeadDim <= 0 || h.Vocab <= 0 || h.Ctx <= 0 || h.Layers < 0:
		return fmt.Errorf("simfile: bad hyper-parameters %+v", h)
	case h.Heads%h.KVHeads != 0 || h.HeadDim%2 != 0:
		return fmt.Errorf("simfile: heads %d not a multiple of kv heads %d, or odd head_dim %d", h.Heads, h.KVHeads, h.HeadDim)
	case h.Layers > 0 && h.FFN <= 0:
		return fmt.Errorf("simfile: bad ffn %d", h.FFN)
	case !(h.RMSEps > 0):
		return fmt.Errorf("simfile: bad rms eps %g", h.RMSEps)
	case h.Scales.On() && !(h.Scales.Embedding > 0 && h.Scales.Attention > 0 && h.Scales.Residual > 0 && h.Scales.Logits > 0):
		return fmt.Errorf("simfile: bad multipliers %+v", h.Scales)
	}
	return nil
}

// WeightSpecs lists the weights (names and shapes, no data) that graphs of the
// given kinds need: layers (prefill/decode: every layer tensor and the final
// norm) and/or the lm-head matrix.
func WeightSpecs(h Hyper, layers, lmhead bool) []Weight {
	var ws []Weight
	H, Q, KV := h.Hidden, h.Heads*h.HeadDim, h.KVDim()
	if layers {
		for i := range h.Layers {
			p := "model.layers." + strconv.Itoa(i) + "."
			ws = append(ws,
				Weight{Name: p + "input_layernorm.weight", Rows: 1, Cols: H},
				Weight{Name: p + "self_attn.q_proj.weight", Rows: Q, Cols: H},
				Weight{Name: p + "self_attn.k_proj.weight", Rows: KV, Cols: H},
				Weight{Name: p + "self_attn.v_proj.weight", Rows: KV, Cols: H},
			)
			if h.QKVBias {
				ws = append(ws, Weight{Name: p + "self_attn.q_proj.bias", Rows: 1, Cols: Q},
					Weight{Name: p + "self_attn.k_proj.bias", Rows: 1, Cols: KV},
					Weight{Name: p + "self_attn.v_proj.bias", Rows: 1, Cols: KV})
			}
			if h.QKNorm {
				ws = append(ws, Weight{Name: p + "self_attn.q_norm.weight", Rows: 1, Cols: h.HeadDim},
					Weight{Name: p + "self_attn.k_norm.weight", Rows: 1, Cols: h.HeadDim})
			}
			ws = append(ws,
				Weight{Name: p + "self_attn.o_proj.weight", Rows: H, Cols: Q},
				Weight{Name: p + "post_attention_layernorm.weight", Rows: 1, Cols: H},
				Weight{Name: p + "mlp.gate_proj.weight", Rows: h.FFN, Cols: H},
				Weight{Name: p + "mlp.up_proj.weight", Rows: h.FFN, Cols: H},
				Weight{Name: p + "mlp.down_proj.weight", Rows: H, Cols: h.FFN},
			)
		}
		ws = append(ws, Weight{Name: "model.norm.weight", Rows: 1, Cols: H})
	}
	if lmhead {
		name := "lm_head.weight"
		if h.TiedLMHead {
			name = "model.embed_tokens.weight"
		}
		ws = append(ws, Weight{Name: name, Rows: h.Vocab, Cols: H})
	}
	return ws
}

// Default symmetric ranges used to pick scale/offset for fixed-point I/O in DefaultGraphs.
var defaultRange = map[string]float32{"x": 1, "cos": 1, "sin": 1, "y": 64, "kv": 32, "logits": 128}

func ioTensor(name string, role Role, layer int, dt DType, rangeKey string, dims ...int) Tensor {
	t := Tensor{Name: name, Role: role, Layer: layer, DType: dt, Dims: dims}
	if dt.Fixed() {
		r := defaultRange[rangeKey]
		switch dt {
		case UFixed16:
			t.Scale, t.Offset = 2*r/65535, -32768
		case SFixed16:
			t.Scale = r / 32767
		case UFixed8:
			t.Scale, t.Offset = 2*r/255, -128
		}
	}
	return t
}

// maskTensor is the cmask input. A u16 mask (and an additive one with u16
// I/O) is UFIXED_POINT_16 with scale 1, offset −65535: code 65535 is 0
// (attend), code 0 is −65535 (blocked); the graph adds the dequantised value.
func maskTensor(mask MaskKind, iot DType, dims ...int) Tensor {
	t := Tensor{Name: "cmask", Role: RoleCMask, DType: iot, Dims: dims}
	switch {
	case mask == MaskU16 || iot == UFixed16:
		t.DType, t.Scale, t.Offset = UFixed16, 1, -65535
	case iot.Fixed():
		t.DType = F16
	}
	return t
}

// DefaultGraphs returns the three graphs with the default tensor names of
// FORMAT.md (named "prefill", "decode" and "lmhead"). io is the data type of
// x, cos, sin, y and logits; kv that of past_*/new_*. Fixed-point types get
// scale/offset from symmetric default ranges (x, cos, sin ±1, y ±64, KV ±32,
// logits ±128); callers may edit them.
func DefaultGraphs(h Hyper, contract Contract, window int, iot, kv DType, mask MaskKind) (prefill, decode, lmhead Graph) {
	H, D, KV, C := h.Hidden, h.HeadDim, h.KVDim(), h.Ctx
	mk := func(name string, kind Kind, ar int, past bool, m Tensor) Graph {
		g := Graph{Name: name, Kind: kind, Window: ar, Mask: mask, KV: kv}
		if kind == Prefill {
			g.Contract = contract
		}
		g.Inputs = []Tensor{ioTensor("x", RoleX, 0, iot, "x", ar, H), ioTensor("cos", RoleCos, 0, iot, "cos", ar, D),
			ioTensor("sin", RoleSin, 0, iot, "sin", ar, D), m}
		g.Outputs = []Tensor{ioTensor("y", RoleY, 0, iot, "y", ar, H)}
		for i := range h.Layers {
			s := strconv.Itoa(i)
			if past {
				g.Inputs = append(g.Inputs, ioTensor("past_k_"+s, RolePastK, i, kv, "kv", C, KV), ioTensor("past_v_"+s, RolePastV, i, kv, "kv", C, KV))
			}
			g.Outputs = append(g.Outputs, ioTensor("new_k_"+s, RoleNewK, i, kv, "kv", ar, KV), ioTensor("new_v_"+s, RoleNewV, i, kv, "kv", ar, KV))
		}
		return g
	}
	if contract == Chunked {
		prefill = mk("prefill", Prefill, window, true, maskTensor(mask, iot, window, C+window))
	} else {
		prefill = mk("prefill", Prefill, window, false, maskTensor(mask, iot, window, window))
	}
	decode = mk("decode", Decode, 1, true, maskTensor(mask, iot, C))
	lmhead = Graph{Name: "lmhead", Kind: LMHead, Window: 1, Mask: mask, KV: kv,
		Inputs:  []Tensor{ioTensor("x", RoleX, 0, iot, "y", 1, H)},
		Outputs: []Tensor{ioTensor("logits", RoleLogits, 0, iot, "logits", 1, h.Vocab)}}
	return prefill, decode, lmhead
}

// lew is a little-endian writer that remembers its first error and offset.
type lew struct {
	w   *bufio.Writer
	n   int64
	err error
	b   [8]byte
}

func (l *lew) bytes(p []byte) {
	if l.err != nil {
		return
	}
	_, l.err = l.w.Write(p)
	l.n += int64(len(p))
}
func (l *lew) u32(v uint32)  { binary.LittleEndian.PutUint32(l.b[:4], v); l.bytes(l.b[:4]) }
func (l *lew) u64(v uint64)  { binary.LittleEndian.PutUint64(l.b[:8], v); l.bytes(l.b[:8]) }
func (l *lew) f32(v float32) { l.u32(math.Float32bits(v)) }
func (l *lew) str(s string) {
	l.u32(uint32(len(s)))
	l.bytes([]byte(s))
	l.zeros((4 - len(s)%4) % 4)
}
func (l *lew) zeros(n int) {
	var z [64]byte
	for n > 0 {
		k := min(n, len(z))
		l.bytes(z[:k])
		n -= k
	}
}
func (l *lew) u16s(v []uint16) {
	buf := make([]byte, 0, 1<<16)
	for len(v) > 0 {
		k := min(len(v), 1<<15)
		buf = buf[:2*k]
		for i := range k {
			binary.LittleEndian.PutUint16(buf[2*i:], v[i])
		}
		l.bytes(buf)
		v = v[k:]
	}
}
