/* hs_pte.c - execution of the ExecuTorch static-llama graphs prefill_forward / kv_forward
 * (docs/executorch-pte.md §3; FORMAT.md "ExecuTorch graphs"). float32 arithmetic, the shared forward pass. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_scratch.h"
#include "hs_io.h"
#include "hs_pte.h"
#include "qnn_abi.h"

/* A dequantised mask value at or below this blocks its column exactly: exp(-100) is below
 * float32's smallest normal, so such a column's softmax weight vanishes in the real graph too. */
#define ET_BLOCKED (-100.0f)

static uint32_t efail(uint32_t code, char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return code;
}

/* inv_freq with Llama-3 scaling (a factor of 1 leaves plain RoPE) or LongRoPE's divisors, in double like the
 * reference. */
static void inv_freq(const hs_desc *d, double *out) {
  int hd = (int)d->head_dim;
  if (d->flags & HS_FLAG_LONGROPE) {
    for (int i = 0; i < hd / 2; i++) out[i] = 1.0 / ((double)d->rope_ext[i] * pow((double)d->rope_theta, (double)(2 * i) / hd));
    return;
  }
  double orig = d->rope_orig, lo = d->rope_lo, hi = d->rope_hi, factor = d->rope_factor;
  double low_wave = orig / lo, high_wave = orig / hi;
  for (int i = 0; i < hd / 2; i++) {
    double f = 1.0 / pow((double)d->rope_theta, (double)(2 * i) / hd), wave = 2 * M_PI / f;
    if (wave < high_wave) out[i] = f;
    else if (wave > low_wave) out[i] = f / factor;
    else {
      double smooth = (orig / wave - lo) / (hi - lo);
      out[i] = (1 - smooth) * f / factor + smooth * f;
    }
  }
}

/* g_lg is the logits scratch of calls whose output is not float32 or whose live rows are not the
 * leading ones; kept across calls (its pages are faulted in once). Executes are serialised by
 * graphExecute's lock, so one buffer serves them all. */
static float *g_lg;
static size_t g_lg_cap;

static float *lg_scratch(size_t n) {
  if (n <= g_lg_cap) return g_lg;
  float *p = realloc(g_lg, sizeof(float) * n);
  if (!p) return NULL;
  g_lg = p;
  g_lg_cap = n;
  return p;
}

/* poison_rows poisons rows i of an [outer, AR, inner] tensor that are not live (dead[i]), as runs. */
static void poison_rows(const hs_tensor *t, void *p, int outer, int AR, int inner, const unsigned char *dead) {
  for (int o = 0; o < outer; o++)
    for (int i = 0; i < AR;) {
      if (!dead[i]) { i++; continue; }
      int e = i;
      while (e < AR && dead[e]) e++;
      hs_poison(t, p, ((size_t)o * AR + i) * inner, (size_t)(e - i) * inner);
      i = e;
    }
}

/* The logits output is the largest (AR × vocabulary): poisoning all its padding rows at every call
 * would cost more than computing the rows that carry work. g_pois remembers, per output buffer, the
 * rows this library last left poisoned; a call re-poisons only the others. A host that writes into an
 * output buffer itself, or frees and reuses it, must be forgotten: memDeRegister and contextFree call
 * hs_et_forget. Executes are serialised by graphExecute's lock. */
#define POIS_BUFS 16
static struct {
  void *p;
  int ar;
  unsigned char *rows;
} g_pois[POIS_BUFS];
static int g_pois_next;

void hs_et_forget(void) {
  for (int i = 0; i < POIS_BUFS; i++) {
    free(g_pois[i].rows);
    g_pois[i].p = NULL;
    g_pois[i].rows = NULL;
  }
}

/* pois_rows returns the poisoned-rows record of buffer p (AR rows), all clear for a new one (which
 * drops records of p under another row count: a graph of another window shares the buffer); NULL
 * without memory. */
static unsigned char *pois_rows(void *p, int AR) {
  for (int i = 0; i < POIS_BUFS; i++)
    if (g_pois[i].p == p && g_pois[i].ar == AR) return g_pois[i].rows;
  for (int i = 0; i < POIS_BUFS; i++) /* another graph's view of the same buffer wrote into it */
    if (g_pois[i].p == p) {
      free(g_pois[i].rows);
      g_pois[i].p = NULL;
      g_pois[i].rows = NULL;
    }
  int i = g_pois_next++ % POIS_BUFS;
  unsigned char *r = calloc((size_t)AR, 1);
  if (!r) return NULL;
  free(g_pois[i].rows);
  g_pois[i].p = p;
  g_pois[i].ar = AR;
  g_pois[i].rows = r;
  return r;
}

/* poison_logits poisons the dead rows of a logits buffer that are not poisoned already and records
 * which rows are. */
static void poison_logits(const hs_tensor *t, void *p, int AR, int V, const unsigned char *dead) {
  unsigned char *done = pois_rows(p, AR), *todo = malloc((size_t)AR);
  if (!done || !todo) {
    poison_rows(t, p, 1, AR, V, dead);
    free(todo);
    return;
  }
  for (int i = 0; i < AR; i++) todo[i] = dead[i] && !done[i];
  poison_rows(t, p, 1, AR, V, todo);
  memcpy(done, dead, (size_t)AR);
  free(todo);
}

/* store_rows stores the nl compacted rows of src ([nl, inner]) at rows live[a] of an [AR, inner]
 * tensor. */
static void store_rows(const hs_tensor *t, void *p, int nl, const int *live, int inner, const float *src) {
  for (int a = 0; a < nl;) {
    int e = a + 1;
    while (e < nl && live[e] == live[e - 1] + 1) e++; /* a run of consecutive live rows */
    hs_store(t, p, (size_t)live[a] * inner, (size_t)(e - a) * inner, src + (size_t)a * inner);
    a = e;
  }
}

/* et_call is one hs_et_run's state: the graph and its buffers, the model's sizes, and the work
 * arrays of its steps (rows compacted to the live ones after et_inputs). */
typedef struct {
  const hs_model *m;
  const hs_graph *g;
  hs_et_io io;
  void **in, **out;
  char *err;
  size_t n;
  int AR, S, CL, H, HD, half, NKV, KVD, L, V;
  float *x, *y, *cs, *sn, *ch, *shh, *mask, *smask, *pmask, *kbuf;
  int *open, *live, nl, npast; /* the past slots any row opens (npast), the live rows (nl) */
  unsigned char *opens, *dead;
  float **nk, **nv, **pk, **pv;
  double *inv;
} et_call;

static uint32_t et_oom(et_call *c) {
  return efail(QNN_COMMON_ERROR_MEM_ALLOC, c->err, c->n, "graph %s: out of memory", c->g->name);
}

/* et_alloc takes the call's work arrays from the scratch. */
static int et_alloc(et_call *c) {
  size_t AR = (size_t)c->AR, L = (size_t)c->L, half = (size_t)c->half;
  c->x = hs_scratch_calloc(AR * c->H, sizeof(float)), c->y = hs_scratch_calloc(AR * c->H, sizeof(float));
  c->cs = hs_scratch_calloc(AR * c->HD, sizeof(float)), c->sn = hs_scratch_calloc(AR * c->HD, sizeof(float));
  c->ch = hs_scratch_calloc(AR * half, sizeof(float)), c->shh = hs_scratch_calloc(AR * half, sizeof(float));
  c->mask = hs_scratch_calloc(AR * c->CL, sizeof(float)), c->smask = hs_scratch_calloc(AR * AR, sizeof(float));
  c->pmask = hs_scratch_calloc(AR * c->S + 1, sizeof(float));
  c->kbuf = hs_scratch_calloc((size_t)c->KVD * (c->S > c->AR ? c->S : c->AR) + 1, sizeof(float));
  c->open = hs_scratch_calloc((size_t)c->S + 1, sizeof(int)), c->live = hs_scratch_calloc(AR, sizeof(int));
  c->opens = hs_scratch_calloc(AR, 1), c->dead = hs_scratch_calloc(AR, 1);
  c->nk = hs_scratch_calloc(L, sizeof(float *)), c->nv = hs_scratch_calloc(L, sizeof(float *));
  c->pk = hs_scratch_calloc(L, sizeof(float *)), c->pv = hs_scratch_calloc(L, sizeof(float *));
  c->inv = hs_scratch_calloc(half, sizeof(double));
  return c->x && c->y && c->cs && c->sn && c->ch && c->shh && c->mask && c->smask && c->pmask && c->kbuf && c->open &&
         c->live && c->opens && c->dead && c->nk && c->nv && c->pk && c->pv && c->inv;
}

/* et_check_ids checks the first shard's tokens and positions. */
static uint32_t et_check_ids(et_call *c) {
  const int32_t *tok = c->in[c->io.tokens], *pos = c->in[c->io.pos];
  for (int i = 0; i < c->AR; i++) {
    if (tok[i] < 0 || tok[i] >= c->V)
      return efail(QNN_GRAPH_ERROR_INVALID_TENSOR, c->err, c->n, "graph %s: tokens[%d] = %d is outside the vocabulary (%d)",
                   c->g->name, i, tok[i], c->V);
    if (pos[i] < 0 || pos[i] >= c->CL)
      return efail(QNN_GRAPH_ERROR_INVALID_TENSOR, c->err, c->n, "graph %s: input_pos[%d] = %d is outside [0, %d)",
                   c->g->name, i, pos[i], c->CL);
  }
  return 0;
}

/* et_mask reads the mask, dequantised through the tensor's own scale/offset and added to the
 * scores. Column j < S is cache slot j; column S + c is this call's row c. A row that opens nothing
 * is padding (hs_live): it is not computed and its outputs are poisoned. 0, or -1 out of memory. */
static int et_mask(et_call *c) {
  int AR = c->AR, CL = c->CL, S = c->S;
  hs_load(&c->g->in[c->io.mask], c->in[c->io.mask], 0, (size_t)AR * CL, c->mask);
  for (int i = 0; i < AR; i++)
    for (int j = 0; j < CL; j++) {
      float *v = &c->mask[(size_t)i * CL + j];
      if (*v <= ET_BLOCKED || isnan(*v)) *v = -INFINITY;
      else c->opens[i] = 1;
    }
  for (int i = 0; i < AR; i++)
    for (int col = 0; col < AR; col++) c->smask[(size_t)i * AR + col] = c->mask[(size_t)i * CL + S + col];
  c->nl = hs_live(AR, c->opens, c->smask, c->live);
  if (c->nl < 0) return -1;
  for (int i = 0; i < AR; i++) c->dead[i] = 1;
  for (int a = 0; a < c->nl; a++) c->dead[c->live[a]] = 0;
  c->npast = 0;
  for (int j = 0; j < S; j++) {
    int o = 0;
    for (int i = 0; i < AR && !o; i++) o = c->mask[(size_t)i * CL + j] != -INFINITY;
    if (o) c->open[c->npast++] = j;
  }
  for (int i = 0; i < AR; i++)
    for (int p = 0; p < c->npast; p++) c->pmask[(size_t)i * c->npast + p] = c->mask[(size_t)i * CL + c->open[p]];
  return 0;
}

/* et_inputs sets the hidden state and the RoPE tables: looked up and computed (first shard; under
 * LongRoPE cos and sin times its attention factor) or carried in (later shards); then compacts the
 * rows to the live ones. */
static void et_inputs(et_call *c) {
  const hs_desc *d = &c->m->d;
  int half = c->half;
  if (c->io.first) {
    const int32_t *tok = c->in[c->io.tokens], *pos = c->in[c->io.pos];
    double af = (d->flags & HS_FLAG_LONGROPE) ? (double)d->rope_factor : 1.0;
    for (int a = 0; a < c->nl; a++) {
      int i = c->live[a];
      hs_mat_row(&c->m->embed, (uint32_t)tok[i], c->x + (size_t)i * c->H);
      hs_embed_scale(c->m, c->x + (size_t)i * c->H, (size_t)c->H);
      for (int j = 0; j < half; j++) {
        double ang = (double)pos[i] * c->inv[j];
        c->ch[(size_t)i * half + j] = (float)(cos(ang) * af);
        c->shh[(size_t)i * half + j] = (float)(sin(ang) * af);
      }
    }
  } else {
    hs_load(&c->g->in[c->io.h], c->in[c->io.h], 0, (size_t)c->AR * c->H, c->x);
    hs_load(&c->g->in[c->io.cos], c->in[c->io.cos], 0, (size_t)c->AR * half, c->ch);
    hs_load(&c->g->in[c->io.sin], c->in[c->io.sin], 0, (size_t)c->AR * half, c->shh);
  }
  for (int i = 0; i < c->AR; i++)
    hs_rope_row(c->cs + (size_t)i * c->HD, c->sn + (size_t)i * c->HD, c->ch + (size_t)i * half, c->shh + (size_t)i * half, half);
  hs_compact(c->AR, c->nl, c->live, c->x, c->H, c->cs, c->sn, c->HD, c->pmask, c->npast, c->smask);
}

/* et_past gathers the caches of the opened slots: K is [1,n_kv,hd,S] (transposed), V [1,n_kv,S,hd].
 * 0, or -1 out of memory. */
static int et_past(et_call *c) {
  int S = c->S, KVD = c->KVD, HD = c->HD, npast = c->npast;
  for (int l = 0; l < c->L; l++) {
    c->nk[l] = hs_scratch_alloc(sizeof(float) * ((size_t)c->nl * KVD + 1));
    c->nv[l] = hs_scratch_alloc(sizeof(float) * ((size_t)c->nl * KVD + 1));
    c->pk[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KVD + 1));
    c->pv[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KVD + 1));
    if (!c->nk[l] || !c->nv[l] || !c->pk[l] || !c->pv[l]) return -1;
    if (!npast) continue;
    hs_load(&c->g->in[c->io.k[l]], c->in[c->io.k[l]], 0, (size_t)KVD * S, c->kbuf);
    hs_gather_k(c->pk[l], c->kbuf, KVD, S, c->open, npast);
    hs_load(&c->g->in[c->io.v[l]], c->in[c->io.v[l]], 0, (size_t)KVD * S, c->kbuf);
    for (int h = 0; h < c->NKV; h++)
      for (int p = 0; p < npast; p++)
        memcpy(c->pv[l] + (size_t)p * KVD + h * HD, c->kbuf + ((size_t)h * S + c->open[p]) * HD, sizeof(float) * HD);
  }
  return 0;
}

/* et_outputs writes the outputs in graph order: V0, K0, V1, K1, ..., then logits (the forced token,
 * when given, made the greatest) or (hidden_state, cos, sin); the live rows' values, the padding
 * rows' poison. 0, or -1 out of memory. */
static int et_outputs(et_call *c, long forced) {
  const hs_graph *g = c->g;
  void **out = c->out;
  int AR = c->AR, L = c->L, KVD = c->KVD, V = c->V, nl = c->nl;
  for (int l = 0; l < L; l++) {
    hs_scatter_k(c->kbuf, c->nk[l], KVD, AR, c->live, nl);
    hs_store(&g->out[2 * l + 1], out[2 * l + 1], 0, (size_t)KVD * AR, c->kbuf);
    poison_rows(&g->out[2 * l + 1], out[2 * l + 1], KVD, AR, 1, c->dead);
    hs_scatter_v(c->kbuf, c->nv[l], c->NKV, c->HD, AR, c->live, nl);
    hs_store(&g->out[2 * l], out[2 * l], 0, (size_t)KVD * AR, c->kbuf);
    poison_rows(&g->out[2 * l], out[2 * l], c->NKV, AR, c->HD, c->dead);
  }
  if (!c->io.last) {
    store_rows(&g->out[2 * L], out[2 * L], nl, c->live, c->H, c->x);
    poison_rows(&g->out[2 * L], out[2 * L], 1, AR, c->H, c->dead);
    hs_store(&g->out[2 * L + 1], out[2 * L + 1], 0, (size_t)AR * c->half, c->ch);
    hs_store(&g->out[2 * L + 2], out[2 * L + 2], 0, (size_t)AR * c->half, c->shh);
    poison_rows(&g->out[2 * L + 1], out[2 * L + 1], 1, AR, c->half, c->dead);
    poison_rows(&g->out[2 * L + 2], out[2 * L + 2], 1, AR, c->half, c->dead);
    return 0;
  }
  const hs_tensor *lt = &g->out[2 * L];
  /* Float32 logits whose live rows lead are computed in place; others through the scratch. */
  int direct = lt->dtype == QNN_DATATYPE_FLOAT_32 && (nl == 0 || c->live[nl - 1] == nl - 1);
  float *lg = direct ? out[2 * L] : lg_scratch((size_t)nl * V + 1);
  if (!lg) return -1;
  hs_lmhead_n(c->m, c->y, nl, lg);
  if (forced >= 0 && forced < V)
    for (int a = 0; a < nl; a++) {
      float *r = lg + (size_t)a * V, mx = r[0];
      for (int t = 1; t < V; t++) if (r[t] > mx) mx = r[t];
      r[forced] = mx + 16.0f;
    }
  if (!direct) store_rows(lt, out[2 * L], nl, c->live, V, lg);
  poison_logits(lt, out[2 * L], AR, V, c->dead);
  return 0;
}

/* et_steps runs a bound call: checks, mask, inputs, the caches, the forward pass, the outputs. */
static uint32_t et_steps(et_call *c, long forced) {
  if (!et_alloc(c)) return et_oom(c);
  if (c->io.first) {
    inv_freq(&c->m->d, c->inv);
    uint32_t code = et_check_ids(c);
    if (code) return code;
  }
  if (et_mask(c)) return et_oom(c);
  et_inputs(c);
  if (et_past(c)) return et_oom(c);
  hs_forward(c->m, c->nl, c->x, c->cs, c->sn, c->npast, c->pmask, c->pk, c->pv, c->smask, c->y, c->nk, c->nv);
  return et_outputs(c, forced) ? et_oom(c) : 0;
}

uint32_t hs_et_run(const hs_model *m, const hs_graph *g, void **in, void **out, long forced, char *err, size_t n) {
  const hs_desc *d = &m->d;
  et_call c = {.m = m, .g = g, .in = in, .out = out, .err = err, .n = n};
  if (hs_et_bind(d, g, &c.io, err, n)) return QNN_GRAPH_ERROR_INVALID_TENSOR;
  c.AR = (int)c.io.ar, c.S = (int)c.io.s, c.CL = (int)c.io.cl, c.H = (int)d->hidden, c.HD = (int)d->head_dim;
  c.half = c.HD / 2, c.NKV = (int)d->kv_heads, c.KVD = c.NKV * c.HD, c.L = (int)d->layers, c.V = (int)d->vocab;
  size_t sm = hs_scratch_mark();
  uint32_t code = et_steps(&c, forced);
  hs_scratch_release(sm);
  hs_et_io_free(&c.io);
  return code;
}
