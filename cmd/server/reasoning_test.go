package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hexserve/hexserve/config"
	"github.com/rs/zerolog"
)

// TestReasoningParser: the setting wins; else <think> in the loaded chat
// template's text means qwen3, and no template (Llama 3.x) none.
func TestReasoningParser(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		setting string
		want    string
	}{
		{"nothing beside", map[string]string{"tokenizer.json": "{}"}, "", "none"},
		{"Llama template", map[string]string{"tokenizer.json": "{}", "tokenizer_config.json": `{"chat_template": "<|start_header_id|>"}`}, "", "none"},
		{"Qwen3 template", map[string]string{"tokenizer.json": "{}", "chat_template.jinja": "{{- '<think>\\n\\n</think>\\n\\n' }}"}, "", "qwen3"},
		{"setting none wins", map[string]string{"tokenizer.json": "{}", "chat_template.jinja": "<think>"}, "none", "none"},
		{"setting", map[string]string{"tokenizer.json": "{}"}, "deepseek_r1", "deepseek_r1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			tmpl, _, err := loadTemplate(filepath.Join(dir, "tokenizer.json")) // as the load does
			if err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			p := reasoningParser(config.Model{Path: filepath.Join(dir, "model.pte"), ReasoningParser: tc.setting}, tmpl, zerolog.New(&log))
			got := "none"
			if p != nil {
				got = p.Name
			}
			if got != tc.want || !strings.Contains(log.String(), `"reasoning_parser":"`+tc.want+`"`) {
				t.Errorf("parser %s, want %s (log %s)", got, tc.want, log.String())
			}
		})
	}
}
