package tokenizer

// heapThreshold is the word length (bytes) above which BPE uses a priority
// queue instead of rescanning the pairs after every merge. Both apply the
// lowest-rank merge first, leftmost among equals, as HF's Word::merge_all.
var heapThreshold = 128

func (t *Tokenizer) pairRank(a, b int32) uint64 {
	if v, ok := t.merges[pairKey(a, b)]; ok {
		return v
	}
	return noMerge
}

// merge runs BPE on the symbols sym (held in e.sym). The result is valid
// until the next call on e.
func (e *encoder) merge(sym []int32) []int32 {
	if len(sym) <= heapThreshold {
		return e.mergeScan(sym)
	}
	return e.mergeHeap(sym)
}

// mergeScan runs BPE on sym in O(n²) with small constants.
func (e *encoder) mergeScan(sym []int32) []int32 {
	t := e.t
	rk := e.rank[:0]
	for k := 0; k+1 < len(sym); k++ {
		rk = append(rk, t.pairRank(sym[k], sym[k+1]))
	}
	for len(sym) > 1 {
		best, bi := noMerge, -1
		for k, r := range rk {
			if r < best {
				best, bi = r, k
			}
		}
		if bi < 0 {
			break
		}
		sym[bi] = int32(uint32(best))
		sym = append(sym[:bi+1], sym[bi+2:]...)
		rk = append(rk[:bi], rk[bi+1:]...)
		if bi > 0 {
			rk[bi-1] = t.pairRank(sym[bi-1], sym[bi])
		}
		if bi < len(rk) {
			rk[bi] = t.pairRank(sym[bi], sym[bi+1])
		}
	}
	e.sym, e.rank = sym, rk
	return sym
}

type node struct {
	id         int32
	prev, next int32 // -1 at the ends
	alive      bool
}

// mergeHeap runs BPE on sym in O(n log n), like HF's Word::merge_all: a
// min heap of rank<<32|position entries, lazily skipping stale ones.
func (e *encoder) mergeHeap(sym []int32) []int32 {
	t := e.t
	n := len(sym)
	nd := e.node[:0]
	for i, id := range sym {
		nd = append(nd, node{id: id, prev: int32(i - 1), next: int32(i + 1), alive: true})
	}
	nd[n-1].next = -1
	h := e.heap[:0]
	for i := 0; i+1 < n; i++ {
		if r := t.pairRank(nd[i].id, nd[i+1].id); r != noMerge {
			h = heapPush(h, r>>32<<32|uint64(i))
		}
	}
	for len(h) > 0 {
		var top uint64
		top, h = heapPop(h)
		pos := int32(uint32(top))
		rank := top >> 32
		cur := &nd[pos]
		if !cur.alive || cur.next < 0 {
			continue
		}
		v := t.pairRank(cur.id, nd[cur.next].id)
		if v == noMerge || v>>32 != rank {
			continue // stale entry
		}
		right := nd[cur.next]
		cur.id = int32(uint32(v))
		nd[cur.next].alive = false
		cur.next = right.next
		if right.next >= 0 {
			nd[right.next].prev = pos
		}
		if cur.prev >= 0 {
			if r := t.pairRank(nd[cur.prev].id, cur.id); r != noMerge {
				h = heapPush(h, r>>32<<32|uint64(cur.prev))
			}
		}
		if cur.next >= 0 {
			if r := t.pairRank(cur.id, nd[cur.next].id); r != noMerge {
				h = heapPush(h, r>>32<<32|uint64(pos))
			}
		}
	}
	sym = sym[:0]
	for i := int32(0); i >= 0; i = nd[i].next {
		sym = append(sym, nd[i].id)
	}
	e.node, e.heap, e.sym = nd, h, sym
	return sym
}

func heapPush(h []uint64, v uint64) []uint64 {
	h = append(h, v)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	return h
}

func heapPop(h []uint64) (uint64, []uint64) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if r := l + 1; r < len(h) && h[r] < h[m] {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}
