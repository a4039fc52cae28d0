//go:build !purego

#include "textflag.h"

// Each kernel tests four vectors per iteration (32 floats or 64 16-bit
// elements), ORs their match masks and, at the first block with a match,
// finds the first matching element from the masks. See scan_native.go for
// the contract.

// FOUND16 sets AX to the first match within the 64-element block at AX,
// from the match masks in Y1..Y4, and returns.
#define FOUND16 \
	VPMOVMSKB Y1, CX \
	TESTL     CX, CX \
	JNZ       at0 \
	VPMOVMSKB Y2, CX \
	TESTL     CX, CX \
	JNZ       at16 \
	VPMOVMSKB Y3, CX \
	TESTL     CX, CX \
	JNZ       at32 \
	VPMOVMSKB Y4, CX \
	ADDQ      $48, AX \
	JMP       at0 \
at32: \
	ADDQ $32, AX \
	JMP  at0 \
at16: \
	ADDQ $16, AX \
at0: \
	BSFL       CX, CX \
	SHRL       $1, CX \
	ADDQ       CX, AX \
	MOVQ       AX, ret+32(FP) \
	VZEROUPPER \
	RET

// EMIT8 stores the indices of the set bits of R9 (8 bits) and moves Y10 on
// to the next 8 elements. R13 holds lut, Y11 eight 8s.
#define EMIT8 \
	MOVQ    R9, R10 \
	SHLQ    $5, R10 \
	VMOVDQU (R13)(R10*1), Y3 \
	VPADDD  Y10, Y3, Y3 \
	VMOVDQU Y3, (DI)(CX*4) \
	POPCNTQ R9, R9 \
	ADDQ    R9, CX \
	VPADDD  Y11, Y10, Y10

// GATHERSETUP loads out and lut, and sets Y10 (the block's first index, in
// every lane) to 0 and Y11 to 8s.
#define GATHERSETUP \
	MOVQ         out_base+32(FP), DI \
	MOVQ         lut+56(FP), R13 \
	VPXOR        Y10, Y10, Y10 \
	MOVL         $8, R9 \
	MOVQ         R9, X11 \
	VPBROADCASTD X11, Y11 \
	XORQ         AX, AX \
	XORQ         CX, CX

// EMIT16 stores the indices of the 16-bit match lanes of Y1 (16 elements).
#define EMIT16 \
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
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), DX
	ANDQ         $-32, DX
	VBROADCASTSS t+24(FP), Y0
	XORQ         AX, AX
	JMP          f32check

f32loop:
	// match: !(t > x), that is !(x < t), true for NaNs (NGT_UQ)
	VCMPPS $0x1a, (SI)(AX*4), Y0, Y1
	VCMPPS $0x1a, 32(SI)(AX*4), Y0, Y2
	VCMPPS $0x1a, 64(SI)(AX*4), Y0, Y3
	VCMPPS $0x1a, 96(SI)(AX*4), Y0, Y4
	VORPS  Y1, Y2, Y5
	VORPS  Y3, Y4, Y6
	VORPS  Y5, Y6, Y5
	VPTEST Y5, Y5
	JNZ    f32found
	ADDQ   $32, AX

f32check:
	CMPQ AX, DX
	JB   f32loop
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

f32found:
	VMOVMSKPS Y1, CX
	VMOVMSKPS Y2, R8
	VMOVMSKPS Y3, R9
	VMOVMSKPS Y4, R10
	SHLL      $8, R8
	SHLL      $16, R9
	SHLL      $24, R10
	ORL       R8, CX
	ORL       R9, CX
	ORL       R10, CX
	BSFL      CX, CX
	ADDQ      CX, AX
	MOVQ      AX, ret+32(FP)
	VZEROUPPER
	RET

// func indexGEU16(x []uint16, t uint16) int
TEXT ·indexGEU16(SB), NOSPLIT, $0-40
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), DX
	ANDQ         $-64, DX
	VPBROADCASTW t+24(FP), Y0
	XORQ         AX, AX
	JMP          u16check

u16loop:
	// match: max(x, t) == x
	VMOVDQU  (SI)(AX*2), Y1
	VMOVDQU  32(SI)(AX*2), Y2
	VMOVDQU  64(SI)(AX*2), Y3
	VMOVDQU  96(SI)(AX*2), Y4
	VPMAXUW  Y0, Y1, Y5
	VPMAXUW  Y0, Y2, Y6
	VPMAXUW  Y0, Y3, Y7
	VPMAXUW  Y0, Y4, Y8
	VPCMPEQW Y5, Y1, Y1
	VPCMPEQW Y6, Y2, Y2
	VPCMPEQW Y7, Y3, Y3
	VPCMPEQW Y8, Y4, Y4
	VPOR     Y1, Y2, Y5
	VPOR     Y3, Y4, Y6
	VPOR     Y5, Y6, Y5
	VPTEST   Y5, Y5
	JNZ      u16found
	ADDQ     $64, AX

u16check:
	CMPQ AX, DX
	JB   u16loop
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

u16found:
	FOUND16

// func indexGEHalf(x []uint16, ks int16) int
TEXT ·indexGEHalf(SB), NOSPLIT, $0-40
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), DX
	ANDQ         $-64, DX
	VPBROADCASTW ks+24(FP), Y0
	VPCMPEQW     Y15, Y15, Y15
	XORQ         AX, AX
	JMP          halfcheck

halfloop:
	// the signed key sk = h ^ (h>>15 & 0x7fff); match: !(ks > sk)
	VMOVDQU  (SI)(AX*2), Y1
	VMOVDQU  32(SI)(AX*2), Y2
	VMOVDQU  64(SI)(AX*2), Y3
	VMOVDQU  96(SI)(AX*2), Y4
	VPSRAW   $15, Y1, Y5
	VPSRAW   $15, Y2, Y6
	VPSRAW   $15, Y3, Y7
	VPSRAW   $15, Y4, Y8
	VPSRLW   $1, Y5, Y5
	VPSRLW   $1, Y6, Y6
	VPSRLW   $1, Y7, Y7
	VPSRLW   $1, Y8, Y8
	VPXOR    Y5, Y1, Y1
	VPXOR    Y6, Y2, Y2
	VPXOR    Y7, Y3, Y3
	VPXOR    Y8, Y4, Y4
	VPCMPGTW Y1, Y0, Y1
	VPCMPGTW Y2, Y0, Y2
	VPCMPGTW Y3, Y0, Y3
	VPCMPGTW Y4, Y0, Y4
	VPXOR    Y15, Y1, Y1
	VPXOR    Y15, Y2, Y2
	VPXOR    Y15, Y3, Y3
	VPXOR    Y15, Y4, Y4
	VPOR     Y1, Y2, Y5
	VPOR     Y3, Y4, Y6
	VPOR     Y5, Y6, Y5
	VPTEST   Y5, Y5
	JNZ      halffound
	ADDQ     $64, AX

halfcheck:
	CMPQ AX, DX
	JB   halfloop
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

halffound:
	FOUND16

// func indexEq16(x []uint16, a, b uint16) int
TEXT ·indexEq16(SB), NOSPLIT, $0-40
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), DX
	ANDQ         $-64, DX
	VPBROADCASTW a+24(FP), Y0
	VPBROADCASTW b+26(FP), Y9
	XORQ         AX, AX
	JMP          eqcheck

eqloop:
	VMOVDQU  (SI)(AX*2), Y1
	VMOVDQU  32(SI)(AX*2), Y2
	VMOVDQU  64(SI)(AX*2), Y3
	VMOVDQU  96(SI)(AX*2), Y4
	VPCMPEQW Y9, Y1, Y5
	VPCMPEQW Y9, Y2, Y6
	VPCMPEQW Y9, Y3, Y7
	VPCMPEQW Y9, Y4, Y8
	VPCMPEQW Y0, Y1, Y1
	VPCMPEQW Y0, Y2, Y2
	VPCMPEQW Y0, Y3, Y3
	VPCMPEQW Y0, Y4, Y4
	VPOR     Y5, Y1, Y1
	VPOR     Y6, Y2, Y2
	VPOR     Y7, Y3, Y3
	VPOR     Y8, Y4, Y4
	VPOR     Y1, Y2, Y5
	VPOR     Y3, Y4, Y6
	VPOR     Y5, Y6, Y5
	VPTEST   Y5, Y5
	JNZ      eqfound
	ADDQ     $64, AX

eqcheck:
	CMPQ AX, DX
	JB   eqloop
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

eqfound:
	FOUND16

// The gathers take 8 elements at a time: their match mask (one bit per
// element) picks a row of lut, the lane numbers of its set bits packed to
// the front; the row plus the block's first index (Y10) is stored at
// out[CX] and CX advances by the mask's popcount. Nothing branches on the
// data, and every store stays within out[:len(x)] (CX <= AX).

// func gatherGEF32(x []float32, t float32, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEF32(SB), NOSPLIT, $0-80
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), DX
	ANDQ         $-8, DX
	VBROADCASTSS t+24(FP), Y0
	GATHERSETUP
	JMP          gf32check

gf32loop:
	VCMPPS    $0x1a, (SI)(AX*4), Y0, Y1
	VMOVMSKPS Y1, R9
	EMIT8
	ADDQ      $8, AX

gf32check:
	CMPQ AX, DX
	JB   gf32loop
	MOVQ AX, i+64(FP)
	MOVQ CX, n+72(FP)
	VZEROUPPER
	RET

// func gatherGEU16(x []uint16, t uint16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEU16(SB), NOSPLIT, $0-80
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), DX
	ANDQ         $-16, DX
	VPBROADCASTW t+24(FP), Y0
	GATHERSETUP
	JMP          gu16check

gu16loop:
	VMOVDQU  (SI)(AX*2), Y1
	VPMAXUW  Y0, Y1, Y3
	VPCMPEQW Y3, Y1, Y1
	EMIT16
	ADDQ     $16, AX

gu16check:
	CMPQ AX, DX
	JB   gu16loop
	MOVQ AX, i+64(FP)
	MOVQ CX, n+72(FP)
	VZEROUPPER
	RET

// func gatherGEHalf(x []uint16, ks int16, out []int32, lut *[256][8]int32) (i, n int)
TEXT ·gatherGEHalf(SB), NOSPLIT, $0-80
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), DX
	ANDQ         $-16, DX
	VPBROADCASTW ks+24(FP), Y0
	VPCMPEQW     Y15, Y15, Y15
	GATHERSETUP
	JMP          ghalfcheck

ghalfloop:
	VMOVDQU  (SI)(AX*2), Y1
	VPSRAW   $15, Y1, Y3
	VPSRLW   $1, Y3, Y3
	VPXOR    Y3, Y1, Y1
	VPCMPGTW Y1, Y0, Y1
	VPXOR    Y15, Y1, Y1
	EMIT16
	ADDQ     $16, AX

ghalfcheck:
	CMPQ AX, DX
	JB   ghalfloop
	MOVQ AX, i+64(FP)
	MOVQ CX, n+72(FP)
	VZEROUPPER
	RET
