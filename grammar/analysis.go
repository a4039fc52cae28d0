package grammar

import (
	"fmt"
	"slices"
)

// The checks a compiled schema passes before it is used: no reference
// that reaches itself without consuming input, some value valid (and no
// branch, type or property kept that no value can complete, so generation
// never walks into a dead end), and the parse threads alive at once within
// Limits.MaxBranches.

func sortedRefs(m map[string]*node) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// children calls f on each node a value of n can contain or be.
func children(n *node, f func(*node)) {
	if n.ref != nil {
		f(n.ref)
	}
	for _, a := range n.alts {
		f(a)
	}
	for _, a := range n.seq {
		f(a)
	}
	for _, p := range n.prefix {
		f(p)
	}
	if n.items != nil {
		f(n.items)
	}
	for _, p := range n.props {
		f(p.n)
	}
	if n.addl != nil {
		f(n.addl)
	}
}

// all returns the nodes reachable from root, children before parents
// (where there is no cycle).
func (c *compiler) all(root *node) []*node {
	seen := map[*node]bool{}
	var out []*node
	var visit func(n *node)
	visit = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		c.b.spend(1)
		children(n, visit)
		out = append(out, n)
	}
	visit(root)
	return out
}

// leftRecursion returns a reference that reaches itself through
// references and anyOf branches alone (a value that would begin with
// itself). One walk over all references: a long chain is no recursion.
func (c *compiler) leftRecursion() (string, bool) {
	const (
		white = iota
		grey
		black
	)
	names := map[*node]string{}
	for k, r := range c.refs {
		names[r] = k
	}
	colour := map[*node]int{}
	var stack []*node
	var visit func(n *node) (string, bool)
	visit = func(n *node) (string, bool) {
		switch colour[n] {
		case grey: // a cycle: name a reference on it
			for _, m := range stack[slices.Index(stack, n):] {
				if name, ok := names[m]; ok {
					return name, true
				}
			}
			return "", true
		case black:
			return "", false
		}
		colour[n] = grey
		stack = append(stack, n)
		c.b.spend(1)
		if n.ref != nil {
			if name, ok := visit(n.ref); ok {
				return name, true
			}
		}
		for _, a := range n.alts {
			if name, ok := visit(a); ok {
				return name, true
			}
		}
		stack = stack[:len(stack)-1]
		colour[n] = black
		return "", false
	}
	for _, k := range sortedRefs(c.refs) {
		if name, ok := visit(c.refs[k]); ok {
			return name, true
		}
	}
	return "", false
}

// satTypes returns the type bits of n for which some value exists, given
// the nodes known satisfiable.
func satTypes(n *node, sat map[*node]bool) uint8 {
	t := n.types
	if t&(tInt|tNum) != 0 && n.lo > n.hi {
		t &^= tInt | tNum
	}
	if t&tStr != 0 && (n.maxLen >= 0 && n.minLen > n.maxLen || n.re != nil && !n.re.viable(1, 0)) {
		t &^= tStr
	}
	if t&tArr != 0 {
		if n.maxItems >= 0 && n.minItems > n.maxItems {
			t &^= tArr
		}
		for i := 0; i < n.minItems && i <= len(n.prefix) && t&tArr != 0; i++ {
			if it := item(n, int32(i)); it == nil || !sat[it] {
				t &^= tArr
			}
		}
	}
	if t&tObj != 0 {
		for _, p := range n.props {
			if p.req && !sat[p.n] {
				t &^= tObj
			}
		}
	}
	return t
}

func satisfied(n *node, sat map[*node]bool) bool {
	switch {
	case n.ref != nil:
		return sat[n.ref]
	case n.alts != nil:
		return slices.ContainsFunc(n.alts, func(a *node) bool { return sat[a] })
	case n.lits != nil:
		return len(n.lits) > 0
	}
	return satTypes(n, sat) != 0
}

// satisfiable reports whether some value is valid for root, and prunes
// from every node what no value can complete.
func (c *compiler) satisfiable(root *node) bool {
	nodes := c.all(root)
	sat := map[*node]bool{}
	for changed := true; changed; {
		changed = false
		for _, n := range nodes {
			c.b.spend(1)
			if !sat[n] && satisfied(n, sat) {
				sat[n], changed = true, true
			}
		}
	}
	for _, n := range nodes {
		c.prune(n, sat)
	}
	return sat[root]
}

// prune drops from n what cannot be completed.
func (c *compiler) prune(n *node, sat map[*node]bool) {
	if n == anyNode || n.ref != nil || n.lits != nil {
		return
	}
	if n.alts != nil {
		n.alts = slices.DeleteFunc(n.alts, func(a *node) bool { return !sat[a] })
		return
	}
	n.types = satTypes(n, sat)
	for i := range n.props {
		if !sat[n.props[i].n] {
			n.props[i].never = true
		}
	}
	if n.addl != nil && !sat[n.addl] {
		n.addl = nil
	}
	for i, p := range n.prefix {
		if !sat[p] && (n.maxItems < 0 || n.maxItems > i) {
			n.maxItems = i
		}
	}
	if n.items != nil && !sat[n.items] {
		n.items = nil
		if n.maxItems < 0 || n.maxItems > len(n.prefix) {
			n.maxItems = len(n.prefix)
		}
	}
}

// Kinds of value by first byte, for the branch count; kNone: no child
// value open.
const (
	kNull = iota
	kBool
	kNum
	kStr
	kArr
	kObj
	kNone
	nKinds
)

// width[a][b] bounds the parse threads alive inside a value whose first
// byte is of kind a while its open child value is of kind b.
type width [kNone][nKinds]int32

// branches checks that no value of root keeps more than MaxBranches parse
// threads alive at once (overlapping anyOf branches each keep one; nested,
// they multiply).
func (c *compiler) branches(root *node) error {
	lim := int32(c.b.lim.MaxBranches)
	nodes := c.all(root)
	w := map[*node]*width{}
	for _, n := range nodes {
		w[n] = &width{}
	}
	rowMax := func(x *width, k int) int32 {
		return slices.Max(x[k][:])
	}
	for changed := true; changed; {
		changed = false
		for _, n := range nodes {
			c.b.spend(int64(nKinds * kNone))
			var nw width
			switch {
			case n.ref != nil:
				nw = *w[n.ref]
			case n.alts != nil:
				for _, a := range n.alts {
					for i := range nw {
						for j := range nw[i] {
							nw[i][j] = min(nw[i][j]+w[a][i][j], lim+1)
						}
					}
				}
			case n.lits != nil:
				for _, l := range n.lits {
					nw[kindIndex(l[0])][kNone] = 1
				}
			default:
				nw = typedWidth(n, w, rowMax)
			}
			if nw != *w[n] {
				*w[n], changed = nw, true
			}
		}
		for _, n := range nodes {
			for i := range w[n] {
				if m := rowMax(w[n], i); m > lim {
					c.at = c.paths[n]
					return &Error{Path: c.paths[n], Message: fmt.Sprintf("more than %d overlapping branches (anyOf alternatives that can match the same text) are alive at once (structured.max_branches)", lim)}
				}
			}
		}
	}
	return nil
}

func typedWidth(n *node, w map[*node]*width, rowMax func(*width, int) int32) width {
	var nw width
	t := n.types
	for k, bit := range []uint8{tNull, tBool, tInt | tNum, tStr} {
		if t&bit != 0 {
			nw[k][kNone] = 1
		}
	}
	inside := func(k int, c *node) {
		for j := range kNone {
			nw[k][j] = max(nw[k][j], rowMax(w[c], j))
		}
	}
	if t&tArr != 0 {
		nw[kArr][kNone] = 1
		for _, p := range n.prefix {
			inside(kArr, p)
		}
		if n.items != nil {
			inside(kArr, n.items)
		}
	}
	if t&tObj != 0 {
		nw[kObj][kNone], nw[kObj][kStr] = 1, 1 // a key
		for _, p := range n.props {
			if !p.never {
				inside(kObj, p.n)
			}
		}
		if n.addl != nil {
			inside(kObj, n.addl)
		}
	}
	return nw
}

func kindIndex(b byte) int {
	switch kindOf(b) {
	case tNull:
		return kNull
	case tBool:
		return kBool
	case tStr:
		return kStr
	case tArr:
		return kArr
	case tObj:
		return kObj
	}
	return kNum
}
