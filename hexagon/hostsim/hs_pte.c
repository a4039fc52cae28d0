/* hs_pte.c - execution of the ExecuTorch static-llama graphs prefill_forward / kv_forward
 * (docs/executorch-pte.md §3; FORMAT.md "ExecuTorch graphs"). float32 arithmetic, the shared forward pass. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* row_of copies row r of weight w into out (cols values). */
static void row_of(const hs_mat *w, uint32_t r, float *out) {
  size_t base = (size_t)r * w->cols;
  for (uint32_t c = 0; c < w->cols; c++) {
    if (w->storage == HS_W_F32) out[c] = w->f32[base + c];
    else if (w->storage == HS_W_F16) out[c] = hs_f16_to_f32(w->f16[base + c]);
    else out[c] = (float)w->i8[base + c] * w->scales[r];
  }
}

/* inv_freq with Llama-3 scaling (a factor of 1 leaves plain RoPE), in double like the reference. */
static void inv_freq(const hs_desc *d, double *out) {
  int hd = (int)d->head_dim;
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

uint32_t hs_et_run(const hs_model *m, const hs_graph *g, void **in, void **out, long forced, char *err, size_t n) {
  const hs_desc *d = &m->d;
  hs_et_io io;
  if (hs_et_bind(d, g, &io, err, n)) return QNN_GRAPH_ERROR_INVALID_TENSOR;
  int AR = (int)io.ar, S = (int)io.s, CL = (int)io.cl, H = (int)d->hidden, HD = (int)d->head_dim, half = HD / 2;
  int NKV = (int)d->kv_heads, KVD = NKV * HD, L = (int)d->layers, V = (int)d->vocab;
  uint32_t code = 0;
  float *x = calloc((size_t)AR * H, sizeof(float)), *y = calloc((size_t)AR * H, sizeof(float));
  float *cs = calloc((size_t)AR * HD, sizeof(float)), *sn = calloc((size_t)AR * HD, sizeof(float));
  float *ch = calloc((size_t)AR * half, sizeof(float)), *shh = calloc((size_t)AR * half, sizeof(float));
  float *mask = calloc((size_t)AR * CL, sizeof(float)), *smask = calloc((size_t)AR * AR, sizeof(float));
  float *pmask = calloc((size_t)AR * S + 1, sizeof(float)), *kbuf = calloc((size_t)KVD * (S > AR ? S : AR) + 1, sizeof(float));
  int *open = calloc((size_t)S + 1, sizeof(int));
  float **nk = calloc((size_t)L, sizeof(float *)), **nv = calloc((size_t)L, sizeof(float *));
  float **pk = calloc((size_t)L, sizeof(float *)), **pv = calloc((size_t)L, sizeof(float *));
  double *inv = calloc((size_t)half, sizeof(double));
  float *lg = NULL;
  if (!x || !y || !cs || !sn || !ch || !shh || !mask || !smask || !pmask || !kbuf || !open || !nk || !nv || !pk || !pv || !inv)
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
      row_of(&m->embed, (uint32_t)tok[i], x + (size_t)i * H);
      for (int j = 0; j < half; j++) {
        double a = (double)pos[i] * inv[j];
        ch[(size_t)i * half + j] = (float)cos(a);
        shh[(size_t)i * half + j] = (float)sin(a);
      }
    }
  } else {
    hs_load(&g->in[io.h], in[io.h], 0, (size_t)AR * H, x);
    hs_load(&g->in[io.cos], in[io.cos], 0, (size_t)AR * half, ch);
    hs_load(&g->in[io.sin], in[io.sin], 0, (size_t)AR * half, shh);
  }
  for (int i = 0; i < AR; i++)
    for (int j = 0; j < half; j++) {
      cs[(size_t)i * HD + j] = cs[(size_t)i * HD + j + half] = ch[(size_t)i * half + j];
      sn[(size_t)i * HD + j] = sn[(size_t)i * HD + j + half] = shh[(size_t)i * half + j];
    }

  /* Mask, dequantised through the tensor's own scale/offset and added to the scores.
   * Column j < S is cache slot j; column S + c is this call's row c. */
  hs_load(&g->in[io.mask], in[io.mask], 0, (size_t)AR * CL, mask);
  for (size_t i = 0; i < (size_t)AR * CL; i++)
    if (mask[i] <= ET_BLOCKED || isnan(mask[i])) mask[i] = -INFINITY;
  int npast = 0;
  for (int j = 0; j < S; j++) {
    int o = 0;
    for (int i = 0; i < AR && !o; i++) o = mask[(size_t)i * CL + j] != -INFINITY;
    if (o) open[npast++] = j;
  }
  for (int i = 0; i < AR; i++) {
    for (int p = 0; p < npast; p++) pmask[(size_t)i * npast + p] = mask[(size_t)i * CL + open[p]];
    for (int c = 0; c < AR; c++) smask[(size_t)i * AR + c] = mask[(size_t)i * CL + S + c];
  }

  /* Caches of the opened slots: K is [1,n_kv,hd,S] (transposed), V [1,n_kv,S,hd]. */
  for (int l = 0; l < L; l++) {
    nk[l] = malloc(sizeof(float) * (size_t)AR * KVD);
    nv[l] = malloc(sizeof(float) * (size_t)AR * KVD);
    pk[l] = malloc(sizeof(float) * ((size_t)npast * KVD + 1));
    pv[l] = malloc(sizeof(float) * ((size_t)npast * KVD + 1));
    if (!nk[l] || !nv[l] || !pk[l] || !pv[l]) goto oom;
    if (!npast) continue;
    hs_load(&g->in[io.k[l]], in[io.k[l]], 0, (size_t)KVD * S, kbuf);
    for (int h = 0; h < NKV; h++)
      for (int dd = 0; dd < HD; dd++)
        for (int p = 0; p < npast; p++)
          pk[l][(size_t)p * KVD + h * HD + dd] = kbuf[(size_t)(h * HD + dd) * S + open[p]];
    hs_load(&g->in[io.v[l]], in[io.v[l]], 0, (size_t)KVD * S, kbuf);
    for (int h = 0; h < NKV; h++)
      for (int p = 0; p < npast; p++)
        memcpy(pv[l] + (size_t)p * KVD + h * HD, kbuf + ((size_t)h * S + open[p]) * HD, sizeof(float) * HD);
  }

  hs_forward(m, AR, x, cs, sn, npast, pmask, pk, pv, smask, y, nk, nv);

  /* Outputs in graph order: V0, K0, V1, K1, ..., then logits or (hidden_state, cos, sin). */
  for (int l = 0; l < L; l++) {
    for (int h = 0; h < NKV; h++)
      for (int dd = 0; dd < HD; dd++)
        for (int i = 0; i < AR; i++) kbuf[(size_t)(h * HD + dd) * AR + i] = nk[l][(size_t)i * KVD + h * HD + dd];
    hs_store(&g->out[2 * l + 1], out[2 * l + 1], 0, (size_t)KVD * AR, kbuf);
    for (int h = 0; h < NKV; h++)
      for (int i = 0; i < AR; i++)
        memcpy(kbuf + ((size_t)h * AR + i) * HD, nv[l] + (size_t)i * KVD + h * HD, sizeof(float) * HD);
    hs_store(&g->out[2 * l], out[2 * l], 0, (size_t)KVD * AR, kbuf);
  }
  if (io.last) {
    lg = malloc(sizeof(float) * (size_t)AR * V);
    if (!lg) goto oom;
    hs_lmhead_n(m, y, AR, lg);
    if (forced >= 0 && forced < V)
      for (int i = 0; i < AR; i++) {
        float *r = lg + (size_t)i * V, mx = r[0];
        for (int t = 1; t < V; t++) if (r[t] > mx) mx = r[t];
        r[forced] = mx + 16.0f;
      }
    hs_store(&g->out[2 * L], out[2 * L], 0, (size_t)AR * V, lg);
  } else {
    hs_store(&g->out[2 * L], out[2 * L], 0, (size_t)AR * H, x);
    hs_store(&g->out[2 * L + 1], out[2 * L + 1], 0, (size_t)AR * half, ch);
    hs_store(&g->out[2 * L + 2], out[2 * L + 2], 0, (size_t)AR * half, shh);
  }
  goto done;
oom:
  code = efail(QNN_COMMON_ERROR_MEM_ALLOC, err, n, "graph %s: out of memory", g->name);
done:
  for (int l = 0; nk && nv && pk && pv && l < L; l++) { free(nk[l]); free(nv[l]); free(pk[l]); free(pv[l]); }
  free(nk); free(nv); free(pk); free(pv);
  free(x); free(y); free(cs); free(sn); free(ch); free(shh); free(mask); free(smask); free(pmask); free(kbuf);
  free(open); free(inv); free(lg);
  hs_et_io_free(&io);
  return code;
}
