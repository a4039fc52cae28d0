/* hs_kernels.h - hostsim's compute kernels, shared by every graph kind (QHexRT, ExecuTorch, Genie):
 * float16 conversion, the matmul thread pool, the dot product and the multi-row matmul.
 *
 * Every output element is computed by the same sequence of float32 operations whatever the number of
 * rows in the call, the row's place in it, the blocking or the CPU's vector width: a row's outputs are
 * bit-identical alone and among others (the step scheduler's exactness and the greedy goldens rely on
 * it). The arithmetic is hs_dot's: 16 lanes, lane k summing elements k, k+16, k+32, ... in order,
 * then ((l0..3 + l4..7) + (l8..11 + l12..15)) as 4-vectors, then (v0 + v1) + (v2 + v3), then the
 * scalar tail. hostsim is built with -ffp-contract=off so no clone fuses a multiply and an add. */
#ifndef HOSTSIM_KERNELS_H
#define HOSTSIM_KERNELS_H

#include <stdint.h>
#include <string.h>

/* Storage of an hs_mat: the first three equal HS_W_F16, HS_W_INT8, HS_W_F32 (hs_format.h). PACKED is
 * float32 in blocks of 16 rows, column by column: element (r, c) at ((r/16)·cols + c)·16 + r%16. */
enum { HS_MAT_F16 = 1, HS_MAT_INT8 = 2, HS_MAT_F32 = 3, HS_MAT_F32_PACKED = 4 };

/* hs_mat is a [rows, cols] weight matrix, row-major. */
typedef struct {
  uint32_t storage; /* HS_MAT_*: f16 (kept as f16), int8 (per-row scales), f32 (also f16 converted at load), packed f32 */
  uint32_t rows, cols;
  const float *f32;
  const uint16_t *f16;
  const int8_t *i8;
  const float *scales;
} hs_mat;

float hs_f16_to_f32(uint16_t h);
uint16_t hs_f32_to_f16(float f);
/* hs_f16_init fills the conversion table (hs_f16_to_f32 calls it; call it before using hs_f16_table). */
void hs_f16_init(void);
extern float hs_f16_table[65536];

/* hs_task_fn computes items [start, end) of a parallel loop. */
typedef void (*hs_task_fn)(void *arg, int start, int end);
/* hs_parallel_for splits [0, n) over the calling thread and HOSTSIM_THREADS − 1 pool threads (default:
 * one per CPU, at most 8) when work (a cost estimate, ~multiply-adds) is large enough; one loop runs
 * at a time (process-wide). */
void hs_parallel_for(int n, double work, hs_task_fn fn, void *arg);

typedef float hs_v4f __attribute__((vector_size(16)));

/* hs_dot is the reference dot product (see the header comment for its exact arithmetic). */
static inline float hs_dot(const float *a, const float *b, int n) {
  hs_v4f s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    hs_v4f a0, a1, a2, a3, b0, b1, b2, b3;
    memcpy(&a0, a + i, 16); memcpy(&a1, a + i + 4, 16); memcpy(&a2, a + i + 8, 16); memcpy(&a3, a + i + 12, 16);
    memcpy(&b0, b + i, 16); memcpy(&b1, b + i + 4, 16); memcpy(&b2, b + i + 8, 16); memcpy(&b3, b + i + 12, 16);
    s0 += a0 * b0; s1 += a1 * b1; s2 += a2 * b2; s3 += a3 * b3;
  }
  for (; i + 4 <= n; i += 4) {
    hs_v4f a0, b0;
    memcpy(&a0, a + i, 16); memcpy(&b0, b + i, 16);
    s0 += a0 * b0;
  }
  hs_v4f s = (s0 + s1) + (s2 + s3);
  float r = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; i++) r += a[i] * b[i];
  return r;
}

/* hs_packable reports whether a [rows, cols] float32 matrix can be packed (rows a multiple of 16,
 * cols of 16); hs_pack writes src (row-major) packed into dst (rows·cols floats). */
int hs_packable(uint32_t rows, uint32_t cols);
void hs_pack(const float *src, uint32_t rows, uint32_t cols, float *dst);
/* hs_mat_row copies row r of w (any storage) into out as float32. */
void hs_mat_row(const hs_mat *w, uint32_t r, float *out);

/* hs_matmul computes Y[i, r] = hs_dot(W row r, X row i) for i < n and every row r of w, with
 * X[i] at x + i·ldx and Y[i, r] at y + i·ldy + r; its cost grows with n. Each weight row is read
 * (converted, for f16 and int8 storage) once per call for all n rows. A packed matrix computes 16
 * weight rows at a time as vectors across the rows (hs_dot's lanes become 16 vector sums, no
 * horizontal additions) and stores each input row's 16 outputs together. Threaded over weight rows. */
void hs_matmul(const hs_mat *w, const float *x, int n, int ldx, float *y, int ldy);

#endif
