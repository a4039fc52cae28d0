// Package kvstore keeps the KV rows of many token sequences in host memory
// (and optionally on disk) so that a request can restore the longest saved
// prefix of its prompt instead of evaluating it again.
//
// Sequences live in a radix tree over token ids, one tree per owner: a
// lookup only sees its owner's entries, and entries that share a prefix
// share its rows (a cache row depends only on the tokens up to and
// including its position). Memory is bounded by a byte budget: past it the
// owner holding the most rows loses its least recently used leaf (one key
// saving many conversations evicts its own, not another key's); evicted
// leaves spill to disk when a directory is set, whose budget is kept the
// same way.
//
// A Store is safe for concurrent use, but the engine calls Save and Restore
// from its one worker only, so the model's cache is never seen half
// restored.
package kvstore

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/hexserve/hexserve/inference"
)

// Config configures Open.
type Config struct {
	Layout inference.KVLayout // the model's; entries of other layouts are refused
	Memory int64              // host-memory budget in bytes (> 0)
	Dir    string             // spill directory; "" keeps entries in memory only
	Disk   int64              // disk budget in bytes for Dir (> 0 when Dir is set)
	Logger zerolog.Logger
}

// Store is a prefix store of KV rows. It implements inference.KVStore.
type Store struct {
	cfg Config
	log zerolog.Logger

	mu        sync.Mutex
	roots     map[string]*node // per owner
	owned     map[string]int64 // rows held in memory, per owner
	clock     uint64           // LRU time
	bytes     int64            // rows held in memory
	entries   int              // leaves
	evictions int64
	disk      *disk // nil without Dir
}

var _ inference.KVStore = (*Store)(nil)

// node is one edge of the radix tree: tokens [start, start+len(toks)) of
// its path and their rows.
type node struct {
	parent *node
	start  int
	toks   []int32
	rows   []byte
	kids   map[int32]*node // by first token
	used   uint64          // last use (LRU)
	tag    string          // client hint of the last save that ended here
	owner  string
}

func (n *node) end() int { return n.start + len(n.toks) }

// Open creates a store and, with a directory, indexes the entries saved
// there (entries that do not match the layout are dropped with a log line).
func Open(cfg Config) (*Store, error) {
	if cfg.Layout.RowBytes <= 0 || cfg.Layout.Identity == "" {
		return nil, errors.New("kvstore: the model's KV layout is empty")
	}
	if cfg.Memory <= 0 {
		return nil, errors.New("kvstore: the memory budget must be > 0")
	}
	s := &Store{cfg: cfg, log: cfg.Logger, roots: map[string]*node{}, owned: map[string]int64{}}
	if cfg.Dir != "" {
		if cfg.Disk <= 0 {
			return nil, errors.New("kvstore: the disk budget must be > 0")
		}
		d, err := openDisk(cfg.Dir, cfg.Disk, cfg.Layout, cfg.Logger)
		if err != nil {
			return nil, err
		}
		s.disk = d
	}
	return s, nil
}

// Close writes the entries in memory to the directory (if any), so that a
// restarted server finds them, and empties the store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disk == nil {
		s.roots, s.owned, s.entries, s.bytes = map[string]*node{}, map[string]int64{}, 0, 0
		return nil
	}
	var errs []error
	ev := s.evictions
	for s.entries > 0 {
		// A parent left behind as a leaf is a prefix of a written file: not written again.
		if _, err := s.evict(nil); err != nil {
			errs = append(errs, err)
		}
	}
	s.evictions = ev // shutting down is not an eviction
	return errors.Join(errs...)
}

// Stats reports the store's size and counters.
func (s *Store) Stats() inference.KVStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := inference.KVStats{Entries: s.entries, Bytes: s.bytes, Budget: s.cfg.Memory, Evictions: s.evictions}
	if s.disk != nil {
		st.DiskEntries, st.DiskBytes, st.DiskBudget = len(s.disk.files), s.disk.bytes, s.disk.budget
	}
	return st
}

// Restore finds the longest saved prefix of seq among owner's entries (in
// memory, else on disk), passes its rows [from, n) to put in order, and
// returns n. When no entry reaches beyond from it calls nothing and returns
// a value <= from.
func (s *Store) Restore(owner string, seq []int32, from int, put func(pos int, rows []byte) error) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	path, n := s.match(owner, seq)
	if s.disk != nil {
		if f, k := s.disk.best(owner, seq); f != nil && k > n && k > from {
			if err := s.loadFile(f); err != nil {
				s.log.Warn().Err(err).Str("file", f.name).Msg("kvstore: dropping a saved entry")
			}
			path, n = s.match(owner, seq)
		}
	}
	if n <= from {
		return n, nil
	}
	s.clock++
	for _, nd := range path {
		nd.used = s.clock
	}
	rb := s.cfg.Layout.RowBytes
	for _, nd := range path {
		lo, hi := max(from, nd.start), min(n, nd.end())
		if lo >= hi {
			continue
		}
		if err := put(lo, nd.rows[(lo-nd.start)*rb:(hi-nd.start)*rb]); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// match returns the nodes on the path of seq's longest stored prefix and its
// length (the last node may be matched only in part).
func (s *Store) match(owner string, seq []int32) ([]*node, int) {
	nd := s.roots[owner]
	var path []*node
	n := 0
	for nd != nil && n < len(seq) {
		kid := nd.kids[seq[n]]
		if kid == nil {
			break
		}
		k := inference.CommonPrefix(kid.toks, seq[n:])
		path = append(path, kid)
		n += k
		if k < len(kid.toks) {
			break
		}
		nd = kid
	}
	return path, n
}

// Save stores the rows of seq, calling get only for the rows not stored
// yet; tag (the client's prompt_cache_key or user, may be empty) replaces
// the owner's other entry saved under the same tag, if any. A sequence
// whose new rows alone exceed the budget is not saved.
func (s *Store) Save(owner, tag string, seq []int32, get func(from, to int, dst []byte) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.insert(owner, tag, seq, get)
}

func (s *Store) insert(owner, tag string, seq []int32, get func(from, to int, dst []byte) error) error {
	if len(seq) == 0 {
		return nil
	}
	rb := int64(s.cfg.Layout.RowBytes)
	path, n := s.match(owner, seq)
	if need := int64(len(seq)-n) * rb; need > s.cfg.Memory {
		return nil
	}
	root := s.roots[owner]
	if root == nil {
		root = &node{owner: owner, kids: map[int32]*node{}}
		s.roots[owner] = root
	}
	parent := root
	if len(path) > 0 {
		last := path[len(path)-1]
		if n < last.end() {
			last = s.split(last, n-last.start)
			path[len(path)-1] = last
		}
		parent = last
	}
	s.clock++
	for _, nd := range path {
		nd.used = s.clock
	}
	leaf := parent
	if n < len(seq) {
		rows := make([]byte, int64(len(seq)-n)*rb)
		if err := get(n, len(seq), rows); err != nil {
			return fmt.Errorf("kvstore: reading rows [%d, %d): %w", n, len(seq), err)
		}
		leaf = &node{parent: parent, start: n, toks: append([]int32(nil), seq[n:]...), rows: rows, used: s.clock, owner: owner}
		if len(parent.kids) > 0 || parent == root {
			s.entries++ // else the parent leaf becomes interior: same count
		}
		if parent.kids == nil {
			parent.kids = map[int32]*node{}
		}
		parent.kids[seq[n]] = leaf
		s.bytes += int64(len(rows))
		s.owned[owner] += int64(len(rows))
	}
	if tag != "" {
		s.dropTag(root, tag, leaf)
		leaf.tag = tag
	}
	for s.bytes > s.cfg.Memory && s.entries > 0 {
		removed, err := s.evict(leaf)
		if !removed { // the entry just saved is the only one
			_, err = s.evict(nil)
		}
		if err != nil {
			s.log.Warn().Err(err).Msg("kvstore: spilling an entry to disk")
		}
	}
	return nil
}

// split cuts nd after k tokens and returns the upper part (the new parent).
func (s *Store) split(nd *node, k int) *node {
	rb := s.cfg.Layout.RowBytes
	up := &node{parent: nd.parent, start: nd.start, toks: append([]int32(nil), nd.toks[:k]...),
		rows: append([]byte(nil), nd.rows[:k*rb]...), used: nd.used, owner: nd.owner,
		kids: map[int32]*node{nd.toks[k]: nd}}
	nd.parent.kids[nd.toks[0]] = up
	nd.parent, nd.start = up, nd.start+k
	nd.toks = append([]int32(nil), nd.toks[k:]...)
	nd.rows = append([]byte(nil), nd.rows[k*rb:]...)
	return up
}

// dropTag removes the leaves under root tagged tag, other than keep and its
// ancestors.
func (s *Store) dropTag(root *node, tag string, keep *node) {
	var found []*node
	var walk func(*node)
	walk = func(nd *node) {
		if len(nd.kids) == 0 && nd != root && nd.tag == tag && nd != keep {
			found = append(found, nd)
		}
		for _, k := range nd.kids {
			walk(k)
		}
	}
	walk(root)
	for _, nd := range found {
		s.remove(nd)
	}
}

// evict removes the least recently used leaf of the owner holding the most
// rows (so one key saving many conversations evicts its own, not another
// key's), other than keep (the entry just saved), writing it (its whole
// path) to disk first when a directory is set. An owner whose only leaf is
// keep yields to the next; removed is false when keep is the only leaf.
func (s *Store) evict(keep *node) (removed bool, err error) {
	var old *node
	for _, o := range heaviestFirst(s.owned) {
		r := s.roots[o]
		var walk func(*node)
		walk = func(nd *node) {
			if len(nd.kids) == 0 && nd != r && nd != keep && (old == nil || nd.used < old.used) {
				old = nd
			}
			for _, k := range nd.kids {
				walk(k)
			}
		}
		walk(r)
		if old != nil {
			break
		}
	}
	if old == nil {
		return false, nil
	}
	if s.disk != nil {
		toks, rows := s.pathOf(old)
		err = s.disk.write(old.owner, old.tag, toks, rows)
	}
	s.remove(old)
	s.evictions++
	return true, err
}

// heaviestFirst is the owners of owned, the most bytes first, then by
// name: the order in which both tiers evict.
func heaviestFirst(owned map[string]int64) []string {
	owners := slices.Collect(maps.Keys(owned))
	slices.SortFunc(owners, func(a, b string) int {
		if c := cmp.Compare(owned[b], owned[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return owners
}

// pathOf returns the tokens and rows from the root to nd.
func (s *Store) pathOf(nd *node) ([]int32, []byte) {
	var chain []*node
	for p := nd; p.parent != nil; p = p.parent {
		chain = append(chain, p)
	}
	toks := make([]int32, 0, nd.end())
	rows := make([]byte, 0, nd.end()*s.cfg.Layout.RowBytes)
	for i := len(chain) - 1; i >= 0; i-- {
		toks = append(toks, chain[i].toks...)
		rows = append(rows, chain[i].rows...)
	}
	return toks, rows
}

// remove deletes leaf nd. Its parent, if it has no other child, stays as a
// leaf: the rows of a shorter prefix, evicted in turn when it is the oldest.
func (s *Store) remove(nd *node) {
	p := nd.parent
	delete(p.kids, nd.toks[0])
	s.bytes -= int64(len(nd.rows))
	if s.owned[nd.owner] -= int64(len(nd.rows)); s.owned[nd.owner] <= 0 {
		delete(s.owned, nd.owner)
	}
	switch {
	case p.parent == nil:
		s.entries--
		if len(p.kids) == 0 {
			delete(s.roots, p.owner)
		}
	case len(p.kids) > 0:
		s.entries--
	}
}

// loadFile moves a disk entry into memory.
func (s *Store) loadFile(f *diskFile) error {
	toks, rows, err := s.disk.read(f)
	if err != nil {
		return err
	}
	rb := s.cfg.Layout.RowBytes
	return s.insert(f.owner, f.tag, toks, func(from, to int, dst []byte) error {
		copy(dst, rows[from*rb:to*rb])
		return nil
	})
}
