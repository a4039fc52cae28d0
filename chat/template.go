package chat

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Template is a model's chat template. The zero Template (and Llama32) is
// the native Llama-3.2 renderer; ParseTemplate and LoadTemplate compile a
// Jinja chat_template, set up as transformers' apply_chat_template sets up
// Python Jinja2 (see the package doc, "Jinja templates").
type Template struct {
	main, toolUse *jinja.Template // nil main: the native Llama-3.2 renderer
	bos, eos      string
	specials      []string // special-token texts, longest first
	first         [256]bool
	source        string // the text LoadTemplate read (Source)
}

// Llama32 is the built-in Llama-3.2 template, rendered natively.
var Llama32 = &Template{}

// llama32SHA is the sha256 of the official Llama-3.2 chat_template, which
// the native renderer reproduces byte for byte; a model shipping it is
// rendered natively (faster, same text).
const llama32SHA = "5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4"

// TemplateTokens are what a template needs from the tokenizer's files.
type TemplateTokens struct {
	BOS, EOS string // the bos_token and eos_token variables
	// Specials are the texts of the special added tokens: rendered output is
	// split at these (outside message content) into Special segments.
	Specials []string
}

// NamedTemplate is one entry of tokenizer_config.json's list form of
// chat_template.
type NamedTemplate struct {
	Name, Template string
}

// ParseTemplate compiles a Jinja chat template. named, when not empty, is
// the list form: "default" is rendered, and "tool_use" when the request
// has tools, as transformers chooses.
func ParseTemplate(source string, named []NamedTemplate, tok TemplateTokens) (*Template, error) {
	var toolUseSrc string
	if len(named) > 0 {
		source = ""
		for _, n := range named {
			switch n.Name {
			case "default":
				source = n.Template
			case "tool_use":
				toolUseSrc = n.Template
			}
		}
		if source == "" {
			return nil, errors.New(`chat: chat_template list has no "default" template`)
		}
	}
	t := &Template{bos: tok.BOS, eos: tok.EOS}
	var err error
	if t.main, err = compile(source); err != nil {
		return nil, err
	}
	if toolUseSrc != "" {
		if t.toolUse, err = compile(toolUseSrc); err != nil {
			return nil, err
		}
	}
	for _, s := range tok.Specials {
		if s != "" {
			t.specials = append(t.specials, s)
			t.first[s[0]] = true
		}
	}
	sort.SliceStable(t.specials, func(i, j int) bool { return len(t.specials[i]) > len(t.specials[j]) })
	return t, nil
}

func compile(source string) (*jinja.Template, error) {
	if strings.ContainsFunc(source, isMarkRune) {
		return nil, errors.New("chat: the chat template contains supplementary private-use characters (U+100000..U+10FFFD), which the renderer reserves")
	}
	tmpl, err := jinja.Compile(renameFilters(source))
	if err != nil {
		return nil, fmt.Errorf("chat: chat template: %w", err)
	}
	return tmpl, nil
}

// LoadTemplate reads the chat template beside a tokenizer.json in dir:
// chat_template.jinja if present (as transformers prefers it), else
// tokenizer_config.json's chat_template. bos_token, eos_token and the
// special tokens come from tokenizer_config.json (its added_tokens_decoder
// entries marked special), else from tokenizer.json's added_tokens. ok is
// false when dir has no template. The official Llama-3.2 template gives
// Llama32, the native renderer: same text, faster (TestNativeAgreesWithJinja).
// read reads each file (the server passes its model-file reader, which
// refuses FIFOs and devices and caps each file; a missing file is
// os.ErrNotExist).
func LoadTemplate(read func(path string) ([]byte, error), dir string) (t *Template, ok bool, err error) {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		Added        map[string]struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens_decoder"`
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	if data, err := read(cfgPath); err == nil {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, false, fmt.Errorf("chat: %s: %w", cfgPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	var source string
	var named []NamedTemplate
	if data, err := read(filepath.Join(dir, "chat_template.jinja")); err == nil {
		source = string(data)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	} else if c := bytes.TrimSpace(cfg.ChatTemplate); len(c) > 0 && string(c) != "null" {
		if c[0] == '[' {
			err = json.Unmarshal(c, &named)
		} else {
			err = json.Unmarshal(c, &source)
		}
		if err != nil {
			return nil, false, fmt.Errorf("chat: %s: chat_template: %w", cfgPath, err)
		}
	}
	if source == "" && len(named) == 0 {
		return nil, false, nil
	}
	tok := TemplateTokens{BOS: tokenText(cfg.BOS), EOS: tokenText(cfg.EOS)}
	for _, a := range cfg.Added {
		if a.Special {
			tok.Specials = append(tok.Specials, a.Content)
		}
	}
	if len(cfg.Added) == 0 {
		if tok.Specials, err = tokenizerSpecials(read, filepath.Join(dir, "tokenizer.json")); err != nil {
			return nil, false, err
		}
	}
	text := source
	for _, n := range named {
		text += n.Template + "\n"
	}
	if sum := sha256.Sum256([]byte(source)); hex.EncodeToString(sum[:]) == llama32SHA {
		native := *Llama32
		native.source = text
		return &native, true, nil
	}
	if t, err = ParseTemplate(source, named, tok); err != nil {
		return nil, false, err
	}
	t.source = text
	return t, true, nil
}

// Source is the template text LoadTemplate read (a list's templates one after another), for
// what the server detects in it (tool-call format, reasoning); "" for a template not loaded
// from files (Llama32, ParseTemplate's).
func (t *Template) Source() string {
	if t == nil {
		return ""
	}
	return t.source
}

// tokenText is a bos_token/eos_token value: a string, an AddedToken
// object's content, or null.
func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct{ Content string }
	_ = json.Unmarshal(raw, &o)
	return o.Content
}

func tokenizerSpecials(read func(string) ([]byte, error), path string) ([]string, error) {
	data, err := read(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var tj struct {
		Added []struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("chat: %s: %w", path, err)
	}
	var out []string
	for _, a := range tj.Added {
		if a.Special {
			out = append(out, a.Content)
		}
	}
	return out, nil
}

// Native reports whether t is the native Llama-3.2 renderer.
func (t *Template) Native() bool { return t == nil || t.main == nil }

// render renders msgs with t's Jinja template (RenderSegments with
// Options.Template set): Special segments are the template's own special
// tokens, and message content (and every other string of the request) is
// plain text, whatever special-token strings it contains.
func (t *Template) render(msgs []Message, opt Options) ([]Segment, error) {
	if err := validate(msgs); err != nil {
		return nil, err
	}
	if opt.Context != nil && opt.Context.Err() != nil {
		return nil, opt.Context.Err()
	}
	r := &jinjaRender{t: t, opt: opt, marks: marker{specials: t.specials, first: &t.first}}
	data, err := r.data(msgs)
	if err != nil {
		return nil, err
	}
	if r.marks.full {
		return nil, errorf("messages", "the request has too many distinct private-use characters (U+100000..U+10FFFD)")
	}
	tmpl := t.main
	if t.toolUse != nil && len(opt.Tools) > 0 {
		tmpl = t.toolUse
	}
	out, err := renderValues(tmpl, data)
	switch {
	case r.stop != nil:
		return nil, r.stop
	case r.raised != nil:
		return nil, &Error{Param: "messages", Message: *r.raised}
	case err != nil:
		return nil, &Error{Param: "messages", Message: "the chat template failed: " + err.Error()}
	}
	segs, n := r.marks.split(out)
	if opt.MaxBytes > 0 && n > opt.MaxBytes {
		return nil, &LengthError{MaxBytes: opt.MaxBytes}
	}
	if opt.Context != nil && opt.Context.Err() != nil {
		return nil, opt.Context.Err()
	}
	return segs, nil
}

// renderValues runs the engine, turning a panic inside it into an error:
// a template the engine mishandles must fail one request, not the server.
func renderValues(tmpl *jinja.Template, data map[string]jinja.Value) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the template engine failed: %v", p)
		}
	}()
	return tmpl.RenderValues(data)
}

// jinjaRender is one rendering's state: the content marks, and the
// template's raise_exception message or a bound reached in tojson.
type jinjaRender struct {
	t      *Template
	opt    Options
	marks  marker
	raised *string
	stop   error // a LengthError or the context's error
	n      int   // bytes tojson produced
}

// reserved are the variables a request's template kwargs cannot replace.
var reserved = map[string]bool{"messages": true, "tools": true, "add_generation_prompt": true,
	"bos_token": true, "eos_token": true, "raise_exception": true, "strftime_now": true, tojsonName: true, trimName: true}

func (r *jinjaRender) data(msgs []Message) (map[string]jinja.Value, error) {
	d := make(map[string]jinja.Value, 12+len(r.opt.Kwargs))
	date := r.opt.DateString
	if date == "" {
		date = DefaultDate
	}
	d["date_string"] = r.str(date)
	if r.opt.ToolsInSystem {
		d["tools_in_user_message"] = jinja.NewBool(false)
	}
	for k, v := range r.opt.Kwargs {
		if !reserved[k] {
			val, err := r.value(v)
			if err != nil {
				return nil, errorf("chat_template_kwargs."+k, "%v", err)
			}
			d[k] = val
		}
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		v, err := r.message(i, m)
		if err != nil {
			return nil, err
		}
		list[i] = v
	}
	d["messages"] = jinja.NewList(list)
	d["tools"] = jinja.None()
	if len(r.opt.Tools) > 0 {
		tools := make([]jinja.Value, len(r.opt.Tools))
		for i, raw := range r.opt.Tools {
			v, err := parseJSONDepth(string(raw), MaxToolDepth)
			if err != nil {
				return nil, errorf(fmt.Sprintf("tools[%d]", i), "%v", err)
			}
			tools[i] = r.fromJSON(v)
		}
		d["tools"] = jinja.NewList(tools)
	}
	d["add_generation_prompt"] = jinja.NewBool(r.opt.AddGenerationPrompt)
	d["bos_token"], d["eos_token"] = jinja.NewString(r.t.bos), jinja.NewString(r.t.eos)
	d["raise_exception"] = jinja.NewCallable("raise_exception", r.raise)
	d[tojsonName] = jinja.NewCallable("tojson", r.tojson)
	d[trimName] = jinja.NewCallable("trim", trim)
	return d, nil
}

// message is m as transformers and vLLM pass it: tool calls as
// {"id", "type": "function", "function": {"name", "arguments": <object>}},
// and reasoning_content, tool_call_id and name only when set.
func (r *jinjaRender) message(i int, m Message) (jinja.Value, error) {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", r.str(m.Content))
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", r.str(m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for j, tc := range m.ToolCalls {
			args := jsonValue{kind: jsonObject}
			if len(strings.TrimSpace(string(tc.Arguments))) > 0 {
				a, err := parseJSON(string(tc.Arguments))
				if err != nil {
					return jinja.Value{}, errorf(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j), "%v", err)
				}
				args = a
			}
			fn := jinja.NewDict()
			fn.AsDict().Set("name", r.str(tc.Name))
			fn.AsDict().Set("arguments", r.fromJSON(args))
			c := jinja.NewDict()
			if tc.ID != "" {
				c.AsDict().Set("id", r.str(tc.ID))
			}
			c.AsDict().Set("type", jinja.NewString("function"))
			c.AsDict().Set("function", fn)
			calls[j] = c
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", r.str(m.ToolCallID))
	}
	if m.Name != "" {
		d.Set("name", r.str(m.Name))
	}
	return v, nil
}

// str is a request string, its special-token texts marked.
func (r *jinjaRender) str(s string) jinja.Value { return jinja.NewString(r.marks.mark(s)) }

// fromJSON converts v keeping its key order, as Python's json.loads does.
// An integer beyond int64 becomes a string of one mark standing for its
// digits, which tojson prints bare: Python keeps all its digits.
func (r *jinjaRender) fromJSON(v jsonValue) jinja.Value {
	switch v.kind {
	case jsonNull:
		return jinja.None()
	case jsonBool:
		return jinja.NewBool(v.str == "true")
	case jsonNumber:
		if !strings.ContainsAny(v.str, ".eE") {
			if n, err := strconv.ParseInt(v.str, 10, 64); err == nil {
				return jinja.NewInt(n)
			}
			return jinja.NewString(string(r.marks.markFor(bigIntPrefix + pyNumber(v.str))))
		}
		f, _ := strconv.ParseFloat(v.str, 64)
		return jinja.NewFloat(f)
	case jsonString:
		return r.str(v.str)
	case jsonArray:
		items := make([]jinja.Value, len(v.elem))
		for i, e := range v.elem {
			items[i] = r.fromJSON(e)
		}
		return jinja.NewList(items)
	}
	d := jinja.NewDict()
	for i, k := range v.keys {
		d.AsDict().Set(r.marks.mark(k), r.fromJSON(v.elem[i]))
	}
	return d
}

// value converts a template kwarg: JSON (json.RawMessage keeps key order)
// or the Go values encoding/json decodes into (map keys sorted).
func (r *jinjaRender) value(v any) (jinja.Value, error) {
	switch v := v.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(v), nil
	case string:
		return r.str(v), nil
	case int:
		return jinja.NewInt(int64(v)), nil
	case int64:
		return jinja.NewInt(v), nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return jinja.NewInt(int64(v)), nil
		}
		return jinja.NewFloat(v), nil
	case json.RawMessage:
		j, err := parseJSONDepth(string(v), MaxToolDepth)
		if err != nil {
			return jinja.Value{}, err
		}
		return r.fromJSON(j), nil
	case []any:
		items := make([]jinja.Value, len(v))
		for i, e := range v {
			var err error
			if items[i], err = r.value(e); err != nil {
				return jinja.Value{}, err
			}
		}
		return jinja.NewList(items), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := jinja.NewDict()
		for _, k := range keys {
			e, err := r.value(v[k])
			if err != nil {
				return jinja.Value{}, err
			}
			d.AsDict().Set(r.marks.mark(k), e)
		}
		return d, nil
	}
	return jinja.Value{}, fmt.Errorf("unsupported value of type %T", v)
}

// raise is the template's raise_exception: the message becomes a 400.
func (r *jinjaRender) raise(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	msg := "raise_exception"
	if len(args) > 0 {
		if msg = args[0].String(); args[0].IsString() {
			msg = args[0].AsString()
		}
		msg = r.marks.unmark(msg)
	}
	r.raised = &msg
	return jinja.Undefined(), errors.New(msg)
}

// tojson is transformers' tojson filter (see tojson.go). It also checks
// the bounds, as tool lists are the bulk of a large prompt.
func (r *jinjaRender) tojson(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: no value")
	}
	s, err := pyJSONValue(args[0], kw, &r.marks)
	if err != nil {
		return jinja.Undefined(), err
	}
	r.n += len(s)
	if r.opt.MaxBytes > 0 && r.n > r.opt.MaxBytes {
		r.stop = &LengthError{MaxBytes: r.opt.MaxBytes}
	} else if r.opt.Context != nil && r.opt.Context.Err() != nil {
		r.stop = r.opt.Context.Err()
	}
	if r.stop != nil {
		return jinja.Undefined(), r.stop
	}
	return jinja.NewString(s), nil
}
