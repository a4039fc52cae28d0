package inference

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/hexserve/hexserve/inference/sample"
)

// Vocab gives the engine the bytes of a token. tokenizer.Tokenizer implements it.
type Vocab interface {
	Piece(id int32) []byte   // the token's bytes (byte-level BPE: possibly part of a UTF-8 character)
	IsSpecial(id int32) bool // control tokens such as <|python_tag|>, never emitted as text
}

type pendingTok struct {
	id    int32
	start int // offset of the token's first byte in the choice's text
	lp    *sample.Logprob
}

// textOut is what one token releases: complete UTF-8 text, and the tokens
// whose bytes that text starts (with their logprobs).
type textOut struct {
	text string
	ids  []int32
	lps  []sample.Logprob
	stop string // the stop string that ended the choice
}

func (o *textOut) empty() bool { return o.text == "" && len(o.ids) == 0 }

// detok turns a choice's tokens into text. It holds back bytes that may
// still become part of a stop string or that end in an incomplete UTF-8
// character, and holds back the tokens whose bytes are held, so ids and
// logprobs are released together with their text.
type detok struct {
	vocab   Vocab
	stops   [][]byte
	held    []byte // undecided bytes; held[0] is at offset emitted
	emitted int
	pend    []pendingTok
}

func (d *detok) reset(v Vocab, stops []string) {
	d.vocab = v
	d.stops = d.stops[:0]
	for _, s := range stops {
		d.stops = append(d.stops, []byte(s))
	}
	d.held = d.held[:0]
	d.emitted = 0
	d.pend = d.pend[:0]
}

// add appends token id and returns what can be released; stopped reports a
// stop string: the text before it is released and everything after dropped.
func (d *detok) add(id int32, lp *sample.Logprob) (out textOut, stopped bool) {
	d.pend = append(d.pend, pendingTok{id: id, start: d.emitted + len(d.held), lp: lp})
	if !d.vocab.IsSpecial(id) {
		d.held = append(d.held, d.vocab.Piece(id)...)
	}
	if at, s := d.matchStop(); at >= 0 {
		out := d.release(at, true)
		out.stop = s
		return out, true
	}
	h := len(d.held)
	if len(d.stops) > 0 {
	scan:
		for i := range d.held {
			tail := d.held[i:]
			for _, s := range d.stops {
				if len(tail) < len(s) && bytes.HasPrefix(s, tail) {
					h = i
					break scan
				}
			}
		}
	}
	h = completeUTF8(d.held[:h])
	return d.release(h, false), false
}

// flush releases everything held (at the end of a choice); an incomplete
// UTF-8 sequence becomes U+FFFD.
func (d *detok) flush() textOut { return d.release(len(d.held), false) }

// matchStop returns where the first stop string in the held bytes starts
// (-1: none) and which one it is.
func (d *detok) matchStop() (int, string) {
	at, which := -1, ""
	for _, s := range d.stops {
		if i := bytes.Index(d.held, s); i >= 0 && (at < 0 || i < at) {
			at, which = i, string(s)
		}
	}
	return at, which
}

// release emits held[:n] and the pending tokens that start within the
// emitted text (all of them once nothing is held). With stop, everything
// after held[:n] is dropped.
func (d *detok) release(n int, stop bool) textOut {
	var out textOut
	if n > 0 {
		out.text = strings.ToValidUTF8(string(d.held[:n]), "\uFFFD")
		d.emitted += n
	}
	d.held = d.held[:copy(d.held, d.held[n:])]
	if stop {
		d.held = d.held[:0]
	}
	k := 0
	for _, p := range d.pend {
		if p.start >= d.emitted && (stop || len(d.held) > 0) {
			break
		}
		k++
	}
	for _, p := range d.pend[:k] {
		out.ids = append(out.ids, p.id)
		if p.lp != nil {
			out.lps = append(out.lps, *p.lp)
		}
	}
	d.pend = d.pend[:copy(d.pend, d.pend[k:])]
	if stop {
		d.pend = d.pend[:0]
	}
	return out
}

// completeUTF8 returns the length of the longest prefix of b that does not
// end inside an incomplete (but so far valid) UTF-8 sequence.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if c := b[i]; c < utf8.RuneSelf {
			return len(b)
		} else if utf8.RuneStart(c) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
