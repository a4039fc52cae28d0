package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/rs/zerolog"
)

// TestToolFormat: the setting wins; else the loaded template's text (from
// chat_template.jinja first, then tokenizer_config.json's, a string or a
// list) decides, then config.json's model_type; a model without files is
// Llama 3's; a config.json that cannot be read is logged and left out.
func TestToolFormat(t *testing.T) {
	write := func(dir string, files map[string]string) {
		for name, text := range files {
			if text == "fifo" { // a FIFO is refused, never waited on
				if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		setting string
		want    string
	}{
		{"nothing beside", map[string]string{"tokenizer.json": "{}"}, "", "llama3_json"},
		{"setting", map[string]string{"tokenizer.json": "{}", "chat_template.jinja": "<tool_call>"}, "granite", "granite"},
		{"jinja file", map[string]string{"tokenizer.json": "{}", "chat_template.jinja": "{{ '<tool_call>' }}",
			"tokenizer_config.json": `{"chat_template": "<|tool_call|>"}`}, "", "hermes"},
		{"tokenizer_config string, Falcon3", map[string]string{"tokenizer.json": "{}", "tokenizer_config.json": `{"chat_template": "<tool_call>"}`,
			"config.json": `{"model_type": "llama"}`}, "", "hermes"},
		{"tokenizer_config list", map[string]string{"tokenizer.json": "{}",
			"tokenizer_config.json": `{"chat_template": [{"name": "default", "template": "x"}, {"name": "tool_use", "template": "<|tool_call|>"}]}`}, "", "granite"},
		{"model_type fallback", map[string]string{"tokenizer.json": "{}", "tokenizer_config.json": `{"chat_template": "<|im_start|>"}`,
			"config.json": `{"model_type": "qwen3"}`}, "", "hermes"},
		{"no marker, no model_type", map[string]string{"tokenizer.json": "{}", "chat_template.jinja": "<|user|>"}, "", "json"},
		{"config.json a FIFO", map[string]string{"tokenizer.json": "{}", "chat_template.jinja": "<|user|>", "config.json": "fifo"}, "", "json"},
		{"config.json over its cap", map[string]string{"tokenizer.json": "{}", "chat_template.jinja": "<|user|>",
			"config.json": `{"model_type": "granite"}` + strings.Repeat(" ", modelfile.MaxConfig)}, "", "json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir, tc.files)
			tmpl, _, err := loadTemplate(filepath.Join(dir, "tokenizer.json")) // as the load does
			if err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			f := toolFormat(config.Model{Path: filepath.Join(dir, "model.pte"), ToolParser: tc.setting}, tmpl, zerolog.New(&log))
			if f.Name() != tc.want {
				t.Errorf("format %s, want %s (log %s)", f.Name(), tc.want, log.String())
			}
			for word, want := range map[string]string{"cap": "more than the", "FIFO": "not a regular file"} {
				if strings.Contains(tc.name, word) && !strings.Contains(log.String(), want) {
					t.Errorf("log %s, want %q", log.String(), want)
				}
			}
		})
	}
}

// TestToolParsersAreFormats: the values config accepts for
// model.tool_parser are exactly the formats apiconv has.
func TestToolParsersAreFormats(t *testing.T) {
	var names []string
	for _, f := range apiconv.ToolFormats {
		names = append(names, f.Name())
	}
	if !slices.Equal(names, config.ToolParsers) {
		t.Errorf("formats %v, config accepts %v", names, config.ToolParsers)
	}
}
