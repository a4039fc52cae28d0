//go:build !nomkmodel

package main

import (
	"fmt"
	"io"

	"github.com/hexserve/hexserve/hexagon/genie/geniesim"
)

// mkmodel --format genie: a Qualcomm AI Hub Genie bundle (docs/genie.md) whose context binaries are
// hostsim's Genie graphs.
func writeGenie(o mkmodelOptions, stderr io.Writer) (string, error) {
	cfg, wf, err := modelInputs(&o)
	if err != nil {
		return "", err
	}
	g := geniesim.Options{Config: cfg, Name: o.name, Precision: o.precision, Weights: wf, Parts: o.parts,
		PromptAR: o.prefillChunk, Ctx: o.ctx, Progress: func(k, n int, size int64) {
			fmt.Fprintf(stderr, "hexserve mkmodel: part %d/%d: %.1f MB\n", k, n, float64(size)/1e6)
		}}
	if _, err := geniesim.Spec(g); err != nil {
		return "", usageError{err}
	}
	if err := geniesim.Write(o.out, g); err != nil {
		return "", err
	}
	if err := copyTokenizer(o, o.out, cfg, stderr); err != nil {
		return "", err
	}
	return o.out, nil
}
