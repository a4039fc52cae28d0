package main

import (
	"fmt"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon"
	"github.com/hexserve/hexserve/hexagon/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/tokenizer"
	"github.com/rs/zerolog"
)

// loadModel opens the QNN runtime, the bundle's graphs and its tokenizer.
// Closing the returned model also closes the runtime.
func loadModel(cfg config.Config, log zerolog.Logger) (inference.Model, *tokenizer.Tokenizer, error) {
	m := cfg.Model
	qlog := log.With().Str("component", "qnn").Logger()
	rt, err := qnn.Open(qnn.Config{Backend: m.Libraries.Backend, System: m.Libraries.System, RPCMem: m.Libraries.RPCMem,
		Logger: &qlog, PerfMode: qnn.PerfMode(m.PerfMode)})
	if err != nil {
		return nil, nil, err
	}
	arch, err := rt.Arch()
	if err != nil || arch == "" {
		log.Debug().Err(err).Msg("the backend does not report its DSP arch; using v79")
		arch = "v79"
	}
	b, err := bundle.ReadWith(m.Bundle, arch, m.Overrides)
	if err != nil {
		rt.Close()
		return nil, nil, err
	}
	tok, err := tokenizer.Load(b.Tokenizer)
	if err != nil {
		rt.Close()
		return nil, nil, err
	}
	runner, err := hexagon.Open(hexagon.Config{Bundle: b.ManifestPath, Arch: arch, Runtime: rt, Overrides: m.Overrides,
		Logger: log.With().Str("component", "hexagon").Logger()})
	if err != nil {
		rt.Close()
		return nil, nil, err
	}
	info := runner.Info()
	if tok.VocabSize() > info.VocabSize {
		runner.Close()
		rt.Close()
		return nil, nil, fmt.Errorf("tokenizer %s has %d tokens but the model's lm-head only %d", b.Tokenizer, tok.VocabSize(), info.VocabSize)
	}
	log.Info().Str("bundle", b.Dir).Str("arch", arch).Str("contract", runner.Contract()).Str("name", info.Name).
		Int("context", info.ContextLen).Int("prefill_window", info.PrefillWindow).Msg("model loaded")
	return &ownedRuntime{Runner: runner, rt: rt}, tok, nil
}

// ownedRuntime is a Runner that also owns its QNN runtime.
type ownedRuntime struct {
	*hexagon.Runner
	rt *qnn.Runtime
}

func (o *ownedRuntime) Close() error {
	err := o.Runner.Close()
	if err2 := o.rt.Close(); err == nil {
		err = err2
	}
	return err
}
