package grammar

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// Cache keeps what grammars can share across requests — compiled patterns
// and the masks of pattern and structural states — within a byte budget,
// evicting the least recently used entry first. It is safe for concurrent
// use; one per server (Options.Cache), nil for the package's default.
type Cache struct {
	mu    sync.Mutex
	max   int64
	lru   *list.List // front: most recently used; values are *centry
	m     map[any]*list.Element
	bytes [2]int64 // per kind
	hits  uint64
	miss  uint64
	evict uint64
}

// Cache entry kinds.
const (
	kindPattern = iota
	kindMask
)

type centry struct {
	key  any
	val  any
	size int64
	kind int
}

// DefaultCacheBytes is the default cache's budget.
const DefaultCacheBytes = 64 << 20

var defaultCache = NewCache(DefaultCacheBytes)

// NewCache returns a cache holding up to maxBytes (≤ 0: DefaultCacheBytes).
func NewCache(maxBytes int64) *Cache {
	if maxBytes <= 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{max: maxBytes, lru: list.New(), m: map[any]*list.Element{}}
}

func (c *Cache) orDefault() *Cache {
	if c == nil {
		return defaultCache
	}
	return c
}

// CacheStats is a snapshot of a cache for /metrics.
type CacheStats struct {
	MaxBytes     int64
	PatternBytes int64 // compiled patterns: DFA and length tables
	MaskBytes    int64 // cached masks
	Entries      int
	Hits, Misses uint64
	Evictions    uint64
}

// Stats returns the cache's current figures.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{MaxBytes: c.max, PatternBytes: c.bytes[kindPattern], MaskBytes: c.bytes[kindMask],
		Entries: c.lru.Len(), Hits: c.hits, Misses: c.miss, Evictions: c.evict}
}

func (c *Cache) get(key any) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[key]
	if !ok {
		c.miss++
		return nil, false
	}
	c.hits++
	c.lru.MoveToFront(el)
	return el.Value.(*centry).val, true
}

// put adds val of size bytes under key (replacing an older one), evicting
// from the back to stay within the budget; a value larger than the whole
// budget is not kept.
func (c *Cache) put(key, val any, size int64, kind int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.max {
		return
	}
	if el, ok := c.m[key]; ok {
		c.drop(el)
	}
	c.m[key] = c.lru.PushFront(&centry{key: key, val: val, size: size, kind: kind})
	c.bytes[kind] += size
	for c.bytes[kindPattern]+c.bytes[kindMask] > c.max {
		c.drop(c.lru.Back())
		c.evict++
	}
}

func (c *Cache) drop(el *list.Element) {
	e := el.Value.(*centry)
	c.lru.Remove(el)
	delete(c.m, e.key)
	c.bytes[e.kind] -= e.size
}

// ids number strREs and grammars for cache keys (a key holding a pointer
// would keep its grammar alive).
var ids atomic.Uint64

func nextID() uint64 { return ids.Add(1) }
