package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A regex is compiled exactly to a DFA over the UTF-8 bytes of the decoded
// string, for the subset of ECMA-262 syntax that is regular: literals,
// classes (with \d \w \s and their negations), '.', alternation, groups,
// the quantifiers ? * + {m} {m,} {m,n} (greedy or lazy: the same strings
// match), and ^ / $ at the start / end of a top-level alternative. The
// rest (backreferences, lookaround, \b \B, \p{…}) is refused.

// rx is a parsed regex.
type rx struct {
	op       rxOp
	cls      []rng // opClass: sorted, disjoint code point ranges
	subs     []*rx
	min, max int // opRep; max -1: unbounded
}

type rxOp uint8

const (
	opClass rxOp = iota
	opCat
	opAlt
	opRep
	opBegin // ^
	opEnd   // $
)

type rng struct{ lo, hi rune }

const maxRune = 0x10ffff

// maxRepeat bounds a {m,n} quantifier's counts; Limits.MaxStates bounds
// the automaton.
const maxRepeat = 1000

type rxParser struct {
	s    []rune
	i    int
	fold bool // ASCII case-insensitive (the formats' /i)
}

type rxError string

// recovered turns a panic with an rxError into an error (any other panic
// goes on).
func recovered(e any, err error) error {
	if e == nil {
		return err
	}
	if re, ok := e.(rxError); ok {
		return re
	}
	panic(e)
}

func (e rxError) Error() string { return string(e) }

func (p *rxParser) fail(format string, a ...any) {
	panic(rxError(fmt.Sprintf(format, a...)))
}

// parseRegex parses an ECMA-262 pattern.
func parseRegex(src string, fold bool) (r *rx, err error) {
	defer func() { err = recovered(recover(), err) }()
	p := &rxParser{s: []rune(src), fold: fold}
	r = p.alt()
	if p.i < len(p.s) {
		p.fail("unbalanced ')' at offset %d", p.i)
	}
	return r, nil
}

func (p *rxParser) more() bool { return p.i < len(p.s) }
func (p *rxParser) peek() rune { return p.s[p.i] }

func (p *rxParser) alt() *rx {
	subs := []*rx{p.cat()}
	for p.more() && p.peek() == '|' {
		p.i++
		subs = append(subs, p.cat())
	}
	if len(subs) == 1 {
		return subs[0]
	}
	return &rx{op: opAlt, subs: subs}
}

func (p *rxParser) cat() *rx {
	r := &rx{op: opCat}
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		a := p.atom()
		a = p.quant(a)
		r.subs = append(r.subs, a)
	}
	return r
}

// quant parses the quantifiers after a.
func (p *rxParser) quant(a *rx) *rx {
	for p.more() {
		lo, hi := 0, 0
		switch c := p.peek(); c {
		case '*':
			lo, hi = 0, -1
			p.i++
		case '+':
			lo, hi = 1, -1
			p.i++
		case '?':
			lo, hi = 0, 1
			p.i++
		case '{':
			var ok bool
			if lo, hi, ok = p.braces(); !ok {
				return a // a literal '{' (Annex B)
			}
		default:
			return a
		}
		if a.op == opBegin || a.op == opEnd {
			p.fail("a quantifier on an anchor is not supported")
		}
		if hi >= 0 && hi < lo {
			p.fail("numbers out of order in {} quantifier")
		}
		if lo > maxRepeat || hi > maxRepeat {
			p.fail("repetition counts above %d are not supported", maxRepeat)
		}
		if p.more() && p.peek() == '?' { // lazy: the same strings match
			p.i++
		}
		a = &rx{op: opRep, subs: []*rx{a}, min: lo, max: hi}
	}
	return a
}

// braces parses {m}, {m,} or {m,n} at p.i; ok false leaves p.i alone.
func (p *rxParser) braces() (int, int, bool) {
	j := p.i + 1
	num := func() (int, bool) {
		k := j
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		if k == j {
			return 0, false
		}
		v, err := strconv.Atoi(string(p.s[k:j]))
		if err != nil {
			v = maxRepeat + 1
		}
		return v, true
	}
	lo, ok := num()
	if !ok {
		return 0, 0, false
	}
	hi := lo
	if j < len(p.s) && p.s[j] == ',' {
		j++
		if hi, ok = num(); !ok {
			hi = -1
		}
	}
	if j >= len(p.s) || p.s[j] != '}' {
		return 0, 0, false
	}
	p.i = j + 1
	return lo, hi, true
}

func (p *rxParser) atom() *rx {
	c := p.peek()
	p.i++
	switch c {
	case '^':
		return &rx{op: opBegin}
	case '$':
		return &rx{op: opEnd}
	case '.':
		return class(negate([]rng{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}))
	case '(':
		if p.more() && p.peek() == '?' {
			rest := string(p.s[p.i:min(len(p.s), p.i+3)])
			switch {
			case strings.HasPrefix(rest, "?:"):
				p.i += 2
			case strings.HasPrefix(rest, "?<") && !strings.HasPrefix(rest, "?<=") && !strings.HasPrefix(rest, "?<!"):
				for p.more() && p.peek() != '>' {
					p.i++
				}
				if !p.more() {
					p.fail("unterminated group name")
				}
				p.i++
			default:
				p.fail("lookaround and other (?…) groups are not supported")
			}
		}
		r := p.alt()
		if !p.more() || p.peek() != ')' {
			p.fail("missing ')'")
		}
		p.i++
		return r
	case ')':
		p.fail("unbalanced ')'")
	case '[':
		return class(p.fold1(p.set()))
	case '\\':
		return class(p.fold1(p.escape(false)))
	case '*', '+', '?':
		p.fail("nothing to repeat at offset %d", p.i-1)
	case '{':
		p.i--
		if _, _, ok := p.braces(); ok {
			p.fail("nothing to repeat at offset %d", p.i)
		}
		p.i++
	}
	return class(p.fold1([]rng{{c, c}}))
}

// escape parses an escape after '\' (in a class when inClass).
// escapeClasses are the class escapes; escapeChars the one-character ones.
var (
	escapeClasses = map[rune]func() []rng{
		'd': func() []rng { return digitCls }, 'D': func() []rng { return negate(digitCls) },
		'w': func() []rng { return wordCls }, 'W': func() []rng { return negate(wordCls) },
		's': func() []rng { return spaceCls }, 'S': func() []rng { return negate(spaceCls) },
	}
	escapeChars = map[rune]rune{'n': '\n', 'r': '\r', 't': '\t', 'v': '\v', 'f': '\f'}
)

func (p *rxParser) escape(inClass bool) []rng {
	if !p.more() {
		p.fail("\\ at end of pattern")
	}
	c := p.peek()
	p.i++
	one := func(r rune) []rng { return []rng{{r, r}} }
	if f, ok := escapeClasses[c]; ok {
		return f()
	}
	if r, ok := escapeChars[c]; ok {
		return one(r)
	}
	switch c {
	case '0':
		if p.more() && p.peek() >= '0' && p.peek() <= '9' {
			p.fail("octal escapes are not supported")
		}
		return one(0)
	case 'b':
		if inClass {
			return one('\b')
		}
		p.fail("word boundaries (\\b) are not supported")
	case 'B':
		p.fail("word boundaries (\\B) are not supported")
	case 'c':
		if p.more() && (p.peek()|0x20 >= 'a' && p.peek()|0x20 <= 'z') {
			r := p.peek() % 32
			p.i++
			return one(r)
		}
		p.fail("invalid \\c escape")
	case 'x':
		return one(p.hex(2))
	case 'u':
		return one(p.unicodeEscape())
	case 'k':
		p.fail("backreferences are not supported")
	case 'p', 'P':
		p.fail("Unicode property escapes (\\p) are not supported")
	}
	if c >= '1' && c <= '9' {
		p.fail("backreferences are not supported")
	}
	if c < 0x80 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		p.fail("unknown escape \\%c", c)
	}
	return one(c)
}

// unicodeEscape reads what follows \u: {hex…} or four hex digits (no
// surrogates).
func (p *rxParser) unicodeEscape() rune {
	if p.more() && p.peek() == '{' {
		p.i++
		j := p.i
		for p.more() && p.peek() != '}' {
			p.i++
		}
		v, err := strconv.ParseUint(string(p.s[j:p.i]), 16, 32)
		if !p.more() || err != nil || v > maxRune {
			p.fail("invalid \\u{…} escape")
		}
		p.i++
		return rune(v)
	}
	r := p.hex(4)
	if r >= 0xd800 && r <= 0xdfff {
		p.fail("surrogate escapes are not supported")
	}
	return r
}

func (p *rxParser) hex(n int) rune {
	if p.i+n > len(p.s) {
		p.fail("invalid hexadecimal escape")
	}
	v, err := strconv.ParseUint(string(p.s[p.i:p.i+n]), 16, 32)
	if err != nil {
		p.fail("invalid hexadecimal escape")
	}
	p.i += n
	return rune(v)
}

// set parses a class after '['.
func (p *rxParser) set() []rng {
	neg := p.more() && p.peek() == '^'
	if neg {
		p.i++
	}
	var rs []rng
	first := true
	for {
		if !p.more() {
			p.fail("missing ']'")
		}
		c := p.peek()
		if c == ']' {
			p.i++
			break
		}
		_ = first
		first = false
		lo := p.classAtom()
		if p.i+1 < len(p.s) && p.peek() == '-' && p.s[p.i+1] != ']' {
			p.i++
			hi := p.classAtom()
			if len(lo) != 1 || len(hi) != 1 || lo[0].lo != lo[0].hi || hi[0].lo != hi[0].hi {
				p.fail("a class escape cannot bound a range")
			}
			if hi[0].lo < lo[0].lo {
				p.fail("range out of order in character class")
			}
			rs = append(rs, rng{lo[0].lo, hi[0].lo})
			continue
		}
		rs = append(rs, lo...)
	}
	rs = norm(rs)
	if neg {
		return negate(p.fold1(rs))
	}
	return rs
}

func (p *rxParser) classAtom() []rng {
	c := p.peek()
	p.i++
	if c == '\\' {
		return p.escape(true)
	}
	return []rng{{c, c}}
}

// fold1 adds the other ASCII case of the letters in rs when folding.
func (p *rxParser) fold1(rs []rng) []rng {
	if !p.fold {
		return rs
	}
	out := slices.Clone(rs)
	for _, r := range rs {
		for c := max(r.lo, 'A'); c <= min(r.hi, 'Z'); c++ {
			out = append(out, rng{c + 32, c + 32})
		}
		for c := max(r.lo, 'a'); c <= min(r.hi, 'z'); c++ {
			out = append(out, rng{c - 32, c - 32})
		}
	}
	return norm(out)
}

var (
	digitCls = []rng{{'0', '9'}}
	wordCls  = []rng{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	// ECMA-262 WhiteSpace and LineTerminator.
	spaceCls = []rng{{'\t', '\r'}, {' ', ' '}, {0xa0, 0xa0}, {0x1680, 0x1680}, {0x2000, 0x200a},
		{0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}}
	anyCls = []rng{{0, maxRune}}
)

// class is a one-character regex; surrogates never match (JSON strings
// here hold none).
func class(rs []rng) *rx {
	return &rx{op: opClass, cls: subtract(norm(rs), []rng{{0xd800, 0xdfff}})}
}

func norm(rs []rng) []rng {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b rng) int { return int(a.lo - b.lo) })
	var out []rng
	for _, r := range rs {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func negate(rs []rng) []rng {
	rs = norm(rs)
	var out []rng
	next := rune(0)
	for _, r := range rs {
		if r.lo > next {
			out = append(out, rng{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= maxRune {
		out = append(out, rng{next, maxRune})
	}
	return out
}

func subtract(a, b []rng) []rng {
	return negate(append(negate(a), b...))
}

// unanchor applies the pattern's search semantics: each top-level
// alternative not starting with ^ may be preceded by anything, and one not
// ending with $ followed by anything. Anchors elsewhere are refused.
func unanchor(r *rx) (*rx, error) {
	alts := []*rx{r}
	if r.op == opAlt {
		alts = r.subs
	}
	any := &rx{op: opRep, subs: []*rx{class(anyCls)}, min: 0, max: -1}
	out := &rx{op: opAlt}
	for _, a := range alts {
		subs := []*rx{a}
		if a.op == opCat {
			subs = slices.Clone(a.subs)
		}
		begin := len(subs) > 0 && subs[0].op == opBegin
		if begin {
			subs = subs[1:]
		}
		end := len(subs) > 0 && subs[len(subs)-1].op == opEnd
		if end {
			subs = subs[:len(subs)-1]
		}
		for _, s := range subs {
			if hasAnchor(s) {
				return nil, rxError("^ and $ are supported only at the start and end of the pattern (or of a top-level alternative)")
			}
		}
		if !begin {
			subs = append([]*rx{any}, subs...)
		}
		if !end {
			subs = append(subs, any)
		}
		out.subs = append(out.subs, &rx{op: opCat, subs: subs})
	}
	return out, nil
}

func hasAnchor(r *rx) bool {
	if r.op == opBegin || r.op == opEnd {
		return true
	}
	for _, s := range r.subs {
		if hasAnchor(s) {
			return true
		}
	}
	return false
}

// The NFA works on bytes: a code point class becomes UTF-8 byte-range
// sequences.
type nstate struct {
	eps  []int32
	outs []nedge
}

type nedge struct {
	lo, hi byte
	to     int32
}

type nfa struct {
	st  []nstate
	b   *budget
	max int // states
}

func (n *nfa) add() int32 {
	if len(n.st) >= n.max {
		panic(rxError(fmt.Sprintf("pattern is too large (more than %d automaton states; structured.max_states)", n.max/5)))
	}
	n.b.spend(1)
	n.st = append(n.st, nstate{})
	return int32(len(n.st) - 1)
}

// build returns the start and end states of r's fragment.
func (n *nfa) build(r *rx) (int32, int32) {
	s, e := n.add(), n.add()
	switch r.op {
	case opClass:
		for _, seq := range utf8Seqs(r.cls) {
			cur := s
			for i, br := range seq {
				to := e
				if i < len(seq)-1 {
					to = n.add()
				}
				n.st[cur].outs = append(n.st[cur].outs, nedge{br[0], br[1], to})
				cur = to
			}
		}
	case opCat:
		cur := s
		for _, sub := range r.subs {
			a, b := n.build(sub)
			n.st[cur].eps = append(n.st[cur].eps, a)
			cur = b
		}
		n.st[cur].eps = append(n.st[cur].eps, e)
	case opAlt:
		for _, sub := range r.subs {
			a, b := n.build(sub)
			n.st[s].eps = append(n.st[s].eps, a)
			n.st[b].eps = append(n.st[b].eps, e)
		}
	case opRep:
		cur := s
		for range r.min {
			a, b := n.build(r.subs[0])
			n.st[cur].eps = append(n.st[cur].eps, a)
			cur = b
		}
		if r.max < 0 {
			a, b := n.build(r.subs[0])
			n.st[cur].eps = append(n.st[cur].eps, a, e)
			n.st[b].eps = append(n.st[b].eps, cur)
		} else {
			for range r.max - r.min {
				a, b := n.build(r.subs[0])
				n.st[cur].eps = append(n.st[cur].eps, a, e)
				cur = b
			}
		}
		n.st[cur].eps = append(n.st[cur].eps, e)
	}
	return s, e
}

// utf8Seqs splits code point ranges into sequences of byte ranges whose
// products are exactly their UTF-8 encodings.
func utf8Seqs(rs []rng) [][][2]byte {
	var out [][][2]byte
	var split func(lo, hi rune)
	split = func(lo, hi rune) {
		for _, b := range []rune{0x7f, 0x7ff, 0xffff} {
			if lo <= b && hi > b {
				split(lo, b)
				split(b+1, hi)
				return
			}
		}
		if hi < 0x80 {
			out = append(out, [][2]byte{{byte(lo), byte(hi)}})
			return
		}
		for i := 1; i < 4; i++ {
			m := rune(1)<<(6*i) - 1
			if lo&^m != hi&^m {
				if lo&m != 0 {
					split(lo, lo|m)
					split((lo|m)+1, hi)
					return
				}
				if hi&m != m {
					split(lo, (hi&^m)-1)
					split(hi&^m, hi)
					return
				}
			}
		}
		var a, b [4]byte
		k := utf8.EncodeRune(a[:], lo)
		utf8.EncodeRune(b[:], hi)
		seq := make([][2]byte, k)
		for i := range k {
			seq[i] = [2]byte{a[i], b[i]}
		}
		out = append(out, seq)
	}
	for _, r := range rs {
		split(r.lo, r.hi)
	}
	return out
}

// dfa is a deterministic automaton over bytes; state 0 is dead and state 1
// the start.
type dfa struct {
	next   []int32 // [state*256+byte]
	accept []bool
}

func (d *dfa) states() int { return len(d.accept) }

// step returns the state after b.
func (d *dfa) step(s int32, b byte) int32 { return d.next[int(s)<<8|int(b)] }

// compileRegex compiles an ECMA-262 pattern with search semantics (fold:
// ASCII case-insensitive) within b (nil: the default state limit, no
// budget). Over b it panics with a budgetError.
func compileRegex(src string, fold bool, b *budget) (d *dfa, err error) {
	r, err := parseRegex(src, fold)
	if err != nil {
		return nil, err
	}
	if r, err = unanchor(r); err != nil {
		return nil, err
	}
	defer func() { err = recovered(recover(), err) }()
	maxStates := DefaultMaxStates
	if b != nil {
		maxStates = b.lim.MaxStates
	}
	n := &nfa{b: b, max: 5 * maxStates}
	s, e := n.build(r)
	return determinize(n, s, e, maxStates), nil
}

// determinize is the DFA of n by the subset construction, at most maxDFA
// states (a panic with an rxError past it).
func determinize(n *nfa, start, final int32, maxDFA int) *dfa {
	sc := &subsets{n: n, final: final, max: maxDFA, mark: make([]int32, len(n.st)),
		d: &dfa{next: make([]int32, 256), accept: []bool{false}}, ids: map[string]int32{"": 0}, sets: [][]int32{nil}}
	sc.intern(sc.closure([]int32{start}))
	for i := 1; i < len(sc.sets); i++ {
		sc.expand(i)
	}
	return sc.d
}

// subsets is the subset construction's state: the DFA so far and its
// states' NFA sets.
type subsets struct {
	n     *nfa
	final int32
	max   int
	mark  []int32 // closure's visited marks, by generation
	gen   int32
	d     *dfa
	ids   map[string]int32
	sets  [][]int32
}

// closure is set's ε-closure, sorted, keeping only the states with byte
// edges (or the final one).
func (sc *subsets) closure(set []int32) []int32 {
	n := sc.n
	sc.gen++
	var out []int32
	stack := slices.Clone(set)
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if sc.mark[x] == sc.gen {
			continue
		}
		sc.mark[x] = sc.gen
		out = append(out, x)
		stack = append(stack, n.st[x].eps...)
		n.b.spend(1 + int64(len(n.st[x].eps)))
	}
	out = slices.DeleteFunc(out, func(x int32) bool { return len(n.st[x].outs) == 0 && x != sc.final })
	slices.Sort(out)
	return out
}

// intern is set's DFA state, added when new.
func (sc *subsets) intern(set []int32) int32 {
	var kb strings.Builder
	for _, x := range set {
		kb.WriteString(strconv.Itoa(int(x)))
		kb.WriteByte(',')
	}
	k := kb.String()
	if id, ok := sc.ids[k]; ok {
		return id
	}
	if len(sc.sets) >= sc.max {
		panic(rxError(fmt.Sprintf("pattern is too complex (more than %d automaton states; structured.max_states)", sc.max)))
	}
	sc.n.b.alloc(256*4 + int64(4*len(set)+len(k)))
	id := int32(len(sc.sets))
	sc.ids[k] = id
	sc.sets = append(sc.sets, set)
	sc.d.next = append(sc.d.next, make([]int32, 256)...)
	sc.d.accept = append(sc.d.accept, slices.Contains(set, sc.final))
	return id
}

// expand fills DFA state i's transitions: the byte range is cut at every
// edge boundary, and each piece goes to one set.
func (sc *subsets) expand(i int) {
	n, set := sc.n, sc.sets[i]
	cuts := []int{0, 256}
	edges := 0
	for _, x := range set {
		for _, ed := range n.st[x].outs {
			cuts = append(cuts, int(ed.lo), int(ed.hi)+1)
		}
		edges += len(n.st[x].outs)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	n.b.spend(int64(len(cuts)) * int64(len(set)+edges))
	for c := 0; c+1 < len(cuts); c++ {
		lo, hi := cuts[c], cuts[c+1]
		var to []int32
		for _, x := range set {
			for _, ed := range n.st[x].outs {
				if int(ed.lo) <= lo && lo <= int(ed.hi) {
					to = append(to, ed.to)
				}
			}
		}
		if len(to) == 0 {
			continue
		}
		id := sc.intern(sc.closure(to))
		for b := lo; b < hi; b++ {
			sc.d.next[i<<8|b] = id
		}
	}
}
