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

uint32_t hs_et_run(const hs_model *m, const hs_graph *g, void **in, void **out, long forced, char *err, size_t n) {
  const hs_desc *d = &m->d;
  hs_et_io io;
  if (hs_et_bind(d, g, &io, err, n)) return QNN_GRAPH_ERROR_INVALID_TENSOR;
  int AR = (int)io.ar, S = (int)io.s, CL = (int)io.cl, H = (int)d->hidden, HD = (int)d->head_dim, half = HD / 2;
  int NKV = (int)d->kv_heads, KVD = NKV * HD, L = (int)d->layers, V = (int)d->vocab;
  uint32_t code = 0;
  size_t sm = hs_scratch_mark();
  float *x = hs_scratch_calloc((size_t)AR * H, sizeof(float)), *y = hs_scratch_calloc((size_t)AR * H, sizeof(float));
  float *cs = hs_scratch_calloc((size_t)AR * HD, sizeof(float)), *sn = hs_scratch_calloc((size_t)AR * HD, sizeof(float));
  float *ch = hs_scratch_calloc((size_t)AR * half, sizeof(float)), *shh = hs_scratch_calloc((size_t)AR * half, sizeof(float));
  float *mask = hs_scratch_calloc((size_t)AR * CL, sizeof(float)), *smask = hs_scratch_calloc((size_t)AR * AR, sizeof(float));
  float *pmask = hs_scratch_calloc((size_t)AR * S + 1, sizeof(float)), *kbuf = hs_scratch_calloc((size_t)KVD * (S > AR ? S : AR) + 1, sizeof(float));
  int *open = hs_scratch_calloc((size_t)S + 1, sizeof(int)), *live = hs_scratch_calloc((size_t)AR, sizeof(int));
  unsigned char *opens = hs_scratch_calloc((size_t)AR, 1), *dead = hs_scratch_calloc((size_t)AR, 1);
  float **nk = hs_scratch_calloc((size_t)L, sizeof(float *)), **nv = hs_scratch_calloc((size_t)L, sizeof(float *));
  float **pk = hs_scratch_calloc((size_t)L, sizeof(float *)), **pv = hs_scratch_calloc((size_t)L, sizeof(float *));
  double *inv = hs_scratch_calloc((size_t)half, sizeof(double));
  if (!x || !y || !cs || !sn || !ch || !shh || !mask || !smask || !pmask || !kbuf || !open || !live || !opens || !dead || !nk ||
      !nv || !pk || !pv || !inv)
    goto oom;

  /* Hidden state and RoPE tables: looked up (first shard) or carried in (later shards). */
  if (io.first) {
    const int32_t *tok = in[io.tokens], *pos = in[io.pos];
    inv_freq(d, inv);
    for (int i = 0; i < AR; i++) {
      if (tok[i] < 0 || tok[i] >= V) {
        code = efail(QNN_GRAPH_ERROR_INVALID_TENSOR, err, n, "graph %s: tokens[%d] = %d is outside the vocabulary (%d)",
                     g->name, i, tok[i], V);
        goto done;
      }
      if (pos[i] < 0 || pos[i] >= CL) {
        code = efail(QNN_GRAPH_ERROR_INVALID_TENSOR, err, n, "graph %s: input_pos[%d] = %d is outside [0, %d)", g->name, i,
                     pos[i], CL);
        goto done;
      }
    }
  }

  /* Mask, dequantised through the tensor's own scale/offset and added to the scores.
   * Column j < S is cache slot j; column S + c is this call's row c. A row that opens nothing is
   * padding (hs_live): it is not computed and its outputs are poisoned. */
  hs_load(&g->in[io.mask], in[io.mask], 0, (size_t)AR * CL, mask);
  for (int i = 0; i < AR; i++)
    for (int j = 0; j < CL; j++) {
      float *v = &mask[(size_t)i * CL + j];
      if (*v <= ET_BLOCKED || isnan(*v)) *v = -INFINITY;
      else opens[i] = 1;
    }
  for (int i = 0; i < AR; i++)
    for (int c = 0; c < AR; c++) smask[(size_t)i * AR + c] = mask[(size_t)i * CL + S + c];
  int nl = hs_live(AR, opens, smask, live);
  if (nl < 0) goto oom;
  for (int i = 0; i < AR; i++) dead[i] = 1;
  for (int a = 0; a < nl; a++) dead[live[a]] = 0;
  int npast = 0;
  for (int j = 0; j < S; j++) {
    int o = 0;
    for (int i = 0; i < AR && !o; i++) o = mask[(size_t)i * CL + j] != -INFINITY;
    if (o) open[npast++] = j;
  }
  for (int i = 0; i < AR; i++)
    for (int p = 0; p < npast; p++) pmask[(size_t)i * npast + p] = mask[(size_t)i * CL + open[p]];

  if (io.first) {
    const int32_t *tok = in[io.tokens], *pos = in[io.pos];
    double af = (d->flags & HS_FLAG_LONGROPE) ? (double)d->rope_factor : 1.0; /* LongRoPE's attention factor */
    for (int a = 0; a < nl; a++) {
      int i = live[a];
      hs_mat_row(&m->embed, (uint32_t)tok[i], x + (size_t)i * H);
      hs_embed_scale(m, x + (size_t)i * H, (size_t)H);
      for (int j = 0; j < half; j++) {
        double ang = (double)pos[i] * inv[j];
        ch[(size_t)i * half + j] = (float)(cos(ang) * af);
        shh[(size_t)i * half + j] = (float)(sin(ang) * af);
      }
    }
  } else {
    hs_load(&g->in[io.h], in[io.h], 0, (size_t)AR * H, x);
    hs_load(&g->in[io.cos], in[io.cos], 0, (size_t)AR * half, ch);
    hs_load(&g->in[io.sin], in[io.sin], 0, (size_t)AR * half, shh);
  }
  for (int i = 0; i < AR; i++)
    hs_rope_row(cs + (size_t)i * HD, sn + (size_t)i * HD, ch + (size_t)i * half, shh + (size_t)i * half, half);
  hs_compact(AR, nl, live, x, H, cs, sn, HD, pmask, npast, smask);

  /* Caches of the opened slots: K is [1,n_kv,hd,S] (transposed), V [1,n_kv,S,hd]. */
  for (int l = 0; l < L; l++) {
    nk[l] = hs_scratch_alloc(sizeof(float) * ((size_t)nl * KVD + 1));
    nv[l] = hs_scratch_alloc(sizeof(float) * ((size_t)nl * KVD + 1));
    pk[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KVD + 1));
    pv[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KVD + 1));
    if (!nk[l] || !nv[l] || !pk[l] || !pv[l]) goto oom;
    if (!npast) continue;
    hs_load(&g->in[io.k[l]], in[io.k[l]], 0, (size_t)KVD * S, kbuf);
    hs_gather_k(pk[l], kbuf, KVD, S, open, npast);
    hs_load(&g->in[io.v[l]], in[io.v[l]], 0, (size_t)KVD * S, kbuf);
    for (int h = 0; h < NKV; h++)
      for (int p = 0; p < npast; p++)
        memcpy(pv[l] + (size_t)p * KVD + h * HD, kbuf + ((size_t)h * S + open[p]) * HD, sizeof(float) * HD);
  }

  hs_forward(m, nl, x, cs, sn, npast, pmask, pk, pv, smask, y, nk, nv);

  /* Outputs in graph order: V0, K0, V1, K1, ..., then logits or (hidden_state, cos, sin); the live
   * rows' values, the padding rows' poison. */
  for (int l = 0; l < L; l++) {
    hs_scatter_k(kbuf, nk[l], KVD, AR, live, nl);
    hs_store(&g->out[2 * l + 1], out[2 * l + 1], 0, (size_t)KVD * AR, kbuf);
    poison_rows(&g->out[2 * l + 1], out[2 * l + 1], KVD, AR, 1, dead);
    hs_scatter_v(kbuf, nv[l], NKV, HD, AR, live, nl);
    hs_store(&g->out[2 * l], out[2 * l], 0, (size_t)KVD * AR, kbuf);
    poison_rows(&g->out[2 * l], out[2 * l], NKV, AR, HD, dead);
  }
  if (io.last) {
    const hs_tensor *lt = &g->out[2 * L];
    /* Float32 logits whose live rows lead are computed in place; others through the scratch. */
    int direct = lt->dtype == QNN_DATATYPE_FLOAT_32 && (nl == 0 || live[nl - 1] == nl - 1);
    float *lg = direct ? out[2 * L] : lg_scratch((size_t)nl * V + 1);
    if (!lg) goto oom;
    hs_lmhead_n(m, y, nl, lg);
    if (forced >= 0 && forced < V)
      for (int a = 0; a < nl; a++) {
        float *r = lg + (size_t)a * V, mx = r[0];
        for (int t = 1; t < V; t++) if (r[t] > mx) mx = r[t];
        r[forced] = mx + 16.0f;
      }
    if (!direct) store_rows(lt, out[2 * L], nl, live, V, lg);
    poison_logits(lt, out[2 * L], AR, V, dead);
  } else {
    store_rows(&g->out[2 * L], out[2 * L], nl, live, H, x);
    poison_rows(&g->out[2 * L], out[2 * L], 1, AR, H, dead);
    hs_store(&g->out[2 * L + 1], out[2 * L + 1], 0, (size_t)AR * half, ch);
    hs_store(&g->out[2 * L + 2], out[2 * L + 2], 0, (size_t)AR * half, shh);
    poison_rows(&g->out[2 * L + 1], out[2 * L + 1], 1, AR, half, dead);
    poison_rows(&g->out[2 * L + 2], out[2 * L + 2], 1, AR, half, dead);
  }
  goto done;
oom:
  code = efail(QNN_COMMON_ERROR_MEM_ALLOC, err, n, "graph %s: out of memory", g->name);
done:
  hs_scratch_release(sm);
  hs_et_io_free(&io);
  return code;
}
