package main

import (
	"github.com/hexserve/hexserve/config"
	"github.com/hexserve/hexserve/front"
	"github.com/rs/zerolog"
)

// reasoningParser is e's reasoning parser: model.reasoning_parser, else
// detected from the chat template beside the tokenizer (<think> in it:
// qwen3); nil for none. It is logged.
func reasoningParser(e config.Model, log zerolog.Logger) *front.ReasoningParser {
	template := ""
	if e.ReasoningParser == "" {
		var err error
		if template, err = templateSource(modelTokenizerDir(e)); err != nil {
			log.Warn().Err(err).Msg("the chat template cannot be read to detect the reasoning parser (model.reasoning_parser)")
		}
	}
	p, _ := front.ReasoningParserNamed(e.ReasoningParser, template) // config.Validate checked a set one
	name := "none"
	if p != nil {
		name = p.Name
	}
	log.Info().Str("reasoning_parser", name).Bool("detected", e.ReasoningParser == "").Msg("reasoning parser")
	return p
}
