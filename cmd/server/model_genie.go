package main

import (
	"cmp"
	"os"
	"path/filepath"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/genie"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/inference/sample"
	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/tokenizer"
)

// detectGenie reports whether path is a Genie bundle (a folder holding genie_config.json, or that
// file itself) and returns its folder.
func detectGenie(path string, st os.FileInfo) (string, bool, error) {
	if st.IsDir() {
		return path, genie.IsBundle(path), nil
	}
	if filepath.Base(path) == genie.ConfigFile && st.Mode().IsRegular() {
		return filepath.Dir(path), true, nil
	}
	return "", false, nil
}

// openGenie opens a Genie bundle: the tokenizer is dialog.tokenizer.path (model.tokenizer
// overrides it).
func openGenie(a openArgs) (opened, error) {
	m := a.cfg.Model
	rt, err := a.runtime()
	if err != nil {
		return opened{}, err
	}
	runner, err := genie.Open(genie.Config{Dir: a.file, Runtime: rt, OwnRuntime: true, Logger: a.log.With().Str("component", "genie").Logger(),
		AllowOutside: m.AllowOutsidePaths, Memory: int64(a.cfg.Engine.ModelMemory)})
	if err != nil {
		return opened{}, err
	}
	o := opened{tokPath: cmp.Or(m.Tokenizer, runner.Tokenizer()), dir: a.file, own: "dialog.context.eos-token"}
	if o.tok, err = tokenizer.Load(o.tokPath); err != nil {
		runner.Close()
		return opened{}, err
	}
	o.model, o.loaded = runner, a.log.Info().Str("genie", a.file)
	return o, nil
}

// probeGenie reads a Genie bundle's genie_config.json (checked) and its config.json (through
// genie.LoadConfig, once): the context is dialog.context.size − 1, the runner's (the AR-1
// graphs' past).
func probeGenie(m config.Model, dir string) (modelProbe, error) {
	c, err := genie.LoadConfig(modelfile.Folder{Dir: dir, AllowOutside: m.AllowOutsidePaths})
	if err != nil {
		return modelProbe{}, err
	}
	s := shape{hidden: c.HFHidden, layers: c.HFLayers, heads: c.HFHeads, kvHeads: cmp.Or(c.HFKVHeads, c.HFHeads), headDim: c.HFHeadDim,
		ffn: c.HFFFN, vocab: c.HFVocab, tied: c.HFTied != nil && *c.HFTied}
	return modelProbe{ContextLen: c.Size - 1, Family: c.Family, Outside: c.Outside, Generated: c.Generated, Shape: s}, nil
}

// samplingDefaults are config sampling's defaults for the parameters a request leaves out.
func samplingDefaults(c config.Sampling) sample.Params {
	return sample.Params{Temperature: c.Temperature, TopP: c.TopP, TopK: c.TopK, MinP: c.MinP,
		RepetitionPenalty: c.RepetitionPenalty}
}

// samplingDefaulter is a model with sampling defaults of its own (a Genie bundle's
// dialog.sampler), asked for instead of the model's type.
type samplingDefaulter interface{ Defaults() genie.Sampler }

// modelSampling is a model's own sampling defaults, nil for a model that has none: a Genie
// bundle's dialog.sampler (temp, top-k, top-p, seed) in place of config sampling's values,
// as genie-t2t-run applies them to a dialog that sets none.
func modelSampling(model inference.Model, c config.Sampling) *sample.Params {
	g, ok := model.(samplingDefaulter)
	if !ok {
		return nil
	}
	d, s := g.Defaults(), samplingDefaults(c)
	if d.Temp != nil {
		s.Temperature = float32(*d.Temp)
	}
	if d.TopK != nil {
		s.TopK = max(*d.TopK, 0)
	}
	if d.TopP != nil {
		s.TopP = float32(*d.TopP)
	}
	if d.Seed != nil {
		seed := int64(*d.Seed)
		s.Seed = &seed
	}
	return &s
}
