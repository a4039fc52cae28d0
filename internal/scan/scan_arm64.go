//go:build !purego

package scan

// NEON (Advanced SIMD) is part of every arm64 CPU.
const native = true

const (
	blockF32 = 16 // four 4-float vectors
	block16  = 32 // four 8-element vectors
)

//go:noescape
func indexGEF32(x []float32, t float32) int

//go:noescape
func indexGEU16(x []uint16, t uint16) int

//go:noescape
func indexGEHalf(x []uint16, ks int16) int

//go:noescape
func indexEq16(x []uint16, a, b uint16) int

// The gathers' kernels (lut is amd64's; these take no table).
var lut *[256][8]int32

//go:noescape
func gatherGEF32(x []float32, t float32, out []int32, lut *[256][8]int32) (i, n int)

//go:noescape
func gatherGEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)

//go:noescape
func gatherGEHalf(x []uint16, ks int16, out []int32, lut *[256][8]int32) (i, n int)
