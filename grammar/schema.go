// Package grammar compiles a JSON Schema (a subset of draft 2020-12) or a
// tool set into a byte-level grammar and matches it against a tokenizer's
// vocabulary: at each step it gives the set of token ids that keep the
// output a prefix of a valid instance, and EOS only once the value is
// complete. It is pure Go.
package grammar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Type bits of a node.
const (
	tNull uint8 = 1 << iota
	tBool
	tInt // integers only (no fraction)
	tNum // numbers with up to FracDigits fraction digits
	tStr
	tArr
	tObj
	tAll = tNull | tBool | tInt | tNum | tStr | tArr | tObj
)

// Limits of the grammar (documented in docs/api.md).
const (
	FracDigits = 6  // fraction digits a number may have
	MaxWS      = 4  // whitespace bytes allowed in each gap between tokens of JSON
	maxProps   = 64 // properties per object schema
	maxDigits  = 18 // integer plus fraction digits of a number
)

// node is a compiled schema. Exactly one of ref, alts, seq, lits or the
// typed fields applies (in that order).
type node struct {
	ref   *node
	alts  []*node  // anyOf
	lits  []string // enum/const: compact JSON texts
	types uint8

	lo, hi int64 // number bounds, scaled by 10^frac (frac: 0 when only integers)

	minLen, maxLen int    // string, in code points
	format         string // string: a key of formats ("": none)
	re             *strRE // string: a pattern or a regex format (nil: none)

	prefix             []*node
	items              *node // nil: no items beyond prefix
	minItems, maxItems int

	props  []prop
	addl   *node // nil: no additional properties
	strict bool  // keys in schema order

	seq []*node // parts matched one after the other, with no gap (tool-call markers around a call)
}

type prop struct {
	name  string // JSON-encoded, without quotes
	n     *node
	req   bool
	never bool // no value of n is valid: the key may not come
}

// Error is a schema the grammar cannot enforce exactly (or not within its
// Limits: then it wraps ErrBudget).
type Error struct {
	Path    string // dotted path of the offending keyword, e.g. "properties.x.not"
	Message string
	err     error
}

func (e *Error) Error() string { return e.Path + ": " + e.Message }

// Unwrap returns ErrBudget's error for a schema over its limits.
func (e *Error) Unwrap() error { return e.err }

// Options tune compilation.
type Options struct {
	// Strict makes object keys follow the schema's property order.
	Strict bool
	// Closed makes an object schema with properties and no
	// additionalProperties allow no other keys, as llama.cpp's schema
	// grammars (and so Ollama's format) do; JSON Schema allows any.
	Closed bool
	// Context stops the compile with its error once it is done (a client
	// that went away); nil: never.
	Context context.Context
	// Limits bound the compile and each mask of the grammar's matchers.
	Limits Limits
	// Cache keeps compiled patterns and masks across grammars; nil: the
	// package's default (DefaultCacheBytes).
	Cache *Cache
	// Calls is how Tools writes forced calls; the zero value is Llama 3's.
	Calls CallSyntax
}

// Grammar is a compiled schema; it is immutable and safe to share.
type Grammar struct {
	root  *node
	took  time.Duration
	masks *maskCache
	lim   Limits
	steps int64
}

// CompileTime is how long compiling g took.
func (g *Grammar) CompileTime() time.Duration { return g.took }

// CompileSteps is the work compiling g took, in the steps of Limits.Steps.
func (g *Grammar) CompileSteps() int64 { return g.steps }

type compiler struct {
	doc    any
	strict bool
	closed bool
	refs   map[string]*node
	orders map[uintptr][]string
	b      *budget
	cache  *Cache
	at     string             // the schema part being compiled (named when over budget)
	memo   map[uintptr]memoed // schema objects already compiled
	res    map[reKey]*strRE   // patterns of this compile
	nodes  map[string]*node   // interned nodes: equal schemas share one
	paths  map[*node]string   // anyOf nodes: their schema path
}

type memoed struct {
	s map[string]any // keeps the map (and so its address) alive
	n *node
}

// Compile compiles a JSON Schema document within o.Limits. A schema over
// them is an *Error naming the part that was being compiled, wrapping
// ErrBudget; a done o.Context returns its error.
func Compile(schema []byte, o Options) (g *Grammar, err error) {
	done, err := o.Cache.orDefault().enter(o.Context)
	if err != nil {
		return nil, err
	}
	defer done()
	t0 := time.Now()
	doc, orders, err := decode(schema)
	if err != nil {
		return nil, decodeError(err)
	}
	c := newCompiler(doc, orders, o)
	n, err := c.run(func() (*node, error) { return c.compile(doc, "") })
	if err != nil {
		return nil, err
	}
	return &Grammar{root: n, took: time.Since(t0), masks: c.newMasks(), lim: c.b.lim, steps: c.b.lim.Steps - c.b.left}, nil
}

func newCompiler(doc any, orders map[uintptr][]string, o Options) *compiler {
	return &compiler{doc: doc, strict: o.Strict, closed: o.Closed, refs: map[string]*node{}, orders: orders,
		b: newBudget(o.Context, o.Limits), cache: o.Cache.orDefault(), memo: map[uintptr]memoed{},
		res: map[reKey]*strRE{}, nodes: map[string]*node{}, paths: map[*node]string{}}
}

func (c *compiler) newMasks() *maskCache { return &maskCache{id: nextID(), cache: c.cache} }

// run compiles with build, then checks the result (no left recursion, some
// value valid, the branches alive at once within the limit); a budget
// panic becomes an error.
func (c *compiler) run(build func() (*node, error)) (n *node, err error) {
	defer func() {
		var be error
		catch(recover(), &be)
		switch {
		case be == nil:
		case errors.Is(be, ErrBudget):
			n, err = nil, &Error{Path: c.at, Message: "this schema costs too much to enforce: " + strings.TrimPrefix(be.Error(), ErrBudget.Error()+": "), err: be}
		default:
			n, err = nil, be // the context's error
		}
	}()
	if n, err = build(); err != nil {
		return nil, err
	}
	c.at = ""
	if ref, ok := c.leftRecursion(); ok {
		return nil, &Error{Path: "$ref", Message: fmt.Sprintf("reference %s reaches itself without consuming input", ref)}
	}
	if !c.satisfiable(n) {
		return nil, &Error{Path: "", Message: "the schema allows no value (false, an empty enum or contradictory keywords)"}
	}
	if err := c.branches(n); err != nil {
		return nil, err
	}
	return n, nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

var anyNode = &node{types: tAll, maxLen: -1, maxItems: -1, lo: minBound(FracDigits), hi: maxBound(FracDigits)}

func init() { anyNode.items = anyNode; anyNode.addl = anyNode }

func maxBound(frac int) int64 {
	v := int64(1)
	for range maxDigits {
		v *= 10
	}
	return v - 1
}
func minBound(frac int) int64 { return -maxBound(frac) }

// annotations are keywords without effect on validity.
var annotations = map[string]bool{"title": true, "description": true, "$schema": true, "$id": true,
	"$comment": true, "default": true, "examples": true, "deprecated": true, "readOnly": true,
	"writeOnly": true, "$defs": true, "definitions": true, "contentMediaType": true, "contentEncoding": true}

func (c *compiler) compile(s any, path string) (*node, error) {
	switch s := s.(type) {
	case bool:
		if s {
			return anyNode, nil
		}
		return c.intern(&node{alts: []*node{}}), nil
	case map[string]any:
		// The same schema object met again (anyOf siblings apply to every
		// branch) compiles once.
		key := reflect.ValueOf(s).Pointer()
		if m, ok := c.memo[key]; ok {
			return m.n, nil
		}
		c.at = path
		c.b.spend(int64(1 + len(s)))
		n, err := c.object(s, path)
		if err != nil {
			return nil, err
		}
		if _, ref := s["$ref"]; !ref { // a reference keeps its identity
			n = c.intern(n)
		}
		if _, ok := c.paths[n]; !ok {
			c.paths[n] = path
		}
		c.memo[key] = memoed{s, n}
		return n, nil
	}
	return nil, &Error{Path: path, Message: "a schema must be an object or a boolean"}
}

func (c *compiler) object(s map[string]any, path string) (*node, error) {
	if r, ok := s["$ref"]; ok {
		for k := range s {
			if k != "$ref" && !annotations[k] {
				return nil, &Error{Path: join(path, k), Message: "keywords beside $ref are not supported"}
			}
		}
		return c.ref(r, join(path, "$ref"))
	}
	if all, ok := s["allOf"]; ok {
		merged, err := mergeAllOf(s, all, c, join(path, "allOf"))
		if err != nil {
			return nil, err
		}
		return c.object(merged, path)
	}
	for _, k := range sortedKeys(s) {
		if !supported[k] && !annotations[k] {
			return nil, &Error{Path: join(path, k), Message: fmt.Sprintf("keyword %q is not supported", k)}
		}
	}
	if v, ok := s["uniqueItems"]; ok && v != false {
		return nil, &Error{Path: join(path, "uniqueItems"), Message: "only uniqueItems: false is supported"}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if v, ok := s[k]; ok {
			return c.alternatives(s, k, v, path)
		}
	}
	n := &node{types: tAll, maxLen: -1, maxItems: -1}
	if t, ok := s["type"]; ok {
		ts, err := types(t, join(path, "type"))
		if err != nil {
			return nil, err
		}
		n.types = ts
	}
	if err := c.numbers(n, s, path); err != nil {
		return nil, err
	}
	if err := c.strings(n, s, path); err != nil {
		return nil, err
	}
	if err := c.arrays(n, s, path); err != nil {
		return nil, err
	}
	if err := c.objects(n, s, path); err != nil {
		return nil, err
	}
	if err := c.enum(n, s, path); err != nil {
		return nil, err
	}
	return n, nil
}

// alternatives compiles an anyOf or oneOf (k, whose value is v) with its
// siblings in s applied to every branch.
func (c *compiler) alternatives(s map[string]any, k string, v any, path string) (*node, error) {
	rest := without(s, k)
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, &Error{Path: join(path, k), Message: k + " must be a non-empty array"}
	}
	n := &node{}
	for i, sub := range list {
		m, ok := sub.(map[string]any)
		if !ok {
			m = map[string]any{}
			if sub == false {
				continue
			}
		}
		if len(rest) > 0 { // the siblings apply to every branch
			m = map[string]any{"allOf": []any{rest, m}}
		}
		a, err := c.compile(m, join(path, fmt.Sprintf("%s.%d", k, i)))
		if err != nil {
			return nil, err
		}
		c.b.spend(int64(len(n.alts)))
		if k == "oneOf" || !slices.Contains(n.alts, a) { // equal anyOf branches: one thread
			n.alts = append(n.alts, a)
		}
	}
	c.at = join(path, k)
	c.paths[n] = c.at
	if k == "oneOf" && !c.disjoint(n.alts) {
		return nil, &Error{Path: join(path, k), Message: "oneOf branches that are not provably disjoint are not supported"}
	}
	return n, nil
}

// disjoint reports whether no two of alts can start with the same byte
// (branches² pairs, charged to the budget).
func (c *compiler) disjoint(alts []*node) bool {
	first := make([]uint8, len(alts))
	for i, a := range alts {
		first[i] = firstBytes(a, 0)
	}
	for i := range alts {
		c.b.spend(int64(1 + i))
		for j := range i {
			if first[i]&first[j] != 0 {
				return false
			}
		}
	}
	return true
}

var supported = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "prefixItems": true, "minItems": true, "maxItems": true, "enum": true, "const": true,
	"anyOf": true, "oneOf": true, "allOf": true, "uniqueItems": true, "minLength": true, "maxLength": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "format": true,
	"pattern": true}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func without(m map[string]any, k string) map[string]any {
	r := map[string]any{}
	for kk, v := range m {
		if kk != k && !annotations[kk] {
			r[kk] = v
		}
	}
	return r
}

func types(t any, path string) (uint8, error) {
	one := func(s any) (uint8, error) {
		switch s {
		case "null":
			return tNull, nil
		case "boolean":
			return tBool, nil
		case "integer":
			return tInt, nil
		case "number":
			return tInt | tNum, nil
		case "string":
			return tStr, nil
		case "array":
			return tArr, nil
		case "object":
			return tObj, nil
		}
		return 0, &Error{Path: path, Message: fmt.Sprintf("unknown type %v", s)}
	}
	if l, ok := t.([]any); ok {
		var r uint8
		for _, x := range l {
			b, err := one(x)
			if err != nil {
				return 0, err
			}
			r |= b
		}
		return r, nil
	}
	return one(t)
}

func (c *compiler) ref(r any, path string) (*node, error) {
	s, ok := r.(string)
	if !ok || !strings.HasPrefix(s, "#") {
		return nil, &Error{Path: path, Message: fmt.Sprintf("only local references (#...) are supported, got %v", r)}
	}
	if n, ok := c.refs[s]; ok {
		return n, nil
	}
	c.b.spend(int64(1 + len(s))) // the pointer's tokens, each looked up
	target, err := pointer(c.doc, s[1:])
	if err != nil {
		return nil, &Error{Path: path, Message: err.Error()}
	}
	n := &node{}
	c.refs[s] = n
	// The target's keywords are named where they are (a chain of
	// references must not grow the path).
	t, err := c.compile(target, strings.ReplaceAll(strings.TrimPrefix(s[1:], "/"), "/", "."))
	if err != nil {
		return nil, err
	}
	n.ref = t
	return n, nil
}

// pointer resolves a JSON pointer in doc.
func pointer(doc any, p string) (any, error) {
	if p == "" {
		return doc, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("reference #%s is not a JSON pointer", p)
	}
	cur := doc
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			x, ok := v[tok]
			if !ok {
				return nil, fmt.Errorf("reference #%s does not resolve", p)
			}
			cur = x
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, fmt.Errorf("reference #%s does not resolve", p)
			}
			cur = v[i]
		default:
			return nil, fmt.Errorf("reference #%s does not resolve", p)
		}
	}
	return cur, nil
}

// mergeAllOf folds allOf's parts into s when they are compatible.
func mergeAllOf(s map[string]any, all any, c *compiler, path string) (map[string]any, error) {
	list, ok := all.([]any)
	if !ok || len(list) == 0 {
		return nil, &Error{Path: path, Message: "allOf must be a non-empty array"}
	}
	out := without(s, "allOf")
	src := map[string][]int{} // keyword: the parts (-1: s itself) that set it
	for k := range out {
		src[k] = []int{-1}
	}
	for i, part := range list {
		p := join(path, strconv.Itoa(i))
		for depth := 0; ; depth++ {
			m, ok := part.(map[string]any)
			if !ok || depth > 16 {
				break
			}
			r, ok := m["$ref"].(string)
			if !ok || len(m) != 1 || !strings.HasPrefix(r, "#") {
				break
			}
			t, err := pointer(c.doc, r[1:])
			if err != nil {
				return nil, &Error{Path: join(p, "$ref"), Message: err.Error()}
			}
			part = t
		}
		switch m := part.(type) {
		case bool:
			if !m {
				out = map[string]any{"anyOf": []any{false}}
			}
			continue
		case map[string]any:
			for k, v := range m {
				if annotations[k] {
					continue
				}
				if l, ok := v.([]any); ok { // merged with what is there: required, type lists
					c.b.spend(int64(1 + len(l)))
				}
				c.b.spend(1)
				src[k] = append(src[k], i)
				old, ok := out[k]
				if !ok {
					out[k] = v
					continue
				}
				mv, err := mergeKey(k, old, v)
				if err != nil {
					return nil, &Error{Path: join(p, k), Message: err.Error()}
				}
				out[k] = mv
			}
		default:
			return nil, &Error{Path: p, Message: "a schema must be an object or a boolean"}
		}
	}
	// items and additionalProperties see only their own part's prefixItems
	// and properties, so those must come from the same single part.
	for _, kk := range [][2]string{{"items", "prefixItems"}, {"additionalProperties", "properties"}} {
		a, b := src[kk[0]], src[kk[1]]
		if len(a) > 0 && (len(a) > 1 || len(b) > 1 || len(b) == 1 && b[0] != a[0]) {
			return nil, &Error{Path: path, Message: fmt.Sprintf("allOf parts that combine %s with another part's %s are not supported", kk[0], kk[1])}
		}
	}
	return out, nil
}

func mergeKey(k string, a, b any) (any, error) {
	if reflect.DeepEqual(a, b) {
		return a, nil
	}
	switch k {
	case "minimum", "exclusiveMinimum", "minLength", "minItems":
		return pickBound(k, a, b, true)
	case "maximum", "exclusiveMaximum", "maxLength", "maxItems":
		return pickBound(k, a, b, false)
	case "required":
		return mergeRequired(a, b), nil
	case "properties":
		return mergeProperties(a, b)
	case "type":
		return mergeTypes(a, b)
	}
	return nil, fmt.Errorf("allOf parts with different %s are not supported", k)
}

// pickBound is the tighter of two numeric bounds on k: the larger one
// (wantMax) for a minimum, the smaller for a maximum.
func pickBound(k string, a, b any, wantMax bool) (any, error) {
	ra, rb := jsonRat(a), jsonRat(b)
	if ra == nil || rb == nil {
		return nil, fmt.Errorf("allOf parts disagree on %s", k)
	}
	if (ra.Cmp(rb) < 0) == wantMax {
		return b, nil
	}
	return a, nil
}

// jsonRat is x's exact value when it is a JSON number, else nil.
func jsonRat(x any) *big.Rat {
	n, ok := x.(json.Number)
	if !ok {
		return nil
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil
	}
	return r
}

// mergeRequired is the union of two required lists, a's order first
// (non-strings are kept, to be refused when compiled).
func mergeRequired(a, b any) []any {
	la, _ := a.([]any)
	lb, _ := b.([]any)
	r := slices.Clone(la)
	seen := make(map[any]bool, len(la))
	for _, x := range la {
		if _, ok := x.(string); ok {
			seen[x] = true
		}
	}
	for _, x := range lb {
		if _, ok := x.(string); !ok {
			r = append(r, x)
		} else if !seen[x] {
			seen[x] = true
			r = append(r, x)
		}
	}
	return r
}

// mergeProperties joins two properties objects; a name in both gets the
// allOf of its two schemas.
func mergeProperties(a, b any) (any, error) {
	ma, ok1 := a.(map[string]any)
	mb, ok2 := b.(map[string]any)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("properties must be objects")
	}
	r := map[string]any{}
	for kk, v := range ma {
		r[kk] = v
	}
	for kk, v := range mb {
		if old, ok := r[kk]; ok && !sameSchema(old, v) {
			r[kk] = map[string]any{"allOf": []any{old, v}}
		} else {
			r[kk] = v
		}
	}
	return r, nil
}

// mergeTypes is the intersection of two type keywords.
func mergeTypes(a, b any) (any, error) {
	ta, err1 := types(a, "")
	tb, err2 := types(b, "")
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("unknown type")
	}
	var r []any
	for _, t := range []string{"null", "boolean", "integer", "number", "string", "array", "object"} {
		tt, _ := types(t, "")
		if t == "integer" && ta&tb&tNum != 0 {
			continue // number covers it
		}
		if ta&tb&tt == tt {
			r = append(r, t)
		}
	}
	return r, nil
}

// sameSchema reports whether a and b are the same schema object (so a
// merge keeps it, and its compile is shared), or equal booleans.
func sameSchema(a, b any) bool {
	ma, ok1 := a.(map[string]any)
	mb, ok2 := b.(map[string]any)
	if ok1 && ok2 {
		return reflect.ValueOf(ma).Pointer() == reflect.ValueOf(mb).Pointer()
	}
	return !ok1 && !ok2 && a == b
}

// bounds reads the counts minKey into *lo (0 when absent) and maxKey into
// *hi (left as it is when absent).
func bounds(s map[string]any, minKey, maxKey, path string, lo, hi *int) error {
	var err error
	if *lo, _, err = count(s, minKey, path); err != nil {
		return err
	}
	m, ok, err := count(s, maxKey, path)
	if err != nil {
		return err
	}
	if ok {
		*hi = m
	}
	return nil
}

func count(s map[string]any, k, path string) (int, bool, error) {
	v, ok := s[k]
	if !ok {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	i, err := strconv.Atoi(strings.TrimSuffix(string(n), ".0"))
	if !isNum || err != nil || i < 0 {
		return 0, false, &Error{Path: join(path, k), Message: k + " must be a non-negative integer"}
	}
	return i, true, nil
}

func (c *compiler) numbers(n *node, s map[string]any, path string) error {
	n.lo, n.hi = minBound(0), maxBound(0)
	frac := int64(1)
	if n.types&tNum != 0 {
		for range FracDigits {
			frac *= 10
		}
	}
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v, ok := s[k]
		if !ok {
			continue
		}
		num, isNum := v.(json.Number)
		r, ok := new(big.Rat).SetString(string(num))
		if !isNum || !ok {
			return &Error{Path: join(path, k), Message: k + " must be a number"}
		}
		r.Mul(r, new(big.Rat).SetInt64(frac))
		fl := new(big.Int).Quo(r.Num(), r.Denom()) // truncated toward zero
		if r.Sign() < 0 && !r.IsInt() {
			fl.Sub(fl, big.NewInt(1))
		}
		ce := new(big.Int).Set(fl)
		if !r.IsInt() {
			ce.Add(ce, big.NewInt(1))
		}
		var b *big.Int
		switch k {
		case "minimum":
			b = ce
		case "exclusiveMinimum":
			b = fl.Add(fl, big.NewInt(1))
		case "maximum":
			b = fl
		case "exclusiveMaximum":
			b = ce.Sub(ce, big.NewInt(1))
		}
		// Past the digits a number may have (maxDigits, FracDigits of them
		// after the point for a number): a bound the other way clamps, but a
		// minimum above the largest or a maximum below the smallest leaves
		// no number at all (clamped, it would let the limit itself through).
		lim := big.NewInt(maxBound(0))
		upper := strings.HasPrefix(k, "max") || k == "exclusiveMaximum"
		if b.Cmp(lim) > 0 {
			if !upper {
				n.types &^= tInt | tNum
			}
			b = lim
		} else if b.Cmp(new(big.Int).Neg(lim)) < 0 {
			if upper {
				n.types &^= tInt | tNum
			}
			b = new(big.Int).Neg(lim)
		}
		if upper {
			n.hi = min(n.hi, b.Int64())
		} else {
			n.lo = max(n.lo, b.Int64())
		}
	}
	return nil
}

func (c *compiler) strings(n *node, s map[string]any, path string) error {
	err := bounds(s, "minLength", "maxLength", path, &n.minLen, &n.maxLen)
	if err != nil {
		return err
	}
	var k reKey // the string's regex, if any
	if f, ok := s["format"]; ok {
		name, _ := f.(string)
		switch {
		case formats[name] != nil:
			n.format = name
		case reFormats[name] != "":
			k.src, k.format = name, true
		default:
			return &Error{Path: join(path, "format"), Message: fmt.Sprintf("format %v is not supported", f)}
		}
	}
	if p, ok := s["pattern"]; ok {
		src, isStr := p.(string)
		switch {
		case !isStr:
			return &Error{Path: join(path, "pattern"), Message: "pattern must be a string"}
		case n.format != "" || k.format:
			return &Error{Path: join(path, "pattern"), Message: "pattern together with format is not supported"}
		}
		k.src = src
	}
	if k.src == "" && !k.format {
		return nil
	}
	k.min, k.max = n.minLen, n.maxLen
	if n.re = c.res[k]; n.re != nil {
		return nil
	}
	if r, ok := c.cache.get(k); ok {
		n.re = r.(*strRE)
		c.res[k] = n.re
		return nil
	}
	c.at = join(path, "pattern")
	if k.format {
		c.at = join(path, "format")
	}
	var d *dfa
	if k.format {
		d, err = formatDFA(k.src)
	} else if d, err = compileRegex(k.src, false, c.b); err != nil {
		return &Error{Path: join(path, "pattern"), Message: fmt.Sprintf("pattern %q: %v", k.src, err)}
	}
	if err == nil {
		n.re, err = newStrRE(d, n.minLen, n.maxLen, k.format && k.src == "hostname", c.b)
	}
	if err != nil {
		return &Error{Path: join(path, "maxLength"), Message: err.Error()}
	}
	n.re.cache = c.cache
	c.res[k] = n.re
	c.cache.put(k, n.re, n.re.size(), kindPattern)
	return nil
}

func (c *compiler) arrays(n *node, s map[string]any, path string) error {
	err := bounds(s, "minItems", "maxItems", path, &n.minItems, &n.maxItems)
	if err != nil {
		return err
	}
	if p, ok := s["prefixItems"]; ok {
		l, ok := p.([]any)
		if !ok {
			return &Error{Path: join(path, "prefixItems"), Message: "prefixItems must be an array"}
		}
		for i, x := range l {
			a, err := c.compile(x, join(path, fmt.Sprintf("prefixItems.%d", i)))
			if err != nil {
				return err
			}
			n.prefix = append(n.prefix, a)
		}
	}
	n.items = anyNode
	if it, ok := s["items"]; ok {
		if it == false {
			n.items = nil
		} else if n.items, err = c.compile(it, join(path, "items")); err != nil {
			return err
		}
	}
	if n.items == nil && (n.maxItems < 0 || n.maxItems > len(n.prefix)) {
		n.maxItems = len(n.prefix)
	}
	return nil
}

func (c *compiler) objects(n *node, s map[string]any, path string) error {
	n.strict = c.strict
	n.addl = anyNode
	if _, props := s["properties"]; props && c.closed {
		n.addl = nil
	}
	if a, ok := s["additionalProperties"]; ok {
		if a == false {
			n.addl = nil
		} else {
			var err error
			if n.addl, err = c.compile(a, join(path, "additionalProperties")); err != nil {
				return err
			}
		}
	}
	var req []string
	if r, ok := s["required"]; ok {
		l, ok := r.([]any)
		if !ok {
			return &Error{Path: join(path, "required"), Message: "required must be an array of strings"}
		}
		for _, x := range l {
			name, ok := x.(string)
			if !ok {
				return &Error{Path: join(path, "required"), Message: "required must be an array of strings"}
			}
			req = append(req, name)
		}
	}
	// Each required name is looked up among the properties (at most
	// maxProps), and each property among the required names.
	c.b.spend(int64(len(req)) * int64(1+maxProps))
	var names []string
	if p, ok := s["properties"]; ok {
		m, ok := p.(map[string]any)
		if !ok {
			return &Error{Path: join(path, "properties"), Message: "properties must be an object"}
		}
		names = c.order(m)
		if len(names) > maxProps {
			return &Error{Path: join(path, "properties"), Message: fmt.Sprintf("more than %d properties", maxProps)}
		}
		for _, name := range names {
			sub, err := c.compile(m[name], join(join(path, "properties"), name))
			if err != nil {
				return err
			}
			n.props = append(n.props, prop{name: encodeKey(name), n: sub, req: slices.Contains(req, name)})
		}
	}
	for _, r := range req {
		if !slices.Contains(names, r) {
			if n.addl == nil {
				return &Error{Path: join(path, "required"), Message: fmt.Sprintf("required property %q is not in properties and additionalProperties is false", r)}
			}
			if len(n.props) >= maxProps {
				return &Error{Path: join(path, "properties"), Message: fmt.Sprintf("more than %d properties", maxProps)}
			}
			n.props = append(n.props, prop{name: encodeKey(r), n: n.addl, req: true})
		}
	}
	return nil
}

// encodeKey is a property name as its compact JSON string, without quotes.
func encodeKey(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	out := bytes.TrimSpace(b.Bytes())
	return string(out[1 : len(out)-1])
}

// litSteps is what a byte of an enum or const value costs: canonicalised,
// encoded, matched against the schema's type and set apart from the
// values before it, about 30 steps (at ~5 ns a step, the rate
// DefaultSteps is set for: 0.1 s), so a long enum is refused at the
// budget rather than compiled for seconds.
const litSteps = 32

func (c *compiler) enum(n *node, s map[string]any, path string) error {
	var vals []any
	key := ""
	if v, ok := s["const"]; ok {
		vals, key = []any{v}, "const"
	}
	if v, ok := s["enum"]; ok {
		l, ok := v.([]any)
		if !ok {
			return &Error{Path: join(path, "enum"), Message: "enum must be an array"}
		}
		if key != "" {
			l = slices.DeleteFunc(slices.Clone(l), func(x any) bool { c.b.spend(litSteps); return !reflect.DeepEqual(x, vals[0]) })
		}
		vals, key = l, "enum"
	}
	if key == "" {
		return nil
	}
	c.at = join(path, key)
	typed := *n
	g := &Grammar{root: &typed}
	seen := make(map[string]struct{}, len(vals))
	for _, v := range vals {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if err := e.Encode(canonical(v)); err != nil {
			return &Error{Path: join(path, key), Message: err.Error()}
		}
		lit := string(bytes.TrimSpace(b.Bytes()))
		c.b.spend(litSteps * int64(1+len(lit)))
		if _, dup := seen[lit]; !dup && g.MatchString(lit) {
			seen[lit] = struct{}{}
			n.lits = append(n.lits, lit)
		}
	}
	if len(n.lits) == 0 {
		n.alts = []*node{} // nothing is valid
	}
	return nil
}

// intern returns the node equal to n compiled before, else n: equal
// schemas (anyOf branches, repeated definitions) share one node, so their
// matching threads are one.
func (c *compiler) intern(n *node) *node {
	var b strings.Builder
	fmt.Fprintf(&b, "%p|%p|%d|%d|%d|%d|%d|%q|%p|%p|%d|%d|%p|%t|%q|", n.ref, n.items, n.types, n.lo, n.hi,
		n.minLen, n.maxLen, n.format, n.re, n.addl, n.minItems, n.maxItems, n.addl, n.strict, n.lits)
	for _, a := range n.alts {
		fmt.Fprintf(&b, "a%p", a)
	}
	if n.alts != nil {
		b.WriteString("A")
	}
	for _, p := range n.prefix {
		fmt.Fprintf(&b, "i%p", p)
	}
	for _, p := range n.props {
		fmt.Fprintf(&b, "p%q%p%t", p.name, p.n, p.req)
	}
	key := b.String()
	c.b.spend(int64(1 + len(key)/16))
	if m, ok := c.nodes[key]; ok {
		return m
	}
	c.nodes[key] = n
	return n
}

// canonical rewrites the numbers in v in their shortest plain decimal form
// (1.0 as 1, 1e2 as 100), the form the grammar matches enum values in.
func canonical(v any) any {
	switch v := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(v))
		if !ok {
			return v
		}
		if r.IsInt() {
			return json.Number(r.Num().String())
		}
		s := r.FloatString(FracDigits + 1)
		s = strings.TrimRight(s, "0")
		return json.Number(s)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = canonical(x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = canonical(x)
		}
		return out
	}
	return v
}

// order returns the keys of m in document order (sorted for objects that
// allOf merging built).
func (c *compiler) order(m map[string]any) []string {
	if o, ok := c.orders[reflect.ValueOf(m).Pointer()]; ok && len(o) == len(m) {
		return o
	}
	return sortedKeys(m)
}

var errTooDeep = fmt.Errorf("the schema nests deeper than %d objects and arrays", MaxDepth)

func decodeError(err error) *Error {
	if err == errTooDeep {
		return &Error{Message: err.Error()}
	}
	return &Error{Message: "schema is not valid JSON: " + err.Error()}
}

// decode parses a JSON document with numbers as json.Number, recording the
// key order of every object.
func decode(data []byte) (any, map[uintptr][]string, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	orders := map[uintptr][]string{}
	depth := 0
	var value func() (any, error)
	value = func() (any, error) {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		if t == json.Delim('{') || t == json.Delim('[') {
			if depth++; depth > MaxDepth {
				return nil, errTooDeep
			}
			defer func() { depth-- }()
		}
		switch t {
		case json.Delim('{'):
			m := map[string]any{}
			var keys []string
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := value()
				if err != nil {
					return nil, err
				}
				if _, dup := m[k]; !dup {
					keys = append(keys, k)
				}
				m[k] = v
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			orders[reflect.ValueOf(m).Pointer()] = keys
			return m, nil
		case json.Delim('['):
			l := []any{}
			for d.More() {
				v, err := value()
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return l, nil
		}
		return t, nil
	}
	v, err := value()
	if err != nil {
		return nil, nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, nil, fmt.Errorf("trailing data after the schema")
	}
	return v, orders, nil
}

// firstBytes returns a bitmask of the kinds of first byte a value of n can
// start with (one bit per JSON type, integers and numbers together).
func firstBytes(n *node, depth int) uint8 {
	if depth > 32 {
		return tAll
	}
	switch {
	case n.ref != nil:
		return firstBytes(n.ref, depth+1)
	case n.alts != nil:
		var r uint8
		for _, a := range n.alts {
			r |= firstBytes(a, depth+1)
		}
		return r
	case n.lits != nil:
		var r uint8
		for _, l := range n.lits {
			r |= kindOf(l[0])
		}
		return r
	}
	r := n.types
	if r&tNum != 0 {
		r |= tInt
	}
	return r &^ tNum
}

func kindOf(b byte) uint8 {
	switch b {
	case 'n':
		return tNull
	case 't', 'f':
		return tBool
	case '"':
		return tStr
	case '[':
		return tArr
	case '{':
		return tObj
	}
	return tInt
}
