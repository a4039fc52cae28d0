package tokenizer

// The Llama-3 encoder as it was before the general loader (commit be85db5),
// kept for FuzzLlama3MatchesLegacy: its added-token passes over the Llama-3
// split (splitNext, which TestSplit and TestSplitMatchesOniguruma check on
// their own; the legacy copy of it was the same code).

func legacyEncode(t *Tokenizer, s string, parseSpecial bool) []int32 {
	var passes []*matcher
	for _, m := range []*matcher{t.plain, t.normed} {
		if m != nil {
			passes = append(passes, m)
		}
	}
	e := t.encoder()
	defer t.encoders.Put(e)
	return legacyText(e, s, passes, parseSpecial, nil)
}

func legacyText(e *encoder, s string, passes []*matcher, parseSpecial bool, out []int32) []int32 {
	if len(passes) == 0 {
		for i := 0; i < len(s); {
			j := splitNext(s, i)
			out = e.word(s[i:j], out)
			i = j
		}
		return out
	}
	m, rest := passes[0], passes[1:]
	text := 0 // start of the text not yet encoded
	for from := 0; ; {
		start, end, id, ok := m.find(s, from)
		if !ok {
			return legacyText(e, s[text:], rest, parseSpecial, out)
		}
		from = end
		if !parseSpecial && e.t.special[id] {
			continue
		}
		out = legacyText(e, s[text:start], rest, parseSpecial, out)
		out = append(out, id)
		text = end
	}
}
