package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
