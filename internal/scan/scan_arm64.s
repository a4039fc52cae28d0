//go:build !purego

#include "textflag.h"

// Each kernel loads four vectors per iteration (16 floats or 32 16-bit
// elements) and stops at the first block holding a match, returning its
// start: the Go loop finds the element (see scan_native.go). The ordered
// scans AND the "below the threshold" masks and go on while every lane is
// set. The comparisons the Go assembler does not know are encoded as WORDs,
// the instruction in the comment.

// ALLBELOW sets the flags for "every lane of V1..V4 is set" (Z: yes).
#define ALLBELOW \
	VAND V1.B16, V2.B16, V1.B16 \
	VAND V3.B16, V4.B16, V3.B16 \
	VAND V1.B16, V3.B16, V1.B16 \
	VMOV V1.D[0], R3 \
	VMOV V1.D[1], R4 \
	AND  R3, R4, R3 \
	CMN  $1, R3

// LANE stores R5 at out[R8], advances R8 by R3's low bit, shifts R3 by SH
// and R5 by one.
#define LANE(SH) \
	MOVW R5, (R7)(R8<<2) \
	AND  $1, R3, R6 \
	ADD  R6, R8, R8 \
	LSR  $SH, R3, R3 \
	ADD  $1, R5, R5

// func indexGEF32(x []float32, t float32) int
TEXT ·indexGEF32(SB), NOSPLIT, $0-40
	MOVD  x_base+0(FP), R0
	MOVD  x_len+8(FP), R1
	AND   $~15, R1, R1
	MOVWU t+24(FP), R3
	VDUP  R3, V0.S4
	MOVD  $0, R2
	B     f32check

f32loop:
	VLD1.P 64(R0), [V1.S4, V2.S4, V3.S4, V4.S4]
	WORD   $0x6ea1e401                          // fcmgt v1.4s, v0.4s, v1.4s (t > x: false for NaNs)
	WORD   $0x6ea2e402                          // fcmgt v2.4s, v0.4s, v2.4s
	WORD   $0x6ea3e403                          // fcmgt v3.4s, v0.4s, v3.4s
	WORD   $0x6ea4e404                          // fcmgt v4.4s, v0.4s, v4.4s
	ALLBELOW
	BNE    f32done
	ADD    $16, R2

f32check:
	CMP R1, R2
	BLT f32loop

f32done:
	MOVD R2, ret+32(FP)
	RET

// func indexGEU16(x []uint16, t uint16) int
TEXT ·indexGEU16(SB), NOSPLIT, $0-40
	MOVD  x_base+0(FP), R0
	MOVD  x_len+8(FP), R1
	AND   $~31, R1, R1
	MOVHU t+24(FP), R3
	VDUP  R3, V0.H8
	MOVD  $0, R2
	B     u16check

u16loop:
	VLD1.P 64(R0), [V1.H8, V2.H8, V3.H8, V4.H8]
	WORD   $0x6e613401                          // cmhi v1.8h, v0.8h, v1.8h (t > x, unsigned)
	WORD   $0x6e623402                          // cmhi v2.8h, v0.8h, v2.8h
	WORD   $0x6e633403                          // cmhi v3.8h, v0.8h, v3.8h
	WORD   $0x6e643404                          // cmhi v4.8h, v0.8h, v4.8h
	ALLBELOW
	BNE    u16done
	ADD    $32, R2

u16check:
	CMP R1, R2
	BLT u16loop

u16done:
	MOVD R2, ret+32(FP)
	RET

// func indexGEHalf(x []uint16, ks int16) int
TEXT ·indexGEHalf(SB), NOSPLIT, $0-40
	MOVD  x_base+0(FP), R0
	MOVD  x_len+8(FP), R1
	AND   $~31, R1, R1
	MOVHU ks+24(FP), R3
	VDUP  R3, V0.H8
	MOVD  $0, R2
	B     halfcheck

halfloop:
	// the signed key sk = h ^ (h>>15 & 0x7fff)
	VLD1.P 64(R0), [V1.H8, V2.H8, V3.H8, V4.H8]
	WORD   $0x4f110425                          // sshr v5.8h, v1.8h, #15
	WORD   $0x4f110446                          // sshr v6.8h, v2.8h, #15
	WORD   $0x4f110467                          // sshr v7.8h, v3.8h, #15
	WORD   $0x4f110488                          // sshr v8.8h, v4.8h, #15
	VUSHR  $1, V5.H8, V5.H8
	VUSHR  $1, V6.H8, V6.H8
	VUSHR  $1, V7.H8, V7.H8
	VUSHR  $1, V8.H8, V8.H8
	VEOR   V5.B16, V1.B16, V1.B16
	VEOR   V6.B16, V2.B16, V2.B16
	VEOR   V7.B16, V3.B16, V3.B16
	VEOR   V8.B16, V4.B16, V4.B16
	WORD   $0x4e613401                          // cmgt v1.8h, v0.8h, v1.8h (ks > sk, signed)
	WORD   $0x4e623402                          // cmgt v2.8h, v0.8h, v2.8h
	WORD   $0x4e633403                          // cmgt v3.8h, v0.8h, v3.8h
	WORD   $0x4e643404                          // cmgt v4.8h, v0.8h, v4.8h
	ALLBELOW
	BNE    halfdone
	ADD    $32, R2

halfcheck:
	CMP R1, R2
	BLT halfloop

halfdone:
	MOVD R2, ret+32(FP)
	RET

// func indexEq16(x []uint16, a, b uint16) int
TEXT ·indexEq16(SB), NOSPLIT, $0-40
	MOVD  x_base+0(FP), R0
	MOVD  x_len+8(FP), R1
	AND   $~31, R1, R1
	MOVHU a+24(FP), R3
	VDUP  R3, V0.H8
	MOVHU b+26(FP), R3
	VDUP  R3, V9.H8
	MOVD  $0, R2
	B     eqcheck

eqloop:
	VLD1.P 64(R0), [V1.H8, V2.H8, V3.H8, V4.H8]
	VCMEQ  V9.H8, V1.H8, V5.H8
	VCMEQ  V9.H8, V2.H8, V6.H8
	VCMEQ  V9.H8, V3.H8, V7.H8
	VCMEQ  V9.H8, V4.H8, V8.H8
	VCMEQ  V0.H8, V1.H8, V1.H8
	VCMEQ  V0.H8, V2.H8, V2.H8
	VCMEQ  V0.H8, V3.H8, V3.H8
	VCMEQ  V0.H8, V4.H8, V4.H8
	VORR   V5.B16, V1.B16, V1.B16
	VORR   V6.B16, V2.B16, V2.B16
	VORR   V7.B16, V3.B16, V3.B16
	VORR   V8.B16, V4.B16, V4.B16
	VORR   V1.B16, V2.B16, V1.B16
	VORR   V3.B16, V4.B16, V3.B16
	VORR   V1.B16, V3.B16, V1.B16
	VMOV   V1.D[0], R3
	VMOV   V1.D[1], R4
	ORR    R3, R4, R3
	CBNZ   R3, eqdone
	ADD    $32, R2

eqcheck:
	CMP R1, R2
	BLT eqloop

eqdone:
	MOVD R2, ret+32(FP)
	RET

// The gathers test one vector (4 floats or 8 16-bit elements) per
// iteration and narrow its match mask into R3 (16 or 8 bits per lane). A
// vector with no match costs nothing more; otherwise every lane's index is
// stored at out[R8] and R8 advances by the lane's bit (no branch on the
// data; the stores stay within out[:len(x)], R8 <= R2).

// func gatherGEF32(x []float32, t float32, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEF32(SB), NOSPLIT, $0-80
	MOVD  x_base+0(FP), R0
	MOVD  x_len+8(FP), R1
	AND   $~3, R1, R1
	MOVWU t+24(FP), R3
	VDUP  R3, V0.S4
	MOVD  out_base+32(FP), R7
	MOVD  $0, R2
	MOVD  $0, R8
	B     gf32check

gf32loop:
	VLD1.P 16(R0), [V1.S4]
	WORD   $0x6ea1e401         // fcmgt v1.4s, v0.4s, v1.4s (t > x)
	WORD   $0x6e205821         // mvn v1.16b, v1.16b (match: !(x < t))
	WORD   $0x0e612821         // xtn v1.4h, v1.4s
	VMOV   V1.D[0], R3
	CBZ    R3, gf32next
	MOVD   R2, R5
	LANE(16)
	LANE(16)
	LANE(16)
	LANE(16)

gf32next:
	ADD $4, R2

gf32check:
	CMP R1, R2
	BLT gf32loop
	MOVD R2, i+64(FP)
	MOVD R8, n+72(FP)
	RET

// func gatherGEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEU16(SB), NOSPLIT, $0-80
	MOVD  x_base+0(FP), R0
	MOVD  x_len+8(FP), R1
	AND   $~7, R1, R1
	MOVHU t+24(FP), R3
	VDUP  R3, V0.H8
	MOVD  out_base+32(FP), R7
	MOVD  $0, R2
	MOVD  $0, R8
	B     gu16check

gu16loop:
	VLD1.P 16(R0), [V1.H8]
	WORD   $0x6e603c21         // cmhs v1.8h, v1.8h, v0.8h (x >= t, unsigned)
	WORD   $0x0e212821         // xtn v1.8b, v1.8h
	VMOV   V1.D[0], R3
	CBZ    R3, gu16next
	MOVD   R2, R5
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)

gu16next:
	ADD $8, R2

gu16check:
	CMP R1, R2
	BLT gu16loop
	MOVD R2, i+64(FP)
	MOVD R8, n+72(FP)
	RET

// func gatherGEHalf(x []uint16, ks int16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEHalf(SB), NOSPLIT, $0-80
	MOVD  x_base+0(FP), R0
	MOVD  x_len+8(FP), R1
	AND   $~7, R1, R1
	MOVHU ks+24(FP), R3
	VDUP  R3, V0.H8
	MOVD  out_base+32(FP), R7
	MOVD  $0, R2
	MOVD  $0, R8
	B     ghalfcheck

ghalfloop:
	VLD1.P 16(R0), [V1.H8]
	WORD   $0x4f110425         // sshr v5.8h, v1.8h, #15
	VUSHR  $1, V5.H8, V5.H8
	VEOR   V5.B16, V1.B16, V1.B16
	WORD   $0x4e603c21         // cmge v1.8h, v1.8h, v0.8h (sk >= ks, signed)
	WORD   $0x0e212821         // xtn v1.8b, v1.8h
	VMOV   V1.D[0], R3
	CBZ    R3, ghalfnext
	MOVD   R2, R5
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)
	LANE(8)

ghalfnext:
	ADD $8, R2

ghalfcheck:
	CMP R1, R2
	BLT ghalfloop
	MOVD R2, i+64(FP)
	MOVD R8, n+72(FP)
	RET
