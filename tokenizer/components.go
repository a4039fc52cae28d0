package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// notSupported is the error for a component type this package lacks.
func notSupported(what, typ string) error {
	return fmt.Errorf("%s.type %q is not supported", what, typ)
}

// steps decodes a component that may be a Sequence of steps (list holds
// the Sequence's steps under its own key).
func steps(raw json.RawMessage, what string, list func(*componentJSON) []json.RawMessage) ([]componentJSON, error) {
	c, err := component(raw, what)
	if err != nil {
		return nil, err
	}
	if c.Type != "Sequence" {
		return []componentJSON{c}, nil
	}
	var out []componentJSON
	for _, r := range list(&c) {
		s, err := component(r, what)
		if err != nil {
			return nil, err
		}
		if s.Type == "Sequence" {
			return nil, fmt.Errorf("%s: a Sequence inside a Sequence is not supported", what)
		}
		out = append(out, s)
	}
	return out, nil
}

// parseNormalizer accepts null, NFC, Prepend, Replace with a string
// pattern, and a Sequence of those.
func parseNormalizer(raw json.RawMessage) ([]normStep, error) {
	if isNull(raw) {
		return nil, nil
	}
	cs, err := steps(raw, "normalizer", func(c *componentJSON) []json.RawMessage { return c.Normalizers })
	if err != nil {
		return nil, err
	}
	out := []normStep{}
	for _, c := range cs {
		switch c.Type {
		case "NFC":
			out = append(out, normStep{kind: normNFC})
		case "Prepend":
			out = append(out, normStep{kind: normPrepend, to: c.Prepend})
		case "Replace":
			from, to, err := replaceStrings(&c, "normalizer")
			if err != nil {
				return nil, err
			}
			out = append(out, normStep{kind: normReplace, from: from, to: to})
		default:
			return nil, notSupported("normalizer", c.Type)
		}
	}
	return out, nil
}

// replaceStrings reads a Replace step with a string pattern.
func replaceStrings(c *componentJSON, what string) (from, to string, err error) {
	from, ok := c.Pattern["String"]
	if !ok || len(c.Pattern) != 1 || c.Content == nil {
		return "", "", fmt.Errorf("%s Replace: pattern %v is not supported (only a String pattern)", what, c.Pattern)
	}
	if from == "" {
		return "", "", fmt.Errorf("%s Replace: an empty pattern is not supported", what)
	}
	return from, *c.Content, nil
}

// parsePreTokenizer accepts Split(Llama-3 or Qwen2 regex) then ByteLevel,
// ByteLevel alone (GPT-2), Metaspace, and null. byteLevel says the model's
// tokens are byte-level strings.
func parsePreTokenizer(raw json.RawMessage) (p preTokenizer, byteLevel bool, err error) {
	if isNull(raw) {
		return preTokenizer{kind: preNone}, false, nil
	}
	cs, err := steps(raw, "pre_tokenizer", func(c *componentJSON) []json.RawMessage { return c.Pretokenizers })
	if err != nil {
		return p, false, err
	}
	for _, c := range cs {
		if c.Type != "Split" && c.Type != "ByteLevel" && c.Type != "Metaspace" {
			return p, false, notSupported("pre_tokenizer", c.Type)
		}
	}
	switch {
	case len(cs) == 1 && cs[0].Type == "ByteLevel":
		p, err = gpt2PreTokenizer(&cs[0])
		return p, true, err
	case len(cs) == 1 && cs[0].Type == "Metaspace":
		p, err = metaspacePreTokenizer(&cs[0])
		return p, false, err
	case len(cs) == 2 && cs[0].Type == "Split" && cs[1].Type == "ByteLevel":
		p, err = splitPreTokenizer(&cs[0], &cs[1])
		return p, true, err
	}
	var types []string
	for _, c := range cs {
		types = append(types, c.Type)
	}
	return p, false, fmt.Errorf("pre_tokenizer Sequence %q is not supported (need Split then ByteLevel, ByteLevel, or Metaspace)", types)
}

func splitPreTokenizer(split, bl *componentJSON) (preTokenizer, error) {
	var p preTokenizer
	switch re, ok := split.Pattern["Regex"]; {
	case len(split.Pattern) != 1 || !ok:
		return p, fmt.Errorf("pre_tokenizer Split pattern %v is not supported (only the Llama-3 and Qwen2 regexes)", split.Pattern)
	case re == Llama3Pattern:
		p.kind = preLlama3
	case re == Qwen2Pattern:
		p.kind = preQwen2
	default:
		return p, fmt.Errorf("pre_tokenizer Split pattern %q is not supported (only the Llama-3 and Qwen2 regexes)", re)
	}
	switch {
	case split.Behavior != "Isolated" || split.Invert:
		return p, fmt.Errorf("pre_tokenizer Split behavior %q invert=%v is not supported (need Isolated, invert=false)", split.Behavior, split.Invert)
	case bl.AddPrefixSpace == nil || *bl.AddPrefixSpace:
		return p, fmt.Errorf("pre_tokenizer ByteLevel after Split: add_prefix_space must be false")
	case bl.UseRegex == nil || *bl.UseRegex:
		return p, fmt.Errorf("pre_tokenizer ByteLevel after Split: use_regex must be false")
	}
	return p, nil
}

func gpt2PreTokenizer(bl *componentJSON) (preTokenizer, error) {
	if bl.AddPrefixSpace == nil {
		return preTokenizer{}, fmt.Errorf("pre_tokenizer ByteLevel: add_prefix_space is missing")
	}
	p := preTokenizer{kind: preGPT2, prefixSpace: *bl.AddPrefixSpace}
	if bl.UseRegex != nil && !*bl.UseRegex {
		p.kind = preByteLevel
	}
	return p, nil
}

func metaspacePreTokenizer(c *componentJSON) (preTokenizer, error) {
	p := preTokenizer{kind: preMetaspace, repl: c.Replacement, split: c.Split == nil || *c.Split}
	var err error
	if p.scheme, err = prependScheme(c, "pre_tokenizer"); err != nil {
		return p, err
	}
	return p, nil
}

// prependScheme reads Metaspace's replacement and prepend_scheme as HF does
// (default always; the old add_prefix_space false means never).
func prependScheme(c *componentJSON, what string) (int, error) {
	if utf8.RuneCountInString(c.Replacement) != 1 {
		return 0, fmt.Errorf("%s Metaspace: replacement %q is not one character", what, c.Replacement)
	}
	scheme := prependAlways
	switch c.PrependScheme {
	case "", "always":
	case "first":
		scheme = prependFirst
	case "never":
		scheme = prependNever
	default:
		return 0, fmt.Errorf("%s Metaspace: prepend_scheme %q is not supported", what, c.PrependScheme)
	}
	if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
		if scheme != prependNever {
			return 0, fmt.Errorf("%s Metaspace: add_prefix_space does not match declared prepend_scheme", what)
		}
	}
	return scheme, nil
}

// parseDecoder accepts ByteLevel for a byte-level model, and Replace (string
// pattern), ByteFallback, Fuse, Strip and Metaspace, alone or in a Sequence,
// for a SentencePiece-style one.
func parseDecoder(raw json.RawMessage, byteLevel bool) ([]decodeStep, error) {
	if isNull(raw) {
		return nil, fmt.Errorf("decoder null is not supported")
	}
	cs, err := steps(raw, "decoder", func(c *componentJSON) []json.RawMessage { return c.Decoders })
	if err != nil {
		return nil, err
	}
	if byteLevel {
		if len(cs) != 1 || cs[0].Type != "ByteLevel" {
			return nil, fmt.Errorf("decoder.type %q is not supported with the ByteLevel pre-tokenizer (need ByteLevel)", cs[0].Type)
		}
		return nil, nil
	}
	var out []decodeStep
	for _, c := range cs {
		st, err := decoderStep(&c)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func decoderStep(c *componentJSON) (decodeStep, error) {
	switch c.Type {
	case "Replace":
		from, to, err := replaceStrings(c, "decoder")
		return decodeStep{kind: decReplace, from: from, to: to}, err
	case "ByteFallback":
		return decodeStep{kind: decByteFallback}, nil
	case "Fuse":
		return decodeStep{kind: decFuse}, nil
	case "Strip":
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 || c.Start < 0 || c.Stop < 0 {
			return decodeStep{}, fmt.Errorf("decoder Strip: content must be one character and start, stop not negative")
		}
		return decodeStep{kind: decStrip, content: *c.Content, start: c.Start, stop: c.Stop}, nil
	case "Metaspace":
		scheme, err := prependScheme(c, "decoder")
		return decodeStep{kind: decMetaspace, repl: c.Replacement, never: scheme == prependNever}, err
	}
	return decodeStep{}, notSupported("decoder", c.Type)
}
