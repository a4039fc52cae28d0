package ollama

import (
	"fmt"
	"strings"
	"time"

	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/inference/sample"
)

// Version is the Ollama API version /api/version reports: the release whose
// API these endpoints follow, so clients that check it accept the server.
const Version = "0.33.0"

// Card describes the served model for /api/tags, /api/ps and /api/show.
type Card struct {
	Name          string // the served model id
	Format        string // "qhexrt" (bundle) or "pte" (ExecuTorch)
	Family        string // "llama"
	ParameterSize string // "3.2B"; "" is unknown
	Quantization  string // "W8A16"; "" is unknown
	Size          int64  // bytes of the model's files
	Digest        string // sha256 of the files' identity (names, sizes, times)
	ModifiedAt    time.Time
	ContextLen    int
	VocabSize     int
	// Defaults are the server's sampling defaults (the Modelfile parameters).
	Defaults sample.Params
	// Date is the template's date (for the template text).
	Date string
	// ExpiresAt is when the loaded model will be unloaded (/api/ps); zero:
	// it stays loaded.
	ExpiresAt time.Time
	Arch      Arch
}

// Arch is the model's shape from its config; 0 is unknown.
type Arch struct {
	Params              int64 // parameters, tied embeddings counted once
	Hidden, Layers, FFN int   // embedding length, blocks, feed-forward length
	Heads, KVHeads      int
}

// capabilities are what the served Llama-3.2 instruct model does.
var capabilities = []string{"completion", "tools"}

func (c Card) details() ModelDetails {
	return ModelDetails{Format: c.Format, Family: c.Family, Families: []string{c.Family},
		ParameterSize: orUnknown(c.ParameterSize), QuantizationLevel: orUnknown(c.Quantization), ContextLength: c.ContextLen}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// List is the /api/tags body: the served models.
func List(cs ...Card) ListResponse {
	out := ListResponse{Models: []ListModel{}}
	for _, c := range cs {
		out.Models = append(out.Models, ListModel{Name: c.Name, Model: c.Name, ModifiedAt: c.ModifiedAt, Size: c.Size,
			Digest: c.Digest, Details: c.details(), Capabilities: capabilities})
	}
	return out
}

// NeverExpires is /api/ps's expires_at of a model that stays loaded while
// the server runs.
var NeverExpires = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// Process is the /api/ps body: the loaded models, all of each on the
// accelerator, with when each will be unloaded.
func Process(cs ...Card) ProcessResponse {
	out := ProcessResponse{Models: []ProcessModel{}}
	for _, c := range cs {
		exp := c.ExpiresAt
		if exp.IsZero() {
			exp = NeverExpires
		}
		out.Models = append(out.Models, ProcessModel{Name: c.Name, Model: c.Name, Size: c.Size, Digest: c.Digest,
			Details: c.details(), ExpiresAt: exp, SizeVRAM: c.Size, ContextLength: c.ContextLen})
	}
	return out
}

// Show is the /api/show body: details, model_info with the keys Ollama
// sends for the model's shape (those its config gives), the prompt template
// as this server renders it, and the sampling defaults as Modelfile
// parameters.
func Show(c Card) ShowResponse {
	info := map[string]any{
		"general.architecture":       c.Family,
		"general.basename":           c.Name,
		c.Family + ".context_length": c.ContextLen,
		c.Family + ".vocab_size":     c.VocabSize,
	}
	a := c.Arch
	for key, v := range map[string]int64{
		"general.parameter_count":             a.Params,
		c.Family + ".embedding_length":        int64(a.Hidden),
		c.Family + ".block_count":             int64(a.Layers),
		c.Family + ".attention.head_count":    int64(a.Heads),
		c.Family + ".attention.head_count_kv": int64(a.KVHeads),
		c.Family + ".feed_forward_length":     int64(a.FFN),
	} {
		if v > 0 {
			info[key] = v
		}
	}
	params := c.parameters()
	tmpl := Template(c.Date)
	mf := fmt.Sprintf("# hexserve serves %s from the device's model files.\nFROM %s\nTEMPLATE \"\"\"%s\"\"\"\n%s",
		c.Name, c.Name, tmpl, params)
	return ShowResponse{Modelfile: mf, Parameters: params, Template: tmpl, Details: c.details(), ModelInfo: info,
		Capabilities: capabilities, ModifiedAt: c.ModifiedAt}
}

func (c Card) parameters() string {
	var b strings.Builder
	for _, st := range chat.StopTokens {
		fmt.Fprintf(&b, "stop %q\n", st)
	}
	d := c.Defaults
	fmt.Fprintf(&b, "temperature %g\n", d.Temperature)
	if d.TopP > 0 && d.TopP < 1 {
		fmt.Fprintf(&b, "top_p %g\n", d.TopP)
	}
	if d.TopK > 0 {
		fmt.Fprintf(&b, "top_k %d\n", d.TopK)
	}
	if d.MinP > 0 {
		fmt.Fprintf(&b, "min_p %g\n", d.MinP)
	}
	if d.RepetitionPenalty > 0 && d.RepetitionPenalty != 1 {
		fmt.Fprintf(&b, "repeat_penalty %g\n", d.RepetitionPenalty)
	}
	fmt.Fprintf(&b, "num_ctx %d\n", c.ContextLen)
	return b.String()
}

// Template is the prompt this server renders for a system message and a user
// prompt, with {{ .System }} and {{ .Prompt }} in their place: the
// Llama-3.2 template is native code (package chat), not a text template, so
// this shows its output rather than its source.
func Template(date string) string {
	text, err := chat.Render([]chat.Message{{Role: "system", Content: "{{ .System }}"}, {Role: "user", Content: "{{ .Prompt }}"}},
		chat.Options{AddGenerationPrompt: true, DateString: date})
	if err != nil {
		return "" // cannot happen: the messages are valid
	}
	return text
}
