package tokenizer

// The Llama-3 encoder as it was before the general loader (commit be85db5),
// kept for FuzzLlama3MatchesLegacy: its added-token passes and its split.

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
			j := legacySplitNext(s, i)
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

// legacySplitNext returns the end of the pre-token starting at s[i] (i < len(s)),
// trying the pattern's alternatives in order, as a backtracking engine does.
func legacySplitNext(s string, i int) int {
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if s[i] == '\'' {
		if n := contraction(s[i+1:]); n > 0 {
			return i + 1 + n
		}
	}
	c, w := classAt(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == clLetter {
		return run(s, i+w, clLetter)
	}
	if (c == clOther || c == clSpace) && i+w < len(s) {
		if c2, w2 := classAt(s, i+w); c2 == clLetter {
			return run(s, i+w+w2, clLetter)
		}
	}
	// \p{N}{1,3}
	if c == clNumber {
		j := i + w
		for k := 1; k < 3 && j < len(s); k++ {
			c2, w2 := classAt(s, j)
			if c2 != clNumber {
				break
			}
			j += w2
		}
		return j
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	j := -1
	if c == clOther {
		j = run(s, i+w, clOther)
	} else if s[i] == ' ' && i+1 < len(s) {
		if c2, w2 := classAt(s, i+1); c2 == clOther {
			j = run(s, i+1+w2, clOther)
		}
	}
	if j >= 0 {
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	// Here s[i] is whitespace. \s*[\r\n]+ matches up to the last CR/LF of
	// the whitespace run; \s+(?!\S) gives back the run's last rune when a
	// non-space follows; \s+ takes the run.
	j, last, lastNL := i, i, -1
	for j < len(s) {
		c2, w2 := classAt(s, j)
		if c2 == clCRLF {
			lastNL = j + w2
		} else if c2 != clSpace {
			break
		}
		last = j
		j += w2
	}
	switch {
	case lastNL >= 0:
		return lastNL
	case j == len(s) || last == i:
		return j
	}
	return last
}
