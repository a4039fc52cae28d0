package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hexserve/hexserve/chat"
)

// writeFiles writes each of files (name to text) into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadTemplateBesideTokenizer: a model's template comes from beside its
// tokenizer.json; without one it is the built-in Llama-3.2 template.
func TestLoadTemplateBesideTokenizer(t *testing.T) {
	bare := t.TempDir()
	own := t.TempDir()
	writeFiles(t, own, map[string]string{"tokenizer_config.json": `{"chat_template":"{{ messages[0].content }}!"}`})
	broken := t.TempDir()
	writeFiles(t, broken, map[string]string{"chat_template.jinja": `{% for %}`})
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

// TestTemplateFilesRefused: the chat template's files beside tokenizer.json are read through the
// model-file reader: a FIFO or /dev/zero as chat_template.jinja or tokenizer_config.json fails the
// load within 5 s, naming the file, instead of blocking or filling memory.
func TestTemplateFilesRefused(t *testing.T) {
	for _, name := range []string{"chat_template.jinja", "tokenizer_config.json"} {
		for _, kind := range []string{"a named pipe", "a device"} {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
			p := filepath.Join(dir, name)
			var err error
			if kind == "a named pipe" {
				err = syscall.Mkfifo(p, 0o600)
			} else {
				err = os.Symlink("/dev/zero", p)
			}
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, _, err := loadTemplate(filepath.Join(dir, "tokenizer.json")); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), kind) {
					t.Errorf("%s as %s: %v", kind, name, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s as %s: the load did not return within 5 s", kind, name)
			}
		}
	}
}
