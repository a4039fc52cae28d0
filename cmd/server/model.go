package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/hexagon/bundle"
	"github.com/hexserve/hexserve/hexagon/executorch"
	"github.com/hexserve/hexserve/hexagon/qhexrt"
	"github.com/hexserve/hexserve/hexagon/qnn"
	"github.com/hexserve/hexserve/inference"
	"github.com/hexserve/hexserve/internal/endtokens"
	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/tokenizer"
)

// modelKind is what a model path holds.
type modelKind int

const (
	kindBundle modelKind = iota // QHexRT bundle: folder, arch folder or manifest
	kindPTE                     // ExecuTorch .pte
	kindGenie                   // Qualcomm AI Hub Genie bundle: folder with genie_config.json
)

// locateModel detects what path names, from the content: a file starting
// with ExecuTorch's ET12 identifier is a .pte (any other file a manifest); a
// folder holding a manifest.json or an arch folder is a bundle, else a
// folder holding exactly one .pte names it. It returns the kind and, for a
// .pte, the file.
func locateModel(path string) (modelKind, string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, "", fmt.Errorf("model %s: %w", path, err)
	}
	if dir, ok := genieDir(path, st); ok {
		return kindGenie, dir, nil
	}
	if !st.IsDir() {
		// Only a regular file is opened here (a FIFO would block); the
		// bundle reader explains what anything else is.
		if st.Mode().IsRegular() && isPTE(path) {
			return kindPTE, path, nil
		}
		return kindBundle, path, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return 0, "", fmt.Errorf("model %s: %w", path, err)
	}
	var ptes []string
	for _, e := range ents {
		name := e.Name()
		if name == "manifest.json" || e.IsDir() && plausibleArchDir(name) {
			return kindBundle, path, nil
		}
		if e.Type().IsRegular() && strings.HasSuffix(name, ".pte") && isPTE(filepath.Join(path, name)) {
			ptes = append(ptes, name)
		}
	}
	switch len(ptes) {
	case 0:
		return kindBundle, path, nil // the bundle reader says what is missing
	case 1:
		return kindPTE, filepath.Join(path, ptes[0]), nil
	}
	return 0, "", fmt.Errorf("model %s: the folder holds %d .pte files (%s); name one", path, len(ptes), strings.Join(ptes, ", "))
}

// plausibleArchDir accepts Hexagon arch folder names v60 … v99.
func plausibleArchDir(a string) bool {
	return len(a) == 3 && a[0] == 'v' && a[1] >= '6' && a[1] <= '9' && a[2] >= '0' && a[2] <= '9'
}

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

// loadModel opens the QNN runtime, the model's graphs, its tokenizer and
// its chat template (loadTemplate). Closing the returned model also closes
// the runtime.
func loadModel(cfg config.Config, log zerolog.Logger) (inference.Model, *tokenizer.Tokenizer, *chat.Template, error) {
	m := cfg.Model
	kind, file, err := locateModel(m.Location())
	if err != nil {
		return nil, nil, nil, err
	}
	var pte pteSpecials
	if kind == kindPTE {
		// The tokenizer first: the export has none (and its BOS/EOS metadata
		// are hard-coded constants), so a missing one is the error to report.
		if pte, err = loadPTETokenizer(m, file); err != nil {
			return nil, nil, nil, err
		}
	}
	qlog := log.With().Str("component", "qnn").Logger()
	rt, err := qnn.Open(qnn.Config{Backend: m.Libraries.Backend, System: m.Libraries.System, RPCMem: m.Libraries.RPCMem,
		ADSPLibraryPath: m.ADSPLibraryPath, Logger: &qlog, PerfMode: qnn.PerfMode(m.PerfMode), Turn: &npuTurn})
	if err != nil {
		return nil, nil, nil, err
	}
	var (
		model   endTokenModel
		tok     *tokenizer.Tokenizer
		tokPath string
		loaded  *zerolog.Event
		dir     string                                             // the model's folder, where the end-token files are looked for
		own     = "hexserve.eos_token_ids and params.eos_token_id" // where the model's end tokens come from
	)
	switch kind {
	case kindGenie:
		model, tok, tokPath, loaded, err = openGenie(m, int64(cfg.Engine.ModelMemory), file, rt, log)
		dir, own = file, "dialog.context.eos-token"
	case kindPTE:
		tok, tokPath, dir, own = pte.tok, pte.path, filepath.Dir(file), "the tokenizer's <|eot_id|>, <|eom_id|>, <|end_of_text|>"
		var runner *executorch.Runner
		runner, err = executorch.Open(executorch.Config{Path: file, Runtime: rt, BOS: pte.bos, EOS: pte.eos,
			Logger: log.With().Str("component", "executorch").Logger(), Memory: int64(cfg.Engine.ModelMemory)})
		if err == nil {
			model, loaded = &ownedPTE{Runner: runner, rt: rt}, log.Info().Str("pte", file)
		}
	default:
		arch, aerr := rt.Arch()
		if aerr != nil || arch == "" {
			log.Debug().Err(aerr).Msg("the backend does not report its DSP arch; using v79")
			arch = "v79"
		}
		var b *bundle.Bundle
		if b, err = bundle.ReadWith(file, arch, m.Overrides); err != nil {
			break
		}
		tokPath, dir = b.Tokenizer, b.Dir
		if m.Tokenizer != "" {
			tokPath = m.Tokenizer
		}
		if tok, err = tokenizer.Load(tokPath); err != nil {
			break
		}
		var runner *qhexrt.Runner
		runner, err = qhexrt.Open(qhexrt.Config{Bundle: b.ManifestPath, Read: b, Arch: arch, Runtime: rt, Overrides: m.Overrides,
			SeqKVBytes: int64(m.SeqKVMB) << 20, Logger: log.With().Str("component", "hexagon").Logger()})
		if err == nil {
			model = &ownedRuntime{Runner: runner, rt: rt, dir: b.Dir}
			loaded = log.Info().Str("bundle", b.Dir).Str("arch", arch).Str("contract", runner.Contract())
		}
	}
	if err != nil {
		rt.Close()
		return nil, nil, nil, err
	}
	tmpl, err := finishLoad(model, tok, tokPath, dir, own, loaded)
	if err != nil {
		model.Close()
		return nil, nil, nil, err
	}
	return model, tok, tmpl, nil
}

// endTokenModel is a loaded model whose end tokens the end-token rule sets.
type endTokenModel interface {
	inference.Model
	setEndTokens([]int32)
}

// finishLoad checks the tokenizer against the model, applies the end-token rule (the model's
// own list, named own, ∪ generation_config.json's, else tokenizer_config.json's, looked for in
// the model's folder, then the tokenizer's), loads the chat template and logs the load.
func finishLoad(model endTokenModel, tok *tokenizer.Tokenizer, tokPath, dir, own string, loaded *zerolog.Event) (*chat.Template, error) {
	info := model.Info()
	if tok.VocabSize() > info.VocabSize {
		return nil, fmt.Errorf("tokenizer %s has %d tokens but the model's logits only %d", tokPath, tok.VocabSize(), info.VocabSize)
	}
	dirs := []string{dir}
	if td := filepath.Dir(tokPath); td != dir {
		dirs = append(dirs, td)
	}
	eos, err := endtokens.Resolve(info.EOS, own, dirs, tok)
	if err != nil {
		return nil, err
	}
	model.setEndTokens(eos.IDs)
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

// ownedRuntime is a Runner that also owns its QNN runtime.
type ownedRuntime struct {
	*qhexrt.Runner
	rt  *qnn.Runtime
	dir string  // the bundle's arch folder
	eos []int32 // the end-token rule's
}

func (o *ownedRuntime) setEndTokens(ids []int32) { o.eos = ids }

// Info is the runner's, with the end-token rule's end tokens.
func (o *ownedRuntime) Info() inference.ModelInfo {
	i := o.Runner.Info()
	i.EOS = withEndTokens(i.EOS, o.eos)
	return i
}

// withEndTokens is the end-token rule's ids once set, else the runner's own.
func withEndTokens(own, rule []int32) []int32 {
	if rule == nil {
		return own
	}
	return slices.Clone(rule)
}

// BufferBytes is the runtime's buffer memory (I/O and KV).
func (o *ownedRuntime) BufferBytes() int64 { return o.rt.BufferBytes() }

func (o *ownedRuntime) Close() error {
	return errors.Join(o.Runner.Close(), o.rt.Close())
}

// ownedPTE is an ExecuTorch runner that also owns its QNN runtime.
type ownedPTE struct {
	*executorch.Runner
	rt  *qnn.Runtime
	eos []int32
}

func (o *ownedPTE) setEndTokens(ids []int32) { o.eos = ids }

// Info is the runner's, with the end-token rule's end tokens.
func (o *ownedPTE) Info() inference.ModelInfo {
	i := o.Runner.Info()
	i.EOS = withEndTokens(i.EOS, o.eos)
	return i
}

// BufferBytes is the runtime's buffer memory (I/O and KV).
func (o *ownedPTE) BufferBytes() int64 { return o.rt.BufferBytes() }

func (o *ownedPTE) Close() error {
	return errors.Join(o.Runner.Close(), o.rt.Close())
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
