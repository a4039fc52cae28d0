// Package bundle reads and writes model bundles: one folder per DSP
// architecture holding a QHexRT-style manifest (schema v1 plus hexserve's own
// `hexserve` object), the QNN context binaries, the f16 embedding table and
// tokenizer.json. Read resolves a bundle path to its arch folder, applies
// defaults, and checks that every referenced file exists.
package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hexserve/hexserve/internal/rope"
)

// SchemaVersion is the manifest envelope version this package reads and writes.
const SchemaVersion = 1

// Manifest is the manifest JSON. Keys this package does not know are kept in
// Extra fields and written back unchanged.
type Manifest struct {
	SchemaVersion int       `json:"schema_version"`
	Model         Model     `json:"model"`
	Params        Params    `json:"params"`
	Artifacts     Artifacts `json:"artifacts"`
	Plan          Plan      `json:"plan"`
	Chat          Chat      `json:"chat"`
	Hexserve      *Hexserve `json:"hexserve,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Model is the manifest's `model` object.
type Model struct {
	Name    string `json:"name"`
	Family  string `json:"family,omitempty"`
	DSPArch string `json:"dsp_arch"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Params is the manifest's `params` object (model shape).
type Params struct {
	Hidden     int     `json:"hidden"`
	Vocab      int     `json:"vocab"`
	NLayers    int     `json:"n_layers"`
	MaxCtx     int     `json:"max_ctx"`
	KVDim      int     `json:"kv_dim"`
	HeadDim    int     `json:"head_dim"`
	RopeTheta  float64 `json:"rope_theta"`
	EOSTokenID IDs     `json:"eos_token_id,omitempty"`
	// MaxPositions is the most positions the model was trained for (Hugging
	// Face's max_position_embeddings; Llama 3.2: 131072); 0: not given. A
	// context shift never passes it.
	MaxPositions int `json:"max_position_embeddings,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Artifacts is the manifest's `artifacts` object. Paths are relative to the
// manifest's folder (absolute paths are used as they are).
type Artifacts struct {
	// Contexts maps prefill, decode, lmhead (or shared) to a context binary.
	Contexts  map[string]Context `json:"contexts"`
	Embed     string             `json:"embed"`
	Tokenizer string             `json:"tokenizer"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Context names one context binary.
type Context struct {
	Bin string `json:"bin"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Plan is the manifest's `plan` object.
type Plan struct {
	Params PlanParams `json:"params"`

	Extra map[string]json.RawMessage `json:"-"`
}

// PlanParams names the graphs inside the context binaries.
type PlanParams struct {
	Prefill string `json:"prefill,omitempty"`
	Decode  string `json:"decode,omitempty"`
	LMHead  string `json:"lmhead,omitempty"`

	Extra map[string]json.RawMessage `json:"-"`
}

// Chat is the manifest's `chat` object.
type Chat struct {
	BOS *int `json:"-"` // `bos`: read from a number or an array, written as [id]

	Extra map[string]json.RawMessage `json:"-"`
}

// Hexserve holds hexserve's own manifest keys. Every field may be missing
// (nil or empty): a seed manifest has none of them, and the server config can
// supply the same object as overrides.
type Hexserve struct {
	Contract      *string       `json:"contract,omitempty" yaml:"contract"`
	NHeads        *int          `json:"n_heads,omitempty" yaml:"n_heads"`
	NKVHeads      *int          `json:"n_kv_heads,omitempty" yaml:"n_kv_heads"`
	PrefillWindow *int          `json:"prefill_window,omitempty" yaml:"prefill_window"`
	RMSEps        *float64      `json:"rms_eps,omitempty" yaml:"rms_eps"`
	RopeScaling   *rope.Scaling `json:"rope_scaling,omitempty" yaml:"rope_scaling"`
	EOSTokenIDs   []int         `json:"eos_token_ids,omitempty" yaml:"eos_token_ids"`
	Mask          *string       `json:"mask,omitempty" yaml:"mask"`
	Tensors       *Tensors      `json:"tensors,omitempty" yaml:"tensors"`

	Extra map[string]json.RawMessage `json:"-" yaml:"-"`
}

// Validate checks the values a manifest or the server config
// (model.overrides) sets; the error starts with the key ("mask: must be
// additive or u16").
func (h *Hexserve) Validate() error {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	nonPositive := func(p *int) bool { return p != nil && *p <= 0 }
	checks := []struct {
		bad       bool
		key, what string
	}{
		{!slices.Contains([]string{"", ContractQHexRT, ContractChunked}, str(h.Contract)), "contract", "must be qhexrt or chunked"},
		{!slices.Contains([]string{"", MaskAdditive, MaskU16}, str(h.Mask)), "mask", "must be additive or u16"},
		{nonPositive(h.NHeads), "n_heads", "must be > 0"},
		{nonPositive(h.NKVHeads), "n_kv_heads", "must be > 0"},
		{nonPositive(h.PrefillWindow), "prefill_window", "must be > 0"},
		{h.RMSEps != nil && *h.RMSEps <= 0, "rms_eps", "must be > 0"},
		{h.RopeScaling != nil && h.RopeScaling.Factor <= 0, "rope_scaling.factor", "must be > 0"},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("%s: %s", ch.key, ch.what)
		}
	}
	for _, id := range h.EOSTokenIDs {
		if id < 0 {
			return fmt.Errorf("eos_token_ids: %d: must be >= 0", id)
		}
	}
	return nil
}

// Tensors binds graph tensor roles to names; `{i}` in the per-layer names is
// the layer index. Empty fields take the defaults (DefaultTensors).
type Tensors struct {
	X     string `json:"x,omitempty" yaml:"x"`
	Cos   string `json:"cos,omitempty" yaml:"cos"`
	Sin   string `json:"sin,omitempty" yaml:"sin"`
	CMask string `json:"cmask,omitempty" yaml:"cmask"`
	Y     string `json:"y,omitempty" yaml:"y"`
	PastK string `json:"past_k,omitempty" yaml:"past_k"`
	PastV string `json:"past_v,omitempty" yaml:"past_v"`
	NewK  string `json:"new_k,omitempty" yaml:"new_k"`
	NewV  string `json:"new_v,omitempty" yaml:"new_v"`
}

// Layer expands a per-layer name template for layer i.
func Layer(template string, i int) string {
	return strings.ReplaceAll(template, "{i}", strconv.Itoa(i))
}

// IDs is a token id list written as a single number when it has one element;
// it reads a number or an array.
type IDs []int

// MarshalJSON writes one id as a number, several as an array.
func (v IDs) MarshalJSON() ([]byte, error) {
	if len(v) == 1 {
		return json.Marshal(v[0])
	}
	return json.Marshal([]int(v))
}

// UnmarshalJSON reads a number or an array of numbers.
func (v *IDs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*v = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		var ids []int
		if err := json.Unmarshal(b, &ids); err != nil {
			return err
		}
		*v = ids
		return nil
	}
	var id int
	if err := json.Unmarshal(b, &id); err != nil {
		return err
	}
	*v = IDs{id}
	return nil
}

// The JSON methods below keep unknown keys: each type decodes its known
// fields through an alias (which has no JSON methods) and stashes the rest in
// Extra, and writes Extra back.

// UnmarshalJSON decodes Manifest, keeping unknown keys in Extra.
func (m *Manifest) UnmarshalJSON(b []byte) error {
	type plain Manifest
	return decodeKeep(b, (*plain)(m), &m.Extra)
}

// MarshalJSON encodes Manifest with its Extra keys.
func (m Manifest) MarshalJSON() ([]byte, error) {
	type plain Manifest
	return encodeKeep(plain(m), m.Extra)
}

// UnmarshalJSON decodes Model, keeping unknown keys in Extra.
func (m *Model) UnmarshalJSON(b []byte) error {
	type plain Model
	return decodeKeep(b, (*plain)(m), &m.Extra)
}

// MarshalJSON encodes Model with its Extra keys.
func (m Model) MarshalJSON() ([]byte, error) {
	type plain Model
	return encodeKeep(plain(m), m.Extra)
}

// UnmarshalJSON decodes Params, keeping unknown keys in Extra.
func (p *Params) UnmarshalJSON(b []byte) error {
	type plain Params
	return decodeKeep(b, (*plain)(p), &p.Extra)
}

// MarshalJSON encodes Params with its Extra keys.
func (p Params) MarshalJSON() ([]byte, error) {
	type plain Params
	return encodeKeep(plain(p), p.Extra)
}

// UnmarshalJSON decodes Artifacts, keeping unknown keys in Extra.
func (x *Artifacts) UnmarshalJSON(b []byte) error {
	type plain Artifacts
	return decodeKeep(b, (*plain)(x), &x.Extra)
}

// MarshalJSON encodes Artifacts with its Extra keys.
func (x Artifacts) MarshalJSON() ([]byte, error) {
	type plain Artifacts
	return encodeKeep(plain(x), x.Extra)
}

// UnmarshalJSON decodes Context, keeping unknown keys in Extra.
func (c *Context) UnmarshalJSON(b []byte) error {
	type plain Context
	return decodeKeep(b, (*plain)(c), &c.Extra)
}

// MarshalJSON encodes Context with its Extra keys.
func (c Context) MarshalJSON() ([]byte, error) {
	type plain Context
	return encodeKeep(plain(c), c.Extra)
}

// UnmarshalJSON decodes Plan, keeping unknown keys in Extra.
func (p *Plan) UnmarshalJSON(b []byte) error {
	type plain Plan
	return decodeKeep(b, (*plain)(p), &p.Extra)
}

// MarshalJSON encodes Plan with its Extra keys.
func (p Plan) MarshalJSON() ([]byte, error) {
	type plain Plan
	return encodeKeep(plain(p), p.Extra)
}

// UnmarshalJSON decodes PlanParams, keeping unknown keys in Extra.
func (p *PlanParams) UnmarshalJSON(b []byte) error {
	type plain PlanParams
	return decodeKeep(b, (*plain)(p), &p.Extra)
}

// MarshalJSON encodes PlanParams with its Extra keys.
func (p PlanParams) MarshalJSON() ([]byte, error) {
	type plain PlanParams
	return encodeKeep(plain(p), p.Extra)
}

// UnmarshalJSON decodes Chat, keeping unknown keys in Extra. `bos` may be a
// number or an array (QHexRT's parser reads an array and takes its first id).
func (c *Chat) UnmarshalJSON(b []byte) error {
	var raw struct {
		BOS IDs `json:"bos"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	*c = Chat{}
	if len(raw.BOS) > 0 {
		bos := raw.BOS[0]
		c.BOS = &bos
	}
	delete(all, "bos")
	if len(all) > 0 {
		c.Extra = all
	}
	return nil
}

// MarshalJSON encodes Chat with `bos` as a one-element array, the form
// QHexRT's manifest parser requires.
func (c Chat) MarshalJSON() ([]byte, error) {
	var v struct {
		BOS []int `json:"bos,omitempty"`
	}
	if c.BOS != nil {
		v.BOS = []int{*c.BOS}
	}
	return encodeKeep(v, c.Extra)
}

// UnmarshalJSON decodes Hexserve, keeping unknown keys in Extra.
func (h *Hexserve) UnmarshalJSON(b []byte) error {
	type plain Hexserve
	return decodeKeep(b, (*plain)(h), &h.Extra)
}

// MarshalJSON encodes Hexserve with its Extra keys.
func (h Hexserve) MarshalJSON() ([]byte, error) {
	type plain Hexserve
	return encodeKeep(plain(h), h.Extra)
}

// decodeKeep decodes b into v (a pointer to a struct alias without JSON
// methods) and the keys v's json tags do not name into extra.
func decodeKeep(b []byte, v any, extra *map[string]json.RawMessage) error {
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range jsonKeys(reflect.TypeOf(v).Elem()) {
		delete(all, k)
	}
	if len(all) == 0 {
		all = nil
	}
	*extra = all
	return nil
}

// encodeKeep encodes v (fields in declaration order) followed by the extra
// keys it does not already have, sorted.
func encodeKeep(v any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var have map[string]json.RawMessage
	if err := json.Unmarshal(b, &have); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if _, known := have[k]; !known {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	buf := bytes.NewBuffer(b[:len(b)-1]) // drop the closing brace
	for _, k := range keys {
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(extra[k])
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// jsonKeys lists the JSON names of t's exported fields.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		keys = append(keys, name)
	}
	return keys
}
