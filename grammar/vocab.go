package grammar

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"unicode/utf8"
	"unsafe"
)

// Vocab indexes a tokenizer's vocabulary for matching: a byte trie of the
// tokens, and for the inside of a string the tokens that are plain text
// (no '"', '\\', control byte or partial UTF-8), bucketed by length in code
// points, so that mask is a precomputed bitset. Build one per model; it is
// immutable and safe to share.
type Vocab struct {
	size  int
	eos   []int32
	toks  [][]byte // nil: never allowed (control tokens, empty pieces)
	trie  []tnode
	edges []tedge

	plainUpTo [][]uint64 // [c]: plain tokens of at most c code points
	special   []int32    // tokens with a '\\' after plain string text
	spOff     []int32    // per special token: offset of the '\\'
	spCps     []int32    // and code points before it

	// Tokens with a '"' after plain string text: closing a string, the
	// rest of the token (the suffix) goes to the enclosing value; the
	// suffixes form their own trie, walked once per mask.
	quote    []int32 // token ids
	quoteCps []int32 // code points before the '"'
	quoteOff []int32 // bytes before the '"'
	quoteEnd []int32 // the suffix's node in qtrie
	qtrie    []tnode
	qedges   []tedge
}

type tnode struct {
	first, n int32 // edges[first:first+n], sorted by byte
	ids      []int32
}

type tedge struct {
	b     byte
	child int32
}

// NewVocab indexes pieces (the bytes of each token id; nil for control
// tokens, which are never allowed) with the ids that end a turn, which are
// allowed only where the value is complete.
func NewVocab(pieces [][]byte, eos []int32) *Vocab {
	v := &Vocab{size: len(pieces), eos: slices.Clone(eos), toks: pieces}
	var toks [][]byte
	var ids []int32
	for id, p := range pieces {
		if len(p) > 0 && !slices.Contains(eos, int32(id)) {
			toks, ids = append(toks, p), append(ids, int32(id))
		}
	}
	v.trie, v.edges, _ = newTrie(toks, ids)
	var suffixes [][]byte
	w := (len(pieces) + 63) / 64
	// Inside a string between characters, a token is decided by its
	// prefix of whole plain characters (off bytes, c code points) and what
	// follows: nothing or a valid partial character (allowed iff the code
	// points fit), a control byte or invalid UTF-8 (never allowed), or '"'
	// or '\' (the grammar decides).
	level := make([]int, len(pieces)) // code points needed; -1: not plain
	maxC := 0
	for id, p := range pieces {
		level[id] = -1
		if len(p) == 0 || slices.Contains(eos, int32(id)) {
			continue
		}
		off, c := plainPrefix(p)
		switch rest := p[off:]; {
		case len(rest) == 0:
		case partialRune(rest):
			c++
		case rest[0] == '"':
			v.quote = append(v.quote, int32(id))
			v.quoteCps = append(v.quoteCps, int32(c))
			v.quoteOff = append(v.quoteOff, int32(off))
			suffixes = append(suffixes, rest[1:])
			continue
		case rest[0] == '\\':
			v.special = append(v.special, int32(id))
			v.spOff = append(v.spOff, int32(off))
			v.spCps = append(v.spCps, int32(c))
			continue
		default:
			continue
		}
		level[id] = c
		maxC = max(maxC, c)
	}
	v.qtrie, v.qedges, v.quoteEnd = newTrie(suffixes, nil)
	v.plainUpTo = make([][]uint64, maxC+1)
	for c := range v.plainUpTo {
		v.plainUpTo[c] = make([]uint64, w)
	}
	for id, c := range level {
		for ; c >= 0 && c <= maxC; c++ {
			v.plainUpTo[c][id>>6] |= 1 << (id & 63)
		}
	}
	return v
}

// partialRune reports whether p is the start of a valid UTF-8 character
// (lead byte and fewer continuation bytes than it needs).
func partialRune(p []byte) bool {
	if utf8.FullRune(p) {
		return false
	}
	var t stk
	t.f = frame{k: fStr, n: anyNode}
	ts := []*stk{{f: t.f, up: &stk{f: frame{k: fDoc, st: sIn}}}}
	for _, b := range p {
		if ts = step(nil, ts, b, nil); len(ts) == 0 {
			return false
		}
	}
	return true
}

// plainPrefix returns the length of p's longest prefix of whole plain
// string characters and their number.
func plainPrefix(p []byte) (int, int) {
	i, c := 0, 0
	for i < len(p) {
		b := p[i]
		if b == '"' || b == '\\' || b < 0x20 {
			break
		}
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
		c++
	}
	return i, c
}

// newTrie builds a byte trie of strs; a node lists ids[i] (i when ids is
// nil) for each string i ending there. ends[i] is string i's node. The
// strings are inserted in sorted order, so a node's newest child is the
// only one a later string can share.
func newTrie(strs [][]byte, ids []int32) ([]tnode, []tedge, []int32) {
	order := make([]int, len(strs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return bytes.Compare(strs[a], strs[b]) })
	kids := [][]tedge{nil}
	nodeIDs := [][]int32{nil}
	ends := make([]int32, len(strs))
	for _, i := range order {
		cur := int32(0)
		for _, b := range strs[i] {
			k := kids[cur]
			if len(k) > 0 && k[len(k)-1].b == b {
				cur = k[len(k)-1].child
				continue
			}
			nx := int32(len(kids))
			kids = append(kids, nil)
			nodeIDs = append(nodeIDs, nil)
			kids[cur] = append(kids[cur], tedge{b, nx})
			cur = nx
		}
		id := int32(i)
		if ids != nil {
			id = ids[i]
		}
		nodeIDs[cur] = append(nodeIDs[cur], id)
		ends[i] = cur
	}
	trie := make([]tnode, len(kids))
	edges := make([]tedge, 0, len(kids))
	for i, k := range kids {
		trie[i] = tnode{first: int32(len(edges)), n: int32(len(k)), ids: nodeIDs[i]}
		edges = append(edges, k...)
	}
	return trie, edges, ends
}

// Bytes is about how much memory v's index holds.
func (v *Vocab) Bytes() int64 {
	n := int64(len(v.trie)+len(v.qtrie))*40 + int64(len(v.edges)+len(v.qedges))*8
	for _, p := range v.toks {
		n += int64(len(p)) + 24
	}
	for _, b := range v.plainUpTo {
		n += int64(len(b)) * 8
	}
	n += int64(len(v.special)+len(v.quote)) * 16
	return n
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// Matcher follows one generation: which tokens may come next, and the
// state after each accepted token. It is not safe for concurrent use.
type Matcher struct {
	v       *Vocab
	ts      []*stk
	buf     [][]*stk // per trie depth, reused by Mask
	qok     []bool   // per suffix-trie node: the suffix is allowed
	ar      arena    // threads of Mask and Allowed
	g       *Grammar
	key     []byte   // scratch for the mask cache's keys
	scratch []uint64 // one thread's mask
	ctx     context.Context
	bud     budget // of the current mask
	err     error  // a mask over budget: nothing is allowed any more
	peak    int64  // the most steps a mask took
}

// PeakMaskSteps is the most work one of m's masks took, in the steps of
// Limits.Steps.
func (m *Matcher) PeakMaskSteps() int64 { return m.peak }

// NewMatcher starts matching g against v's tokens; ctx (nil: never) stops
// a mask once it is done.
func (g *Grammar) NewMatcher(v *Vocab) *Matcher { return g.NewMatcherContext(nil, v) }

// NewMatcherContext is NewMatcher whose masks stop when ctx is done.
func (g *Grammar) NewMatcherContext(ctx context.Context, v *Vocab) *Matcher {
	return &Matcher{v: v, ts: g.newThreads(), g: g, ctx: ctx}
}

// Err reports why the matcher stopped allowing tokens: a mask over its
// grammar's step budget, or its context's error. Nil while it works.
func (m *Matcher) Err() error { return m.err }

// ErrRejected is returned by Accept for a token the grammar does not allow.
var ErrRejected = errors.New("grammar: token not allowed here")

func (v *Vocab) isEOS(id int32) bool { return slices.Contains(v.eos, id) }

func (m *Matcher) isEOS(id int32) bool { return m.v.isEOS(id) }

// Complete reports whether the output so far is a complete value (EOS may
// come).
func (m *Matcher) Complete() bool {
	if m.err != nil {
		return false
	}
	for _, t := range m.ts {
		if complete(t) {
			return true
		}
	}
	return false
}

// run feeds p to ts; threads come from a (nil: the heap).
func (m *Matcher) run(a *arena, ts []*stk, p []byte) []*stk {
	for _, b := range p {
		if len(ts) == 0 {
			return nil
		}
		ts = step(a, ts, b, nil)
	}
	return ts
}

// Allowed reports whether token id may come next.
func (m *Matcher) Allowed(id int32) bool {
	if id < 0 || int(id) >= m.v.size || m.err != nil {
		return false
	}
	if m.isEOS(id) {
		return m.Complete()
	}
	p := m.v.toks[id]
	m.ar.reset()
	return len(p) > 0 && len(m.run(&m.ar, m.ts, p)) > 0
}

// Accept advances the state by token id.
func (m *Matcher) Accept(id int32) error {
	if id < 0 || int(id) >= m.v.size {
		return fmt.Errorf("grammar: token %d is outside the vocabulary", id)
	}
	if m.isEOS(id) {
		if !m.Complete() {
			return ErrRejected
		}
		m.ts = nil // nothing may follow
		return nil
	}
	p := m.v.toks[id]
	ts := m.run(nil, m.ts, p)
	if len(p) == 0 || len(ts) == 0 {
		return ErrRejected
	}
	m.ts = ts
	return nil
}

// Mask sets in allowed (a bitset over the vocabulary, len ≥ (Size+63)/64)
// exactly the tokens that may come next. A mask over the grammar's step
// budget (Limits.Steps) stops there, allows nothing, and sets Err.
func (m *Matcher) Mask(allowed []uint64) {
	clear(allowed)
	if len(m.ts) == 0 || m.err != nil {
		return
	}
	m.bud = *newBudget(m.ctx, m.g.lim)
	defer func() {
		m.peak = max(m.peak, m.bud.lim.Steps-m.bud.left)
		catch(recover(), &m.err)
		if m.err != nil {
			m.err = fmt.Errorf("grammar: a token's mask stopped: %w", m.err)
			clear(allowed)
		}
	}()
	m.mask(allowed)
}

func (m *Matcher) mask(allowed []uint64) {
	m.ar.reset()
	if m.stringMask(allowed) {
		m.eos(allowed)
		return
	}
	c := m.g.masks
	if c != nil && structural(m.ts) {
		m.key = stateKey(m.key[:0], m.ts)
		if c.get(m.v, m.key, allowed) {
			return
		}
	} else {
		c = nil
	}
	m.walk(m.v.trie, m.v.edges, 0, m.ts, 0, func(ni int32) {
		for _, id := range m.v.trie[ni].ids {
			allowed[id>>6] |= 1 << (id & 63)
		}
	})
	m.eos(allowed)
	if c != nil {
		c.put(m.v, m.key, allowed)
	}
}

// eos allows the end tokens when the value is complete.
func (m *Matcher) eos(allowed []uint64) {
	if m.Complete() {
		for _, id := range m.v.eos {
			allowed[id>>6] |= 1 << (id & 63)
		}
	}
}

// maskCache keeps the masks of structural states (between the values of
// arrays, objects and the document: the costliest walks), keyed by the
// threads' whole stacks, so a state met again costs a copy. It is shared
// by a grammar's matchers; the masks live in the server's Cache.
type maskCache struct {
	id    uint64 // the grammar's, in the keys
	cache *Cache
}

type structKey struct {
	g     uint64
	v     *Vocab
	state string
}

func (c *maskCache) get(v *Vocab, key []byte, allowed []uint64) bool {
	mask, ok := c.cache.get(structKey{c.id, v, string(key)})
	if ok {
		copy(allowed, mask.([]uint64))
	}
	return ok
}

func (c *maskCache) put(v *Vocab, key []byte, allowed []uint64) {
	c.cache.put(structKey{c.id, v, string(key)}, slices.Clone(allowed), int64(8*len(allowed)+len(key)+64), kindMask)
}

// structural reports whether every thread is between values (its top
// frame a container or the document).
func structural(ts []*stk) bool {
	for _, t := range ts {
		if k := t.f.k; k != fArr && k != fObj && k != fDoc {
			return false
		}
	}
	return true
}

// stateKey appends an encoding of every frame of every thread to b: two
// thread sets with the same key allow the same tokens.
func stateKey(b []byte, ts []*stk) []byte {
	for _, t := range ts {
		for ; t != nil; t = t.up {
			f := &t.f
			b = binary.LittleEndian.AppendUint64(b, uint64(uintptr(unsafe.Pointer(f.n))))
			b = append(b, byte(f.k), f.st, f.ws, f.need, f.lo, f.hi, byte(f.nd), byte(f.fd))
			if f.neg {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
			b = binary.LittleEndian.AppendUint32(b, uint32(f.cnt))
			b = binary.LittleEndian.AppendUint32(b, uint32(f.key))
			b = binary.LittleEndian.AppendUint32(b, uint32(f.last))
			b = binary.LittleEndian.AppendUint32(b, uint32(f.rs))
			b = binary.LittleEndian.AppendUint64(b, f.seen)
			b = binary.LittleEndian.AppendUint64(b, uint64(f.v))
			b = binary.LittleEndian.AppendUint32(b, uint32(len(f.lit)))
			b = append(b, f.lit...)
		}
		b = append(b, 0xff) // end of a thread
	}
	return b
}

// walk calls reached(node) for each node of trie under node ni that the
// threads ts (at ni) can reach.
func (m *Matcher) walk(trie []tnode, edges []tedge, ni int32, ts []*stk, depth int, reached func(int32)) {
	n := &trie[ni]
	for len(m.buf) <= depth+1 {
		m.buf = append(m.buf, nil)
	}
	for _, e := range edges[n.first : n.first+n.n] {
		m.bud.spend(int64(len(ts)))
		mark := m.ar.mark()
		next := step(&m.ar, ts, e.b, m.buf[depth+1][:0])
		m.buf[depth+1] = next
		if len(next) > 0 {
			reached(e.child)
			if trie[e.child].n > 0 {
				m.walk(trie, edges, e.child, next, depth+1, reached)
			}
		}
		m.ar.rewind(mark) // the subtree's threads are done with
	}
}

// stringMask fills the mask when every thread is inside a string between
// characters, from each thread's own mask (a token is allowed when some
// thread takes it), so overlapping string branches cost one bitset each,
// not a walk of the vocabulary. It reports false when it does not apply.
func (m *Matcher) stringMask(allowed []uint64) bool {
	for _, t := range m.ts {
		if !plainThread(t) && !reThread(t) {
			return false
		}
	}
	one := func(t *stk, dst []uint64) {
		if reThread(t) {
			m.reString(t, dst)
		} else {
			m.plainString(t, dst)
		}
	}
	if len(m.ts) == 1 {
		one(m.ts[0], allowed)
		return true
	}
	if len(m.scratch) != len(allowed) {
		m.scratch = make([]uint64, len(allowed))
	}
	for _, t := range m.ts {
		clear(m.scratch)
		m.bud.spend(int64(len(allowed)/16 + 1))
		one(t, m.scratch)
		for i, w := range m.scratch {
			allowed[i] |= w
		}
	}
	return true
}

// plainThread reports whether t is inside a string without a pattern or
// format (or a key of an object that takes any key), between characters.
func plainThread(t *stk) bool {
	f := &t.f
	if f.st != sChars || f.need != 0 {
		return false
	}
	return f.k == fStr && f.n.format == "" && f.n.re == nil ||
		f.k == fKey && len(t.up.f.n.props) == 0 && t.up.f.n.addl != nil
}

// reThread reports whether t is inside a string with a pattern or regex
// format, between characters.
func reThread(t *stk) bool { return t.f.k == fStr && t.f.n.re != nil && t.f.st == sChars }

// plainString fills the mask of plainThread t from the precomputed
// bitsets, running the grammar only for the special tokens.
func (m *Matcher) plainString(t *stk, allowed []uint64) {
	f := t.f
	minLen, maxLen := 0, -1
	if f.k == fStr {
		minLen, maxLen = f.n.minLen, f.n.maxLen
	} // else a key of an object that takes any key (json_object): its
	// text selects nothing, only where it ends matters.
	room := len(m.v.plainUpTo) - 1
	if maxLen >= 0 {
		room = min(room, maxLen-int(f.cnt))
	}
	if room >= 0 {
		copy(allowed, m.v.plainUpTo[room])
	}
	m.closers(t)
	for i, id := range m.v.quote {
		c := int(f.cnt) + int(m.v.quoteCps[i])
		if m.qok[m.v.quoteEnd[i]] && c >= minLen && (maxLen < 0 || c <= maxLen) {
			allowed[id>>6] |= 1 << (id & 63)
		}
	}
	var one [1]*stk
	for i, id := range m.v.special {
		c := m.v.spCps[i]
		if maxLen >= 0 && int(f.cnt)+int(c) > maxLen {
			continue
		}
		g := f
		g.cnt += c
		m.bud.spend(1)
		one[0] = m.ar.new(g, t.up)
		if len(m.run(&m.ar, one[:], m.v.toks[id][m.v.spOff[i]:])) > 0 {
			allowed[id>>6] |= 1 << (id & 63)
		}
	}
}

// closers sets qok: which suffixes after a closing quote the value
// enclosing string thread t takes.
func (m *Matcher) closers(t *stk) {
	if m.qok == nil {
		m.qok = make([]bool, len(m.v.qtrie))
	} else {
		clear(m.qok)
	}
	if after := pop(&m.ar, t.up, &t.f, nil); len(after) > 0 {
		m.qok[0] = true
		m.walk(m.v.qtrie, m.v.qedges, 0, after, 0, func(ni int32) { m.qok[ni] = true })
	}
}

// reString fills the mask of reThread t: the plain-text tokens by a walk
// of the trie with the DFA alone (cached per DFA state and count), the
// closing-quote tokens by their text before the quote, and the grammar
// only for tokens with a backslash.
func (m *Matcher) reString(t *stk, allowed []uint64) {
	f := t.f
	r := f.n.re
	c := int(f.cnt)
	r.plain(m.v, f.rs, c, allowed)
	m.closers(t)
	for i, id := range m.v.quote {
		s := f.rs
		for _, b := range m.v.toks[id][:m.v.quoteOff[i]] {
			s = r.d.step(s, b)
		}
		if m.qok[m.v.quoteEnd[i]] && r.accepts(s, c+int(m.v.quoteCps[i])) {
			allowed[id>>6] |= 1 << (id & 63)
		}
	}
	var one [1]*stk
	for i, id := range m.v.special {
		g := f
		for _, b := range m.v.toks[id][:m.v.spOff[i]] {
			g.rs = r.d.step(g.rs, b)
		}
		g.cnt += m.v.spCps[i]
		m.bud.spend(1)
		if !r.viable(g.rs, int(g.cnt)) {
			continue
		}
		one[0] = m.ar.new(g, t.up)
		if len(m.run(&m.ar, one[:], m.v.toks[id][m.v.spOff[i]:])) > 0 {
			allowed[id>>6] |= 1 << (id & 63)
		}
	}
}

// popcount returns the number of set bits (for tests and benchmarks).
func popcount(s []uint64) int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// Pieces is what VocabOf needs from a tokenizer.
type Pieces interface {
	VocabSize() int
	Piece(id int32) []byte
	IsSpecial(id int32) bool
}

// VocabOf indexes a tokenizer's vocabulary: control tokens are never
// allowed, the eos ids only where the value is complete.
func VocabOf(tok Pieces, eos []int32) *Vocab {
	pieces := make([][]byte, tok.VocabSize())
	for id := range pieces {
		if !tok.IsSpecial(int32(id)) {
			pieces[id] = tok.Piece(int32(id))
		}
	}
	return NewVocab(pieces, eos)
}

func trailing(w uint64) int { return bits.TrailingZeros64(w) }
