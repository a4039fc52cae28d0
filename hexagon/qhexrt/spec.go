package qhexrt

import (
	"fmt"
	"path/filepath"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/internal/rope"
)

// The graph contracts a bundle may follow (docs/architecture.md, "The graph contract").
const (
	ContractQHexRT  = bundle.ContractQHexRT  // prefill only from position 0, no past inputs
	ContractChunked = bundle.ContractChunked // prefill windows anywhere, over the KV cache
)

// graph roles.
const (
	rolePrefill = iota
	roleDecode
	roleLMHead
	nRoles
)

var roleNames = [nRoles]string{"prefill", "decode", "lmhead"}

// graphRef locates one graph: the context binary file and the graph name.
type graphRef struct {
	file, name string
}

// spec is everything the runner needs from a bundle, defaults applied.
type spec struct {
	name                                       string
	hidden, vocab, layers, ctx, kvDim, headDim int
	theta                                      float64
	scaling                                    rope.Scaling
	contract                                   string
	mask                                       graphio.MaskEncoding
	window                                     int // 0: from the prefill graph's x
	names                                      bundle.Tensors
	graphs                                     [nRoles]graphRef
	embed                                      string
	maxPositions                               int // params.max_position_embeddings; 0: not given
	bos                                        int32
	eos                                        []int32
}

// newSpec takes the runner's view of a bundle read by bundle.ReadWith.
func newSpec(b *bundle.Bundle) (*spec, error) {
	p, st := b.Manifest.Params, b.Settings
	s := &spec{
		name: b.Manifest.Model.Name, hidden: p.Hidden, vocab: p.Vocab, layers: p.NLayers, ctx: p.MaxCtx,
		kvDim: p.KVDim, headDim: p.HeadDim, theta: p.RopeTheta, maxPositions: p.MaxPositions,
		scaling:  st.RopeScaling,
		contract: st.Contract, mask: graphio.MaskEncoding(st.Mask), window: st.PrefillWindow,
		names: st.Tensors, embed: b.Embed, bos: int32(st.BOS),
		graphs: [nRoles]graphRef{{b.PrefillBin, st.Graphs.Prefill}, {b.DecodeBin, st.Graphs.Decode}, {b.LMHeadBin, st.Graphs.LMHead}},
	}
	for _, id := range st.EOSTokenIDs {
		s.eos = append(s.eos, int32(id))
	}
	switch s.contract {
	case ContractQHexRT, ContractChunked:
	default:
		return nil, fmt.Errorf("hexserve.contract %q: want %q or %q", s.contract, ContractQHexRT, ContractChunked)
	}
	switch s.mask {
	case graphio.MaskAdditive, graphio.MaskU16:
	default:
		return nil, fmt.Errorf("hexserve.mask %q: want %q or %q", s.mask, graphio.MaskAdditive, graphio.MaskU16)
	}
	if s.headDim%2 != 0 {
		return nil, fmt.Errorf("params.head_dim = %d: must be even", s.headDim)
	}
	return s, nil
}

// key names role's graph in Stats.Graphs: the graph's name, qualified by
// its file when another role's graph has the same name.
func (s *spec) key(role int) string {
	ref := s.graphs[role]
	for i, o := range s.graphs {
		if i != role && o.name == ref.name && o.file != ref.file {
			return filepath.Base(ref.file) + "/" + ref.name
		}
	}
	return ref.name
}
