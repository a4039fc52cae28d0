package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/chat"
)

// TestLoadTemplateBesideTokenizer: a model's template comes from beside its
// tokenizer.json; without one it is the built-in Llama-3.2 template.
func TestLoadTemplateBesideTokenizer(t *testing.T) {
	bare := t.TempDir()
	own := t.TempDir()
	if err := os.WriteFile(filepath.Join(own, "tokenizer_config.json"), []byte(`{"chat_template":"{{ messages[0].content }}!"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "chat_template.jinja"), []byte(`{% for %}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, from, err := loadTemplate(filepath.Join(bare, "tokenizer.json"))
	if err != nil || tmpl != chat.Llama32 || from != "built-in Llama-3.2" {
		t.Errorf("bare folder: %v %q %v", tmpl, from, err)
	}
	tmpl, from, err = loadTemplate(filepath.Join(own, "tokenizer.json"))
	if err != nil || tmpl.Native() || from != own {
		t.Fatalf("own template: %q %v", from, err)
	}
	if got, err := chat.Render([]chat.Message{{Role: "user", Content: "hi"}}, chat.Options{Template: tmpl}); err != nil || got != "hi!" {
		t.Errorf("rendered %q, %v", got, err)
	}
	if _, _, err := loadTemplate(filepath.Join(broken, "tokenizer.json")); err == nil || !strings.Contains(err.Error(), "chat template") {
		t.Errorf("a broken template loaded: %v", err)
	}
}
