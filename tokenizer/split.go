package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Llama3Pattern is the Split pre-tokenizer regex of the Llama-3 family;
// splitNext implements it by hand with Oniguruma's semantics.
const Llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Qwen2Pattern is the Split regex of Qwen2, Qwen2.5 and Qwen3: Llama-3's
// with single digits (\p{N} for \p{N}{1,3}); splitQwen2 implements it.
const Qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// class is a rune's category as the Llama-3 pattern sees it.
type class uint8

const (
	clOther  class = iota // none of the below: [^\s\p{L}\p{N}]
	clLetter              // \p{L}
	clNumber              // \p{N}
	clSpace               // \s other than \r and \n
	clCRLF                // \r or \n
)

var asciiClass = func() (t [128]class) {
	for c := 0; c < 128; c++ {
		switch {
		case c == '\r' || c == '\n':
			t[c] = clCRLF
		case c == ' ' || (c >= '\t' && c <= '\r'):
			t[c] = clSpace
		case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
			t[c] = clLetter
		case c >= '0' && c <= '9':
			t[c] = clNumber
		}
	}
	return t
}()

// classAt returns the class and byte width of the rune at s[i]. Oniguruma's
// Unicode \s is the White_Space property (it includes U+0085 and excludes
// U+FEFF), which is exactly unicode.White_Space. An invalid UTF-8 byte is
// one rune of class clOther. Letters and numbers newer than Go's Unicode
// tables come from lettersSince15 and numbersSince15.
func classAt(s string, i int) (class, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	switch {
	case unicode.IsLetter(r):
		return clLetter, w
	case unicode.IsNumber(r):
		return clNumber, w
	case unicode.Is(unicode.White_Space, r):
		return clSpace, w
	case r < 0x1C89: // below the first rune of the tables below
	case unicode.Is(lettersSince15, r):
		return clLetter, w
	case unicode.Is(numbersSince15, r):
		return clNumber, w
	}
	return clOther, w
}

// Go's unicode package implements Unicode 15.0.0, while HF tokenizers
// (Oniguruma 6.9.10) uses Unicode 16.0.0. These tables add the letters and
// numbers assigned in Unicode 15.1 and 16.0 (for example CJK Extension I,
// Garay, Kirat Rai, Egyptian Hieroglyphs Extended-A); no whitespace changed
// and no character left \p{L} or \p{N}. The list was checked code point by
// code point against tokenizers@0.23.2.
var (
	lettersSince15 = &unicode.RangeTable{
		R16: []unicode.Range16{
			{0x1C89, 0x1C8A, 1},
			{0xA7CB, 0xA7CD, 1},
			{0xA7DA, 0xA7DC, 1},
		},
		R32: []unicode.Range32{
			{0x105C0, 0x105F3, 1},
			{0x10D4A, 0x10D65, 1},
			{0x10D6F, 0x10D85, 1},
			{0x10EC2, 0x10EC4, 1},
			{0x11380, 0x11389, 1},
			{0x1138B, 0x1138B, 1},
			{0x1138E, 0x1138E, 1},
			{0x11390, 0x113B5, 1},
			{0x113B7, 0x113B7, 1},
			{0x113D1, 0x113D1, 1},
			{0x113D3, 0x113D3, 1},
			{0x11BC0, 0x11BE0, 1},
			{0x13460, 0x143FA, 1},
			{0x16100, 0x1611D, 1},
			{0x16D40, 0x16D6C, 1},
			{0x18CFF, 0x18CFF, 1},
			{0x1E5D0, 0x1E5ED, 1},
			{0x1E5F0, 0x1E5F0, 1},
			{0x2EBF0, 0x2EE5D, 1},
		},
	}
	numbersSince15 = &unicode.RangeTable{
		R32: []unicode.Range32{
			{0x10D40, 0x10D49, 1},
			{0x116D0, 0x116E3, 1},
			{0x11BF0, 0x11BF9, 1},
			{0x16130, 0x16139, 1},
			{0x16D70, 0x16D79, 1},
			{0x1CCF0, 0x1CCF9, 1},
			{0x1E5F1, 0x1E5FA, 1},
		},
	}
)

// contraction returns the length of a case-insensitive 's 't 're 've 'm 'll
// or 'd at the start of s (which begins after the ASCII apostrophe), or 0.
// Under (?i) Oniguruma also matches U+017F (long s), whose case fold is 's'.
func contraction(s string) int {
	if len(s) == 0 {
		return 0
	}
	lower := func(i int) byte {
		if i < len(s) {
			return s[i] | 0x20 // only compared against ASCII lowercase letters
		}
		return 0
	}
	switch lower(0) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r':
		if lower(1) == 'e' {
			return 2
		}
	case 'v':
		if lower(1) == 'e' {
			return 2
		}
	case 'l':
		if lower(1) == 'l' {
			return 2
		}
	}
	if len(s) >= 2 && s[0] == 0xC5 && s[1] == 0xBF { // U+017F ſ
		return 2
	}
	return 0
}

// splitNext returns the end of the Llama-3 pre-token starting at s[i]
// (i < len(s)).
func splitNext(s string, i int) int { return splitDigits(s, i, 3) }

// splitQwen2 returns the end of the Qwen2 pre-token starting at s[i].
func splitQwen2(s string, i int) int { return splitDigits(s, i, 1) }

// splitDigits returns the end of the pre-token starting at s[i] (i <
// len(s)) of the Llama-3 pattern with \p{N}{1,digits}, trying the
// alternatives in order, as a backtracking engine does.
func splitDigits(s string, i, digits int) int {
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
	// \p{N}{1,digits}
	if c == clNumber {
		j := i + w
		for k := 1; k < digits && j < len(s); k++ {
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

// run returns the end of the run of runes of class want starting at s[j].
func run(s string, j int, want class) int {
	for j < len(s) {
		c, w := classAt(s, j)
		if c != want {
			break
		}
		j += w
	}
	return j
}
