package slotpool

import (
	"bytes"
	"fmt"
	"testing"
)

// TestCacheWrite: a call's new rows land in their slots of every layer
// through the write-back (with and without workers), Sync waits for them,
// and Restride keeps the slots it is told to keep.
func TestCacheWrite(t *testing.T) {
	const layers, nkv, hd, es, stride, ar = 3, 2, 4, 2, 10, 4
	for _, workers := range []int{0, 2} {
		t.Run(fmt.Sprintf("workers%d", workers), func(t *testing.T) {
			var k, v, outK, outV [][]byte
			for l := range layers {
				k, v = append(k, make([]byte, nkv*hd*stride*es)), append(v, make([]byte, nkv*hd*stride*es))
				ok, ov := make([]byte, nkv*hd*ar*es), make([]byte, nkv*hd*ar*es)
				for i := range ok {
					ok[i], ov[i] = byte(l*50+i), byte(l*50+i+7)
				}
				outK, outV = append(outK, ok), append(outV, ov)
			}
			c := NewCache(k, v, nkv, hd, es, stride, workers)
			defer c.Close()
			want := NewCache(cloneAll(k), cloneAll(v), nkv, hd, es, stride, 0)
			defer want.Close()
			var ws []Write
			for l := range layers { // two runs: rows 0–1 into slots 3…, row 2 into slot 8
				ws = append(ws, Write{Layer: l, Slot: 3, From: 0, N: 2, K: outK[l], V: outV[l], Rows: ar, Stride: stride},
					Write{Layer: l, Slot: 8, From: 2, N: 1, K: outK[l], V: outV[l], Rows: ar, Stride: stride})
				want.KS.Copy(want.K[l], stride, 3, outK[l], ar, 0, 2)
				want.VS.Copy(want.V[l], stride, 3, outV[l], ar, 0, 2)
				want.KS.Copy(want.K[l], stride, 8, outK[l], ar, 2, 1)
				want.VS.Copy(want.V[l], stride, 8, outV[l], ar, 2, 1)
			}
			c.Submit(ws...)
			c.Sync()
			for l := range layers {
				if !bytes.Equal(c.K[l], want.K[l]) || !bytes.Equal(c.V[l], want.V[l]) {
					t.Fatalf("layer %d differs from a direct copy", l)
				}
			}
			row := func(c *Cache, slot int) []byte {
				b := make([]byte, c.RowBytes())
				c.Rows(func(int) int { return slot }, 0, 1, b, false)
				return b
			}
			before := row(c, 8)
			c.Restride(9, 9)
			if c.Stride != 9 || !bytes.Equal(row(c, 8), before) {
				t.Errorf("restride to 9: stride %d, slot 8 kept %v", c.Stride, bytes.Equal(row(c, 8), before))
			}
		})
	}
}

func cloneAll(bs [][]byte) [][]byte {
	out := make([][]byte, len(bs))
	for i, b := range bs {
		out[i] = bytes.Clone(b)
	}
	return out
}
