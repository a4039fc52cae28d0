//go:build !purego

package scan

import "golang.org/x/sys/cpu"

var native = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT

// lut[m] lists the set bits of m (the lanes of an 8-element match mask),
// packed to the front: the gathers' compress table.
var lut = func() *[256][8]int32 {
	var t [256][8]int32
	for m := range t {
		n := 0
		for b := range 8 {
			if m&(1<<b) != 0 {
				t[m][n] = int32(b)
				n++
			}
		}
	}
	return &t
}()

const (
	blockF32 = 32 // four 8-float vectors
	block16  = 64 // four 16-element vectors
)
