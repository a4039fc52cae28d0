package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// decodeStep is one step of a SentencePiece-style decoder, each as HF's
// decode_chain: Replace (string pattern), ByteFallback, Fuse, Strip and
// Metaspace.
type decodeStep struct {
	kind        decodeKind
	from, to    string // Replace
	content     string // Strip: one character
	start, stop int    // Strip
	repl        string // Metaspace replacement
	never       bool   // Metaspace prepend_scheme never
}

type decodeKind uint8

const (
	decReplace decodeKind = iota
	decByteFallback
	decFuse
	decStrip
	decMetaspace
)

// decodeTokens returns the text of the token strings of ids through the
// decoder steps (SentencePiece-style tokenizers).
func (t *Tokenizer) decodeTokens(ids []int32, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if t.valid(id) && !(skipSpecial && t.skipped(id)) {
			toks = append(toks, t.decodeString(id))
		}
	}
	for _, st := range t.decoders {
		toks = st.apply(toks)
	}
	return strings.Join(toks, "")
}

// decodeString is the token string HF's decoder gets for id: a normalized
// added token's normalized form, else its content or vocab string.
func (t *Tokenizer) decodeString(id int32) string {
	if s, ok := t.addedAs[id]; ok {
		return s
	}
	return t.tokens[id]
}

func (st *decodeStep) apply(toks []string) []string {
	switch st.kind {
	case decReplace:
		for i, s := range toks {
			toks[i] = strings.ReplaceAll(s, st.from, st.to)
		}
	case decByteFallback:
		return byteFallback(toks)
	case decFuse:
		return []string{strings.Join(toks, "")}
	case decStrip:
		for i, s := range toks {
			toks[i] = st.stripToken(s)
		}
	case decMetaspace:
		for i, s := range toks {
			if i == 0 && !st.never {
				toks[i] = strings.ReplaceAll(s, st.repl, "")
			} else {
				toks[i] = strings.ReplaceAll(s, st.repl, " ")
			}
		}
	}
	return toks
}

// stripToken removes up to start leading and stop trailing copies of
// content.
func (st *decodeStep) stripToken(s string) string {
	for range st.start {
		if !strings.HasPrefix(s, st.content) {
			break
		}
		s = s[len(st.content):]
	}
	for range st.stop {
		if !strings.HasSuffix(s, st.content) {
			break
		}
		s = s[:len(s)-len(st.content)]
	}
	return s
}

// byteToken returns the byte a "<0xXX>" token stands for, as HF's
// ByteFallback decoder reads it (Rust's u8::from_str_radix, which also takes
// a leading '+').
func byteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	h := strings.TrimPrefix(s[3:5], "+")
	b, err := strconv.ParseUint(h, 16, 8)
	return byte(b), err == nil
}

// byteFallback turns each run of <0xXX> tokens into its text, or one U+FFFD
// per token when the run is not valid UTF-8.
func byteFallback(toks []string) []string {
	out := make([]string, 0, len(toks))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if s := string(run); utf8.ValidString(s) {
			out = append(out, s)
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, s := range toks {
		if b, ok := byteToken(s); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, s)
	}
	flush()
	return out
}

// spPiece is the text a SentencePiece-style token stands for inside a
// stream: the decoder steps applied to it alone, not as the first token,
// with a <0xXX> token as its raw byte.
func (t *Tokenizer) spPiece(tok string) string {
	for _, st := range t.decoders {
		switch st.kind {
		case decReplace:
			tok = strings.ReplaceAll(tok, st.from, st.to)
		case decByteFallback:
			if b, ok := byteToken(tok); ok {
				return string([]byte{b})
			}
		case decMetaspace:
			tok = strings.ReplaceAll(tok, st.repl, " ")
		}
	}
	return tok
}
