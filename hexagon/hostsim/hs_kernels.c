/* hs_kernels.c - float16 conversion, the matmul thread pool and the blocked multi-row matmul
 * (see hs_kernels.h for the arithmetic every output follows). */
#include "hs_kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- float16 ---- */
float hs_f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static float f16_slow(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) u = sign;
    else {
      float f = ldexpf((float)man, -24);
      return sign ? -f : f;
    }
  } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
  else u = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void f16_fill(void) {
  for (uint32_t i = 0; i < 65536; i++) hs_f16_table[i] = f16_slow((uint16_t)i);
}
void hs_f16_init(void) { pthread_once(&f16_once, f16_fill); }
float hs_f16_to_f32(uint16_t h) {
  hs_f16_init();
  return hs_f16_table[h];
}
uint16_t hs_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffff;
  if (a >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000 ? 0x200 : 0));
  if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520 -> inf */
  if (a < 0x38800000) {                                    /* subnormal or zero */
    float af;
    memcpy(&af, &a, 4);
    return (uint16_t)(sign | (uint32_t)lrintf(af * 16777216.0f));
  }
  uint32_t mant = a & 0x7fffff, exp = (a >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

/* ---- thread pool ---- */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  int nthreads;
  unsigned gen;
  int pending;
  hs_task_fn fn;
  void *arg;
  int n;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0, 0, 0, 0, 0};
static pthread_mutex_t pool_run = PTHREAD_MUTEX_INITIALIZER;

static void range_of(int n, int parts, int i, int *s, int *e) {
  *s = (int)((long long)n * i / parts);
  *e = (int)((long long)n * (i + 1) / parts);
}

static void *worker(void *p) {
  int idx = (int)(intptr_t)p;
  unsigned seen = 0;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (pool.gen == seen) pthread_cond_wait(&pool.go, &pool.mu);
    seen = pool.gen;
    hs_task_fn fn = pool.fn;
    void *arg = pool.arg;
    int n = pool.n, s, e;
    pthread_mutex_unlock(&pool.mu);
    range_of(n, pool.nthreads, idx, &s, &e);
    if (s < e) fn(arg, s, e);
    pthread_mutex_lock(&pool.mu);
    if (--pool.pending == 0) pthread_cond_signal(&pool.done);
  }
  return NULL;
}

static void pool_start(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  const char *env = getenv("HOSTSIM_THREADS");
  if (env && atoi(env) > 0) n = atoi(env);
  if (n < 1) n = 1;
  if (n > 8) n = 8;
  pool.nthreads = (int)n;
  for (int i = 1; i < pool.nthreads; i++) {
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, worker, (void *)(intptr_t)i) != 0) { pool.nthreads = i; pthread_attr_destroy(&at); break; }
    pthread_attr_destroy(&at);
  }
}
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

void hs_parallel_for(int n, double work, hs_task_fn fn, void *arg) {
  if (n <= 0) return;
  if (work < 200000.0 || n < 2) { fn(arg, 0, n); return; }
  pthread_once(&pool_once, pool_start);
  if (pool.nthreads < 2) { fn(arg, 0, n); return; }
  pthread_mutex_lock(&pool_run);
  pthread_mutex_lock(&pool.mu);
  pool.fn = fn; pool.arg = arg; pool.n = n;
  pool.pending = pool.nthreads - 1;
  pool.gen++;
  pthread_cond_broadcast(&pool.go);
  pthread_mutex_unlock(&pool.mu);
  int s, e;
  range_of(n, pool.nthreads, 0, &s, &e);
  if (s < e) fn(arg, s, e);
  pthread_mutex_lock(&pool.mu);
  while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.mu);
  pthread_mutex_unlock(&pool.mu);
  pthread_mutex_unlock(&pool_run);
}

/* ---- matmul ---- */
/* v16f is 16 outputs' partial sums side by side: the packed kernel keeps, for each of hs_dot's 16
 * lanes, one vector across 16 weight rows. GCC lowers it to the target's vectors (4 SSE/NEON
 * registers, 2 AVX2, 1 AVX-512) with the same element-wise arithmetic. */
typedef float v16f __attribute__((vector_size(64)));

void hs_pack(const float *src, uint32_t rows, uint32_t cols, float *dst) {
  for (uint32_t b = 0; b < rows / 16; b++)
    for (uint32_t c = 0; c < cols; c++)
      for (uint32_t k = 0; k < 16; k++) dst[((size_t)b * cols + c) * 16 + k] = src[((size_t)b * 16 + k) * cols + c];
}

int hs_packable(uint32_t rows, uint32_t cols) { return rows >= 16 && rows % 16 == 0 && cols % 16 == 0; }

void hs_mat_row(const hs_mat *w, uint32_t r, float *out) {
  size_t base = (size_t)r * w->cols;
  for (uint32_t c = 0; c < w->cols; c++) {
    if (w->storage == HS_MAT_F32) out[c] = w->f32[base + c];
    else if (w->storage == HS_MAT_F32_PACKED) out[c] = w->f32[((size_t)(r / 16) * w->cols + c) * 16 + r % 16];
    else if (w->storage == HS_MAT_F16) out[c] = hs_f16_to_f32(w->f16[base + c]);
    else out[c] = (float)w->i8[base + c] * w->scales[r];
  }
}

/* packed_block computes Y[i, 16b .. 16b+16) for one input row: for each of hs_dot's lanes m the sum
 * over t of W[·][16t+m]·x[16t+m] as a vector across the 16 weight rows, combined exactly as hs_dot
 * combines its lanes (V_j = (S_j + S_4+j) + (S_8+j + S_12+j), then (V0 + V1) + (V2 + V3)). */
static inline __attribute__((always_inline)) void packed_block(const float *P, const float *x, int cols, float *y) {
  v16f V[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) {
    v16f A = {0}, B = {0}, C = {0}, D = {0}, w;
    for (int t = 0; t < cols; t += 16) {
      memcpy(&w, P + (size_t)(t + j) * 16, 64);
      A += w * x[t + j];
      memcpy(&w, P + (size_t)(t + 4 + j) * 16, 64);
      B += w * x[t + 4 + j];
      memcpy(&w, P + (size_t)(t + 8 + j) * 16, 64);
      C += w * x[t + 8 + j];
      memcpy(&w, P + (size_t)(t + 12 + j) * 16, 64);
      D += w * x[t + 12 + j];
    }
    V[j] = (A + B) + (C + D);
  }
  v16f o = (V[0] + V[1]) + (V[2] + V[3]);
  memcpy(y, &o, 64);
}

typedef struct {
  const hs_mat *w;
  const float *x;
  int n, ldx;
  float *y;
  int ldy;
} mm_job;

#if defined(__x86_64__) && !defined(HS_NO_CLONES)
#define HS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HS_CLONES
#endif

/* packed_task computes blocks [b0, b1) of 16 weight rows for every input row. */
HS_CLONES static void packed_task(void *p, int b0, int b1) {
  const mm_job *j = p;
  int cols = (int)j->w->cols;
  for (int b = b0; b < b1; b++) {
    const float *P = j->w->f32 + (size_t)b * 16 * cols;
    for (int i = 0; i < j->n; i++) packed_block(P, j->x + (size_t)i * j->ldx, cols, j->y + (size_t)i * j->ldy + (size_t)b * 16);
  }
}

/* rows_task computes weight rows [r0, r1) one at a time (converted from f16/int8 storage into a
 * float32 row), each against every input row. */
static void rows_task(void *p, int r0, int r1) {
  const mm_job *j = p;
  const hs_mat *w = j->w;
  int cols = (int)w->cols;
  float *tmp = w->storage == HS_MAT_F32 ? NULL : malloc(sizeof(float) * (size_t)cols);
  if (w->storage != HS_MAT_F32 && !tmp) abort();
  for (int r = r0; r < r1; r++) {
    const float *row;
    if (w->storage == HS_MAT_F32) row = w->f32 + (size_t)r * cols;
    else if (w->storage == HS_MAT_F16) {
      /* The magnitude bits shifted into a float32 and scaled by 2^112 give every finite f16 (normal
       * and subnormal) exactly; weights are never inf/NaN. Blocks of 16 vectorise. */
      const uint16_t *h = w->f16 + (size_t)r * cols;
      int i = 0;
      for (; i + 16 <= cols; i += 16)
        for (int k = 0; k < 16; k++) {
          uint32_t x = h[i + k], b = (x & 0x7fffu) << 13;
          float f;
          memcpy(&f, &b, 4);
          f *= 0x1p112f;
          memcpy(&b, &f, 4);
          b |= (x & 0x8000u) << 16;
          memcpy(&tmp[i + k], &b, 4);
        }
      for (; i < cols; i++) tmp[i] = hs_f16_table[h[i]];
      row = tmp;
    } else {
      const int8_t *q = w->i8 + (size_t)r * cols;
      float s = w->scales[r];
      int c = 0;
      for (; c + 16 <= cols; c += 16)
        for (int k = 0; k < 16; k++) tmp[c + k] = (float)q[c + k] * s;
      for (; c < cols; c++) tmp[c] = (float)q[c] * s;
      row = tmp;
    }
    for (int i = 0; i < j->n; i++) j->y[(size_t)i * j->ldy + r] = hs_dot(row, j->x + (size_t)i * j->ldx, cols);
  }
  free(tmp);
}

void hs_matmul(const hs_mat *w, const float *x, int n, int ldx, float *y, int ldy) {
  if (n <= 0) return;
  hs_f16_init();
  mm_job j = {w, x, n, ldx, y, ldy};
  double work = (double)w->rows * w->cols * n;
  if (w->storage == HS_MAT_F32_PACKED) hs_parallel_for((int)(w->rows / 16), work, packed_task, &j);
  else hs_parallel_for((int)w->rows, work, rows_task, &j);
}
