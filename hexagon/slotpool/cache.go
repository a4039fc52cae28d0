package slotpool

import (
	"time"

	"github.com/hexserve/hexserve/hexagon/graphio"
	"github.com/hexserve/hexserve/hexagon/writeback"
)

// Cache is the KV cache the runners holding one cache for many sequences
// (.pte, Genie) stand on: per layer a K and a V buffer in the layouts every
// such graph takes (K [n_kv·hd][S][1], V [n_kv][S][hd]) at Stride slots per
// row, re-strided when a graph of another width runs, and the write-back of
// a call's new rows into it through one writeback.Copier keyed by layer (the
// embedded Copier: Queue, Start, Hand, Submit, Wait, Close).
//
// Rows are addressed through the Pool's slots only (Write's slot, KV's
// Move and Rows), never by position, so a shifted sequence's slots wrap
// (a ring at the original positions, Pool.Shift) with the cache unchanged;
// a sequence holding forked rows copies them into slots of its own with
// Move before it evicts any.
type Cache struct {
	KV
	*writeback.Copier[Write]
}

// Write is one layer's new rows of one run of a call: entries [From,
// From+N) of the layer's new-entry outputs K and V (Rows entries per row:
// the call's width) into slots Slot… of the cache at Stride slots per row
// (the stride when queued).
type Write struct {
	Layer, Slot, From, N int
	K, V                 []byte
	Rows, Stride         int
}

// NewCache is the cache over per-layer buffers k and v of nkv heads of hd
// elements of es bytes, at stride slots per row, with a write-back of
// workers goroutines (writeback.Workers).
func NewCache(k, v [][]byte, nkv, hd, es, stride, workers int) *Cache {
	c := &Cache{KV: KV{K: k, V: v, Stride: stride,
		KS: graphio.Slots{Outer: nkv * hd, Inner: 1, ES: es}, VS: graphio.Slots{Outer: nkv, Inner: hd, ES: es}}}
	c.Copier = writeback.New(len(k), workers, func(w Write) int { return w.Layer }, c.write)
	return c
}

func (c *Cache) write(w Write) {
	c.KS.Copy(c.K[w.Layer], w.Stride, w.Slot, w.K, w.Rows, w.From, w.N)
	c.VS.Copy(c.V[w.Layer], w.Stride, w.Slot, w.V, w.Rows, w.From, w.N)
}

// Sync finishes the write-back in flight, helping with it, and returns the
// time it waited (the copy's share of the critical path). Everything that
// reads or writes the cache or a call's new-row outputs calls it first.
func (c *Cache) Sync() time.Duration {
	t := time.Now()
	if c.WaitAll() {
		return time.Since(t)
	}
	return 0
}

// SyncLayers is Sync for the writes of some layers only.
func (c *Cache) SyncLayers(layers []int) time.Duration {
	t := time.Now()
	if c.Wait(layers) {
		return time.Since(t)
	}
	return 0
}

// Restride changes the rows from Stride to s slots, keeping slots [0,
// keep); the write-back must be synced.
func (c *Cache) Restride(s, keep int) {
	for l := range c.K {
		c.KS.Restride(c.K[l], c.Stride, s, keep)
		c.VS.Restride(c.V[l], c.Stride, s, keep)
	}
	c.Stride = s
}
