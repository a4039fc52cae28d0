package sample

import (
	"math"
	"slices"

	"github.com/hexserve/hexserve/internal/scan"
)

// codeHist is the state of the code histogram over F16 and U16 logits (see
// histCodes).
type codeHist struct {
	cnt    *[1 << 16]uint32  // per code: untouched ids with that logit
	dirty  [][2]int          // code ranges [lo, hi) the last step counted
	wtab   *[1 << 16]float64 // per code: exp(logit/T), one of tabs
	tabs   []weightTab       // the tables built, up to maxTabs
	tick   uint64            // steps, for the tables' last use
	tw     *[1 << 16]float64 // per key: the touched ids' weights
	twKeys []int             // the touched ids' keys
	twW    []float64         // and weights
	blk    [1 << 10]float64  // per 64 keys: the mass
	gbuf   []wcand
	kTop   int  // key of the best logit
	kBot   int  // lowest key within the cutoff
	bKey   int  // top_p's crossing group (-1: none)
	bKept  int  // its kept ids (the lowest), unless bList
	bList  bool // its kept tokens are in pbuf
}

func newCodeHist() codeHist {
	return codeHist{cnt: new([1 << 16]uint32), tw: new([1 << 16]float64)}
}

// maxTabs bounds the weight tables a Scratch keeps (512 KiB each): one per
// temperature (and U16 quantisation) in use, so that sequences of different
// temperatures sharing a sampling goroutine do not rebuild a table in turn.
const maxTabs = 4

// weightTab is a table of code weights, what it was built for, and when it
// was last used.
type weightTab struct {
	key  tabFor
	w    *[1 << 16]float64
	used uint64
}

// tabFor identifies a table of code weights: the temperature, the type and,
// for U16, the quantisation.
type tabFor struct {
	t      float32
	typ    DType
	scale  float32
	offset int32
}

// wcand is a candidate and its weight.
type wcand struct {
	cand
	w float64
}

// Keys order the codes of histCodes by value. For U16 the key is the code;
// for F16 it is halfKey, except that +0 and -0 form one group under key
// 0x8000 (key 0x7fff is never used).

// codeVal returns the logit of code c of s.l (F16 NaN as -Inf).
func (s *Sampler) codeVal(c uint16) float32 {
	if s.l.Type == U16 {
		return u16Val(s.l, int(c))
	}
	return half2f[c]
}

// codeKey returns the key of code c (-1 for NaN).
func (s *Sampler) codeKey(c uint16) int {
	switch k := halfKey(c); {
	case s.l.Type == U16:
		return int(c)
	case isNaN16(c):
		return -1
	case k == 0x7fff:
		return 0x8000
	default:
		return k
	}
}

// ceilKey returns the key of the smallest logit at least v (1<<16 for U16
// when every code is below v).
func (s *Sampler) ceilKey(v float32) int {
	if s.l.Type == U16 {
		return u16Ceil(s.l, v)
	}
	if k := halfKeyCeil(v); k != 0x7fff {
		return k
	}
	return 0x8000
}

// groupCodes returns the codes of the group of key k.
func (s *Sampler) groupCodes(k int) (uint16, uint16) {
	switch {
	case s.l.Type == U16:
		return uint16(k), uint16(k)
	case k == 0x8000:
		return 0, 0x8000
	}
	h := keyHalf(k)
	return h, h
}

func (s *Sampler) groupCount(k int) int {
	if s.l.Type == F16 && k == 0x7fff {
		return 0
	}
	h, h2 := s.groupCodes(k)
	c := int(s.cd.cnt[h])
	if h2 != h {
		c += int(s.cd.cnt[h2])
	}
	return c
}

// groupMass is the weight of group k, in units of exp(logit/T).
func (s *Sampler) groupMass(k int) float64 {
	h, _ := s.groupCodes(k)
	return float64(s.groupCount(k))*s.cd.wtab[h] + s.cd.tw[k]
}

// histCodes is hist for F16 logits and U16 logits with a positive scale,
// where every logit is one of 65,536 codes: argmax finds the best untouched
// logit, then one pass counts the ids per code within the cutoff (the touched
// ids are taken out again; see countCodes), so the weights are exact with one
// exp per code, from a table built once per temperature (and quantisation).
// Groups of equal logits are walked from the best down, by blocks of 64
// keys; ties in a group go to the lowest ids, so a group needs its ids only
// when top_p splits it while holding touched ids, or when the draw lands in
// it. It reports false when the logits are out of the table's range
// (|logit|/T near 700), above every code, or not finite.
func (s *Sampler) histCodes(l Logits, skip []uint64, mt float32) bool {
	s.l = l
	if s.cd.cnt == nil {
		s.cd = newCodeHist()
	}
	for _, r := range s.cd.dirty {
		clear(s.cd.cnt[r[0]:r[1]])
	}
	s.cd.dirty = s.cd.dirty[:0]
	_, best := argmax(l, skip) // the best untouched logit
	m, n := max(best, mt), 0
	dS := s.p.Temperature * sampleCutoff
	thr := m - dS
	T := float64(s.p.Temperature)
	if !(float64(m)/T < 700 && float64(thr)/T > -700) {
		return false
	}
	kTop, kBot := s.ceilKey(m), s.ceilKey(thr)
	if l.Type == U16 && kTop > 0xffff || l.Type == F16 && m > 65504 {
		return false
	}
	s.countCodes(kBot, kTop)
	tab := tabFor{t: s.p.Temperature, typ: l.Type}
	if l.Type == U16 {
		tab.scale, tab.offset = l.Scale, l.Offset
	}
	s.weights(tab, T)
	for _, k := range s.cd.twKeys {
		s.cd.tw[k] = 0
	}
	s.cd.twKeys, s.cd.twW = s.cd.twKeys[:0], s.cd.twW[:0]
	for _, x := range s.tv {
		if x.v >= thr {
			k, w := s.ceilKey(x.v), math.Exp(float64(x.v)/T)
			s.cd.tw[k] += w
			s.cd.twKeys = append(s.cd.twKeys, k)
			s.cd.twW = append(s.cd.twW, w)
			n++
		}
	}
	for b := kBot >> 6; b <= kTop>>6; b++ {
		hi := min(b<<6+63, kTop)
		if l.Type == F16 && hi == 0x7fff { // -0 goes with +0, in block 0x200
			hi--
		}
		w, c := s.keyMass(max(b<<6, kBot), hi)
		s.cd.blk[b] = w
		n += c
	}
	if l.Type == F16 && kBot <= 0x8000 && kTop >= 0x8000 {
		c := s.cd.cnt[0x8000]
		s.cd.blk[0x200] += float64(c) * s.cd.wtab[0x8000]
		n += int(c)
	}
	for i, k := range s.cd.twKeys {
		s.cd.blk[k>>6] += s.cd.twW[i]
	}
	var z float64
	for _, w := range s.cd.blk[kBot>>6 : kTop>>6+1] {
		z += w
	}
	s.l, s.m, s.thr, s.cd.kTop, s.cd.kBot = l, m, thr, kTop, kBot
	s.big, s.wasBig, s.inRange = true, n >= s.bigMin, n
	s.cd.bKey, s.cd.bList, s.zk = -1, false, z
	s.pbuf, s.pw = s.pbuf[:0], s.pw[:0]
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		s.topPCodes(p * z)
	}
	return true
}

// weights makes s.cd.wtab the table of exp(logit/T) per code of s.l for
// tab: a table kept from an earlier step, else a new one (replacing the
// least recently used when maxTabs are kept).
func (s *Sampler) weights(tab tabFor, T float64) {
	s.cd.tick++
	old := -1
	for i := range s.cd.tabs {
		t := &s.cd.tabs[i]
		if t.key == tab {
			t.used, s.cd.wtab = s.cd.tick, t.w
			return
		}
		if old < 0 || t.used < s.cd.tabs[old].used {
			old = i
		}
	}
	if len(s.cd.tabs) < maxTabs {
		s.cd.tabs = append(s.cd.tabs, weightTab{w: new([1 << 16]float64)})
		old = len(s.cd.tabs) - 1
	}
	t := &s.cd.tabs[old]
	t.key, t.used = tab, s.cd.tick
	for c := range t.w {
		// no +Inf: 0·w must stay 0
		t.w[c] = min(math.Exp(float64(s.codeVal(uint16(c)))/T), math.MaxFloat64)
	}
	s.cd.wtab = t.w
}

// topPCodes finds, after histCodes, the group where the mass from the best
// down reaches mass: the groups above it are kept whole; of it, the lowest
// ids (equal weights, s.cd.bKept) or, when it holds touched ids, its best
// tokens (in s.pbuf). s.zk becomes the kept mass.
func (s *Sampler) topPCodes(mass float64) {
	kTop, kBot := s.cd.kTop, s.cd.kBot
	kept, kw, cum := s.pbuf[:0], s.pw[:0], 0.0
	for b := kTop >> 6; b >= kBot>>6; b-- {
		if cum+s.cd.blk[b] < mass {
			cum += s.cd.blk[b]
			continue
		}
		for k := min(b<<6+63, kTop); k >= max(b<<6, kBot); k-- {
			g := s.groupMass(k)
			if g == 0 {
				continue
			}
			if cum+g < mass {
				cum += g
				continue
			}
			s.cd.bKey = k
			if s.cd.tw[k] == 0 { // equal weights: keep the lowest ids
				h, _ := s.groupCodes(k)
				w, n := s.cd.wtab[h], s.groupCount(k)
				need := min(max(int(math.Ceil((mass-cum)/w)), 1), n)
				for need > 1 && cum+float64(need-1)*w >= mass {
					need--
				}
				for need < n && cum+float64(need)*w < mass {
					need++
				}
				s.cd.bKept, s.zk = need, cum+float64(need)*w
			} else {
				for _, c := range s.groupCands(k) {
					if cum >= mass {
						break
					}
					kept = append(kept, c.cand)
					kw = append(kw, c.w)
					cum += c.w
				}
				s.cd.bList, s.zk = true, cum
				s.pbuf, s.pw = kept, kw
			}
			return
		}
	}
}

// keyMass returns the mass and number of the untouched ids with keys k0..k1
// (for F16, within one sign of halves).
func (s *Sampler) keyMass(k0, k1 int) (float64, int) {
	h0, h1 := k0, k1
	switch {
	case s.l.Type == U16:
	case k0 >= 0x8000:
		h0, h1 = k0-0x8000, k1-0x8000
	default:
		h0, h1 = 0xffff-k1, 0xffff-k0
	}
	c, w := s.cd.cnt[h0:h1+1], s.cd.wtab[h0:h1+1]
	w = w[:len(c)]
	var a0, a1, a2, a3 float64
	var n0, n1 uint32
	i := 0
	for ; i+4 <= len(c); i += 4 {
		c4 := c[i : i+4 : i+4]
		if c4[0]|c4[1]|c4[2]|c4[3] == 0 { // runs of empty codes (U16's fine steps)
			continue
		}
		w4 := w[i : i+4 : i+4]
		// counts fit in int32, whose conversion is one instruction
		a0 += float64(int32(c4[0])) * w4[0]
		a1 += float64(int32(c4[1])) * w4[1]
		a2 += float64(int32(c4[2])) * w4[2]
		a3 += float64(int32(c4[3])) * w4[3]
		n0 += c4[0] + c4[1]
		n1 += c4[2] + c4[3]
	}
	for ; i < len(c); i++ {
		a0 += float64(c[i]) * w[i]
		n0 += c[i]
	}
	return a0 + a1 + a2 + a3, int(n0) + int(n1)
}

// groupCands returns the tokens of group k, best first, with their weights.
func (s *Sampler) groupCands(k int) []wcand {
	h, h2 := s.groupCodes(k)
	s.gids = codeIDs(s.l.Raw16, h, h2, s.touched, s.gids[:0], math.MaxInt)
	g := s.cd.gbuf[:0]
	for _, id := range s.gids {
		g = append(g, wcand{cand{id, s.codeVal(h)}, s.cd.wtab[h]})
	}
	for _, x := range s.tv {
		if x.v >= s.thr && s.ceilKey(x.v) == k {
			g = append(g, wcand{x, math.Exp(float64(x.v) / float64(s.p.Temperature))})
		}
	}
	slices.SortFunc(g, func(a, b wcand) int {
		if better(a.cand, b.cand) {
			return -1
		}
		return 1
	})
	s.cd.gbuf = g
	return g
}

// pickCode returns the token of group k where the draw u (within the
// group's mass) falls; at most the n-th (from 1) of equal weights.
func (s *Sampler) pickCode(k int, u float64, n int) int32 {
	if s.cd.tw[k] == 0 {
		h, h2 := s.groupCodes(k)
		j := min(max(int(u/s.cd.wtab[h]), 0), n-1)
		if s.gids = codeIDs(s.l.Raw16, h, h2, s.touched, s.gids[:0], j+1); len(s.gids) > j {
			return s.gids[j]
		}
		return -1
	}
	g := s.groupCands(k)
	for _, c := range g {
		if u -= c.w; u < 0 {
			return c.id
		}
	}
	return g[len(g)-1].id
}

// sampleCodes draws a token after histCodes.
func (s *Sampler) sampleCodes() int32 {
	u := s.rng.Float64() * s.zk
	lo := s.cd.kBot // the lowest key kept whole
	if s.cd.bKey >= 0 {
		lo = s.cd.bKey + 1
	}
	last := -1
	for b := s.cd.kTop >> 6; b >= lo>>6; b-- {
		if b<<6 >= lo && u >= s.cd.blk[b] {
			u -= s.cd.blk[b]
			continue
		}
		for k := min(b<<6+63, s.cd.kTop); k >= max(b<<6, lo); k-- {
			g := s.groupMass(k)
			if g == 0 {
				continue
			}
			if u < g {
				return s.pickCode(k, u, s.groupCount(k))
			}
			u -= g
			last = k
		}
	}
	switch {
	case s.cd.bKey >= 0 && s.cd.bList:
		for i, w := range s.pw {
			if u -= w; u < 0 {
				return s.pbuf[i].id
			}
		}
		return s.pbuf[len(s.pbuf)-1].id
	case s.cd.bKey >= 0:
		return s.pickCode(s.cd.bKey, u, s.cd.bKept)
	}
	// rounding: the lowest kept group
	for k := lo; k <= s.cd.kTop && last < 0; k++ {
		if s.groupMass(k) > 0 {
			last = k
		}
	}
	if last < 0 {
		return 0
	}
	return s.pickCode(last, math.Inf(1), s.groupCount(last))
}

// keptCodes materialises the kept tokens of a histCodes step (for tests).
func (s *Sampler) keptCodes() ([]cand, []float64) {
	lo := s.cd.kBot
	if s.cd.bKey >= 0 {
		lo = s.cd.bKey + 1
	}
	var c []cand
	nb := 0
	for i, h := range s.l.Raw16 {
		k := s.codeKey(h)
		if k < 0 || skipped(s.touched, i) {
			continue
		}
		if k >= lo || k == s.cd.bKey && !s.cd.bList && nb < s.cd.bKept {
			if k == s.cd.bKey {
				nb++
			}
			c = append(c, cand{int32(i), s.codeVal(h)})
		}
	}
	for _, x := range s.tv {
		if x.v >= s.thr && s.ceilKey(x.v) >= lo {
			c = append(c, x)
		}
	}
	if s.cd.bList {
		c = append(c, s.pbuf...)
	}
	inv := 1 / s.p.Temperature
	ws := make([]float64, len(c))
	for i, x := range c {
		ws[i] = float64(expNeg((x.v - s.m) * inv))
	}
	return c, ws
}

// The code scans below serve F16 (halves) and U16 (fixed-point codes) alike.

// countCodes counts, per code, the untouched ids with keys kBot..kTop
// (F16: with -0 in +0's group), the only counts the step reads: the codes
// at or above the cutoff are counted (scan.CountGE*, which may count every
// code instead), then the touched ids counted among them are taken out
// again. It records the code ranges it wrote for the next step to clear.
func (s *Sampler) countCodes(kBot, kTop int) {
	x, cnt := s.l.Raw16, s.cd.cnt
	kc := kBot
	if s.l.Type == F16 && kBot == 0x8000 {
		kc = 0x7fff // -0
	}
	var all bool // every code was counted, not only those from kc up
	if s.l.Type == U16 {
		all = scan.CountGEU16(x, uint16(kc), cnt)
	} else {
		all = scan.CountGEHalf(x, uint16(kc), cnt)
	}
	counted := func(h uint16) bool {
		if all {
			return s.l.Type == U16 || !isNaN16(h)
		}
		if s.l.Type == U16 {
			return int(h) >= kc
		}
		return int(scan.HalfKey(h)) >= kc && !isNaN16(h)
	}
	if s.l.Type == F16 {
		clear(cnt[0x7c01:0x8000]) // positive NaNs: keys above every value
	}
	for _, id := range s.tlist {
		if h := x[id]; counted(h) {
			cnt[h]--
		}
	}
	// Untouched ids have keys up to kTop (touched ones above it are back to
	// zero), and from kc up unless all were counted.
	if all {
		kc = 0
	}
	switch {
	case s.l.Type == U16:
		s.cd.dirty = append(s.cd.dirty, [2]int{kc, kTop + 1})
	default:
		if kTop >= 0x8000 { // non-negative halves: code = key − 0x8000
			s.cd.dirty = append(s.cd.dirty, [2]int{max(kc, 0x8000) - 0x8000, kTop - 0x8000 + 1})
		}
		if kc <= 0x7fff { // negative halves: code = 0xffff − key
			s.cd.dirty = append(s.cd.dirty, [2]int{0xffff - min(kTop, 0x7fff), 0xffff - kc + 1})
		}
	}
}

// codeIDs appends to out, in id order, the first n ids not in skip whose
// code is h or h2.
func codeIDs(x []uint16, h, h2 uint16, skip []uint64, out []int32, n int) []int32 {
	for i := 0; i < len(x) && n > 0; i++ {
		if i += scan.IndexEq16(x[i:], h, h2); i == len(x) {
			break
		}
		if !skipped(skip, i) {
			out = append(out, int32(i))
			n--
		}
	}
	return out
}
