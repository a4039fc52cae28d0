//go:build !purego

package scan

import "golang.org/x/sys/cpu"

var native = cpu.X86.HasAVX2

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
