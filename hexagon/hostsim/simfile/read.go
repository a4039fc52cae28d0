package simfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/hexserve/hexserve/internal/rope"
)

// WeightInfo describes one stored weight.
type WeightInfo struct {
	Name                       string
	Format                     WeightFormat
	Rows, Cols                 int
	Offset, Size, ScalesOffset int64
}

// File is the decoded header, graphs and weight index of a context binary.
type File struct {
	Hyper   Hyper
	Graphs  []Graph
	Weights []WeightInfo
	Size    int64 // total size the header declares
}

// Read decodes the header, graphs and weight index from r (weight data is not read).
func Read(r io.ReaderAt) (*File, error) {
	hdr := make([]byte, headerSize)
	if _, err := r.ReadAt(hdr, 0); err != nil {
		return nil, fmt.Errorf("simfile: reading header: %w", err)
	}
	if string(hdr[:8]) != string(magic[:]) {
		return nil, errors.New("simfile: not a hostsim context binary")
	}
	le := binary.LittleEndian
	if v := le.Uint32(hdr[8:]); v != version {
		return nil, fmt.Errorf("simfile: unsupported version %d", v)
	}
	u := func(off int) int { return int(le.Uint32(hdr[off:])) }
	f32 := func(off int) float32 { return math.Float32frombits(le.Uint32(hdr[off:])) }
	f := &File{Hyper: Hyper{Hidden: u(16), Layers: u(20), Heads: u(24), KVHeads: u(28), HeadDim: u(32), FFN: u(36),
		Vocab: u(40), Ctx: u(44), RMSEps: math.Float32frombits(le.Uint32(hdr[48:])), TiedLMHead: le.Uint32(hdr[52:])&1 != 0,
		QKNorm: le.Uint32(hdr[52:])&2 != 0, QKVBias: le.Uint32(hdr[52:])&4 != 0,
		FirstLayer: u(96), Shards: u(100), Rope: Rope{Theta: f32(104), Scaling: &rope.Scaling{Type: rope.TypeLlama3,
			Factor: float64(f32(108)), LowFreqFactor: float64(f32(112)), HighFreqFactor: float64(f32(116)), OriginalMaxPositions: u(120)}}}}
	if f.Hyper.Rope.Theta == 0 && f32(108) == 0 {
		f.Hyper.Rope = Rope{}
	} else if le.Uint32(hdr[52:])&flagLongRoPE != 0 {
		f.Hyper.Rope.Scaling = &rope.Scaling{Type: rope.TypeLongRoPE, AttentionFactor: float64(f32(108)), OriginalMaxPositions: u(120)}
	}
	if le.Uint32(hdr[52:])&flagScales != 0 {
		var sc [16]byte
		if _, err := r.ReadAt(sc[:], headerSize); err != nil {
			return nil, fmt.Errorf("simfile: reading the multipliers: %w", err)
		}
		g := func(off int) float32 { return math.Float32frombits(le.Uint32(sc[off:])) }
		f.Hyper.Scales = Scales{Embedding: g(0), Attention: g(4), Residual: g(8), Logits: g(12)}
	}
	ng, nw := u(56), u(60)
	goff, woff, doff := int64(le.Uint64(hdr[64:])), int64(le.Uint64(hdr[72:])), int64(le.Uint64(hdr[80:]))
	f.Size = int64(le.Uint64(hdr[88:]))
	if goff > woff || woff > doff || doff > f.Size || ng > 64 {
		return nil, errors.New("simfile: corrupt header")
	}
	tables := make([]byte, doff-goff)
	if _, err := r.ReadAt(tables, goff); err != nil {
		return nil, fmt.Errorf("simfile: reading tables: %w", err)
	}
	rd := &ler{b: tables}
	for range ng {
		g := Graph{Name: rd.str()}
		g.Kind, g.Contract, g.Window = Kind(rd.u32()), Contract(rd.u32()), int(rd.u32())
		g.Mask, g.KV = MaskKind(rd.u32()), DType(rd.u32())
		nin, nout := int(rd.u32()), int(rd.u32())
		if rd.err != nil || nin > 4096 || nout > 4096 {
			return nil, errors.New("simfile: corrupt graph table")
		}
		for i := range nin + nout {
			t := Tensor{Name: rd.str(), Role: Role(rd.u32()), Layer: int(rd.u32())}
			t.DType, t.Scale, t.Offset = DType(rd.u32()), math.Float32frombits(rd.u32()), int32(rd.u32())
			rank := int(rd.u32())
			if rd.err != nil || rank > 8 {
				return nil, errors.New("simfile: corrupt tensor table")
			}
			for range rank {
				t.Dims = append(t.Dims, int(rd.u32()))
			}
			if i < nin {
				g.Inputs = append(g.Inputs, t)
			} else {
				g.Outputs = append(g.Outputs, t)
			}
		}
		f.Graphs = append(f.Graphs, g)
	}
	rd.pos = int(woff - goff)
	for range nw {
		w := WeightInfo{Name: rd.str(), Format: WeightFormat(rd.u32()), Rows: int(rd.u32()), Cols: int(rd.u32())}
		w.Offset, w.Size, w.ScalesOffset = int64(rd.u64()), int64(rd.u64()), int64(rd.u64())
		f.Weights = append(f.Weights, w)
	}
	if rd.err != nil {
		return nil, rd.err
	}
	return f, nil
}

type ler struct {
	b   []byte
	pos int
	err error
}

func (r *ler) take(n int) []byte {
	if r.err != nil || n < 0 || r.pos+n > len(r.b) {
		r.err = errors.New("simfile: truncated tables")
		return make([]byte, max(n, 0))
	}
	p := r.b[r.pos : r.pos+n]
	r.pos += n
	return p
}
func (r *ler) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *ler) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *ler) str() string {
	n := int(r.u32())
	if n > 4096 {
		r.err = errors.New("simfile: corrupt string")
		return ""
	}
	s := string(r.take(n))
	r.take((4 - n%4) % 4)
	return s
}
