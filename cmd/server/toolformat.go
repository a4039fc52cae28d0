package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/front"
	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/rs/zerolog"
)

// Size caps of the files read to detect a model's tool-call format.
const (
	maxTemplateBytes = 1 << 20  // chat_template.jinja
	maxTokConfBytes  = 16 << 20 // tokenizer_config.json (its added tokens can be large)
	maxConfigBytes   = 1 << 20  // config.json
)

// toolFormat is model entry e's tool-call format: model.tool_parser when
// set, else detected (front.DetectToolFormat) from the chat template beside
// the model's tokenizer.json and config.json's model_type there. A file that
// cannot be read is logged and left out of the detection.
func toolFormat(e config.Model, log zerolog.Logger) front.ToolFormat {
	name := e.ToolParser
	if name == "" {
		dir := modelTokenizerDir(e)
		template, err := templateSource(dir)
		if err != nil {
			log.Warn().Err(err).Msg("the chat template cannot be read to detect the tool-call format (model.tool_parser)")
		}
		var cfg struct {
			ModelType string `json:"model_type"`
		}
		if err := readJSON(dir, "config.json", maxConfigBytes, &cfg); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn().Err(err).Msg("config.json cannot be read to detect the tool-call format (model.tool_parser)")
		}
		name = front.DetectToolFormat(template, cfg.ModelType)
	}
	f, err := front.ToolFormatNamed(name) // config.Validate checked a set one
	if err != nil {
		f = front.Llama3JSON
	}
	log.Info().Str("tool_parser", f.Name()).Bool("detected", e.ToolParser == "").Msg("tool-call format")
	return f
}

// modelTokenizerDir is the folder of e's tokenizer.json: model.tokenizer's, else
// the first of the model's folder and its two parents that holds one; ""
// when there is none.
func modelTokenizerDir(e config.Model) string {
	if e.Tokenizer != "" {
		return filepath.Dir(e.Tokenizer)
	}
	dir := e.Location()
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	for range 3 {
		if st, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil && st.Mode().IsRegular() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// templateSource is the chat template text in dir: chat_template.jinja, else
// tokenizer_config.json's chat_template (a string, or a list of named
// templates, all of whose texts are returned); "" when there is none.
func templateSource(dir string) (string, error) {
	b, err := readCapped(dir, "chat_template.jinja", maxTemplateBytes)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return string(b), err
	}
	var tc struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := readJSON(dir, "tokenizer_config.json", maxTokConfBytes, &tc); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		return "", err
	}
	var one string
	if json.Unmarshal(tc.ChatTemplate, &one) == nil {
		return one, nil
	}
	var named []struct {
		Template string `json:"template"`
	}
	if err := json.Unmarshal(tc.ChatTemplate, &named); err != nil && len(tc.ChatTemplate) > 0 {
		return "", fmt.Errorf("%s: chat_template is neither a string nor a list of templates", filepath.Join(dir, "tokenizer_config.json"))
	}
	var all string
	for _, t := range named {
		all += t.Template + "\n"
	}
	return all, nil
}

// readJSON decodes dir's file name, at most limit bytes, into v.
func readJSON(dir, name string, limit int64, v any) error {
	b, err := readCapped(dir, name, limit)
	if err != nil {
		return err
	}
	if err := modelfile.DecodeJSON(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// readCapped reads dir's regular file name through the model-file reader
// (no FIFO or device, never blocking), at most limit bytes; a missing dir
// or file is os.ErrNotExist.
func readCapped(dir, name string, limit int64) ([]byte, error) {
	if dir == "" {
		return nil, os.ErrNotExist
	}
	return modelfile.ReadFile(filepath.Join(dir, name), limit)
}
