//go:build !purego

#include "textflag.h"

// histF32 takes chunks of up to histChunk elements, 16 at a time. Vector
// work: t = (x − thr)·scale, the valid lanes (t ≥ 0, ordered: NaNs are
// not), q = min(uint32(int32(t)), HistQMax) (a t beyond int32 converts to
// 0x80000000, above HistQMax), of = q>>16 + 1 (0 in the other lanes) packed
// to 16 bits and stored, and the valid lanes' q packed to the front (by
// lut, as the gathers do) and appended to buf. Scalar work, once per chunk:
// for each q in buf, acc[q>>16] += 1<<40 | q&0xffff, in a loop whose length
// does not depend on which lanes were valid (no branch to mispredict on
// logits half in range). Padding makes the count a multiple of 8: its q
// are the sink's, acc[HistBuckets].

// ADD1(OFF) makes the add of the q at OFF(R13)(R12*4): its low half is the
// fraction, its high half the bucket.
#define ADD1(OFF) \
	MOVWQZX OFF(R13)(R12*4), R10 \
	MOVWQZX OFF+2(R13)(R12*4), BX \
	ORQ     R8, R10 \
	ADDQ    R10, (R9)(BX*8)

// Q(OFF, T, M, Q) takes the 8 floats at AX+OFF: the valid lanes' mask in
// M, q in Q (T is scratch).
#define Q(OFF, T, M, Q) \
	VMOVUPS    OFF*4(SI)(AX*4), T \
	VSUBPS     Y0, T, T \
	VMULPS     Y1, T, T \
	VCMPPS     $0x1d, Y4, T, M \
	VCVTTPS2DQ T, Q \
	VPMINUD    Y3, Q, Q

// PACK(M, Q) appends the valid lanes' q (M: the mask) to buf at CX.
#define PACK(M, Q) \
	VMOVMSKPS M, BX \
	MOVQ      BX, R10 \
	SHLQ      $5, R10 \
	ADDQ      lut+72(FP), R10 \
	VMOVDQU   (R10), Y11 \
	VPERMD    Q, Y11, Q \
	VMOVDQU   Q, (R13)(CX*4) \
	POPCNTQ   BX, BX \
	ADDQ      BX, CX

// func histF32(x []float32, thr, scale float32, acc *HistAcc, of []uint16, buf *[histChunk + 8]int32, lut *[256][8]int32) (n int)
TEXT ·histF32(SB), NOSPLIT, $0-88
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), DX
	ANDQ         $-16, DX
	MOVQ         acc+32(FP), R9
	MOVQ         of_base+40(FP), DI
	MOVQ         buf+64(FP), R13
	VBROADCASTSS thr+24(FP), Y0
	VBROADCASTSS scale+28(FP), Y1
	MOVL         $0x3fffffff, R10 // HistQMax
	MOVQ         R10, X3
	VPBROADCASTD X3, Y3
	VPXOR        Y4, Y4, Y4
	MOVL         $1, R10
	MOVQ         R10, X5
	VPBROADCASTD X5, Y5
	MOVQ         $0x10000000000, R8 // 1<<40
	MOVL         $0x40000000, R10 // the sink's q: bucket HistBuckets
	MOVQ         R10, X6
	VPBROADCASTD X6, Y6
	XORQ         AX, AX
	JMP          chunk

vec:
	Q(0, Y7, Y8, Y9)
	Q(8, Y12, Y13, Y14)
	VPSRLD       $16, Y9, Y10
	VPADDD       Y5, Y10, Y10
	VPAND        Y8, Y10, Y10
	VPSRLD       $16, Y14, Y11
	VPADDD       Y5, Y11, Y11
	VPAND        Y13, Y11, Y11
	VPACKUSDW    Y11, Y10, Y10
	VPERMQ       $0xd8, Y10, Y10   // the 16 of, in order
	VMOVDQU      Y10, (DI)(AX*2)
	PACK(Y8, Y9)
	PACK(Y13, Y14)
	ADDQ         $16, AX
	CMPQ         AX, R11
	JB           vec

	// the scalar adds of the chunk's CX valid elements, eight at a time:
	// the padding after the last is the sink's
	VMOVDQU      Y6, (R13)(CX*4)
	ADDQ         $7, CX
	ANDQ         $-8, CX
	XORQ         R12, R12
	JMP          addcheck

add:
	ADD1(0)
	ADD1(4)
	ADD1(8)
	ADD1(12)
	ADD1(16)
	ADD1(20)
	ADD1(24)
	ADD1(28)
	ADDQ         $8, R12

addcheck:
	CMPQ         R12, CX
	JB           add

chunk:
	XORQ         CX, CX
	LEAQ         256(AX), R11 // histChunk
	CMPQ         R11, DX
	CMOVQHI      DX, R11
	CMPQ         AX, R11
	JB           vec
	MOVQ         AX, n+80(FP)
	VZEROUPPER
	RET

// histWeights takes a block of 64 buckets (16 vectors of 4) at a time:
// each bucket's count c = a>>40 and sum of fractions f = a & (2^40 − 1)
// become doubles exactly (or'd into the mantissa of 2^52, which is then
// subtracted), its weight e·(c·k0 + k1·f) is stored, and vector j is added
// to the partial sums Y(j mod 4); the block's sum is ((Y0 + Y1) + (Y2 +
// Y3)), its lanes added as (l0 + l2) + (l1 + l3). The counts add up in Y14.

// W(J, S) weighs the buckets of vector J of the block at AX and adds them
// to S.
#define W(J, S) \
	VMOVDQU J*32(SI)(AX*8), Y4 \
	VPSRLQ  $40, Y4, Y5 \
	VPAND   Y10, Y4, Y4 \
	VPADDQ  Y5, Y14, Y14 \
	VPOR    Y11, Y5, Y5 \
	VPOR    Y11, Y4, Y4 \
	VSUBPD  Y11, Y5, Y5 \
	VSUBPD  Y11, Y4, Y4 \
	VMULPD  Y12, Y5, Y5 \
	VMULPD  Y13, Y4, Y4 \
	VADDPD  Y4, Y5, Y5 \
	VMULPD  J*32(DI)(AX*8), Y5, Y5 \
	VMOVUPD Y5, J*32(R8)(AX*8) \
	VADDPD  Y5, S, S

// func histWeights(acc *HistAcc, e *[HistBuckets]float64, k0, k1 float64, bw *[HistBuckets]float64, blk *[HistBuckets / 64]float64) (n int)
TEXT ·histWeights(SB), NOSPLIT, $0-56
	MOVQ         acc+0(FP), SI
	MOVQ         e+8(FP), DI
	VBROADCASTSD k0+16(FP), Y12
	VBROADCASTSD k1+24(FP), Y13
	MOVQ         bw+32(FP), R8
	MOVQ         blk+40(FP), R9
	MOVQ         $0xffffffffff, R10 // 2^40 − 1
	MOVQ         R10, X10
	VPBROADCASTQ X10, Y10
	MOVQ         $0x4330000000000000, R10 // 2^52
	MOVQ         R10, X11
	VPBROADCASTQ X11, Y11
	VPXOR        Y14, Y14, Y14
	XORQ         AX, AX
	XORQ         BX, BX

block:
	VXORPD       Y0, Y0, Y0
	VXORPD       Y1, Y1, Y1
	VXORPD       Y2, Y2, Y2
	VXORPD       Y3, Y3, Y3
	W(0, Y0)
	W(1, Y1)
	W(2, Y2)
	W(3, Y3)
	W(4, Y0)
	W(5, Y1)
	W(6, Y2)
	W(7, Y3)
	W(8, Y0)
	W(9, Y1)
	W(10, Y2)
	W(11, Y3)
	W(12, Y0)
	W(13, Y1)
	W(14, Y2)
	W(15, Y3)
	VADDPD       Y1, Y0, Y0
	VADDPD       Y3, Y2, Y2
	VADDPD       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0
	VPERMILPD    $1, X0, X1
	VADDSD       X1, X0, X0
	VMOVSD       X0, (R9)(BX*8)
	ADDQ         $64, AX
	INCQ         BX
	CMPQ         BX, $256
	JB           block

	VEXTRACTI128 $1, Y14, X1
	VPADDQ       X1, X14, X14
	VPSHUFD      $0x4e, X14, X1
	VPADDQ       X1, X14, X14
	MOVQ         X14, AX
	MOVQ         AX, n+48(FP)
	VZEROUPPER
	RET
