package graphio

// Slots is the layout of a KV-cache tensor as [Outer][slots][Inner]
// elements of ES bytes, where a slot holds one position: QHexRT's caches
// are [1][CTX][kv_dim], ExecuTorch's transposed K is [n_kv·hd][S][1] and
// its V [n_kv][S][hd]. The number of slots per outer row (the stride) is
// a parameter of each call: graph outputs hold AR slots per row, caches
// CTX or S, snapshots the rows they hold.
type Slots struct{ Outer, Inner, ES int }

// Bytes is the size of a tensor of this layout with stride slots per row.
func (l Slots) Bytes(stride int) int { return l.Outer * stride * l.Inner * l.ES }

// Copy copies n slots starting at slot from of src (stride sstride) to
// slot start of dst (stride dstride). One slot of a transposed layout
// (Inner 1) is one element per outer row: a strided scatter.
func (l Slots) Copy(dst []byte, dstride, start int, src []byte, sstride, from, n int) {
	u := l.Inner * l.ES
	if l.Outer == 1 {
		copy(dst[start*u:(start+n)*u], src[from*u:(from+n)*u])
		return
	}
	if start == 0 && from == 0 && dstride == n && sstride == n { // whole rows: one block
		copy(dst[:l.Outer*n*u], src[:l.Outer*n*u])
		return
	}
	if n == 1 && l.Inner == 1 {
		scatter(dst, src, l.Outer, dstride, start, sstride, from, l.ES)
		return
	}
	for o := range l.Outer {
		d, s := (o*dstride+start)*u, (o*sstride+from)*u
		copy(dst[d:d+n*u], src[s:s+n*u])
	}
}

// scatter copies element o·ss+from of src to element o·ds+start of dst for
// every outer row o, for elements of es bytes, without a copy call each.
func scatter(dst, src []byte, rows, ds, start, ss, from, es int) {
	switch es {
	case 1:
		_ = dst[(rows-1)*ds+start]
		_ = src[(rows-1)*ss+from]
		for o := range rows {
			dst[o*ds+start] = src[o*ss+from]
		}
	case 2:
		d, s := U16(dst), U16(src)
		for o := range rows {
			d[o*ds+start] = s[o*ss+from]
		}
	case 4:
		d, s := U32(dst), U32(src)
		for o := range rows {
			d[o*ds+start] = s[o*ss+from]
		}
	default:
		for o := range rows {
			copy(dst[(o*ds+start)*es:(o*ds+start+1)*es], src[(o*ss+from)*es:(o*ss+from+1)*es])
		}
	}
}

// Restride changes b's stride from slots per row to to, in place, keeping
// slots [0, keep) of every row: rows move first-to-last when shrinking and
// last-to-first when growing, so no row overwrites one not yet moved
// (docs/executorch-pte.md §4.5).
func (l Slots) Restride(b []byte, from, to, keep int) {
	if keep <= 0 || from == to || l.Outer == 1 {
		return
	}
	u := l.Inner * l.ES
	move := func(i int) { copy(b[i*to*u:(i*to+keep)*u], b[i*from*u:(i*from+keep)*u]) }
	if to < from {
		for i := 1; i < l.Outer; i++ {
			move(i)
		}
		return
	}
	for i := l.Outer - 1; i > 0; i-- {
		move(i)
	}
}
