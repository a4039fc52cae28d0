package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/internal/modelfile"
	"github.com/rs/zerolog"
)

// toolFormat is model entry e's tool-call format: model.tool_parser when set, else detected
// (apiconv.DetectToolFormat) from the loaded chat template's text (tmpl.Source) and config.json's
// model_type beside the model's tokenizer.json. A config.json that cannot be read is logged and
// left out of the detection.
func toolFormat(e config.Model, tmpl *chat.Template, log zerolog.Logger) apiconv.ToolFormat {
	name := e.ToolParser
	if name == "" {
		var cfg struct {
			ModelType string `json:"model_type"`
		}
		if dir := modelTokenizerDir(e); dir != "" {
			if err := modelfile.ReadJSON(filepath.Join(dir, "config.json"), &cfg); err != nil && !errors.Is(err, os.ErrNotExist) {
				log.Warn().Err(err).Msg("config.json cannot be read to detect the tool-call format (model.tool_parser)")
			}
		}
		name = apiconv.DetectToolFormat(tmpl.Source(), cfg.ModelType)
	}
	f, err := apiconv.ToolFormatNamed(name) // config.Validate checked a set one
	if err != nil {
		f = apiconv.Llama3JSON
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
