package tokenizer

import (
	"unicode/utf8"
)

// seqPrefix inspects the UTF-8 sequence at the start of b (b[0] >= 0x80). It
// returns how many bytes form a valid prefix of one character (0 for an
// invalid lead byte) and whether that prefix is the complete character.
func seqPrefix(b []byte) (n int, complete bool) {
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 2
	case c == 0xE0:
		need, lo = 3, 0xA0
	case c == 0xED:
		need, hi = 3, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 3
	case c == 0xF0:
		need, lo = 4, 0x90
	case c == 0xF4:
		need, hi = 4, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 4
	default:
		return 0, false
	}
	n = 1
	for ; n < need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			return n, false
		}
		lo, hi = 0x80, 0xBF
	}
	return n, n == need
}

// lossyString converts b like Rust's String::from_utf8_lossy.
func lossyString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		n, complete := seqPrefix(b[i:])
		if complete {
			out = append(out, b[i:i+n]...)
		} else {
			out = append(out, "\uFFFD"...)
			n = max(n, 1)
		}
		i += n
	}
	return string(out)
}

// incompleteTail returns the length of a trailing valid-but-unfinished UTF-8
// sequence at the end of b (0 if none).
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return 0
		}
		if c >= 0xC0 { // a lead byte
			n, complete := seqPrefix(b[len(b)-k:])
			if !complete && n == k {
				return k
			}
			return 0
		}
	}
	return 0
}

// StreamDecoder turns ids into text one at a time. The concatenation of its
// outputs (including Flush) equals Decode of all the ids. For a
// SentencePiece-style tokenizer each Add decodes all the ids so far (its
// decoder's Strip and first-token rules look at the whole text).
type StreamDecoder struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
	ids         []int32 // SentencePiece-style: every id so far
	sent        int     // SentencePiece-style: bytes of the text returned
}

// NewStreamDecoder returns a decoder that drops special tokens when
// skipSpecial is set.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// Add decodes one id and returns the text that is now complete; bytes of an
// unfinished UTF-8 character are held until a later Add or Flush.
func (d *StreamDecoder) Add(id int32) string {
	t := d.t
	if !t.valid(id) || (d.skipSpecial && t.skipped(id)) {
		return ""
	}
	if !t.byteLevel {
		d.ids = append(d.ids, id)
		if _, ok := byteToken(t.decodeString(id)); ok {
			return "" // a run of byte tokens may yet be U+FFFD each
		}
		return d.next()
	}
	d.pending = append(d.pending, t.piece(id)...)
	n := len(d.pending) - incompleteTail(d.pending)
	if n == 0 {
		return ""
	}
	s := lossyString(d.pending[:n])
	d.pending = d.pending[:copy(d.pending, d.pending[n:])]
	return s
}

// Flush returns the held bytes, each unfinished character as U+FFFD, and
// resets the decoder.
func (d *StreamDecoder) Flush() string {
	if !d.t.byteLevel {
		s := d.next()
		d.ids, d.sent = d.ids[:0], 0
		return s
	}
	s := lossyString(d.pending)
	d.pending = d.pending[:0]
	return s
}

// next returns the text of d.ids not yet returned.
func (d *StreamDecoder) next() string {
	s := d.t.Decode(d.ids, d.skipSpecial)
	if len(s) < d.sent {
		return ""
	}
	out := s[d.sent:]
	d.sent = len(s)
	return out
}
