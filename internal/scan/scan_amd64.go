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

//go:noescape
func indexGEF32(x []float32, t float32) int

//go:noescape
func indexGEU16(x []uint16, t uint16) int

//go:noescape
func indexGEHalf(x []uint16, ks int16) int

//go:noescape
func indexEq16(x []uint16, a, b uint16) int

// The gathers' kernels; see scan_amd64.s.

//go:noescape
func gatherGEF32(x []float32, t float32, out []int32, lut *[256][8]int32) (i, n int)

//go:noescape
func gatherGEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)

//go:noescape
func gatherGEHalf(x []uint16, ks int16, out []int32, lut *[256][8]int32) (i, n int)
