//go:build !purego

package scan

// NEON (Advanced SIMD) is part of every arm64 CPU.
const native = true

const (
	blockF32 = 16 // four 4-float vectors
	block16  = 32 // four 8-element vectors
)

// lut is amd64's compress table; the arm64 gathers take none.
var lut *[256][8]int32
