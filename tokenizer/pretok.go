package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// preKind is a supported pre-tokenizer.
type preKind uint8

const (
	preLlama3    preKind = iota // Split(Llama3Pattern) then ByteLevel
	preQwen2                    // Split(Qwen2Pattern) then ByteLevel
	preGPT2                     // ByteLevel with use_regex (GPT2Pattern)
	preByteLevel                // ByteLevel without use_regex: one pre-token
	preNone                     // none (SentencePiece, the Llama-2 form): one pre-token
	preMetaspace                // Metaspace (SentencePiece)
)

// Metaspace prepend schemes.
const (
	prependAlways = iota
	prependFirst
	prependNever
)

type preTokenizer struct {
	kind        preKind
	prefixSpace bool   // ByteLevel add_prefix_space
	repl        string // Metaspace replacement
	scheme      int    // Metaspace prepend_scheme
	split       bool   // Metaspace split
}

// pretokenize encodes s, a normalized piece of text between added tokens;
// atStart says it begins at the start of the input (Metaspace's "first").
func (e *encoder) pretokenize(s string, atStart bool, out []int32) []int32 {
	if s == "" {
		return out
	}
	p := &e.t.pre
	switch p.kind {
	case preLlama3:
		for i := 0; i < len(s); {
			j := splitNext(s, i)
			out = e.word(s[i:j], out)
			i = j
		}
	case preQwen2:
		for i := 0; i < len(s); {
			j := splitQwen2(s, i)
			out = e.word(s[i:j], out)
			i = j
		}
	case preGPT2, preByteLevel:
		if p.prefixSpace && s[0] != ' ' {
			s = " " + s
		}
		if p.kind == preByteLevel {
			return e.word(s, out)
		}
		for i := 0; i < len(s); {
			j := splitGPT2(s, i)
			out = e.word(s[i:j], out)
			i = j
		}
	case preNone:
		out = e.wordChars(s, out)
	case preMetaspace:
		out = e.metaspace(s, atStart, out)
	}
	return out
}

// metaspace is HF's Metaspace pre-tokenizer: spaces become the replacement,
// which is prepended by the scheme, and with split each pre-token starts at
// a replacement (SplitDelimiterBehavior::MergedWithNext).
func (e *encoder) metaspace(s string, atStart bool, out []int32) []int32 {
	p := &e.t.pre
	s = strings.ReplaceAll(s, " ", p.repl)
	if (p.scheme == prependAlways || (p.scheme == prependFirst && atStart)) && !strings.HasPrefix(s, p.repl) {
		s = p.repl + s
	}
	if !p.split {
		return e.wordChars(s, out)
	}
	start := 0
	for k := 0; ; {
		i := strings.Index(s[k:], p.repl)
		if i < 0 {
			break
		}
		if k+i > start {
			out = e.wordChars(s[start:k+i], out)
			start = k + i
		}
		k += i + len(p.repl)
	}
	return e.wordChars(s[start:], out)
}

// wordChars appends the ids of one SentencePiece-style pre-token: BPE over
// its characters, as HF's BPE::merge_word. A character missing from the
// vocab becomes its <0xXX> byte tokens (byte_fallback), else unk_token
// (consecutive ones fused with fuse_unk), else nothing.
func (e *encoder) wordChars(w string, out []int32) []int32 {
	t := e.t
	if out, ok := e.known(w, out); ok {
		return out
	}
	sym := e.sym[:0]
	unk := false // an unk not yet added
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRuneInString(w[i:])
		c := w[i : i+n]
		i += n
		if id, ok := t.vocab[c]; ok {
			if unk {
				sym, unk = append(sym, t.unk), false
			}
			sym = append(sym, id)
			continue
		}
		if t.hasBytes(c) {
			// HF leaves a pending unk for after the bytes.
			for k := 0; k < len(c); k++ {
				sym = append(sym, t.byteTok[c[k]])
			}
			continue
		}
		if t.unk >= 0 {
			if unk && !t.fuseUnk {
				sym = append(sym, t.unk)
			}
			unk = true
		}
	}
	if unk {
		sym = append(sym, t.unk)
	}
	if len(sym) == 0 {
		return out
	}
	return e.remember(w, e.merge(sym), out)
}

// hasBytes reports whether byte fallback covers every byte of c.
func (t *Tokenizer) hasBytes(c string) bool {
	for k := 0; k < len(c); k++ {
		if t.byteTok[c[k]] < 0 {
			return false
		}
	}
	return true
}
