package qhexrt

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
)

// bindingSpec is a small bundle: H 4, head_dim 2, kv_dim 2, 2 layers, CTX 8,
// vocab 5, the window left to the prefill graph's x.
func bindingSpec(contract string) *spec {
	return &spec{hidden: 4, vocab: 5, layers: 2, ctx: 8, kvDim: 2, headDim: 2, contract: contract,
		mask: graphio.MaskAdditive, names: bundle.DefaultTensors(),
		graphs: [nRoles]graphRef{{"prefill.bin", "prefill"}, {"decode.bin", "decode"}, {"lmhead.bin", "lmhead"}}}
}

// bindingGraphs are the tensor tables of s's graphs with an AR-row prefill,
// every tensor of type dt.
func bindingGraphs(s *spec, ar int, dt qnn.DataType) [nRoles]*graphIO {
	t := func(name string, dims ...uint32) qnn.TensorInfo {
		return qnn.TensorInfo{Name: name, DataType: dt, Dims: dims}
	}
	var gs [nRoles]*graphIO
	for role := range nRoles {
		gs[role] = &graphIO{role: role, ref: s.graphs[role]}
	}
	h, d, kv, ctx := uint32(s.hidden), uint32(s.headDim), uint32(s.kvDim), uint32(s.ctx)
	for _, g := range gs[:roleLMHead] {
		rows := uint32(1)
		mask := []uint32{ctx}
		if g.role == rolePrefill {
			rows, mask = uint32(ar), []uint32{uint32(ar), uint32(ar)}
			if s.contract == ContractChunked {
				mask = []uint32{uint32(ar), ctx + uint32(ar)}
			}
		}
		g.info.Inputs = []qnn.TensorInfo{t("x", rows, h), t("cos", rows, d), t("sin", rows, d), t("cmask", mask...)}
		g.info.Outputs = []qnn.TensorInfo{t("y", rows, h)}
		for i := range s.layers {
			if g.role == roleDecode || s.contract == ContractChunked {
				g.info.Inputs = append(g.info.Inputs, t(fmt.Sprintf("past_k_%d", i), ctx, kv), t(fmt.Sprintf("past_v_%d", i), ctx, kv))
			}
			g.info.Outputs = append(g.info.Outputs, t(fmt.Sprintf("new_k_%d", i), rows, kv), t(fmt.Sprintf("new_v_%d", i), rows, kv))
		}
	}
	gs[roleLMHead].info.Inputs = []qnn.TensorInfo{t("hidden", 1, h)}
	gs[roleLMHead].info.Outputs = []qnn.TensorInfo{t("logits", 1, uint32(s.vocab))}
	return gs
}

// TestBindTensors binds tensor tables without a runtime: the window comes
// from x, every tensor gets its type, and each mismatch is one problem
// naming the file, the graph and the tensor.
func TestBindTensors(t *testing.T) {
	for _, contract := range []string{ContractQHexRT, ContractChunked} {
		s := bindingSpec(contract)
		gs := bindingGraphs(s, 3, qnn.Float16)
		window, kvET, problems := bindTensors(s, gs)
		if len(problems) > 0 || window != 3 || kvET.Type != qnn.Float16 {
			t.Fatalf("%s: window %d kv %s problems %q", contract, window, kvET, problems)
		}
		pre, dec, lm := gs[rolePrefill], gs[roleDecode], gs[roleLMHead]
		if pre.rows != 3 || dec.rows != 1 || pre.x.Info.Name != "x" || len(dec.newV) != 2 || dec.newV[1].Info.Name != "new_v_1" ||
			lm.out.Info.Name != "logits" || pre.masks == nil || pre.x.Buf != nil {
			t.Errorf("%s: prefill %+v decode %+v lm-head %+v", contract, pre, dec, lm)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(s *spec, gs [nRoles]*graphIO)
		want []string
		n    int // problems expected; 0: len(want)
	}{
		{"window", func(s *spec, gs [nRoles]*graphIO) { s.window = 4 },
			[]string{`prefill.bin graph "prefill": input "x" has dims [3 4]: prefill_window 4 wants [4, 4]`,
				`prefill.bin graph "prefill": output "new_v_1" has dims [3 2], want [4, 2]`}, 10}, // and every prefill tensor
		{"missing past", func(s *spec, gs [nRoles]*graphIO) { gs[roleDecode].info.Inputs[6].Name = "pk1" },
			[]string{`decode.bin graph "decode": no input "past_k_1" [8, 2]`}, 0},
		{"KV type", func(s *spec, gs [nRoles]*graphIO) { gs[rolePrefill].info.Outputs[1].DataType = qnn.Float32 },
			[]string{`output "new_k_0" is float32, the KV cache (past inputs) is float16`}, 0},
		{"vocab", func(s *spec, gs [nRoles]*graphIO) { s.vocab = 6 },
			[]string{`lmhead.bin graph "lmhead": output "logits" has dims [1 5], want [1, 6] (params.vocab)`}, 0},
		{"two faults", func(s *spec, gs [nRoles]*graphIO) {
			gs[roleDecode].info.Inputs[1].DataType = qnn.Float32
			gs[roleLMHead].info.Inputs = nil
		}, []string{`inputs "cos" and "sin" have different types float32 and float16`, "want exactly one of each"}, 0},
	} {
		s := bindingSpec(ContractQHexRT)
		gs := bindingGraphs(s, 3, qnn.Float16)
		tc.edit(s, gs)
		_, _, problems := bindTensors(s, gs)
		got := strings.Join(problems, "\n")
		if n := max(tc.n, len(tc.want)); len(problems) != n {
			t.Errorf("%s: %d problems, want %d:\n%s", tc.name, len(problems), n, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: problems\n%s\nlack %q", tc.name, got, w)
			}
		}
	}
}
