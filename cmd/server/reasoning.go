package main

import (
	"github.com/hexserve/hexserve/apiconv"
	"github.com/hexserve/hexserve/chat"
	"github.com/hexserve/hexserve/config"
	"github.com/rs/zerolog"
)

// reasoningParser is e's reasoning parser: model.reasoning_parser, else
// detected from the loaded chat template's text (<think> in it: qwen3);
// nil for none. It is logged.
func reasoningParser(e config.Model, tmpl *chat.Template, log zerolog.Logger) *apiconv.ReasoningParser {
	p, _ := apiconv.ReasoningParserNamed(e.ReasoningParser, tmpl.Source()) // config.Validate checked a set one
	name := "none"
	if p != nil {
		name = p.Name
	}
	log.Info().Str("reasoning_parser", name).Bool("detected", e.ReasoningParser == "").Msg("reasoning parser")
	return p
}
