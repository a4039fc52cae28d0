package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/executorch"
	"github.com/hexserve/hexserve/hexagon/qhexrt"
	"github.com/hexserve/hexserve/hexagon/qhexrt/bundle"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/endtokens"
	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/tokenizer"
)

// findTokenizer is model.tokenizer when set, else tokenizer.json in the
// model's folder or up to two parent folders.
func findTokenizer(m config.Model, modelFile string) (string, error) {
	if m.Tokenizer != "" {
		return m.Tokenizer, nil
	}
	dir := filepath.Dir(modelFile)
	var tried []string
	for range 3 {
		p := filepath.Join(dir, "tokenizer.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("no tokenizer for %s: set model.tokenizer, or put tokenizer.json next to the model or in up to two parent folders (tried %s)",
		modelFile, strings.Join(tried, ", "))
}

// loadModel opens the model's format on the QNN runtime, its tokenizer and its chat template
// (loadTemplate). Closing the returned model also closes the runtime.
func loadModel(cfg config.Config, log zerolog.Logger) (inference.Model, *tokenizer.Tokenizer, *chat.Template, error) {
	o, tmpl, err := openModel(cfg, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return o.model, o.tok, tmpl, nil
}

// openModel is loadModel's work, with the folder of the model's files (o.dir) for bench.
func openModel(cfg config.Config, log zerolog.Logger) (opened, *chat.Template, error) {
	m := cfg.Model
	kind, file, err := locateModel(m.Location())
	if err != nil {
		return opened{}, nil, err
	}
	var rt *qnn.Runtime
	a := openArgs{cfg: cfg, file: file, log: log, runtime: func() (*qnn.Runtime, error) {
		qlog := log.With().Str("component", "qnn").Logger()
		var err error
		rt, err = qnn.Open(qnn.Config{Backend: m.Libraries.Backend, System: m.Libraries.System, RPCMem: m.Libraries.RPCMem,
			ADSPLibraryPath: m.ADSPLibraryPath, Logger: &qlog, PerfMode: qnn.PerfMode(m.PerfMode), Turn: &npuTurn})
		return rt, err
	}}
	o, err := kind.open(a)
	if err != nil {
		if rt != nil {
			rt.Close() // a second Close, after a runner that owned it closed it, does nothing
		}
		return opened{}, nil, err
	}
	tmpl, err := finishLoad(o.model, o.tok, o.tokPath, o.dir, o.own, o.loaded)
	if err != nil {
		o.model.Close()
		return opened{}, nil, err
	}
	return o, tmpl, nil
}

// openBundle opens a QHexRT bundle for the device's arch (qhexrt.DeviceArch).
func openBundle(a openArgs) (opened, error) {
	m := a.cfg.Model
	rt, err := a.runtime()
	if err != nil {
		return opened{}, err
	}
	arch := qhexrt.DeviceArch(rt, a.log)
	b, err := bundle.ReadWith(a.file, arch, m.Overrides)
	if err != nil {
		return opened{}, err
	}
	o := opened{tokPath: cmp.Or(m.Tokenizer, b.Tokenizer), dir: b.Dir, own: "hexserve.eos_token_ids and params.eos_token_id"}
	if o.tok, err = tokenizer.Load(o.tokPath); err != nil {
		return opened{}, err
	}
	runner, err := qhexrt.Open(qhexrt.Config{Bundle: b.ManifestPath, Read: b, Arch: arch, Runtime: rt, OwnRuntime: true, Overrides: m.Overrides,
		SeqKVBytes: int64(m.SeqKVMB) << 20, Logger: a.log.With().Str("component", "hexagon").Logger()})
	if err != nil {
		return opened{}, err
	}
	o.model = runner
	o.loaded = a.log.Info().Str("bundle", b.Dir).Str("arch", arch).Str("contract", runner.Contract())
	return o, nil
}

// openPTE opens an ExecuTorch .pte: the tokenizer first, since the export has none (and its
// BOS/EOS metadata are hard-coded constants), so a missing one is the error to report.
func openPTE(a openArgs) (opened, error) {
	pte, err := loadPTETokenizer(a.cfg.Model, a.file)
	if err != nil {
		return opened{}, err
	}
	rt, err := a.runtime()
	if err != nil {
		return opened{}, err
	}
	runner, err := executorch.Open(executorch.Config{Path: a.file, Runtime: rt, OwnRuntime: true, BOS: pte.bos, EOS: pte.eos,
		Logger: a.log.With().Str("component", "executorch").Logger(), Memory: int64(a.cfg.Engine.ModelMemory)})
	if err != nil {
		return opened{}, err
	}
	return opened{model: runner, tok: pte.tok, tokPath: pte.path, dir: filepath.Dir(a.file),
		own: "the tokenizer's <|eot_id|>, <|eom_id|>, <|end_of_text|>", loaded: a.log.Info().Str("pte", a.file)}, nil
}

// endTokenModel is a loaded model whose end tokens the end-token rule sets. The runners own
// their QNN runtime (OwnRuntime): closing the model closes it.
type endTokenModel interface {
	inference.Model
	SetEndTokens([]int32)
}

// finishLoad notes a tokenizer larger than the model's logits, applies the end-token rule (the model's
// own list, named own, ∪ generation_config.json's, else tokenizer_config.json's, looked for in
// the model's folder, then the tokenizer's), loads the chat template and logs the load.
func finishLoad(model endTokenModel, tok *tokenizer.Tokenizer, tokPath, dir, own string, loaded *zerolog.Event) (*chat.Template, error) {
	info := model.Info()
	if tok.VocabSize() > info.VocabSize { // AI Hub's Qwen2.5-7B: n-vocab 131072, 151665 tokens
		loaded.Str("vocab_note", fmt.Sprintf("the tokenizer has %d tokens but the logits only %d: ids from %d on are never sampled, and a prompt holding one is refused (400)",
			tok.VocabSize(), info.VocabSize, info.VocabSize))
	}
	dirs := []string{dir}
	if td := filepath.Dir(tokPath); td != dir {
		dirs = append(dirs, td)
	}
	eos, err := endtokens.Resolve(info.EOS, own, dirs, tok)
	if err != nil {
		return nil, err
	}
	model.SetEndTokens(eos.IDs)
	tmpl, tmplFrom, err := loadTemplate(tokPath)
	if err != nil {
		return nil, err
	}
	loaded.Str("tokenizer", tokPath).Str("chat_template", tmplFrom).Str("name", info.Name).Int("context", info.ContextLen).
		Int("prefill_window", info.PrefillWindow).Ints32("end_tokens", eos.IDs).Strs("end_tokens_from", eos.Sources).Msg("model loaded")
	return tmpl, nil
}

// pteSpecials is a .pte's tokenizer and the ids the runner needs from it.
type pteSpecials struct {
	tok  *tokenizer.Tokenizer
	path string
	bos  int32
	eos  []int32
}

// loadPTETokenizer finds and loads a .pte's tokenizer: BOS is
// <|begin_of_text|>, EOS every one of <|eot_id|>, <|eom_id|> and
// <|end_of_text|> it has. A .pte of another family (config.json beside it,
// pteFamily) may have neither: Qwen has no BOS, and its end tokens come from
// the end-token rule.
func loadPTETokenizer(m config.Model, file string) (pteSpecials, error) {
	family, err := pteFamily(file)
	if err != nil {
		return pteSpecials{}, err
	}
	path, err := findTokenizer(m, file)
	if err != nil {
		return pteSpecials{}, err
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		return pteSpecials{}, err
	}
	sp := tok.Specials()
	p := pteSpecials{tok: tok, path: path, bos: sp.BOS}
	for _, id := range []int32{sp.EOT, sp.EOM, sp.EndOfText} {
		if id >= 0 {
			p.eos = append(p.eos, id)
		}
	}
	if family == "" && (len(p.eos) == 0 || sp.BOS < 0) { // another family: its end tokens come from the end-token rule (finishLoad)
		return pteSpecials{}, fmt.Errorf("tokenizer %s has no <|begin_of_text|> or none of <|eot_id|>, <|eom_id|>, <|end_of_text|>: hexserve serves Llama-3 chat models", path)
	}
	return p, nil
}

// loadTemplate is the chat template beside tokenizer.json (chat_template.jinja
// or tokenizer_config.json's chat_template), else the built-in Llama-3.2
// one; from says which, for the load log.
func loadTemplate(tokPath string) (t *chat.Template, from string, err error) {
	dir := filepath.Dir(tokPath)
	t, ok, err := chat.LoadTemplate(readBesideTokenizer, dir)
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("%s: %w", dir, err)
	case !ok:
		return chat.Llama32, "built-in Llama-3.2", nil
	case t.Native():
		return t, dir + " (Llama-3.2, rendered natively)", nil
	}
	return t, dir, nil
}

// readBesideTokenizer reads a file beside tokenizer.json for the chat template through the
// model-file reader: tokenizer.json to its cap, the others (tokenizer_config.json,
// chat_template.jinja) as configs.
func readBesideTokenizer(path string) ([]byte, error) {
	max := int64(modelfile.MaxConfig)
	if filepath.Base(path) == "tokenizer.json" {
		max = modelfile.MaxTokenizer
	}
	return modelfile.ReadFile(path, max)
}
