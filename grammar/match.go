package grammar

// The grammar runs as a set of threads, one per way the bytes so far can be
// parsed (anyOf branches, enum literals, candidate keys). A thread is an
// immutable stack of frames, so forking shares the tail.

type fkind uint8

const (
	fDoc fkind = iota
	fStr
	fKey
	fNum
	fLit
	fArr
	fObj
	fSeq // a node's seq: cnt parts done
)

// Sub-states.
const (
	// doc, arr, obj: waiting for a value / after a value
	sBefore uint8 = iota
	sAfter
	sComma // arr, obj: after ','
	sColon // obj: after a key
	sValue // obj: after ':'
	sIn    // arr, obj, doc: a child value is being parsed
)

// String sub-states.
const (
	sChars uint8 = iota
	sEsc
	sHex // +0..3
)

// Number sub-states.
const (
	nSign uint8 = iota // after '-'
	nInt               // integer digits
	nZero              // a leading 0
	nDot               // after '.'
	nFrac              // fraction digits
)

type frame struct {
	n    *node
	k    fkind
	st   uint8
	ws   uint8 // whitespace bytes in the current gap
	need uint8 // UTF-8 continuation bytes still expected
	lo   byte  // range of the next continuation byte
	hi   byte
	neg  bool
	nd   uint8 // number: digits so far (integer and fraction)
	fd   uint8 // number: fraction digits
	cnt  int32 // string: code points; array: items
	key  int32 // object: the current property (-1: additional)
	last int32 // object, strict: the last property used
	rs   int32 // string with a pattern or regex format: the DFA state
	seen uint64
	v    int64  // number: the digits so far as an integer; string: high surrogate flag or \u digits
	lit  string // literal text (fLit) or key bytes (fKey)
}

type stk struct {
	f  frame
	up *stk
}

func isWS(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

func push(a *arena, f frame, up *stk, out []*stk) []*stk { return append(out, a.new(f, up)) }

// arena allocates the short-lived threads of a mask or a check in chunks,
// reused after reset; a nil arena allocates each on the heap.
type arena struct {
	chunks [][]stk
	i, j   int // next: chunks[i][j]
}

const arenaChunk = 1024

func (a *arena) new(f frame, up *stk) *stk {
	if a == nil {
		return &stk{f: f, up: up}
	}
	if a.i < len(a.chunks) && a.j == arenaChunk {
		a.i, a.j = a.i+1, 0
	}
	if a.i == len(a.chunks) {
		a.chunks = append(a.chunks, make([]stk, arenaChunk))
	}
	t := &a.chunks[a.i][a.j]
	a.j++
	t.f, t.up = f, up
	return t
}

// reset makes the arena's threads free for reuse.
func (a *arena) reset() { a.i, a.j = 0, 0 }

type arenaMark struct{ i, j int }

// mark and rewind free the threads allocated after mark (a walk's
// finished subtree) for reuse.
func (a *arena) mark() arenaMark { return arenaMark{a.i, a.j} }

func (a *arena) rewind(k arenaMark) { a.i, a.j = k.i, k.j }

// gap handles whitespace in a gap of f; ok reports that b was whitespace.
func gap(a *arena, t *stk, b byte, out []*stk) ([]*stk, bool) {
	if !isWS(b) {
		return out, false
	}
	if t.f.ws < MaxWS {
		f := t.f
		f.ws++
		out = push(a, f, t.up, out)
	}
	return out, true
}

// feed returns the threads that follow t on byte b.
func feed(a *arena, t *stk, b byte, out []*stk) []*stk {
	f := t.f
	switch f.k {
	case fDoc:
		var ws bool
		if out, ws = gap(a, t, b, out); ws {
			return out
		}
		if f.st == sBefore {
			return start(a, f.n, a.new(frame{k: fDoc, st: sIn}, t.up), b, out)
		}
		return out
	case fLit:
		if b != f.lit[f.cnt] {
			return out
		}
		f.cnt++
		if int(f.cnt) == len(f.lit) {
			return pop(a, t.up, &f, out)
		}
		return push(a, f, t.up, out)
	case fStr, fKey:
		return str(a, t, b, out)
	case fNum:
		return num(a, t, b, out)
	case fArr:
		return arr(a, t, b, out)
	case fObj:
		return obj(a, t, b, out)
	case fSeq:
		return start(a, f.n.seq[f.cnt], a.new(f, t.up), b, out)
	}
	return out
}

// start begins a value of n on byte b, under parent.
func start(a *arena, n *node, parent *stk, b byte, out []*stk) []*stk {
	for n.ref != nil {
		n = n.ref
	}
	if n.alts != nil {
		for _, alt := range n.alts {
			out = start(a, alt, parent, b, out)
		}
		return out
	}
	if n.seq != nil {
		return start(a, n.seq[0], a.new(frame{k: fSeq, n: n}, parent), b, out)
	}
	if n.lits != nil {
		for _, l := range n.lits {
			if l[0] == b {
				f := frame{k: fLit, lit: l, cnt: 1}
				if len(l) == 1 {
					out = pop(a, parent, &f, out)
				} else {
					out = push(a, f, parent, out)
				}
			}
		}
		return out
	}
	t := n.types
	switch {
	case b == '"' && t&tStr != 0:
		if (n.maxLen < 0 || n.minLen <= n.maxLen) && (n.re == nil || n.re.viable(1, 0)) {
			out = push(a, frame{k: fStr, n: n, rs: 1}, parent, out)
		}
	case b == '{' && t&tObj != 0:
		out = push(a, frame{k: fObj, n: n, last: -1}, parent, out)
	case b == '[' && t&tArr != 0:
		if n.maxItems < 0 || n.minItems <= n.maxItems {
			out = push(a, frame{k: fArr, n: n}, parent, out)
		}
	case b == 't' && t&tBool != 0:
		out = push(a, frame{k: fLit, lit: "true", cnt: 1}, parent, out)
	case b == 'f' && t&tBool != 0:
		out = push(a, frame{k: fLit, lit: "false", cnt: 1}, parent, out)
	case b == 'n' && t&tNull != 0:
		out = push(a, frame{k: fLit, lit: "null", cnt: 1}, parent, out)
	case (b == '-' || b >= '0' && b <= '9') && t&(tInt|tNum) != 0:
		return num(a, a.new(frame{k: fNum, n: n, st: nSign}, parent), b, out)
	}
	return out
}

// pop ends child c under parent.
func pop(a *arena, parent *stk, c *frame, out []*stk) []*stk {
	f := parent.f
	f.ws = 0
	switch f.k {
	case fSeq:
		if f.cnt++; int(f.cnt) == len(f.n.seq) {
			return pop(a, parent.up, &f, out)
		}
	case fDoc:
		f.st = sAfter
	case fArr:
		f.st = sAfter
		f.cnt++
	case fObj:
		if c.k != fKey {
			f.st = sAfter
			break
		}
		j := -1
		for i := range f.n.props {
			if f.n.props[i].name == c.lit {
				j = i
				break
			}
		}
		switch {
		case j >= 0 && candidate(&f, j):
			f.key, f.seen = int32(j), f.seen|1<<j
			if f.n.strict {
				f.last = int32(j)
			}
		case j < 0 && f.n.addl != nil:
			f.key = -1
		default:
			return out
		}
		f.st = sColon
	}
	return push(a, f, parent.up, out)
}

// candidate reports whether property j may come next in object frame f.
func candidate(f *frame, j int) bool {
	if f.seen&(1<<j) != 0 || f.n.props[j].never {
		return false
	}
	if !f.n.strict {
		return true
	}
	if int32(j) <= f.last {
		return false
	}
	for i := f.last + 1; i < int32(j); i++ {
		if f.n.props[i].req {
			return false
		}
	}
	return true
}

func moreKeys(f *frame) bool {
	if f.n.addl != nil {
		return true
	}
	for j := range f.n.props {
		if candidate(f, j) {
			return true
		}
	}
	return false
}

func canClose(f *frame) bool {
	for j, p := range f.n.props {
		if p.req && f.seen&(1<<j) == 0 {
			return false
		}
	}
	return true
}

func obj(a *arena, t *stk, b byte, out []*stk) []*stk {
	f := t.f
	if f.st != sIn {
		var ws bool
		if out, ws = gap(a, t, b, out); ws {
			return out
		}
	}
	switch f.st {
	case sBefore, sComma:
		if b == '"' && moreKeys(&f) {
			f.st = sIn
			return push(a, frame{k: fKey}, a.new(f, t.up), out)
		}
		if b == '}' && f.st == sBefore && canClose(&f) {
			return pop(a, t.up, &f, out)
		}
	case sColon:
		if b == ':' {
			f.st, f.ws = sValue, 0
			return push(a, f, t.up, out)
		}
	case sValue:
		c := f.n.addl
		if f.key >= 0 {
			c = f.n.props[f.key].n
		}
		f.st = sIn
		return start(a, c, a.new(f, t.up), b, out)
	case sAfter:
		if b == ',' && moreKeys(&f) {
			f.st, f.ws = sComma, 0
			return push(a, f, t.up, out)
		}
		if b == '}' && canClose(&f) {
			return pop(a, t.up, &f, out)
		}
	}
	return out
}

// item returns the schema of array item i, nil if none may come.
func item(n *node, i int32) *node {
	if n.maxItems >= 0 && int(i) >= n.maxItems {
		return nil
	}
	if int(i) < len(n.prefix) {
		return n.prefix[i]
	}
	return n.items
}

func arr(a *arena, t *stk, b byte, out []*stk) []*stk {
	f := t.f
	var ws bool
	if out, ws = gap(a, t, b, out); ws {
		return out
	}
	switch f.st {
	case sBefore, sComma:
		if b == ']' && f.st == sBefore && f.n.minItems == 0 {
			return pop(a, t.up, &f, out)
		}
		if c := item(f.n, f.cnt); c != nil {
			f.st = sIn
			return start(a, c, a.new(f, t.up), b, out)
		}
	case sAfter:
		if b == ',' && item(f.n, f.cnt) != nil {
			f.st, f.ws = sComma, 0
			return push(a, f, t.up, out)
		}
		if b == ']' && int(f.cnt) >= f.n.minItems {
			return pop(a, t.up, &f, out)
		}
	}
	return out
}

func isHex(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F' }

// str steps a string or a key.
func str(a *arena, t *stk, b byte, out []*stk) []*stk {
	f := t.f
	key := f.k == fKey
	if !key && f.n.re != nil {
		return reByte(a, t, f, b, out)
	}
	if f.need > 0 {
		if b < f.lo || b > f.hi {
			return out
		}
		f.need--
		f.lo, f.hi = 0x80, 0xbf
	} else {
		ok := true
		switch f.st {
		case sChars:
			if !key && f.n.format != "" {
				return formatByte(a, t, f, b, out)
			}
			if b == '"' {
				if key || int(f.cnt) >= f.n.minLen {
					return pop(a, t.up, &f, out)
				}
				return out
			}
			ok = strChar(&f, b, key)
		case sEsc:
			ok = strEsc(&f, b)
		default: // \u and st-sHex digits
			ok = strHex(&f, b)
		}
		if !ok {
			return out
		}
	}
	if key {
		f.lit += string(b)
		if !keyViable(&t.up.f, f.lit) {
			return out
		}
	}
	return push(a, f, t.up, out)
}

// utf8Lead returns, for a valid UTF-8 lead byte b (0xc2..0xf4), how many
// continuation bytes follow and the range [lo, hi] of the first of them.
func utf8Lead(b byte) (need int, lo, hi byte) {
	need, lo, hi = 1, 0x80, 0xbf
	switch {
	case b >= 0xf0:
		need = 3
	case b >= 0xe0:
		need = 2
	}
	switch b {
	case 0xe0:
		lo = 0xa0
	case 0xed:
		hi = 0x9f
	case 0xf0:
		lo = 0x90
	case 0xf4:
		hi = 0x8f
	}
	return need, lo, hi
}

// strChar steps a string's (or key's) content byte other than the closing
// quote: a UTF-8 lead byte sets the continuation bytes f still needs, a
// backslash starts an escape (not in keys), and the content counts against
// maxLength. It reports whether b is allowed.
func strChar(f *frame, b byte, key bool) bool {
	switch {
	case b < 0x20 || b >= 0x80 && b < 0xc2 || b > 0xf4:
		return false
	case b == '\\':
		if key {
			return false
		}
		f.st = sEsc
	case b >= 0xc2:
		need, lo, hi := utf8Lead(b)
		f.need, f.lo, f.hi = uint8(need), lo, hi
	}
	if !key {
		if f.n.maxLen >= 0 && int(f.cnt) >= f.n.maxLen {
			return false
		}
		f.cnt++
	}
	return true
}

// strEsc steps the byte after a backslash.
func strEsc(f *frame, b byte) bool {
	switch b {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		f.st = sChars
	case 'u':
		f.st = sHex
	default:
		return false
	}
	return true
}

// strHex steps digit st−sHex of a \u escape; a surrogate (\uD800–\uDFFF)
// is refused.
func strHex(f *frame, b byte) bool {
	if !isHex(b) {
		return false
	}
	i := f.st - sHex
	switch {
	case i == 0:
		f.v = 0
		if b == 'd' || b == 'D' {
			f.v = 1
		}
	case i == 1 && f.v == 1 && (b >= '8' && b <= '9' || b > '9'):
		return false // no surrogates
	}
	f.st++
	if i == 3 {
		f.st = sChars
	}
	return true
}

// formatByte steps a string with a format: ASCII content, checked as a
// prefix of the format after each byte.
func formatByte(a *arena, t *stk, f frame, b byte, out []*stk) []*stk {
	check := formats[f.n.format]
	if b == '"' {
		if _, done := check(f.lit); done && int(f.cnt) >= f.n.minLen {
			return pop(a, t.up, &f, out)
		}
		return out
	}
	if b < 0x20 || b >= 0x7f || b == '\\' || f.n.maxLen >= 0 && int(f.cnt) >= f.n.maxLen {
		return out
	}
	f.lit += string(b)
	f.cnt++
	if ok, _ := check(f.lit); !ok {
		return out
	}
	return push(a, f, t.up, out)
}

// keyViable reports whether key bytes s can still become an allowed key of
// the object frame o.
func keyViable(o *frame, s string) bool {
	for j, p := range o.n.props {
		if len(p.name) >= len(s) && p.name[:len(s)] == s && candidate(o, j) {
			return true
		}
	}
	return o.n.addl != nil
}

var pow10s = func() (t [19]int64) {
	t[0] = 1
	for i := 1; i < len(t); i++ {
		t[i] = t[i-1] * 10
	}
	return t
}()

func pow10(k int) int64 { return pow10s[k] }

func fracOf(n *node) int {
	if n.types&tNum != 0 {
		return FracDigits
	}
	return 0
}

// numViable reports whether the number in f can still end within its bounds.
func numViable(f *frame) bool {
	n := f.n
	F := fracOf(n)
	in := func(lo, hi int64) bool { // a range of absolute scaled values
		if f.neg {
			lo, hi = -hi, -lo
		}
		return hi >= n.lo && lo <= n.hi
	}
	switch f.st {
	case nSign:
		return in(0, pow10(maxDigits)-1)
	case nZero:
		return in(0, pow10(F)-1)
	case nInt:
		for k := 0; int(f.nd)+k+F <= maxDigits; k++ {
			p := pow10(k + F)
			if in(f.v*p, (f.v+1)*p-1) {
				return true
			}
			if !f.neg && f.v*p > n.hi || f.neg && -f.v*p < n.lo {
				return false // longer numbers are further out
			}
		}
		return false
	}
	p := pow10(F - int(f.fd))
	return in(f.v*p, (f.v+1)*p-1)
}

// numEnd reports whether the number in f is complete and within bounds.
func numEnd(f *frame) bool {
	if f.st != nInt && f.st != nZero && f.st != nFrac {
		return false
	}
	v := f.v * pow10(fracOf(f.n)-int(f.fd))
	if f.neg {
		v = -v
	}
	return v >= f.n.lo && v <= f.n.hi
}

func num(a *arena, t *stk, b byte, out []*stk) []*stk {
	f := t.f
	ok := false
	switch {
	case b == '-' && f.st == nSign && !f.neg && f.nd == 0:
		f.neg, ok = true, true
	case b >= '0' && b <= '9' && (f.st == nSign || f.st == nInt || f.st == nDot || f.st == nFrac):
		d := int64(b - '0')
		F := fracOf(f.n)
		switch f.st {
		case nSign:
			f.st = nInt
			if d == 0 {
				f.st = nZero
			}
		case nDot:
			f.st = nFrac
		}
		if f.st == nFrac {
			f.fd++
		}
		f.nd++
		f.v = f.v*10 + d
		ok = int(f.fd) <= F && int(f.nd)-int(f.fd)+F <= maxDigits
	case b == '.' && (f.st == nInt || f.st == nZero) && fracOf(f.n) > 0:
		f.st, ok = nDot, true
	}
	if ok && numViable(&f) {
		out = push(a, f, t.up, out)
	}
	// After a number only whitespace or punctuation may follow, never
	// another number byte.
	if numEnd(&t.f) && !isNumByte(b) {
		var ends [4]*stk
		for _, p := range pop(a, t.up, &t.f, ends[:0]) {
			out = feed(a, p, b, out)
		}
	}
	return out
}

func isNumByte(b byte) bool { return b >= '0' && b <= '9' || b == '.' || b == '-' }

// complete reports whether thread t can end here.
func complete(t *stk) bool {
	for {
		switch {
		case t.f.k == fDoc:
			return t.f.st == sAfter
		case t.f.k == fNum && numEnd(&t.f):
			var ends [4]*stk
			p := pop(nil, t.up, &t.f, ends[:0])
			if len(p) == 0 {
				return false
			}
			t = p[0]
		default:
			return false
		}
	}
}

// newThreads returns the threads at the start of a document of g.
func (g *Grammar) newThreads() []*stk {
	return []*stk{{f: frame{k: fDoc, n: g.root}}}
}

// step feeds b to every thread.
func step(a *arena, ts []*stk, b byte, out []*stk) []*stk {
	for _, t := range ts {
		out = feed(a, t, b, out)
	}
	return out
}

// MatchString reports whether s is a complete instance of g.
func (g *Grammar) MatchString(s string) bool {
	ts := g.newThreads()
	for i := 0; i < len(s) && len(ts) > 0; i++ {
		ts = step(nil, ts, s[i], nil)
	}
	for _, t := range ts {
		if complete(t) {
			return true
		}
	}
	return false
}
