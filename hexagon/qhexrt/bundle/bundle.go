package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/hexserve/hexserve/internal/rope"
)

// Contract and mask values.
const (
	ContractQHexRT  = "qhexrt"
	ContractChunked = "chunked"
	MaskAdditive    = "additive"
	MaskU16         = "u16"
)

// ManifestName is the file name Write uses.
const ManifestName = "manifest.json"

// DefaultEOS is Llama-3.2's end-of-turn set.
var DefaultEOS = []int{128001, 128008, 128009}

// DefaultBOS is Llama-3's <|begin_of_text|>.
const DefaultBOS = 128000

// DefaultRopeScaling is Llama-3.2's RoPE scaling.
func DefaultRopeScaling() rope.Scaling { return *rope.Llama32() }

// DefaultTensors are the tensor names hexserve mkmodel writes.
func DefaultTensors() Tensors {
	return Tensors{X: "x", Cos: "cos", Sin: "sin", CMask: "cmask", Y: "y",
		PastK: "past_k_{i}", PastV: "past_v_{i}", NewK: "new_k_{i}", NewV: "new_v_{i}"}
}

// Merge returns h with every field that o sets replacing h's (o wins; Tensors
// merge name by name). Either may be nil.
func (h *Hexserve) Merge(o *Hexserve) *Hexserve {
	var out Hexserve
	if h != nil {
		out = *h
		if h.Tensors != nil {
			t := *h.Tensors
			out.Tensors = &t
		}
	}
	if o == nil {
		return &out
	}
	override(&out.Contract, o.Contract)
	override(&out.NHeads, o.NHeads)
	override(&out.NKVHeads, o.NKVHeads)
	override(&out.PrefillWindow, o.PrefillWindow)
	override(&out.RMSEps, o.RMSEps)
	override(&out.RopeScaling, o.RopeScaling)
	if o.EOSTokenIDs != nil {
		out.EOSTokenIDs = o.EOSTokenIDs
	}
	override(&out.Mask, o.Mask)
	if o.Tensors != nil {
		t := mergeTensors(out.Tensors, *o.Tensors)
		out.Tensors = &t
	}
	return &out
}

// setFrom sets *dst to *v when v is set.
func setFrom[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// override sets *dst to v when v is set.
func override[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

func mergeTensors(base *Tensors, o Tensors) Tensors {
	var t Tensors
	setFrom(&t, base)
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&t.X, o.X)
	set(&t.Cos, o.Cos)
	set(&t.Sin, o.Sin)
	set(&t.CMask, o.CMask)
	set(&t.Y, o.Y)
	set(&t.PastK, o.PastK)
	set(&t.PastV, o.PastV)
	set(&t.NewK, o.NewK)
	set(&t.NewV, o.NewV)
	return t
}

// Settings are the effective model settings: the manifest's hexserve keys
// (merged with overrides) with every default applied.
type Settings struct {
	Contract string // qhexrt or chunked
	Mask     string // additive or u16
	NHeads   int
	NKVHeads int
	// PrefillWindow is 0 when neither the manifest nor the overrides give it:
	// the runner takes it from the prefill graph's x dims.
	PrefillWindow int
	RMSEps        float64
	RopeScaling   rope.Scaling
	EOSTokenIDs   []int // hexserve eos_token_ids (or DefaultEOS) plus params.eos_token_id
	BOS           int
	Tensors       Tensors // every name set
	Graphs        Graphs
}

// Graphs are the graph names inside the context binaries (plan.params).
type Graphs struct {
	Prefill, Decode, LMHead string
}

// Bundle is a manifest read from disk, with absolute file paths and the
// effective settings.
type Bundle struct {
	Dir          string // the arch folder (absolute)
	ManifestPath string // absolute
	Arch         string // model.dsp_arch
	Manifest     *Manifest

	// Context binaries holding each graph (the same file may hold several).
	PrefillBin, DecodeBin, LMHeadBin string
	// Contexts maps each artifacts.contexts key to its absolute path.
	Contexts  map[string]string
	Embed     string // f16 [vocab, hidden] table
	Tokenizer string // tokenizer.json

	Settings Settings
}

// Resolve finds the arch folder and manifest for path, which may name a
// bundle folder (its arch subfolder is used), an arch folder, or a manifest
// file. arch may be empty to accept whatever is found.
func Resolve(path, arch string) (dir, manifestPath string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("bundle: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", "", fmt.Errorf("bundle: %w", err)
	}
	if !st.IsDir() {
		if _, err := modelfile.Stat(abs, 0); err != nil {
			return "", "", fmt.Errorf("bundle: neither a bundle folder nor a manifest file: %w", err)
		}
		return filepath.Dir(abs), abs, nil
	}
	mp, err := findManifest(abs)
	if err != nil {
		return "", "", err
	}
	if mp != "" {
		return abs, mp, nil
	}
	archs, err := archFolders(abs)
	if err != nil {
		return "", "", err
	}
	if arch != "" {
		if !slices.Contains(archs, arch) {
			if len(archs) == 0 {
				return "", "", fmt.Errorf("bundle: %s holds no manifest and no arch folder (want %s/)", abs, arch)
			}
			return "", "", fmt.Errorf("bundle: %s has no %s folder: it is built for %s, the device is %s", abs, arch, strings.Join(archs, ", "), arch)
		}
		archs = []string{arch}
	}
	if len(archs) != 1 {
		if len(archs) == 0 {
			return "", "", fmt.Errorf("bundle: %s holds no manifest and no arch folder", abs)
		}
		return "", "", fmt.Errorf("bundle: %s has several arch folders (%s): name one", abs, strings.Join(archs, ", "))
	}
	sub := filepath.Join(abs, archs[0])
	mp, err = findManifest(sub)
	if err != nil {
		return "", "", err
	}
	if mp == "" {
		return "", "", fmt.Errorf("bundle: %s holds no manifest (a *.json with schema_version)", sub)
	}
	return sub, mp, nil
}

// skipJSON are JSON files in an arch folder that are never the manifest.
var skipJSON = map[string]bool{"tokenizer.json": true, "tokenizer_config.json": true, "config.json": true}

// findManifest returns the one *.json in dir with a schema_version key, or
// "" if there is none. A folder it cannot list (permission denied) or a
// *.json it cannot read is an error, not "no manifest".
func findManifest(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	var found []string
	var bad error
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || skipJSON[e.Name()] {
			continue
		}
		p := filepath.Join(dir, e.Name())
		data, err := modelfile.ReadFile(p, modelfile.MaxConfig)
		if err != nil {
			return "", fmt.Errorf("bundle: %w", err)
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(data, &probe); err != nil {
			bad = errors.Join(bad, fmt.Errorf("bundle: %s is not valid JSON: %w", p, err))
			continue
		}
		if _, ok := probe["schema_version"]; ok {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return "", bad
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("bundle: %s holds several manifests (%s): name one", dir, strings.Join(found, ", "))
}

// archFolders lists dir's subfolders that look like DSP architectures (v75,
// v79, ...), symbolic links to folders included. A link that cannot be
// followed (a loop, permission denied) is an error.
func archFolders(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if len(n) < 2 || n[0] != 'v' || strings.Trim(n[1:], "0123456789") != "" {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&os.ModeSymlink != 0 {
			st, err := os.Stat(filepath.Join(dir, n))
			if err != nil {
				return nil, fmt.Errorf("bundle: %w", err)
			}
			isDir = st.IsDir()
		}
		if isDir {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Read resolves path (see Resolve), parses the manifest, refuses a dsp_arch
// other than arch (when arch is set), applies defaults and checks that every
// referenced file exists. Graph and tensor bindings are not checked here.
func Read(path, arch string) (*Bundle, error) {
	return ReadWith(path, arch, nil)
}

// DefaultArch is the DSP arch assumed when the device's is unknown (a backend that does not
// report it, or no runtime at all): the Snapdragon 8 Elite's, which hostsim emulates.
const DefaultArch = "v79"

// ReadUnknownArch is ReadWith when the device's arch is unknown: a bundle with one arch
// folder is read as it is, one with several as DefaultArch. The error is the first read's.
func ReadUnknownArch(path string, overrides *Hexserve) (*Bundle, error) {
	b, err := ReadWith(path, "", overrides)
	if err != nil {
		if b, err2 := ReadWith(path, DefaultArch, overrides); err2 == nil {
			return b, nil
		}
	}
	return b, err
}

// ReadWith is Read with the server config's overrides merged over the
// manifest's hexserve object.
func ReadWith(path, arch string, overrides *Hexserve) (*Bundle, error) {
	dir, mp, err := Resolve(path, arch)
	if err != nil {
		return nil, err
	}
	data, err := modelfile.ReadFile(mp, modelfile.MaxConfig)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	var m Manifest
	if err := modelfile.DecodeJSON(data, &m); err != nil {
		return nil, fmt.Errorf("bundle: manifest %s: %w", mp, err)
	}
	b := &Bundle{Dir: dir, ManifestPath: mp, Arch: m.Model.DSPArch, Manifest: &m}
	if err := requireKeys(data); err != nil {
		return nil, fmt.Errorf("bundle: manifest %s: %w", mp, err)
	}
	if err := b.check(arch, overrides); err != nil {
		return nil, fmt.Errorf("bundle: manifest %s: %w", mp, err)
	}
	return b, nil
}

func (b *Bundle) check(arch string, overrides *Hexserve) error {
	m := b.Manifest
	if m.SchemaVersion != SchemaVersion {
		return fmt.Errorf("schema_version %d is not supported (want %d)", m.SchemaVersion, SchemaVersion)
	}
	if arch != "" && m.Model.DSPArch != arch {
		return fmt.Errorf("model.dsp_arch is %s but the device is %s: use a bundle built for %s", m.Model.DSPArch, arch, arch)
	}
	p := m.Params
	if err := checkLimits(p); err != nil {
		return err
	}
	if !(p.RopeTheta > 0) || math.IsInf(p.RopeTheta, 0) {
		return fmt.Errorf("params.rope_theta must be positive, got %g", p.RopeTheta)
	}

	// Files.
	if len(m.Artifacts.Contexts) == 0 {
		return errors.New("artifacts.contexts is empty")
	}
	b.Contexts = map[string]string{}
	for _, k := range sortedKeys(m.Artifacts.Contexts) {
		c := m.Artifacts.Contexts[k]
		key := "artifacts.contexts." + k + ".bin"
		if c.Bin == "" {
			return fmt.Errorf("missing key %s", key)
		}
		path, _, err := LocalFile(b.Dir, key, c.Bin, 0)
		if err != nil {
			return err
		}
		b.Contexts[k] = path
	}
	pick := func(role string) (string, error) {
		if p, ok := b.Contexts[role]; ok {
			return p, nil
		}
		if p, ok := b.Contexts["shared"]; ok {
			return p, nil
		}
		return "", fmt.Errorf("artifacts.contexts has no %q or \"shared\" entry (has %s)", role, strings.Join(sortedKeys(m.Artifacts.Contexts), ", "))
	}
	var err error
	if b.PrefillBin, err = pick("prefill"); err != nil {
		return err
	}
	if b.DecodeBin, err = pick("decode"); err != nil {
		return err
	}
	if b.LMHeadBin, err = pick("lmhead"); err != nil {
		return err
	}
	if m.Artifacts.Embed == "" {
		return errors.New("missing key artifacts.embed")
	}
	var size int64
	if b.Embed, size, err = LocalFile(b.Dir, "artifacts.embed", m.Artifacts.Embed, 0); err != nil {
		return err
	}
	if want := int64(p.Vocab) * int64(p.Hidden) * 2; size != want {
		return fmt.Errorf("artifacts.embed: %s has %d bytes, want %d (f16 [params.vocab %d, params.hidden %d])",
			b.Embed, size, want, p.Vocab, p.Hidden)
	}
	if m.Artifacts.Tokenizer == "" {
		return errors.New("missing key artifacts.tokenizer")
	}
	if b.Tokenizer, _, err = LocalFile(b.Dir, "artifacts.tokenizer", m.Artifacts.Tokenizer, modelfile.MaxTokenizer); err != nil {
		return err
	}

	s, err := settings(m, m.Hexserve.Merge(overrides))
	if err != nil {
		return err
	}
	b.Settings = s
	return nil
}

// requireKeys refuses a manifest that lacks a key with no default.
func requireKeys(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return err
	}
	if _, ok := top["schema_version"]; !ok {
		return errors.New("missing key schema_version")
	}
	doc := map[string]map[string]json.RawMessage{}
	for _, sect := range []string{"model", "params", "artifacts"} {
		raw, ok := top[sect]
		if !ok {
			return fmt.Errorf("missing key %s", sect)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fmt.Errorf("%s: %w", sect, err)
		}
		doc[sect] = obj
	}
	for _, k := range []string{"model.dsp_arch", "params.hidden", "params.vocab", "params.n_layers", "params.max_ctx",
		"params.kv_dim", "params.head_dim", "params.rope_theta", "artifacts.contexts", "artifacts.embed", "artifacts.tokenizer"} {
		sect, key, _ := strings.Cut(k, ".")
		if _, ok := doc[sect][key]; !ok {
			return fmt.Errorf("missing key %s", k)
		}
	}
	return nil
}

func settings(m *Manifest, h *Hexserve) (Settings, error) {
	p := m.Params
	s := Settings{
		Contract:    ContractQHexRT,
		Mask:        MaskAdditive,
		NHeads:      p.Hidden / p.HeadDim,
		NKVHeads:    p.KVDim / p.HeadDim,
		RMSEps:      1e-5,
		RopeScaling: DefaultRopeScaling(),
		BOS:         DefaultBOS,
		Tensors:     mergeTensors(&Tensors{}, DefaultTensors()),
		Graphs:      Graphs{Prefill: "prefill", Decode: "decode", LMHead: "lmhead"},
	}
	setFrom(&s.Contract, h.Contract)
	setFrom(&s.Mask, h.Mask)
	setFrom(&s.NHeads, h.NHeads)
	setFrom(&s.NKVHeads, h.NKVHeads)
	setFrom(&s.PrefillWindow, h.PrefillWindow)
	setFrom(&s.RMSEps, h.RMSEps)
	setFrom(&s.RopeScaling, h.RopeScaling)
	if s.RopeScaling.Type == "" && s.RopeScaling.Factor > 0 { // a factor without a type has always been llama3's
		s.RopeScaling.Type = rope.TypeLlama3
	}
	if h.Tensors != nil {
		s.Tensors = mergeTensors(&s.Tensors, *h.Tensors)
	}
	eos := DefaultEOS
	if h.EOSTokenIDs != nil {
		eos = h.EOSTokenIDs
	}
	s.EOSTokenIDs = slices.Clone(eos)
	for _, id := range p.EOSTokenID {
		if !slices.Contains(s.EOSTokenIDs, id) {
			s.EOSTokenIDs = append(s.EOSTokenIDs, id)
		}
	}
	setFrom(&s.BOS, m.Chat.BOS)
	g := m.Plan.Params
	if g.Prefill != "" {
		s.Graphs.Prefill = g.Prefill
	}
	if g.Decode != "" {
		s.Graphs.Decode = g.Decode
	}
	if g.LMHead != "" {
		s.Graphs.LMHead = g.LMHead
	}

	switch {
	case s.Contract != ContractQHexRT && s.Contract != ContractChunked:
		return s, fmt.Errorf("hexserve.contract %q: want %s or %s", s.Contract, ContractQHexRT, ContractChunked)
	case s.Mask != MaskAdditive && s.Mask != MaskU16:
		return s, fmt.Errorf("hexserve.mask %q: want %s or %s", s.Mask, MaskAdditive, MaskU16)
	case s.NHeads <= 0 || s.NKVHeads <= 0 || s.NHeads%s.NKVHeads != 0:
		return s, fmt.Errorf("hexserve.n_heads %d must be a positive multiple of n_kv_heads %d", s.NHeads, s.NKVHeads)
	case s.NKVHeads*p.HeadDim != p.KVDim:
		return s, fmt.Errorf("hexserve.n_kv_heads %d × params.head_dim %d != params.kv_dim %d", s.NKVHeads, p.HeadDim, p.KVDim)
	case s.PrefillWindow < 0 || s.PrefillWindow > p.MaxCtx:
		return s, fmt.Errorf("hexserve.prefill_window %d outside [1, params.max_ctx %d]", s.PrefillWindow, p.MaxCtx)
	case !(s.RMSEps > 0) || math.IsInf(s.RMSEps, 0):
		return s, fmt.Errorf("hexserve.rms_eps must be positive, got %g", s.RMSEps)
	case s.RopeScaling.Kind() != "" && s.RopeScaling.Kind() != rope.TypeLlama3:
		return s, fmt.Errorf("hexserve.rope_scaling.rope_type %q: a QHexRT bundle runs llama3 scaling or none", s.RopeScaling.Type)
	case s.RopeScaling.Check(p.HeadDim) != nil:
		return s, fmt.Errorf("hexserve.rope_scaling %+v is not a valid llama3 scaling", s.RopeScaling)
	}
	for _, t := range []struct{ key, v string }{{"past_k", s.Tensors.PastK}, {"past_v", s.Tensors.PastV}, {"new_k", s.Tensors.NewK}, {"new_v", s.Tensors.NewV}} {
		if !strings.Contains(t.v, "{i}") {
			return s, fmt.Errorf("hexserve.tensors.%s %q lacks the layer placeholder {i}", t.key, t.v)
		}
	}
	return s, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Write writes m as dir/manifest.json (indented), creating dir, through a
// temporary file renamed into place.
func Write(dir string, m *Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".manifest-*.json")
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("bundle: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("bundle: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, ManifestName)); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	return nil
}
