/* hs_model.c - weights and the Llama forward pass (float32 arithmetic), threaded matmuls. */
#include "hs_model.h"
#include "hs_genie.h"
#include "hs_pte.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- float16 ---- */
static float f16_table[65536];
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
static void f16_init(void) {
  for (uint32_t i = 0; i < 65536; i++) f16_table[i] = f16_slow((uint16_t)i);
}
float hs_f16_to_f32(uint16_t h) {
  pthread_once(&f16_once, f16_init);
  return f16_table[h];
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
typedef void (*hs_task_fn)(void *arg, int start, int end);
static struct {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  int nthreads, started;
  unsigned gen;
  int pending;
  hs_task_fn fn;
  void *arg;
  int n;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0, 0, 0, 0, 0, 0};
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

/* parallel_for splits [0,n) over the pool when work (a cost estimate) is large enough. */
static void parallel_for(int n, double work, hs_task_fn fn, void *arg) {
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

/* ---- matmul: Y[n, rows] = X[n, cols] · Wᵀ ---- */
/* HS_HOT marks the hot loops (an AVX2 target_clones variant measured no faster here). */
#define HS_HOT
/* dot uses GCC vector extensions (SSE2 on x86-64, NEON on arm64) with four independent sums. */
typedef float v4f __attribute__((vector_size(16)));
static inline float dot(const float *a, const float *b, int n) {
  v4f s0 = {0, 0, 0, 0}, s1 = s0, s2 = s0, s3 = s0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    v4f a0, a1, a2, a3, b0, b1, b2, b3;
    memcpy(&a0, a + i, 16); memcpy(&a1, a + i + 4, 16); memcpy(&a2, a + i + 8, 16); memcpy(&a3, a + i + 12, 16);
    memcpy(&b0, b + i, 16); memcpy(&b1, b + i + 4, 16); memcpy(&b2, b + i + 8, 16); memcpy(&b3, b + i + 12, 16);
    s0 += a0 * b0; s1 += a1 * b1; s2 += a2 * b2; s3 += a3 * b3;
  }
  for (; i + 4 <= n; i += 4) {
    v4f a0, b0;
    memcpy(&a0, a + i, 16); memcpy(&b0, b + i, 16);
    s0 += a0 * b0;
  }
  v4f s = (s0 + s1) + (s2 + s3);
  float r = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; i++) r += a[i] * b[i];
  return r;
}

/* f16row converts float16 weights to float32 without a table: the magnitude bits shifted into a
 * float32 and scaled by 2^112 give every finite f16 (normal and subnormal) exactly; weights are
 * never inf/NaN. Blocks of 16 let the compiler vectorise at -O2. */
static inline void f16row(const uint16_t *h, float *out, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; k++) {
      uint32_t x = h[i + k], b = (x & 0x7fffu) << 13;
      float f;
      memcpy(&f, &b, 4);
      f *= 0x1p112f;
      memcpy(&b, &f, 4);
      b |= (x & 0x8000u) << 16;
      memcpy(&out[i + k], &b, 4);
    }
  for (; i < n; i++) out[i] = f16_table[h[i]];
}

typedef struct {
  const hs_mat *w;
  const float *x;
  int n, ldx;
  float *y;
  int ldy;
} mm_job;

HS_HOT static void mm_task(void *p, int r0, int r1) {
  const mm_job *j = p;
  const hs_mat *w = j->w;
  int cols = (int)w->cols;
  float *tmp = NULL;
  if (w->storage != HS_W_F32) tmp = malloc(sizeof(float) * (size_t)cols);
  for (int r = r0; r < r1; r++) {
    const float *row;
    if (w->storage == HS_W_F32) row = w->f32 + (size_t)r * cols;
    else if (w->storage == HS_W_F16) {
      f16row(w->f16 + (size_t)r * cols, tmp, cols);
      row = tmp;
    } else {
      const int8_t *q = w->i8 + (size_t)r * cols;
      float s = w->scales[r];
      int c = 0;
      for (; c + 16 <= cols; c += 16) /* fixed-size blocks vectorise at -O2 */
        for (int k = 0; k < 16; k++) tmp[c + k] = (float)q[c + k] * s;
      for (; c < cols; c++) tmp[c] = (float)q[c] * s;
      row = tmp;
    }
    for (int i = 0; i < j->n; i++) j->y[(size_t)i * j->ldy + r] = dot(row, j->x + (size_t)i * j->ldx, cols);
  }
  free(tmp);
}

static void matmul(const hs_mat *w, const float *x, int n, int ldx, float *y, int ldy) {
  mm_job j = {w, x, n, ldx, y, ldy};
  parallel_for((int)w->rows, (double)w->rows * w->cols * n, mm_task, &j);
}

static void vec_of(const hs_mat *w, float *out) {
  for (uint32_t c = 0; c < w->cols; c++) {
    if (w->storage == HS_W_F32) out[c] = w->f32[c];
    else if (w->storage == HS_W_F16) out[c] = f16_table[w->f16[c]];
    else out[c] = (float)w->i8[c] * w->scales[0];
  }
}

static void rmsnorm(const float *x, const hs_mat *w, float eps, int n, float *out) {
  float *wv = malloc(sizeof(float) * (size_t)n);
  vec_of(w, wv);
  double ss = 0;
  for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
  float inv = (float)(1.0 / sqrt(ss / n + eps));
  for (int i = 0; i < n; i++) out[i] = x[i] * inv * wv[i];
  free(wv);
}

static void rope(float *v, const float *cos, const float *sin, int D) {
  int h = D / 2;
  for (int d = 0; d < h; d++) {
    float a = v[d], b = v[d + h];
    v[d] = a * cos[d] - b * sin[d];
    v[d + h] = b * cos[d + h] + a * sin[d + h];
  }
}

typedef struct {
  const hs_model *m;
  int AR, npast;
  const float *q, *k, *v, *pmask, *smask, *pk, *pv;
  float *att;
} att_job;

HS_HOT static void att_task(void *p, int s, int e) {
  const att_job *j = p;
  const hs_desc *d = &j->m->d;
  int D = (int)d->head_dim, nh = (int)d->heads, group = (int)(d->heads / d->kv_heads);
  int qd = nh * D, kvd = (int)d->kv_heads * D;
  float scale = 1.0f / sqrtf((float)D);
  float *sc = malloc(sizeof(float) * (size_t)(j->npast + j->AR));
  for (int t = s; t < e; t++) {
    int i = t / nh, h = t % nh, kh = h / group;
    const float *q = j->q + (size_t)i * qd + (size_t)h * D;
    float mx = -INFINITY;
    for (int p = 0; p < j->npast; p++) {
      float mk = j->pmask[(size_t)i * j->npast + p];
      sc[p] = mk == -INFINITY ? -INFINITY : dot(q, j->pk + (size_t)p * kvd + (size_t)kh * D, D) * scale + mk;
      if (sc[p] > mx) mx = sc[p];
    }
    for (int c = 0; c < j->AR; c++) {
      float mk = j->smask[(size_t)i * j->AR + c];
      float v = mk == -INFINITY ? -INFINITY : dot(q, j->k + (size_t)c * kvd + (size_t)kh * D, D) * scale + mk;
      sc[j->npast + c] = v;
      if (v > mx) mx = v;
    }
    float *o = j->att + (size_t)i * qd + (size_t)h * D;
    memset(o, 0, sizeof(float) * (size_t)D);
    if (mx == -INFINITY) continue;
    float sum = 0;
    for (int c = 0; c < j->npast + j->AR; c++) {
      if (sc[c] == -INFINITY) { sc[c] = 0; continue; }
      sc[c] = expf(sc[c] - mx);
      sum += sc[c];
    }
    float inv = 1.0f / sum;
    for (int c = 0; c < j->npast + j->AR; c++) {
      if (sc[c] == 0) continue;
      float w = sc[c] * inv;
      const float *vv = c < j->npast ? j->pv + (size_t)c * kvd + (size_t)kh * D
                                     : j->v + (size_t)(c - j->npast) * kvd + (size_t)kh * D;
      for (int dd = 0; dd < D; dd++) o[dd] += w * vv[dd];
    }
  }
  free(sc);
}

void hs_forward(const hs_model *m, int AR, float *x, const float *cos, const float *sin, int npast,
                const float *pmask, float *const *pk, float *const *pv, const float *smask, float *y, float **newk,
                float **newv) {
  const hs_desc *d = &m->d;
  int H = (int)d->hidden, D = (int)d->head_dim, qd = (int)(d->heads * d->head_dim);
  int kvd = (int)(d->kv_heads * d->head_dim), F = (int)d->ffn;
  int big = qd > H ? qd : H;
  float *h = malloc(sizeof(float) * (size_t)AR * H);
  float *q = malloc(sizeof(float) * (size_t)AR * qd);
  float *att = malloc(sizeof(float) * (size_t)AR * qd);
  float *o = malloc(sizeof(float) * (size_t)AR * big);
  float *g = malloc(sizeof(float) * (size_t)AR * F);
  float *u = malloc(sizeof(float) * (size_t)AR * F);
  for (uint32_t l = 0; l < d->layers; l++) {
    const hs_layer *L = &m->layers[l];
    for (int i = 0; i < AR; i++) rmsnorm(x + (size_t)i * H, &L->in_norm, d->eps, H, h + (size_t)i * H);
    matmul(&L->q, h, AR, H, q, qd);
    matmul(&L->k, h, AR, H, newk[l], kvd);
    matmul(&L->v, h, AR, H, newv[l], kvd);
    for (int i = 0; i < AR; i++) {
      for (int hh = 0; hh < (int)d->heads; hh++) rope(q + (size_t)i * qd + (size_t)hh * D, cos + (size_t)i * D, sin + (size_t)i * D, D);
      for (int hh = 0; hh < (int)d->kv_heads; hh++)
        rope(newk[l] + (size_t)i * kvd + (size_t)hh * D, cos + (size_t)i * D, sin + (size_t)i * D, D);
    }
    att_job aj = {m, AR, npast, q, newk[l], newv[l], pmask, smask, npast ? pk[l] : NULL, npast ? pv[l] : NULL, att};
    parallel_for(AR * (int)d->heads, (double)AR * d->heads * (npast + AR) * D * 2, att_task, &aj);
    matmul(&L->o, att, AR, qd, o, H);
    for (size_t i = 0; i < (size_t)AR * H; i++) x[i] += o[i];
    for (int i = 0; i < AR; i++) rmsnorm(x + (size_t)i * H, &L->post_norm, d->eps, H, h + (size_t)i * H);
    matmul(&L->gate, h, AR, H, g, F);
    matmul(&L->up, h, AR, H, u, F);
    for (size_t i = 0; i < (size_t)AR * F; i++) {
      float a = g[i];
      g[i] = a / (1.0f + expf(-a)) * u[i];
    }
    matmul(&L->down, g, AR, F, o, H);
    for (size_t i = 0; i < (size_t)AR * H; i++) x[i] += o[i];
  }
  if (m->norm.cols) /* absent in an ExecuTorch shard that is not the last */
    for (int i = 0; i < AR; i++) rmsnorm(x + (size_t)i * H, &m->norm, d->eps, H, y + (size_t)i * H);
  free(h); free(q); free(att); free(o); free(g); free(u);
}

void hs_lmhead(const hs_model *m, const float *x, float *logits) { matmul(&m->lm, x, 1, (int)m->d.hidden, logits, (int)m->d.vocab); }
void hs_lmhead_n(const hs_model *m, const float *x, int n, float *logits) {
  matmul(&m->lm, x, n, (int)m->d.hidden, logits, (int)m->d.vocab);
}

/* ---- loading ---- */
#define F32_CONVERT_LIMIT (1ull << 30) /* f16 weights up to 1 GiB as f32 get converted at load */

typedef struct {
  const uint8_t *buf;
  hs_model *m;
  uint8_t *cur;
  int convert;
} loader;

static int load_mat(loader *ld, const char *name, hs_mat *out) {
  const hs_weight_ref *w = hs_find_weight(&ld->m->d, name);
  if (!w) return -1;
  out->rows = w->rows;
  out->cols = w->cols;
  uint64_t n = (uint64_t)w->rows * w->cols;
  if (w->storage == HS_W_F32 || (w->storage == HS_W_F16 && ld->convert)) {
    float *dst = (float *)ld->cur;
    if (w->storage == HS_W_F32) memcpy(dst, ld->buf + w->off, n * 4);
    else {
      const uint8_t *s = ld->buf + w->off;
      for (uint64_t i = 0; i < n; i++) dst[i] = f16_table[(uint16_t)(s[2 * i] | s[2 * i + 1] << 8)];
    }
    out->storage = HS_W_F32;
    out->f32 = dst;
    ld->cur += (n * 4 + 63) & ~63ull;
  } else if (w->storage == HS_W_F16) {
    memcpy(ld->cur, ld->buf + w->off, n * 2);
    out->storage = HS_W_F16;
    out->f16 = (const uint16_t *)ld->cur;
    ld->cur += (n * 2 + 63) & ~63ull;
  } else {
    memcpy(ld->cur, ld->buf + w->soff, 4ull * w->rows);
    out->scales = (const float *)ld->cur;
    ld->cur += (4ull * w->rows + 63) & ~63ull;
    memcpy(ld->cur, ld->buf + w->off, n);
    out->i8 = (const int8_t *)ld->cur;
    out->storage = HS_W_INT8;
    ld->cur += (n + 63) & ~63ull;
  }
  return 0;
}

static uint64_t need_bytes(const hs_desc *d, const char *name, int convert) {
  const hs_weight_ref *w = hs_find_weight(d, name);
  if (!w) return 0;
  uint64_t n = (uint64_t)w->rows * w->cols;
  if (w->storage == HS_W_F32 || (w->storage == HS_W_F16 && convert)) return (n * 4 + 63) & ~63ull;
  if (w->storage == HS_W_F16) return (n * 2 + 63) & ~63ull;
  return ((n + 63) & ~63ull) + ((4ull * w->rows + 63) & ~63ull);
}

static const char *layer_names[9] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                     "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                                     "mlp.down_proj"};

int hs_model_load(const uint8_t *buf, uint64_t size, hs_model *m, char *err, size_t errlen) {
  pthread_once(&f16_once, f16_init);
  memset(m, 0, sizeof *m);
  if (hs_parse(buf, size, &m->d, err, errlen)) return -1;
  hs_desc *d = &m->d;
  for (uint32_t g = 0; g < d->ngraphs; g++) {
    if (d->graphs[g].kind == HS_KIND_LMHEAD) m->has_lm = 1;
    else m->has_layers = 1;
    if (hs_is_et(d->graphs[g].kind)) { /* the first shard embeds, the last one has the lm-head */
      hs_et_io io;
      if (hs_et_bind(d, &d->graphs[g], &io, err, errlen)) { hs_desc_free(d); return -1; }
      m->has_embed |= io.first;
      m->has_lm |= io.last;
      hs_et_io_free(&io);
    }
    if (d->graphs[g].kind == HS_KIND_GENIE) { /* part 1 embeds, the last part has the lm-head */
      hs_genie_io io;
      if (hs_genie_bind(d, &d->graphs[g], &io, err, errlen)) { hs_desc_free(d); return -1; }
      m->has_embed |= io.first;
      m->has_lm |= io.last;
      hs_genie_io_free(&io);
    }
  }
  int embed_is_lm = m->has_embed && m->has_lm && (d->flags & 1);
  const char *lmname = (d->flags & 1) ? "model.embed_tokens.weight" : "lm_head.weight";
  char nm[96];
  uint64_t f16total = 0;
  for (uint32_t i = 0; i < d->nweights; i++)
    if (d->weights[i].storage == HS_W_F16) f16total += d->weights[i].size;
  int convert = f16total * 2 <= F32_CONVERT_LIMIT;
  uint64_t total = 0;
  if (m->has_layers) {
    for (uint32_t l = 0; l < d->layers; l++)
      for (int j = 0; j < 9; j++) {
        snprintf(nm, sizeof nm, "model.layers.%u.%s.weight", l, layer_names[j]);
        total += need_bytes(d, nm, convert);
      }
    total += need_bytes(d, "model.norm.weight", convert);
  }
  if (m->has_lm) total += need_bytes(d, lmname, convert);
  if (m->has_embed && !embed_is_lm) total += need_bytes(d, "model.embed_tokens.weight", convert);
  m->mem = aligned_alloc(64, total ? total : 64);
  m->layers = calloc(d->layers ? d->layers : 1, sizeof *m->layers);
  if (!m->mem || !m->layers) {
    hs_model_free(m);
    snprintf(err, errlen, "out of memory loading %llu weight bytes", (unsigned long long)total);
    return -1;
  }
  m->mem_size = total;
  loader ld = {buf, m, m->mem, convert};
  if (m->has_layers) {
    for (uint32_t l = 0; l < d->layers; l++) {
      hs_mat *mats[9] = {&m->layers[l].in_norm, &m->layers[l].q, &m->layers[l].k, &m->layers[l].v, &m->layers[l].o,
                         &m->layers[l].post_norm, &m->layers[l].gate, &m->layers[l].up, &m->layers[l].down};
      for (int j = 0; j < 9; j++) {
        snprintf(nm, sizeof nm, "model.layers.%u.%s.weight", l, layer_names[j]);
        load_mat(&ld, nm, mats[j]);
      }
    }
    load_mat(&ld, "model.norm.weight", &m->norm);
  }
  if (m->has_lm) load_mat(&ld, lmname, &m->lm);
  if (embed_is_lm) m->embed = m->lm;
  else if (m->has_embed) load_mat(&ld, "model.embed_tokens.weight", &m->embed);
  for (uint32_t i = 0; i < d->nweights; i++) m->weight_bytes += d->weights[i].size;
  return 0;
}

void hs_model_free(hs_model *m) {
  free(m->mem);
  free(m->layers);
  hs_desc_free(&m->d);
  memset(m, 0, sizeof *m);
}
