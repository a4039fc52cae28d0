package grammar

import (
	"fmt"
	"slices"
	"sync"
)

// strRE constrains a string's decoded content with a DFA (a pattern or a
// regex format) together with its length bounds in code points. Its table
// says, for each DFA state and code point count, whether the string can
// still end valid, so the grammar never steps into a dead end.
type strRE struct {
	d              *dfa
	minLen, maxLen int    // maxLen -1: unbounded
	dot            []bool // hostname: states entered by '.' (254 code points allowed there)
	top            int    // counts at or above top behave alike
	ok             []bool // [state*(top+1)+count]
	univ           []bool // accepting states every character leads back to

	id    uint64 // in the keys of its masks
	cache *Cache // of plain-text masks per state and count
}

type maskKey struct {
	re   uint64
	v    *Vocab
	s, c int32
}

// size is the bytes r's tables hold.
func (r *strRE) size() int64 {
	return int64(len(r.d.next)*4+len(r.d.accept)+len(r.ok)+len(r.univ)+len(r.dot)) + 256
}

// reKey identifies a compiled strRE: a pattern or a regex format's name,
// with the length bounds.
type reKey struct {
	src      string
	format   bool
	min, max int
}

// hostLimit is the hostname format's bound: 253 code points, not counting
// a final '.'.
const hostLimit = 253

// maxTable bounds the size of a strRE's table.
const maxTable = 1 << 23

// newStrRE builds the table of d within b (over it: a budgetError panic).
func newStrRE(d *dfa, minLen, maxLen int, hostname bool, b *budget) (*strRE, error) {
	r := &strRE{d: d, minLen: minLen, maxLen: maxLen, id: nextID()}
	if hostname {
		r.dot = make([]bool, d.states())
		for s := range d.states() {
			if t := d.step(int32(s), '.'); t != 0 {
				r.dot[t] = true
			}
		}
		if r.maxLen < 0 || r.maxLen > hostLimit+1 {
			r.maxLen = hostLimit + 1
		}
	}
	r.top = r.maxLen
	if r.top < 0 {
		r.top = minLen
	}
	n := d.states()
	if n*(r.top+1) > maxTable {
		return nil, fmt.Errorf("the length bounds are too large for this pattern")
	}
	w := r.top + 1
	b.alloc(int64(n*w) + int64(n)*3*256)
	r.ok = make([]bool, n*w)
	revLead, revCont := reverseEdges(d)
	r.fill(revLead, revCont, b)
	r.univ = make([]bool, n)
	for s := 1; s < n && r.dot == nil; s++ {
		r.univ[s] = d.accept[s] && d.loops(int32(s), b)
	}
	return r, nil
}

// reverseEdges are d's edges backwards, by target state: a lead byte begins
// a code point (count+1), a continuation byte does not.
func reverseEdges(d *dfa) (revLead, revCont [][]int32) {
	n := d.states()
	revLead = make([][]int32, n)
	revCont = make([][]int32, n)
	for s := 1; s < n; s++ {
		for b := range 256 {
			t := d.step(int32(s), byte(b))
			if t == 0 {
				continue
			}
			if b >= 0x80 && b < 0xc0 {
				revCont[t] = append(revCont[t], int32(s))
			} else {
				revLead[t] = append(revLead[t], int32(s))
			}
		}
	}
	return revLead, revCont
}

// fill sets r.ok[s*w+c]: from state s with c code points read, an accepted
// end is reachable within the length bounds. Levels go from the top down.
func (r *strRE) fill(revLead, revCont [][]int32, b *budget) {
	n, w := r.d.states(), r.top+1
	var work []int32
	set := func(s int32, c int) {
		if !r.ok[int(s)*w+c] {
			r.ok[int(s)*w+c] = true
			work = append(work, s)
		}
	}
	for c := r.top; c >= 0; c-- {
		b.spend(int64(2 * n))
		for s := 1; s < n; s++ {
			if r.accepts(int32(s), c) {
				set(int32(s), c)
			}
		}
		if c < r.top || r.maxLen < 0 { // a lead byte into level c+1 (capped)
			up := min(c+1, r.top)
			for t := 1; t < n; t++ {
				if up != c && r.ok[t*w+up] {
					b.spend(int64(len(revLead[t])))
					for _, s := range revLead[t] {
						set(s, c)
					}
				}
			}
		}
		for len(work) > 0 {
			t := work[len(work)-1]
			work = work[:len(work)-1]
			b.spend(int64(1 + len(revCont[t])))
			for _, s := range revCont[t] {
				set(s, c)
			}
			if c == r.top && r.maxLen < 0 {
				for _, s := range revLead[t] {
					set(s, c)
				}
			}
		}
	}
}

// loops reports whether every character (valid UTF-8 sequence from U+0020
// up, '"' and '\\' included) leads from s back to s.
func (d *dfa) loops(s int32, bu *budget) bool {
	for b := 0x20; b < 0x80; b++ {
		if d.step(s, byte(b)) != s {
			return false
		}
	}
	// Multi-byte characters: the states after each prefix, by the number
	// of continuation bytes still to come.
	type pend struct {
		s    int32
		need int
		lo   byte // range of the next continuation byte
		hi   byte
	}
	var work []pend
	for b := 0xc2; b <= 0xf4; b++ {
		need, lo, hi := utf8Lead(byte(b))
		p := pend{s: d.step(s, byte(b)), need: need, lo: lo, hi: hi}
		work = append(work, p)
	}
	seen := map[pend]bool{}
	for len(work) > 0 {
		p := work[len(work)-1]
		work = work[:len(work)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		bu.spend(int64(p.hi-p.lo) + 1)
		for b := int(p.lo); b <= int(p.hi); b++ {
			t := d.step(p.s, byte(b))
			if p.need == 1 {
				if t != s {
					return false
				}
				continue
			}
			work = append(work, pend{s: t, need: p.need - 1, lo: 0x80, hi: 0xbf})
		}
	}
	return true
}

// plain sets in allowed (cleared first) the tokens of plain string text
// (no '"', '\\' or control character) that may follow in state s after c
// code points.
func (r *strRE) plain(v *Vocab, s int32, c int, allowed []uint64) {
	k := maskKey{r.id, v, s, int32(min(c, r.top))}
	if cached, ok := r.cache.get(k); ok {
		copy(allowed, cached.([]uint64))
		return
	}
	clear(allowed)
	if r.univ[s] {
		room := len(v.plainUpTo) - 1
		if r.maxLen >= 0 {
			room = min(room, r.maxLen-c)
		}
		if room >= 0 {
			copy(allowed, v.plainUpTo[room])
		}
	} else {
		r.walk(v, 0, s, c, allowed)
	}
	r.cache.put(k, slices.Clone(allowed), int64(8*len(allowed)+64), kindMask)
}

// walk marks the plain-text tokens under trie node ni, reached in state s
// after c code points.
func (r *strRE) walk(v *Vocab, ni int32, s int32, c int, allowed []uint64) {
	n := &v.trie[ni]
	for _, e := range v.edges[n.first : n.first+n.n] {
		b := e.b
		if b == '"' || b == '\\' || b < 0x20 {
			continue
		}
		t := r.d.step(s, b)
		cc := c
		if b < 0x80 || b >= 0xc0 {
			cc++
		}
		if !r.viable(t, cc) {
			continue
		}
		for _, id := range v.trie[e.child].ids {
			allowed[id>>6] |= 1 << (id & 63)
		}
		if v.trie[e.child].n > 0 {
			r.walk(v, e.child, t, cc, allowed)
		}
	}
}

// accepts reports whether a string may end in state s after c code points.
func (r *strRE) accepts(s int32, c int) bool {
	if !r.d.accept[s] || c < r.minLen || r.maxLen >= 0 && c > r.maxLen {
		return false
	}
	return r.dot == nil || c <= hostLimit || c == hostLimit+1 && r.dot[s]
}

// viable reports whether a string in state s after c code points can
// still end valid.
func (r *strRE) viable(s int32, c int) bool {
	if s == 0 || r.maxLen >= 0 && c > r.maxLen {
		return false
	}
	return r.ok[int(s)*(r.top+1)+min(c, r.top)]
}

// viableRange reports whether some ASCII character in [lo, hi] keeps the
// string viable from state s after c code points.
func (r *strRE) viableRange(s int32, c int, lo, hi byte) bool {
	for ch := int(lo); ch <= int(hi); ch++ {
		if r.viable(r.d.step(s, byte(ch)), c) {
			return true
		}
	}
	return false
}

// escaped is the character a one-letter JSON escape stands for (0: none).
func escaped(b byte) byte {
	switch b {
	case '"', '\\', '/':
		return b
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return 0
}

// reByte steps a string constrained by a DFA. The DFA sees the decoded
// characters; in the JSON text, characters from U+0020 up are written as
// themselves except '"' and '\', which are escaped, and control characters
// as \b \f \n \r \t or \u0000–\u001f (also \/ for '/').
func reByte(a *arena, t *stk, f frame, b byte, out []*stk) []*stk {
	r := f.n.re
	c := int(f.cnt)
	switch f.st {
	case sChars:
		switch {
		case b == '"':
			if r.accepts(f.rs, c) {
				return pop(a, t.up, &f, out)
			}
			return out
		case b < 0x20:
			return out
		case b == '\\':
			f.cnt++
			f.st = sEsc
			if !r.viableRange(f.rs, c+1, 0, 0x1f) && !r.viableRange(f.rs, c+1, '"', '"') &&
				!r.viableRange(f.rs, c+1, '\\', '\\') && !r.viableRange(f.rs, c+1, '/', '/') {
				return out
			}
			return push(a, f, t.up, out)
		}
		if b < 0x80 || b >= 0xc0 {
			f.cnt++
		}
		f.rs = r.d.step(f.rs, b)
	case sEsc:
		if b == 'u' {
			if !r.viableRange(f.rs, c, 0, 0x1f) {
				return out
			}
			f.st, f.v = sHex, 0
			return push(a, f, t.up, out)
		}
		ch := escaped(b)
		if ch == 0 {
			return out
		}
		f.st = sChars
		f.rs = r.d.step(f.rs, ch)
	default:
		if !isHex(b) {
			return out
		}
		i := int(f.st - sHex)
		f.v = f.v<<4 | int64(hexVal(b))
		span := int64(1) << (4 * (3 - i))
		lo, hi := f.v*span, min(f.v*span+span-1, 0x1f)
		if lo > hi {
			return out
		}
		if i < 3 {
			f.st++
			if !r.viableRange(f.rs, c, byte(lo), byte(hi)) {
				return out
			}
			return push(a, f, t.up, out)
		}
		f.st = sChars
		f.rs = r.d.step(f.rs, byte(f.v))
	}
	if !r.viable(f.rs, int(f.cnt)) {
		return out
	}
	return push(a, f, t.up, out)
}

func hexVal(b byte) byte {
	switch {
	case b <= '9':
		return b - '0'
	case b >= 'a':
		return b - 'a' + 10
	}
	return b - 'A' + 10
}

// reFormats are the formats defined by ajv-formats' full mode as regular
// expressions (flag i); "hostname" also has its length limit (see strRE).
var reFormats = map[string]string{
	"email":    `^[a-z0-9!#$%&'*+/=?^_` + "`" + `{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_` + "`" + `{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`,
	"hostname": `^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[-0-9a-z]{0,61}[0-9a-z])?)*\.?$`,
	"ipv6":     `^((([0-9a-f]{1,4}:){7}([0-9a-f]{1,4}|:))|(([0-9a-f]{1,4}:){6}(:[0-9a-f]{1,4}|((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})|:))|(([0-9a-f]{1,4}:){5}(((:[0-9a-f]{1,4}){1,2})|:((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})|:))|(([0-9a-f]{1,4}:){4}(((:[0-9a-f]{1,4}){1,3})|((:[0-9a-f]{1,4})?:((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}))|:))|(([0-9a-f]{1,4}:){3}(((:[0-9a-f]{1,4}){1,4})|((:[0-9a-f]{1,4}){0,2}:((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}))|:))|(([0-9a-f]{1,4}:){2}(((:[0-9a-f]{1,4}){1,5})|((:[0-9a-f]{1,4}){0,3}:((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}))|:))|(([0-9a-f]{1,4}:){1}(((:[0-9a-f]{1,4}){1,6})|((:[0-9a-f]{1,4}){0,4}:((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}))|:))|(:(((:[0-9a-f]{1,4}){1,7})|((:[0-9a-f]{1,4}){0,5}:((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}))|:)))$`,
	"uri":      `^(?:[a-z][a-z0-9+\-.]*:)(?:\/?\/(?:(?:[a-z0-9\-._~!$&'()*+,;=:]|%[0-9a-f]{2})*@)?(?:\[(?:(?:(?:(?:[0-9a-f]{1,4}:){6}|::(?:[0-9a-f]{1,4}:){5}|(?:[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){4}|(?:(?:[0-9a-f]{1,4}:){0,1}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){3}|(?:(?:[0-9a-f]{1,4}:){0,2}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){2}|(?:(?:[0-9a-f]{1,4}:){0,3}[0-9a-f]{1,4})?::[0-9a-f]{1,4}:|(?:(?:[0-9a-f]{1,4}:){0,4}[0-9a-f]{1,4})?::)(?:[0-9a-f]{1,4}:[0-9a-f]{1,4}|(?:(?:25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(?:25[0-5]|2[0-4]\d|[01]?\d\d?))|(?:(?:[0-9a-f]{1,4}:){0,5}[0-9a-f]{1,4})?::[0-9a-f]{1,4}|(?:(?:[0-9a-f]{1,4}:){0,6}[0-9a-f]{1,4})?::)|[Vv][0-9a-f]+\.[a-z0-9\-._~!$&'()*+,;=:]+)\]|(?:(?:25[0-5]|2[0-4]\d|[01]?\d\d?)\.){3}(?:25[0-5]|2[0-4]\d|[01]?\d\d?)|(?:[a-z0-9\-._~!$&'()*+,;=]|%[0-9a-f]{2})*)(?::\d*)?(?:\/(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*|\/(?:(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})+(?:\/(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*)?|(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})+(?:\/(?:[a-z0-9\-._~!$&'()*+,;=:@]|%[0-9a-f]{2})*)*)(?:\?(?:[a-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9a-f]{2})*)?(?:#(?:[a-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9a-f]{2})*)?$`,
}

var formatDFAs sync.Map // format name: *dfa (compiled once)

// formatDFA returns the compiled DFA of a regex format.
func formatDFA(name string) (*dfa, error) {
	if d, ok := formatDFAs.Load(name); ok {
		return d.(*dfa), nil
	}
	d, err := compileRegex(reFormats[name], true, nil)
	if err != nil {
		return nil, err
	}
	formatDFAs.Store(name, d)
	return d, nil
}
