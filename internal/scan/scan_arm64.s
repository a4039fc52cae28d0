//go:build !purego

#include "textflag.h"

// Each kernel loads four vectors per iteration (16 floats or 32 16-bit
// elements) and stops at the first block holding a match, returning its
// start: the Go loop finds the element (see scan_native.go). The ordered
// scans AND the "below the threshold" masks and go on while every lane is
// set. The comparisons the Go assembler does not know are encoded as WORDs
// (the instruction in a comment), their register fields zero in the
// constants below and filled in by the macros.

#define FCMGT_4S 0x6ea0e400 // fcmgt vd.4s, vn.4s, vm.4s
#define CMHI_8H  0x6e603400 // cmhi vd.8h, vn.8h, vm.8h
#define CMGT_8H  0x4e603400 // cmgt vd.8h, vn.8h, vm.8h

// BLOCKS loads x (R0) and its length rounded down by AND $MASK to whole
// blocks (R1).
#define BLOCKS(MASK) \
	MOVD x_base+0(FP), R0 \
	MOVD x_len+8(FP), R1 \
	AND  $MASK, R1, R1

// NEXT(STEP) ends a kernel's loop: R2 moves on by a block of STEP
// elements, and the loop goes on while whole blocks remain.
#define NEXT(STEP) \
	ADD $STEP, R2 \
check: \
	CMP R1, R2 \
	BLT loop

// INDEX(STEP, BLOCK) runs BLOCK over the blocks of STEP elements from
// element 0 (R2) until BLOCK branches to done or the blocks end, and
// returns R2.
#define INDEX(STEP, BLOCK) \
	MOVD $0, R2 \
	B    check \
loop: \
	BLOCK \
	NEXT(STEP) \
done: \
	MOVD R2, ret+32(FP) \
	RET

// BELOW(OP) sets each lane of V1..V4 where OP(v0, vN) (v0 holds the
// threshold) and branches to done unless every lane is set.
#define BELOW(OP) \
	WORD $(OP|1<<16|1) \
	WORD $(OP|2<<16|2) \
	WORD $(OP|3<<16|3) \
	WORD $(OP|4<<16|4) \
	FOLD(VAND, AND) \
	CMN  $1, R3 \
	BNE  done

// FOLD combines V1..V4 with the vector op VOP into R3 (with the scalar op
// OP of the two halves).
#define FOLD(VOP, OP) \
	VOP  V1.B16, V2.B16, V1.B16 \
	VOP  V3.B16, V4.B16, V3.B16 \
	VOP  V1.B16, V3.B16, V1.B16 \
	VMOV V1.D[0], R3 \
	VMOV V1.D[1], R4 \
	OP   R3, R4, R3

#define F32BLOCK \
	VLD1.P 64(R0), [V1.S4, V2.S4, V3.S4, V4.S4] \
	BELOW(FCMGT_4S) /* t > x: false for NaNs */

#define U16BLOCK \
	VLD1.P 64(R0), [V1.H8, V2.H8, V3.H8, V4.H8] \
	BELOW(CMHI_8H) /* t > x, unsigned */

#define S16BLOCK \
	VLD1.P 64(R0), [V1.H8, V2.H8, V3.H8, V4.H8] \
	BELOW(CMGT_8H) /* t > x, signed */

// LEU16BLOCK: the lanes that do not match are those above t (x > t,
// unsigned): BELOW with the operands the other way round.
#define LEU16BLOCK \
	VLD1.P 64(R0), [V1.H8, V2.H8, V3.H8, V4.H8] \
	WORD   $(CMHI_8H|1<<5|1) \
	WORD   $(CMHI_8H|2<<5|2) \
	WORD   $(CMHI_8H|3<<5|3) \
	WORD   $(CMHI_8H|4<<5|4) \
	FOLD(VAND, AND) \
	CMN    $1, R3 \
	BNE    done

// EQ(A, D1, D2, D3, D4) sets each lane of Dn where Vn equals A.
#define EQ(A, D1, D2, D3, D4) \
	VCMEQ A.H8, V1.H8, D1.H8 \
	VCMEQ A.H8, V2.H8, D2.H8 \
	VCMEQ A.H8, V3.H8, D3.H8 \
	VCMEQ A.H8, V4.H8, D4.H8

// EQBLOCK branches to done if a lane of V1..V4 equals V0's or V9's.
#define EQBLOCK \
	VLD1.P 64(R0), [V1.H8, V2.H8, V3.H8, V4.H8] \
	EQ(V9, V5, V6, V7, V8) \
	EQ(V0, V1, V2, V3, V4) \
	VORR   V5.B16, V1.B16, V1.B16 \
	VORR   V6.B16, V2.B16, V2.B16 \
	VORR   V7.B16, V3.B16, V3.B16 \
	VORR   V8.B16, V4.B16, V4.B16 \
	FOLD(VORR, ORR) \
	CBNZ   R3, done

// The gathers test one vector (4 floats or 8 16-bit elements) per
// iteration and narrow its match mask into R3 (16 or 8 bits per lane). A
// vector with no match costs nothing more; otherwise every lane's index is
// stored at out[R8] and R8 advances by the lane's bit (no branch on the
// data; the stores stay within out[:len(x)], R8 <= R2).

// GATHER(STEP, MASK, LANES) runs MASK (the match mask of the vector at R0,
// in R3) over the vectors of STEP elements, from element 0 (R2) with no
// index written (R8), and LANES where some lane matched; it returns R2 and
// R8.
#define GATHER(STEP, MASK, LANES) \
	MOVD out_base+32(FP), R7 \
	MOVD $0, R2 \
	MOVD $0, R8 \
	B    check \
loop: \
	MASK \
	VMOV V1.D[0], R3 \
	CBZ  R3, next \
	MOVD R2, R5 \
	LANES \
next: \
	NEXT(STEP) \
	MOVD R2, i+64(FP) \
	MOVD R8, n+72(FP) \
	RET

// LANE stores R5 at out[R8], advances R8 by R3's low bit, shifts R3 by SH
// and R5 by one.
#define LANE(SH) \
	MOVW R5, (R7)(R8<<2) \
	AND  $1, R3, R6 \
	ADD  R6, R8, R8 \
	LSR  $SH, R3, R3 \
	ADD  $1, R5, R5

// LANES4(SH) is four lanes of SH bits.
#define LANES4(SH) \
	LANE(SH) \
	LANE(SH) \
	LANE(SH) \
	LANE(SH)

#define GF32MASK \
	VLD1.P 16(R0), [V1.S4] \
	WORD   $0x6ea1e401 /* fcmgt v1.4s, v0.4s, v1.4s (t > x) */ \
	WORD   $0x6e205821 /* mvn v1.16b, v1.16b (match: !(x < t)) */ \
	WORD   $0x0e612821 /* xtn v1.4h, v1.4s */

#define GU16MASK \
	VLD1.P 16(R0), [V1.H8] \
	WORD   $0x6e603c21 /* cmhs v1.8h, v1.8h, v0.8h (x >= t, unsigned) */ \
	WORD   $0x0e212821 /* xtn v1.8b, v1.8h */

#define GS16MASK \
	VLD1.P 16(R0), [V1.H8] \
	WORD   $0x4e603c21 /* cmge v1.8h, v1.8h, v0.8h (x >= t, signed) */ \
	WORD   $0x0e212821 /* xtn v1.8b, v1.8h */

#define GLEU16MASK \
	VLD1.P 16(R0), [V1.H8] \
	WORD   $0x6e613c01 /* cmhs v1.8h, v0.8h, v1.8h (t >= x, unsigned) */ \
	WORD   $0x0e212821 /* xtn v1.8b, v1.8h */

// func indexGEF32(x []float32, t float32) int
TEXT ·indexGEF32(SB), NOSPLIT, $0-40
	BLOCKS(~15)
	MOVWU t+24(FP), R3
	VDUP  R3, V0.S4
	INDEX(16, F32BLOCK)

// func indexGEU16(x []uint16, t uint16) int
TEXT ·indexGEU16(SB), NOSPLIT, $0-40
	BLOCKS(~31)
	MOVHU t+24(FP), R3
	VDUP  R3, V0.H8
	INDEX(32, U16BLOCK)

// func indexGES16(x []uint16, t int16) int
TEXT ·indexGES16(SB), NOSPLIT, $0-40
	BLOCKS(~31)
	MOVHU t+24(FP), R3
	VDUP  R3, V0.H8
	INDEX(32, S16BLOCK)

// func indexLEU16(x []uint16, t uint16) int
TEXT ·indexLEU16(SB), NOSPLIT, $0-40
	BLOCKS(~31)
	MOVHU t+24(FP), R3
	VDUP  R3, V0.H8
	INDEX(32, LEU16BLOCK)

// func indexEq16(x []uint16, a, b uint16) int
TEXT ·indexEq16(SB), NOSPLIT, $0-40
	BLOCKS(~31)
	MOVHU a+24(FP), R3
	VDUP  R3, V0.H8
	MOVHU b+26(FP), R3
	VDUP  R3, V9.H8
	INDEX(32, EQBLOCK)

// func gatherGEF32(x []float32, t float32, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEF32(SB), NOSPLIT, $0-80
	BLOCKS(~3)
	MOVWU t+24(FP), R3
	VDUP  R3, V0.S4
	GATHER(4, GF32MASK, LANES4(16))

// func gatherGEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEU16(SB), NOSPLIT, $0-80
	BLOCKS(~7)
	MOVHU t+24(FP), R3
	VDUP  R3, V0.H8
	GATHER(8, GU16MASK, LANES4(8); LANES4(8))

// func gatherGES16(x []uint16, t int16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGES16(SB), NOSPLIT, $0-80
	BLOCKS(~7)
	MOVHU t+24(FP), R3
	VDUP  R3, V0.H8
	GATHER(8, GS16MASK, LANES4(8); LANES4(8))

// func gatherLEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherLEU16(SB), NOSPLIT, $0-80
	BLOCKS(~7)
	MOVHU t+24(FP), R3
	VDUP  R3, V0.H8
	GATHER(8, GLEU16MASK, LANES4(8); LANES4(8))
