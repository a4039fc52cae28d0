package inference

import (
	"bytes"
	"unicode/utf8"

	"github.com/hexserve/hexserve/inference/sample"
)

// Vocab gives the engine the bytes of a token. tokenizer.Tokenizer implements it.
type Vocab interface {
	Piece(id int32) []byte   // the token's bytes (byte-level BPE: possibly part of a UTF-8 character)
	IsSpecial(id int32) bool // control tokens such as <|python_tag|>, never emitted as text
}

// textStarter is a Vocab whose decoder treats a text's first token apart
// (SentencePiece's leading "▁"). tokenizer.Tokenizer implements it.
type textStarter interface {
	StartPiece(id int32) []byte // id's bytes as a text's first token
}

// startPiece is id's bytes as a text's first token: v's StartPiece, else
// its Piece.
func startPiece(v Vocab, id int32) []byte {
	if v, ok := v.(textStarter); ok {
		return v.StartPiece(id)
	}
	return v.Piece(id)
}

type pendingTok struct {
	id    int32
	start int // offset of the token's first byte in the choice's text
	lp    *sample.Logprob
}

// textOut is what one token releases: complete UTF-8 text, and the tokens
// whose bytes that text starts (with their logprobs).
type textOut struct {
	text      string
	reasoning string // text of the reasoning (Request.Reasoning)
	ids       []int32
	lps       []sample.Logprob
	stop      string // the stop string that ended the choice
}

func (o *textOut) empty() bool { return o.text == "" && o.reasoning == "" && len(o.ids) == 0 }

// join appends p to o.
func (o *textOut) join(p textOut) {
	o.text += p.text
	o.reasoning += p.reasoning
	if o.ids == nil { // take p's (a token's own slices), not a copy
		o.ids, o.lps = p.ids, p.lps
	} else {
		o.ids = append(o.ids, p.ids...)
		o.lps = append(o.lps, p.lps...)
	}
	if p.stop != "" {
		o.stop = p.stop
	}
}

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
	think   *think // the reasoning's state; nil: the text is all answer
	start   bool   // the next text token starts the text (StartPiece)
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
	d.think = nil
	d.start = false
}

// startText makes the next text token start the text, read with the
// vocabulary's StartPiece: the reply follows a control token (as after
// "<|assistant|>") rather than continuing text.
func (d *detok) startText() { d.start = true }

// piece is text token id's bytes in the choice's text.
func (d *detok) piece(id int32) []byte {
	b := d.next(id)
	d.start = false
	return b
}

// next is id's bytes as the choice's next token, without taking it (a
// logprob's bytes).
func (d *detok) next(id int32) []byte {
	if d.start {
		return startPiece(d.vocab, id)
	}
	return d.vocab.Piece(id)
}

// add appends token id and returns what can be released; stopped reports a
// stop string: the text before it is released and everything after dropped.
func (d *detok) add(id int32, lp *sample.Logprob) (out textOut, stopped bool) {
	d.pend = append(d.pend, pendingTok{id: id, start: d.emitted + len(d.held), lp: lp})
	if !d.vocab.IsSpecial(id) {
		d.held = append(d.held, d.piece(id)...)
	}
	if d.think != nil && !d.reason(&out) {
		out.ids, out.lps = d.tokens(false)
		return out, false
	}
	if at, s := d.matchStop(); at >= 0 {
		out.join(d.release(at, true))
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
	out.join(d.release(h, false))
	return out, false
}

// flush releases everything held (at the end of a choice); an incomplete
// UTF-8 sequence becomes U+FFFD. Held reasoning is released as reasoning
// (without trailing whitespace).
func (d *detok) flush() textOut {
	var out textOut
	if d.think != nil && d.think.phase == reasoning {
		out.reasoning = d.take(len(bytes.TrimRight(d.held, spaces)))
		d.drop(len(d.held))
	}
	out.join(d.release(len(d.held), false))
	return out
}

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
	out.text = d.take(n)
	if stop {
		d.held = d.held[:0]
	}
	out.ids, out.lps = d.tokens(stop)
	return out
}

// tokens takes the pending tokens that start within the emitted text (all
// of them once nothing is held, none after them with stop).
func (d *detok) tokens(stop bool) (ids []int32, lps []sample.Logprob) {
	k := 0
	for _, p := range d.pend {
		if p.start >= d.emitted && (stop || len(d.held) > 0) {
			break
		}
		k++
	}
	for _, p := range d.pend[:k] {
		ids = append(ids, p.id)
		if p.lp != nil {
			lps = append(lps, *p.lp)
		}
	}
	d.pend = d.pend[:copy(d.pend, d.pend[k:])]
	if stop {
		d.pend = d.pend[:0]
	}
	return ids, lps
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
