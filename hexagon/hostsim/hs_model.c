/* hs_model.c - weights and the Llama forward pass (float32 arithmetic; kernels in hs_kernels.c). */
#include "hs_scratch.h"
#include "hs_model.h"
#include "hs_genie.h"
#include "hs_kernels.h"
#include "hs_pte.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)HS_MAT_F32 == (int)HS_W_F32 && (int)HS_MAT_F16 == (int)HS_W_F16 && (int)HS_MAT_INT8 == (int)HS_W_INT8, "hs_mat storage codes");

static void vec_of(const hs_mat *w, float *out) {
  for (uint32_t c = 0; c < w->cols; c++) {
    if (w->storage == HS_W_F32) out[c] = w->f32[c];
    else if (w->storage == HS_W_F16) out[c] = hs_f16_table[w->f16[c]];
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

/* add_bias adds b to each of the n rows of x [n][w] (nothing when b is absent). */
static void add_bias(float *x, const hs_mat *b, int n, int w) {
  if (!b->cols) return;
  float *bv = malloc(sizeof(float) * (size_t)w);
  vec_of(b, bv);
  for (int i = 0; i < n; i++)
    for (int c = 0; c < w; c++) x[(size_t)i * w + c] += bv[c];
  free(bv);
}

/* head_norm applies RMSNorm with weight w over each head (D values) of the n·heads heads in x,
 * in place, with the arithmetic of rmsnorm (nothing when w is absent). */
static void head_norm(float *x, const hs_mat *w, float eps, int nheads, int D) {
  if (!w->cols) return;
  for (int h = 0; h < nheads; h++) rmsnorm(x + (size_t)h * D, w, eps, D, x + (size_t)h * D);
}

static void rope(float *v, const float *cos, const float *sin, int D) {
  int h = D / 2;
  for (int d = 0; d < h; d++) {
    float a = v[d], b = v[d + h];
    v[d] = a * cos[d] - b * sin[d];
    v[d + h] = b * cos[d + h] + a * sin[d + h];
  }
}

/* residual adds a layer branch o to the residual stream x: scaled by Granite's residual
 * multiplier, else exactly x + o. */
static void residual(float *x, const float *o, size_t n, const hs_desc *d) {
  if (d->flags & HS_FLAG_SCALES)
    for (size_t i = 0; i < n; i++) x[i] += o[i] * d->res_mult;
  else
    for (size_t i = 0; i < n; i++) x[i] += o[i];
}

void hs_embed_scale(const hs_model *m, float *x, size_t n) {
  if (m->d.flags & HS_FLAG_SCALES)
    for (size_t i = 0; i < n; i++) x[i] *= m->d.emb_mult;
}

/* logit_scale divides n logits by Granite's logits scaling (nothing without it). */
static void logit_scale(const hs_model *m, float *lg, size_t n) {
  if (m->d.flags & HS_FLAG_SCALES)
    for (size_t i = 0; i < n; i++) lg[i] /= m->d.logit_scale;
}

typedef struct {
  const hs_model *m;
  int AR, npast;
  const float *q, *k, *v, *pmask, *smask, *pk, *pv;
  float *att;
} att_job;

static void att_task(void *p, int s, int e) {
  const att_job *j = p;
  const hs_desc *d = &j->m->d;
  int D = (int)d->head_dim, nh = (int)d->heads, group = (int)(d->heads / d->kv_heads);
  int qd = nh * D, kvd = (int)d->kv_heads * D;
  float scale = d->att_mult > 0 ? d->att_mult : 1.0f / sqrtf((float)D);
  float *sc = malloc(sizeof(float) * (size_t)(j->npast + j->AR));
  for (int t = s; t < e; t++) {
    int i = t / nh, h = t % nh, kh = h / group;
    const float *q = j->q + (size_t)i * qd + (size_t)h * D;
    float mx = -INFINITY;
    for (int p = 0; p < j->npast; p++) {
      float mk = j->pmask[(size_t)i * j->npast + p];
      sc[p] = mk == -INFINITY ? -INFINITY : hs_dot(q, j->pk + (size_t)p * kvd + (size_t)kh * D, D) * scale + mk;
      if (sc[p] > mx) mx = sc[p];
    }
    for (int c = 0; c < j->AR; c++) {
      float mk = j->smask[(size_t)i * j->AR + c];
      float v = mk == -INFINITY ? -INFINITY : hs_dot(q, j->k + (size_t)c * kvd + (size_t)kh * D, D) * scale + mk;
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
  size_t sm = hs_scratch_mark();
  float *h = hs_scratch_alloc(sizeof(float) * (size_t)AR * H);
  float *q = hs_scratch_alloc(sizeof(float) * (size_t)AR * qd);
  float *att = hs_scratch_alloc(sizeof(float) * (size_t)AR * qd);
  float *o = hs_scratch_alloc(sizeof(float) * (size_t)AR * big);
  float *g = hs_scratch_alloc(sizeof(float) * (size_t)AR * F);
  float *u = hs_scratch_alloc(sizeof(float) * (size_t)AR * F);
  for (uint32_t l = 0; l < d->layers; l++) {
    const hs_layer *L = &m->layers[l];
    for (int i = 0; i < AR; i++) rmsnorm(x + (size_t)i * H, &L->in_norm, d->eps, H, h + (size_t)i * H);
    hs_matmul(&L->q, h, AR, H, q, qd);
    hs_matmul(&L->k, h, AR, H, newk[l], kvd);
    hs_matmul(&L->v, h, AR, H, newv[l], kvd);
    add_bias(q, &L->qb, AR, qd);
    add_bias(newk[l], &L->kb, AR, kvd);
    add_bias(newv[l], &L->vb, AR, kvd);
    head_norm(q, &L->qn, d->eps, AR * (int)d->heads, D);
    head_norm(newk[l], &L->kn, d->eps, AR * (int)d->kv_heads, D);
    for (int i = 0; i < AR; i++) {
      for (int hh = 0; hh < (int)d->heads; hh++) rope(q + (size_t)i * qd + (size_t)hh * D, cos + (size_t)i * D, sin + (size_t)i * D, D);
      for (int hh = 0; hh < (int)d->kv_heads; hh++)
        rope(newk[l] + (size_t)i * kvd + (size_t)hh * D, cos + (size_t)i * D, sin + (size_t)i * D, D);
    }
    att_job aj = {m, AR, npast, q, newk[l], newv[l], pmask, smask, npast ? pk[l] : NULL, npast ? pv[l] : NULL, att};
    hs_parallel_for(AR * (int)d->heads, (double)AR * d->heads * (npast + AR) * D * 2, att_task, &aj);
    hs_matmul(&L->o, att, AR, qd, o, H);
    residual(x, o, (size_t)AR * H, d);
    for (int i = 0; i < AR; i++) rmsnorm(x + (size_t)i * H, &L->post_norm, d->eps, H, h + (size_t)i * H);
    hs_matmul(&L->gate, h, AR, H, g, F);
    hs_matmul(&L->up, h, AR, H, u, F);
    for (size_t i = 0; i < (size_t)AR * F; i++) {
      float a = g[i];
      g[i] = a / (1.0f + expf(-a)) * u[i];
    }
    hs_matmul(&L->down, g, AR, F, o, H);
    residual(x, o, (size_t)AR * H, d);
  }
  if (m->norm.cols) /* absent in an ExecuTorch shard that is not the last */
    for (int i = 0; i < AR; i++) rmsnorm(x + (size_t)i * H, &m->norm, d->eps, H, y + (size_t)i * H);
  hs_scratch_release(sm);
}

int hs_live(int AR, const unsigned char *opens, const float *smask, int *live) {
  unsigned char *is = malloc((size_t)AR + 1);
  if (!is) return -1;
  for (int i = 0; i < AR; i++) is[i] = opens[i];
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = 0; i < AR; i++)
      for (int c = 0; is[i] && c < AR; c++)
        if (!is[c] && smask[(size_t)i * AR + c] != -INFINITY) is[c] = 1, changed = 1;
  }
  int n = 0;
  for (int i = 0; i < AR; i++)
    if (is[i]) live[n++] = i;
  free(is);
  return n;
}

void hs_compact(int AR, int nl, const int *live, float *x, int H, float *cs, float *sn, int D, float *pmask, int npast,
                float *smask) {
  for (int a = 0; a < nl; a++) {
    int i = live[a];
    if (i == a) continue;
    memmove(x + (size_t)a * H, x + (size_t)i * H, sizeof(float) * (size_t)H);
    memmove(cs + (size_t)a * D, cs + (size_t)i * D, sizeof(float) * (size_t)D);
    memmove(sn + (size_t)a * D, sn + (size_t)i * D, sizeof(float) * (size_t)D);
    if (npast) memmove(pmask + (size_t)a * npast, pmask + (size_t)i * npast, sizeof(float) * (size_t)npast);
  }
  for (int a = 0; a < nl; a++) /* reads at or after what it writes: in place */
    for (int b = 0; b < nl; b++) smask[(size_t)a * nl + b] = smask[(size_t)live[a] * AR + live[b]];
}

void hs_lmhead(const hs_model *m, const float *x, float *logits) { hs_lmhead_n(m, x, 1, logits); }
void hs_lmhead_n(const hs_model *m, const float *x, int n, float *logits) {
  hs_matmul(&m->lm, x, n, (int)m->d.hidden, logits, (int)m->d.vocab);
  logit_scale(m, logits, (size_t)n * m->d.vocab);
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
      for (uint64_t i = 0; i < n; i++) dst[i] = hs_f16_table[(uint16_t)(s[2 * i] | s[2 * i + 1] << 8)];
    }
    out->storage = HS_W_F32;
    out->f32 = dst;
    float *row = hs_packable(w->rows, w->cols) ? malloc(sizeof(float) * 16 * w->cols) : NULL;
    if (row) { /* the matmuls' layout (without memory for it, row-major); rows are read with hs_mat_row */
      for (uint32_t b = 0; b < w->rows / 16; b++) {
        memcpy(row, dst + (size_t)b * 16 * w->cols, sizeof(float) * 16 * w->cols);
        hs_pack(row, 16, w->cols, dst + (size_t)b * 16 * w->cols);
      }
      free(row);
      out->storage = HS_MAT_F32_PACKED;
    }
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

/* The family's extra layer tensors, in hs_layer's qb, kb, vb, qn, kn order, with the flag each needs. */
static const char *extra_names[5] = {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                                     "self_attn.q_norm.weight", "self_attn.k_norm.weight"};
static const uint32_t extra_flags[5] = {HS_FLAG_QKVBIAS, HS_FLAG_QKVBIAS, HS_FLAG_QKVBIAS, HS_FLAG_QKNORM, HS_FLAG_QKNORM};

static const char *layer_names[9] = {"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                     "self_attn.o_proj", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj",
                                     "mlp.down_proj"};

int hs_model_load(const uint8_t *buf, uint64_t size, hs_model *m, char *err, size_t errlen) {
  hs_f16_init();
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
    for (uint32_t l = 0; l < d->layers; l++)
      for (int j = 0; j < 5; j++)
        if (d->flags & extra_flags[j]) {
          snprintf(nm, sizeof nm, "model.layers.%u.%s", l, extra_names[j]);
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
      hs_mat *extra[5] = {&m->layers[l].qb, &m->layers[l].kb, &m->layers[l].vb, &m->layers[l].qn, &m->layers[l].kn};
      for (int j = 0; j < 5; j++)
        if (d->flags & extra_flags[j]) {
          snprintf(nm, sizeof nm, "model.layers.%u.%s", l, extra_names[j]);
          load_mat(&ld, nm, extra[j]);
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

void hs_gather_k(float *dst, const float *kc, int KVD, int S, const int *open, int npast) {
  for (int c = 0; c < KVD; c++)
    for (int p = 0; p < npast; p++) dst[(size_t)p * KVD + c] = kc[(size_t)c * S + open[p]];
}

void hs_scatter_k(float *dst, const float *rows, int KVD, int AR, const int *at, int n) {
  for (int c = 0; c < KVD; c++)
    for (int a = 0; a < n; a++) dst[(size_t)c * AR + at[a]] = rows[(size_t)a * KVD + c];
}

void hs_scatter_v(float *dst, const float *rows, int NKV, int HD, int AR, const int *at, int n) {
  for (int h = 0; h < NKV; h++)
    for (int a = 0; a < n; a++)
      memcpy(dst + ((size_t)h * AR + at[a]) * HD, rows + (size_t)a * NKV * HD + (size_t)h * HD, sizeof(float) * HD);
}

void hs_rope_row(float *cs, float *sn, const float *ch, const float *sh, int half) {
  for (int j = 0; j < half; j++) {
    cs[j] = cs[j + half] = ch[j];
    sn[j] = sn[j + half] = sh[j];
  }
}
