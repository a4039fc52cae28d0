//go:build !purego

#include "textflag.h"

// Each index kernel tests four vectors per iteration (32 floats or 64
// 16-bit elements), ORs their match masks and, at the first block with a
// match, finds the first matching element from the masks. See
// scan_native.go for the contract. The matches are written once per
// element kind, as macros MATCH(X, T) that turn the elements in X into
// their match mask (all ones where the element matches) with T as scratch,
// and serve both the index kernels and the gathers.

// GEF32(M, X) compares the 8 floats at M with the threshold in Y0 into X.
// The match is !(t > x), that is !(x < t), true for NaNs (NGT_UQ).
#define GEF32(M, X) VCMPPS $0x1a, M, Y0, X

// GEU16: max(x, t) == x.
#define GEU16(X, T) \
	VPMAXUW  Y0, X, T \
	VPCMPEQW T, X, X

// GES16: max(x, t) == x, signed.
#define GES16(X, T) \
	VPMAXSW  Y0, X, T \
	VPCMPEQW T, X, X

// LEU16: min(x, t) == x, unsigned.
#define LEU16(X, T) \
	VPMINUW  Y0, X, T \
	VPCMPEQW T, X, X

// EQ16: x == a (Y0) or x == b (Y9).
#define EQ16(X, T) \
	VPCMPEQW Y9, X, T \
	VPCMPEQW Y0, X, X \
	VPOR     T, X, X

// BLOCKS loads x (SI) and its length rounded down by AND $MASK to whole
// blocks (DX).
#define BLOCKS(MASK) \
	MOVQ x_base+0(FP), SI \
	MOVQ x_len+8(FP), DX \
	ANDQ $MASK, DX

// RETAX returns AX from an index kernel.
#define RETAX \
	MOVQ       AX, ret+32(FP) \
	VZEROUPPER \
	RET

// NEXT(STEP) ends a kernel's loop: AX moves on by a block of STEP elements,
// and the loop goes on while whole blocks remain.
#define NEXT(STEP) \
	ADDQ $STEP, AX \
check: \
	CMPQ AX, DX \
	JB   loop

// INDEX(STEP, BLOCK, FOUND) runs BLOCK (which sets ZF when nothing
// matched) over the blocks of STEP elements from element 0 (AX), and FOUND
// at the first block with a match; it returns AX at the end of the blocks.
#define INDEX(STEP, BLOCK, FOUND) \
	XORQ AX, AX \
	JMP  check \
loop: \
	BLOCK \
	JNZ  found \
	NEXT(STEP) \
	RETAX \
found: \
	FOUND

// ANY(OR) ORs the masks in Y1..Y4 into Y5 (with OR, the ordinary or the
// float one) and clears ZF if any lane is set.
#define ANY(OR) \
	OR     Y1, Y2, Y5 \
	OR     Y3, Y4, Y6 \
	OR     Y5, Y6, Y5 \
	VPTEST Y5, Y5

// F32BLOCK and F32FOUND: the float kernel compares straight from memory
// and finds the match from the four 8-bit float masks.
#define F32BLOCK \
	GEF32((SI)(AX*4), Y1) \
	GEF32(32(SI)(AX*4), Y2) \
	GEF32(64(SI)(AX*4), Y3) \
	GEF32(96(SI)(AX*4), Y4) \
	ANY(VORPS)

#define F32FOUND \
	VMOVMSKPS Y1, CX \
	VMOVMSKPS Y2, R8 \
	VMOVMSKPS Y3, R9 \
	VMOVMSKPS Y4, R10 \
	SHLL      $8, R8 \
	SHLL      $16, R9 \
	SHLL      $24, R10 \
	ORL       R8, CX \
	ORL       R9, CX \
	ORL       R10, CX \
	BSFL      CX, CX \
	ADDQ      CX, AX \
	RETAX

// BLOCK16(MATCH) loads 64 elements into Y1..Y4 and turns them into their
// match masks.
#define BLOCK16(MATCH) \
	VMOVDQU (SI)(AX*2), Y1 \
	VMOVDQU 32(SI)(AX*2), Y2 \
	VMOVDQU 64(SI)(AX*2), Y3 \
	VMOVDQU 96(SI)(AX*2), Y4 \
	MATCH(Y1, Y5) \
	MATCH(Y2, Y6) \
	MATCH(Y3, Y7) \
	MATCH(Y4, Y8) \
	ANY(VPOR)

// FOUND16 sets AX to the first match within the 64-element block at AX,
// from the match masks in Y1..Y4, and returns.
#define FOUND16 \
	VPMOVMSKB Y1, CX; TESTL CX, CX; JNZ at0 \
	VPMOVMSKB Y2, CX; TESTL CX, CX; JNZ at16 \
	VPMOVMSKB Y3, CX; TESTL CX, CX; JNZ at32 \
	VPMOVMSKB Y4, CX \
	ADDQ      $48, AX \
	JMP       at0 \
at32: \
	ADDQ $32, AX \
	JMP  at0 \
at16: \
	ADDQ $16, AX \
at0: \
	BSFL CX, CX \
	SHRL $1, CX \
	ADDQ CX, AX \
	RETAX

// The gathers take 8 elements at a time: their match mask (one bit per
// element) picks a row of lut, the lane numbers of its set bits packed to
// the front; the row plus the block's first index (Y10) is stored at
// out[CX] and CX advances by the mask's popcount. Nothing branches on the
// data, and every store stays within out[:len(x)] (CX <= AX).

// GATHER(STEP, BLOCK) runs BLOCK over the blocks of STEP elements, from
// element 0 (AX) with no index written (CX), and returns AX and CX. It
// loads out (DI) and lut (R13), and sets Y10 (the block's first index, in
// every lane) to 0 and Y11 to 8s.
#define GATHER(STEP, BLOCK) \
	MOVQ         out_base+32(FP), DI \
	MOVQ         lut+56(FP), R13 \
	VPXOR        Y10, Y10, Y10 \
	MOVL         $8, R9 \
	MOVQ         R9, X11 \
	VPBROADCASTD X11, Y11 \
	XORQ         AX, AX \
	XORQ         CX, CX \
	JMP          check \
loop: \
	BLOCK \
	NEXT(STEP) \
	MOVQ         AX, i+64(FP) \
	MOVQ         CX, n+72(FP) \
	VZEROUPPER \
	RET

// EMIT8 stores the indices of the set bits of R9 (8 bits) and moves Y10 on
// to the next 8 elements.
#define EMIT8 \
	MOVQ    R9, R10 \
	SHLQ    $5, R10 \
	VMOVDQU (R13)(R10*1), Y3 \
	VPADDD  Y10, Y3, Y3 \
	VMOVDQU Y3, (DI)(CX*4) \
	POPCNTQ R9, R9 \
	ADDQ    R9, CX \
	VPADDD  Y11, Y10, Y10

// GF32BLOCK emits the matches of 8 floats.
#define GF32BLOCK \
	GEF32((SI)(AX*4), Y1) \
	VMOVMSKPS Y1, R9 \
	EMIT8

// GATHER16(MATCH) emits the matches of 16 elements: their 16-bit masks
// narrowed to bytes, 8 at a time.
#define GATHER16(MATCH) \
	VMOVDQU      (SI)(AX*2), Y1 \
	MATCH(Y1, Y3) \
	VEXTRACTI128 $1, Y1, X2 \
	VPACKSSWB    X2, X1, X1 \
	VPMOVMSKB    X1, R8 \
	MOVQ         R8, R9 \
	ANDQ         $0xff, R9 \
	EMIT8 \
	MOVQ         R8, R9 \
	SHRQ         $8, R9 \
	EMIT8

// func indexGEF32(x []float32, t float32) int
TEXT ·indexGEF32(SB), NOSPLIT, $0-40
	BLOCKS(-32)
	VBROADCASTSS t+24(FP), Y0
	INDEX(32, F32BLOCK, F32FOUND)

// func indexGEU16(x []uint16, t uint16) int
TEXT ·indexGEU16(SB), NOSPLIT, $0-40
	BLOCKS(-64)
	VPBROADCASTW t+24(FP), Y0
	INDEX(64, BLOCK16(GEU16), FOUND16)

// func indexGES16(x []uint16, t int16) int
TEXT ·indexGES16(SB), NOSPLIT, $0-40
	BLOCKS(-64)
	VPBROADCASTW t+24(FP), Y0
	INDEX(64, BLOCK16(GES16), FOUND16)

// func indexLEU16(x []uint16, t uint16) int
TEXT ·indexLEU16(SB), NOSPLIT, $0-40
	BLOCKS(-64)
	VPBROADCASTW t+24(FP), Y0
	INDEX(64, BLOCK16(LEU16), FOUND16)

// func indexEq16(x []uint16, a, b uint16) int
TEXT ·indexEq16(SB), NOSPLIT, $0-40
	BLOCKS(-64)
	VPBROADCASTW a+24(FP), Y0
	VPBROADCASTW b+26(FP), Y9
	INDEX(64, BLOCK16(EQ16), FOUND16)

// func gatherGEF32(x []float32, t float32, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEF32(SB), NOSPLIT, $0-80
	BLOCKS(-8)
	VBROADCASTSS t+24(FP), Y0
	GATHER(8, GF32BLOCK)

// func gatherGEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEU16(SB), NOSPLIT, $0-80
	BLOCKS(-16)
	VPBROADCASTW t+24(FP), Y0
	GATHER(16, GATHER16(GEU16))

// func gatherGES16(x []uint16, t int16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGES16(SB), NOSPLIT, $0-80
	BLOCKS(-16)
	VPBROADCASTW t+24(FP), Y0
	GATHER(16, GATHER16(GES16))

// func gatherLEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherLEU16(SB), NOSPLIT, $0-80
	BLOCKS(-16)
	VPBROADCASTW t+24(FP), Y0
	GATHER(16, GATHER16(LEU16))
