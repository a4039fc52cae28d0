package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/hexserve/hexserve/hexagon/genie"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/internal/modelfile"
)

// inspectedGenie is `hexserve inspect DIR` of a Genie bundle: the config's values as hexserve reads
// them, warnings, then each part's graphs (with their AR and CL) and every tensor.
type inspectedGenie struct {
	Dir      string              `json:"dir"`
	Config   *genie.BundleConfig `json:"config"`
	Warnings []string            `json:"warnings,omitempty"`
	Parts    []inspectedFile     `json:"parts"`
}

func inspectGenie(dir string, o inspectOptions, stdout, stderr io.Writer) int {
	asJSON, backend, system := o.asJSON, o.backend, o.system
	c, err := genie.LoadConfig(modelfile.Folder{Dir: dir})
	if err != nil {
		fmt.Fprintln(stderr, "hexserve inspect:", err)
		return 1
	}
	out := inspectedGenie{Dir: dir, Config: c}
	if c.RopeNote != "" {
		out.Warnings = append(out.Warnings, c.RopeNote)
	}
	be, sys := defaultQNNLibs(backend, system)
	rt, err := qnn.Open(qnn.Config{Backend: be, System: sys})
	if err != nil {
		fmt.Fprintln(stderr, "hexserve inspect:", err)
		return 1
	}
	defer rt.Close()
	status := 0
	for i, f := range c.Bins {
		graphs, ok := binaryGraphs(rt, f, stderr)
		if !ok {
			status = 1
			continue
		}
		for _, g := range graphs {
			if k, n, ok := genie.GraphPart(g.Name); !ok {
				out.Warnings = append(out.Warnings, fmt.Sprintf("%s: graph %s is not named {prompt|token}_ar{A}_cl{C}_{k}_of_{N}", filepath.Base(f), g.Name))
			} else if k != i+1 || n != len(c.Bins) {
				out.Warnings = append(out.Warnings, fmt.Sprintf("%s: graph %s is part %d of %d, listed as ctx-bins[%d] of %d", filepath.Base(f), g.Name, k, n, i, len(c.Bins)))
			}
		}
		out.Parts = append(out.Parts, newInspectedFile(f, graphs))
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return 1
		}
		return status
	}
	fmt.Fprintf(stdout, "Genie bundle %s\n  context %d, n-vocab %d, bos %d, eos %v, kv-dim %d\n", dir, c.Size, c.NVocab, c.BOS, c.EOS, c.KVDim)
	fmt.Fprintf(stdout, "  rope: %s\n", c.Rope)
	fmt.Fprintf(stdout, "  sampler defaults: temp %s, top-k %s, top-p %s, seed %s\n", orUnset(c.Sampler.Temp), orUnset(c.Sampler.TopK),
		orUnset(c.Sampler.TopP), orUnset(c.Sampler.Seed))
	fmt.Fprintf(stdout, "  htp: perf_profile %q, rpc_control_latency %d µs, weight sharing %v, use-mmap %v\n", c.HTP.PerfProfile,
		c.HTP.RPCLatencyUS, c.HTP.WeightSharing, c.UseMmap)
	fmt.Fprintf(stdout, "  tokenizer %s, family %q, %d parts\n", c.Tokenizer, c.Family, len(c.Bins))
	fmt.Fprintf(stdout, "  family settings: %s\n", c.FamilySettings())
	for _, w := range out.Warnings {
		fmt.Fprintln(stdout, "  warning:", w)
	}
	for _, f := range out.Parts {
		printInspected(stdout, f)
	}
	return status
}

// orUnset formats a config value the file may leave out.
func orUnset[T int | float64](v *T) string {
	if v == nil {
		return "unset"
	}
	return fmt.Sprint(*v)
}
