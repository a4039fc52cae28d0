package chat

import (
	"strings"
	"unicode/utf8"
)

// Marks keep request text from turning into special tokens (see the
// package doc, "Content and special tokens"). Before rendering, every
// special-token text inside a request string, and every rune of the marks'
// own range found there, is replaced by one mark: a rune from plane 16's
// private-use area that stands for the text it replaced. A mark is a single
// non-space rune, so the template's strip, split, startswith and
// concatenation treat it as the opaque character it is. After rendering,
// split turns the template's own special-token texts into Special segments
// and each mark back into its text, inside plain segments.

const (
	markBase = 0x100000 // first rune of plane 16's private-use area
	markMax  = 0x10FFFD
)

func isMarkRune(r rune) bool { return r >= markBase && r <= markMax }

// marker is one rendering's table of marks.
type marker struct {
	specials []string // longest first
	first    *[256]bool
	texts    []string        // mark markBase+i stands for texts[i]
	index    map[string]rune // text -> its mark
	full     bool            // the table ran out of marks
}

// needsMark reports whether s has a special-token text or a mark rune
// (all of which start with byte 0xF4 in UTF-8).
func (m *marker) needsMark(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0xF4 || (m.first[c] && m.specialAt(s[i:]) != "") {
			return true
		}
	}
	return false
}

// specialAt is the longest special-token text that s starts with.
func (m *marker) specialAt(s string) string {
	for _, sp := range m.specials {
		if strings.HasPrefix(s, sp) {
			return sp
		}
	}
	return ""
}

// mark returns s with its special-token texts and mark runes replaced.
func (m *marker) mark(s string) string {
	if !m.needsMark(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if m.first[s[i]] {
			if sp := m.specialAt(s[i:]); sp != "" {
				b.WriteRune(m.markFor(sp))
				i += len(sp)
				continue
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if isMarkRune(r) {
			b.WriteRune(m.markFor(s[i : i+n]))
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// markFor is text's mark. Once all 65534 marks are taken (a request with
// that many distinct private-use runes), text is left as it is: such a
// rendering is refused by split.
func (m *marker) markFor(text string) rune {
	if r, ok := m.index[text]; ok {
		return r
	}
	if len(m.texts) > markMax-markBase {
		m.full = true
		return utf8.RuneError
	}
	if m.index == nil {
		m.index = make(map[string]rune)
	}
	r := rune(markBase + len(m.texts))
	m.texts = append(m.texts, text)
	m.index[text] = r
	return r
}

// unmark returns s with marks turned back into their texts.
func (m *marker) unmark(s string) string {
	if len(m.texts) == 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if i := int(r) - markBase; i >= 0 && i < len(m.texts) {
			b.WriteString(strings.TrimPrefix(m.texts[i], bigIntPrefix))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// split cuts rendered text into segments: the template's special-token
// texts are Special, and everything else, with marks turned back into the
// request's text, is plain. n is the length of the text the segments hold.
func (m *marker) split(out string) (segs []Segment, n int) {
	var plain strings.Builder
	flush := func() {
		if plain.Len() > 0 {
			segs = append(segs, Segment{Text: plain.String()})
			n += plain.Len()
			plain.Reset()
		}
	}
	start := 0 // out[start:i] is plain text not yet copied
	for i := 0; i < len(out); {
		c := out[i]
		if c == 0xF4 && len(m.texts) > 0 {
			r, size := utf8.DecodeRuneInString(out[i:])
			if k := int(r) - markBase; k >= 0 && k < len(m.texts) {
				plain.WriteString(out[start:i])
				plain.WriteString(strings.TrimPrefix(m.texts[k], bigIntPrefix))
				i += size
				start = i
				continue
			}
		}
		if m.first[c] {
			if sp := m.specialAt(out[i:]); sp != "" {
				plain.WriteString(out[start:i])
				flush()
				segs = append(segs, Segment{Text: sp, Special: true})
				n += len(sp)
				i += len(sp)
				start = i
				continue
			}
		}
		i++
	}
	plain.WriteString(out[start:])
	flush()
	return segs, n
}
