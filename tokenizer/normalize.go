package tokenizer

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normStep is one supported normalizer: NFC, Prepend or Replace with a
// string pattern.
type normStep struct {
	kind     normKind
	from, to string // Prepend's text is to
}

type normKind uint8

const (
	normNFC normKind = iota
	normPrepend
	normReplace
)

// normalize applies the normalizer steps to s, a piece of text between
// non-normalized added tokens (HF normalizes each piece on its own).
func (t *Tokenizer) normalize(s string) string {
	for _, st := range t.norm {
		switch st.kind {
		case normNFC:
			s = nfc(s)
		case normPrepend:
			if s != "" {
				s = st.to + s
			}
		case normReplace:
			s = strings.ReplaceAll(s, st.from, st.to)
		}
	}
	return s
}

// cgj is U+034F COMBINING GRAPHEME JOINER, which Go's norm inserts after 30
// non-starters (the Stream-Safe Text Format) and HF does not.
const cgj = "\u034F"

// nfc returns the NFC form of s as HF's NFC normalizer computes it. HF's
// tables are Unicode 9.0, Go's 15.0: a character of nfcSince9 is inert to
// HF (no class, no mapping), so it is kept as it is and the text on either
// side normalized on its own, which is what an inert starter does.
func nfc(s string) string {
	if norm.NFC.IsNormalString(s) {
		return s
	}
	for i, r := range s {
		if r >= 0x7FD && unicode.Is(nfcSince9, r) {
			n := utf8.RuneLen(r)
			return nfcPiece(s[:i]) + s[i:i+n] + nfc(s[i+n:])
		}
	}
	return nfcPiece(s)
}

// nfcPiece is NFC by Go's tables without the Stream-Safe Text Format.
func nfcPiece(s string) string {
	out := norm.NFC.String(s)
	if strings.Count(out, cgj) != strings.Count(s, cgj) {
		return nfcLong(s)
	}
	return out
}

// nfcLong is NFC without the Stream-Safe limit, for text with a run of more
// than 30 combining marks: the canonical decomposition of each rune, the
// canonical ordering of each run of non-starters, then canonical
// composition (UAX #15), with Go's tables.
func nfcLong(s string) string {
	var rs []rune
	for _, r := range s {
		rs = append(rs, []rune(norm.NFD.String(string(r)))...)
	}
	for i := 0; i < len(rs); {
		if ccc(rs[i]) == 0 {
			i++
			continue
		}
		j := i
		for j < len(rs) && ccc(rs[j]) != 0 {
			j++
		}
		slices.SortStableFunc(rs[i:j], func(a, b rune) int { return int(ccc(a)) - int(ccc(b)) })
		i = j
	}
	out := rs[:0]
	starter := -1 // index in out of the last starter
	for _, r := range rs {
		c := ccc(r)
		if starter >= 0 {
			last := ccc(out[len(out)-1])
			blocked := len(out)-1 != starter && (last == 0 || last >= c)
			if !blocked {
				if p, ok := compose(out[starter], r); ok {
					out[starter] = p
					continue
				}
			}
		}
		if c == 0 {
			starter = len(out)
		}
		out = append(out, r)
	}
	return string(out)
}

// nfcSince9 holds the characters whose normalization properties Unicode
// gave after 9.0 (combining classes, decompositions, and the parts of
// U+11938): HF's NFC leaves them as they are, Go's does not. The list was
// checked against tokenizers@0.23.2 for every character that Go's NFC does
// not leave alone (TestNFCMatchesHF).
var nfcSince9 = &unicode.RangeTable{
	R16: []unicode.Range16{
		{0x07FD, 0x07FD, 1},
		{0x0898, 0x089F, 1},
		{0x08CA, 0x08D3, 1},
		{0x09FE, 0x09FE, 1},
		{0x0C3C, 0x0C3C, 1},
		{0x0D3B, 0x0D3C, 1},
		{0x0EBA, 0x0EBA, 1},
		{0x1715, 0x1715, 1},
		{0x1ABF, 0x1ACE, 1},
		{0x1DF6, 0x1DFA, 1},
		{0xA82C, 0xA82C, 1},
	},
	R32: []unicode.Range32{
		{0x10D24, 0x10D27, 1},
		{0x10EAB, 0x10EAC, 1},
		{0x10EFD, 0x10EFF, 1},
		{0x10F46, 0x10F50, 1},
		{0x10F82, 0x10F85, 1},
		{0x11070, 0x11070, 1},
		{0x1133B, 0x1133B, 1},
		{0x1145E, 0x1145E, 1},
		{0x11839, 0x1183A, 1},
		{0x11930, 0x11930, 1},
		{0x11935, 0x11935, 1},
		{0x11938, 0x11938, 1},
		{0x1193D, 0x1193E, 1},
		{0x11943, 0x11943, 1},
		{0x119E0, 0x119E0, 1},
		{0x11A34, 0x11A34, 1},
		{0x11A47, 0x11A47, 1},
		{0x11A99, 0x11A99, 1},
		{0x11D42, 0x11D42, 1},
		{0x11D44, 0x11D45, 1},
		{0x11D97, 0x11D97, 1},
		{0x11F41, 0x11F42, 1},
		{0x16FF0, 0x16FF1, 1},
		{0x1E08F, 0x1E08F, 1},
		{0x1E130, 0x1E136, 1},
		{0x1E2AE, 0x1E2AE, 1},
		{0x1E2EC, 0x1E2EF, 1},
		{0x1E4EC, 0x1E4EF, 1},
	},
}

func ccc(r rune) uint8 {
	var b [utf8.UTFMax]byte
	return norm.NFC.Properties(b[:utf8.EncodeRune(b[:], r)]).CCC()
}

// compose returns the primary composite of a and b, if there is one.
func compose(a, b rune) (rune, bool) {
	rs := []rune(norm.NFC.String(string([]rune{a, b})))
	if len(rs) == 1 {
		return rs[0], true
	}
	return 0, false
}
