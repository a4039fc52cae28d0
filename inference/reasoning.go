package inference

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// Reasoning says where a choice's reasoning is in its text (Qwen3's
// <think>…</think>). The engine returns the reasoning apart from the answer
// (Event.Reasoning), without its markers and the whitespace around them;
// counts its tokens (Usage.ReasoningTokens; they count against MaxTokens
// too); applies stop strings and Constrain to the answer only; and, once
// Budget reasoning tokens are spent, forces EndTokens to end it.
type Reasoning struct {
	// Start and End are the markers. The reasoning starts at Start when the
	// text begins with it (after whitespace), else there is none; with
	// Open the text begins inside it and only End is looked for.
	Start, End string
	Open       bool
	// Budget is the most reasoning tokens before EndTokens are forced (0:
	// no limit). EndTokens must hold End.
	Budget    int
	EndTokens []int32
}

// phase is where a reasoning choice's text is.
type phase uint8

const (
	undecided phase = iota // the text so far may still become Start
	reasoning              // inside the reasoning
	answering              // after it, or there was none
)

// think is a detok's reasoning state.
type think struct {
	r     *Reasoning
	phase phase
	lead  bool // leading whitespace of the current part is dropped
	// tokens counts the reasoning tokens; pending the tokens added while
	// undecided (reasoning tokens if Start follows).
	tokens, pending int
	stops           [][]byte // the answer's stop strings
	forced          bool     // EndTokens were forced
}

// reason runs the reasoning phases over the held bytes: reasoning text
// goes to out.reasoning, markers and the whitespace around them are
// dropped. It reports whether the held bytes are the answer's now.
func (d *detok) reason(out *textOut) bool {
	th := d.think
	for {
		switch th.phase {
		case undecided:
			rest := bytes.TrimLeft(d.held, spaces)
			switch start := []byte(th.r.Start); {
			case len(start) > 0 && bytes.HasPrefix(rest, start):
				d.drop(len(d.held) - len(rest) + len(start))
				th.phase, th.lead = reasoning, true
				th.tokens, th.pending = th.pending+1, 0
			case len(start) > 0 && bytes.HasPrefix(start, rest):
				th.pending++
				return false
			default:
				th.phase = answering
				d.stops = th.stops
				return true
			}
		case reasoning:
			if th.lead {
				d.drop(len(d.held) - len(bytes.TrimLeft(d.held, spaces)))
				th.lead = len(d.held) == 0
			}
			end := []byte(th.r.End)
			if i := bytes.Index(d.held, end); i >= 0 {
				k := len(bytes.TrimRight(d.held[:i], spaces))
				out.reasoning += d.take(k)
				d.drop(i - k + len(end))
				th.phase, th.lead = answering, true
				d.stops = th.stops
				continue
			}
			h := len(d.held)
			for i := range d.held {
				if bytes.HasPrefix(end, d.held[i:]) {
					h = i
					break
				}
			}
			h = len(bytes.TrimRight(d.held[:h], spaces))
			out.reasoning += d.take(completeUTF8(d.held[:h]))
			return false
		case answering:
			if th.lead {
				d.drop(len(d.held) - len(bytes.TrimLeft(d.held, spaces)))
				th.lead = len(d.held) == 0
			}
			return true
		}
	}
}

// spaces is the whitespace dropped around the markers.
const spaces = " \t\r\n"

// take removes held[:n] and returns it as text (invalid UTF-8 as U+FFFD).
func (d *detok) take(n int) string {
	if n <= 0 {
		return ""
	}
	var s string
	if b := d.held[:n]; utf8.Valid(b) {
		s = string(b) // one copy; ToValidUTF8 makes two
	} else {
		s = string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
	}
	d.drop(n)
	return s
}

// drop removes held[:n] without emitting it.
func (d *detok) drop(n int) {
	if n <= 0 {
		return
	}
	d.emitted += n
	d.held = d.held[:copy(d.held, d.held[n:])]
}

// count counts tok as a reasoning token when it was added inside
// the reasoning (or ended it); it reports whether the budget is spent
// while the reasoning goes on.
func (th *think) count(before phase) bool {
	if before == reasoning {
		th.tokens++
	}
	return th.phase == reasoning && th.r.Budget > 0 && th.tokens >= th.r.Budget
}

// forced is the constraint that forces a token sequence (the end of a
// reasoning whose budget is spent); it is never Complete.
type forced struct {
	toks []int32
	i    int
}

func (f *forced) Allowed(id int32) bool { return f.i < len(f.toks) && f.toks[f.i] == id }

func (f *forced) Mask(allowed []uint64) {
	clear(allowed)
	if f.i < len(f.toks) {
		id := f.toks[f.i]
		allowed[id/64] |= 1 << (id % 64)
	}
}

func (f *forced) Accept(id int32) error {
	if f.Allowed(id) {
		f.i++
	}
	return nil
}

func (*forced) Complete() bool { return false }

func (f *forced) done() bool { return f.i >= len(f.toks) }

// startThink sets up d's reasoning state for r (nil: none) with the
// answer's stop strings.
func (d *detok) startThink(r *Reasoning) {
	if r == nil {
		d.think = nil
		return
	}
	d.think = &think{r: r, stops: slices.Clone(d.stops)}
	d.stops = nil
	if r.Open {
		d.think.phase, d.think.lead = reasoning, true
	}
}
