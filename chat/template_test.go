package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/internal/testjsonl"
)

// familiesDir holds the official template files (../shared, kept out of the
// repository; CI has it beside the clone).
const familiesDir = "../../shared/testdata/families"

// needFamilies skips a test when ../shared is missing, and fails it in CI.
func needFamilies(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(familiesDir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing under CI: %v", familiesDir, err)
		}
		t.Skipf("%s is missing (the official template files come from ../shared, outside the repository): %v", familiesDir, err)
	}
}

// familyCase is one line of testdata/families.jsonl (families.py).
type familyCase struct {
	Name     string
	Template string
	Messages []struct {
		Role             string
		Content          *string
		ReasoningContent string `json:"reasoning_content"`
		ToolCallID       string `json:"tool_call_id"`
		Name             string
		ToolCalls        []struct {
			ID       string
			Function struct {
				Name      string
				Arguments string
			}
		} `json:"tool_calls"`
	}
	Tools               []json.RawMessage
	Kwargs              map[string]json.RawMessage
	AddGenerationPrompt bool `json:"add_generation_prompt"`
	Rendered            *string
	Error               *string
}

func (c familyCase) input() ([]Message, Options) {
	var msgs []Message
	for _, m := range c.Messages {
		msg := Message{Role: m.Role, ReasoningContent: m.ReasoningContent, ToolCallID: m.ToolCallID, Name: m.Name}
		if m.Content != nil {
			msg.Content = *m.Content
		}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
		}
		msgs = append(msgs, msg)
	}
	opt := Options{Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: map[string]any{}}
	for k, v := range c.Kwargs {
		if k == "date_string" {
			_ = json.Unmarshal(v, &opt.DateString)
			continue
		}
		opt.Kwargs[k] = v
	}
	return msgs, opt
}

// loadCaseTemplate compiles a case's template with the Jinja engine (also
// the Llama-3.2 one, which LoadTemplate would render natively).
func loadCaseTemplate(t testing.TB, path string) *Template {
	t.Helper()
	dir := filepath.Join("..", filepath.Dir(path))
	if rest, ok := strings.CutPrefix(path, "families/"); ok {
		needFamilies(t)
		dir = filepath.Join(familiesDir, filepath.Dir(rest))
	}
	tmpl, ok, err := LoadTemplate(os.ReadFile, dir)
	if err != nil || !ok {
		t.Fatalf("LoadTemplate(%s): %v, %v", dir, ok, err)
	}
	if tmpl.Native() {
		cfg := readConfig(t, filepath.Join(dir, "tokenizer_config.json"))
		if tmpl, err = ParseTemplate(cfg.ChatTemplate, nil, TemplateTokens{BOS: cfg.BOS, EOS: cfg.EOS, Specials: llamaSpecials}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(path, "phi-3.5") { // no tokenizer_config.json: Phi-3-mini's tokens (SOURCE.md)
		tmpl.bos, tmpl.eos = "<s>", "<|endoftext|>"
	}
	return tmpl
}

var llamaSpecials = []string{BeginOfText, StartHeader, EndHeader, EndOfTurn, "<|eom_id|>", PythonTag, "<|end_of_text|>"}

type tokConfig struct {
	ChatTemplate string `json:"chat_template"`
	BOS          string `json:"bos_token"`
	EOS          string `json:"eos_token"`
}

func readConfig(t testing.TB, path string) tokConfig {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c tokConfig
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFamilyGoldens renders testdata/families.jsonl (Python Jinja2 set up as
// transformers, by families.py) with each family's own template: Llama-3.2,
// Qwen3 (thinking on/off, tools, tool-call turns with null content, tool
// results, reasoning_content before and after the last query), Qwen3-2507,
// Qwen2.5 and Phi-3.5.
// testdata/families_random.jsonl adds 400 random conversations over the
// four families' templates (special-token texts, <think> and private-use
// runes in content, reasoning_content, tool calls with odd numbers).
func TestFamilyGoldens(t *testing.T) {
	for _, name := range []string{"families.jsonl", "families_random.jsonl"} {
		t.Run(name, func(t *testing.T) { checkFamilyFile(t, "testdata/"+name) })
	}
}

func checkFamilyFile(t *testing.T, path string) {
	templates := map[string]*Template{}
	for _, c := range testjsonl.Read[familyCase](t, path) {
		t.Run(c.Name, func(t *testing.T) {
			tmpl := templates[c.Template]
			if tmpl == nil {
				tmpl = loadCaseTemplate(t, c.Template)
				templates[c.Template] = tmpl
			}
			msgs, opt := c.input()
			opt.Template = tmpl
			segs, err := RenderSegments(msgs, opt)
			if c.Error != nil {
				if e, ok := err.(*Error); !ok || e.Message != *c.Error {
					t.Fatalf("err = %v, want the template's %q", err, *c.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i, s := range segs {
				b.WriteString(s.Text)
				if s.Text == "" || (i > 0 && !s.Special && !segs[i-1].Special) {
					t.Errorf("segment %d: empty or adjacent plain segments", i)
				}
			}
			if got := b.String(); got != *c.Rendered {
				t.Errorf("mismatch\n got: %q\nwant: %q", got, *c.Rendered)
			}
		})
	}
}

// TestJinjaLlamaGoldens renders the Llama-3.2 goldens and the 800 random
// Python Jinja2 renderings of testdata/jinja2_*.jsonl through the Jinja
// path: Llama 3.x goes through the same engine exactly.
func TestJinjaLlamaGoldens(t *testing.T) {
	tmpl := loadCaseTemplate(t, "testdata/tokenizer/llama3.2/tokenizer_config.json")
	for _, g := range LoadGoldens(t) {
		msgs, opt := g.Input()
		opt.Template = tmpl
		got, err := Render(msgs, opt)
		if err != nil || got != g.Rendered {
			t.Errorf("%s: %v\n got: %q\nwant: %q", g.Name, err, got, g.Rendered)
		}
	}
	for _, name := range []string{"jinja2_random.jsonl", "jinja2_kwargs.jsonl"} {
		t.Run(name, func(t *testing.T) {
			checkJinja2File(t, "testdata/"+name, func(msgs []Message, opt Options) (string, error) {
				opt.Template = tmpl
				return Render(msgs, opt)
			})
		})
	}
}
