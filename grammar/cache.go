package grammar

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
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
	// slots bounds the compiles running at once (nil: no bound).
	slots chan struct{}
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

// DefaultMaxCompiles is how many compiles a server runs at once when
// structured.max_compiles is unset; CompileWait is how long a compile
// waits for its turn before it is refused with ErrBusy.
const (
	DefaultMaxCompiles = 2
	CompileWait        = time.Second
)

// ErrBusy is the error of a compile that waited CompileWait for one of the
// compiles running at once to finish.
var ErrBusy = errors.New("grammar: too many schemas are being compiled at once (structured.max_compiles)")

// LimitCompiles bounds the compiles (Compile, Tools) sharing c that run at
// once to n (<= 0: DefaultMaxCompiles). Call it before c is shared.
func (c *Cache) LimitCompiles(n int) {
	if n <= 0 {
		n = DefaultMaxCompiles
	}
	c.slots = make(chan struct{}, n)
}

// enter waits, at most CompileWait, for a compile's turn and returns the
// function that ends it; a done ctx returns its error.
func (c *Cache) enter(ctx context.Context) (func(), error) {
	if c.slots == nil {
		return func() {}, nil
	}
	select {
	case c.slots <- struct{}{}:
		return func() { <-c.slots }, nil
	default:
	}
	if ctx == nil {
		ctx = context.Background()
	}
	t := time.NewTimer(CompileWait)
	defer t.Stop()
	select {
	case c.slots <- struct{}{}:
		return func() { <-c.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, ErrBusy
	}
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
