/* hs_genie.c - execution of the Genie graphs (FORMAT.md "Genie graphs"): part 1 looks input_ids up in
 * the embedding, later parts run their layers over the hidden state with the host's attention mask and
 * cos/sin rows, the last part ends in the final norm and the lm-head. float32 arithmetic, the shared
 * forward pass. As strict as the real runtime's contract: a mask code other than attend/masked, a cos/sin
 * row that is not a rotation, an input id outside the vocabulary is an error. A row whose mask attends
 * nothing is padding: it is not computed and its outputs are poisoned (all-ones codes, NaN floats). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_scratch.h"
#include "hs_genie.h"
#include "hs_io.h"
#include "qnn_abi.h"

static uint32_t gfail(uint32_t code, char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return code;
}

static void row_of(const hs_mat *w, uint32_t r, float *out) { hs_mat_row(w, r, out); } /* any storage, packed too */

/* poison overwrites elements [i, i+n) of tensor t's buffer p with values nobody should read:
 * NaN floats, all-ones codes. */
static void poison(const hs_tensor *t, void *p, size_t i, size_t n) {
  size_t es = hs_dtype_bytes(t->dtype);
  uint8_t *b = (uint8_t *)p + es * i;
  if (t->dtype != QNN_DATATYPE_FLOAT_32 && t->dtype != QNN_DATATYPE_FLOAT_16) {
    memset(b, 0xff, es * n);
    return;
  }
  if (!n) return;
  if (t->dtype == QNN_DATATYPE_FLOAT_32) { float v = NAN; memcpy(b, &v, 4); }
  else { uint16_t v = 0x7e00; memcpy(b, &v, 2); }
  for (size_t done = 1; done < n;) { /* doubling copies */
    size_t k = done < n - done ? done : n - done;
    memcpy(b + es * done, b, es * k);
    done += k;
  }
}

/* store is hs_store with a fast path for UFIXED_POINT_16 (the w4a16 logits: 128,256 per row), which
 * quantises with the reciprocal of the scale in float: a code may differ by one at a rounding tie. */
static void store(const hs_tensor *t, void *p, size_t start, size_t n, const float *src) {
  if (t->dtype != QNN_DATATYPE_UFIXED_POINT_16) {
    hs_store(t, p, start, n, src);
    return;
  }
  uint16_t *d = (uint16_t *)p + start;
  float inv = 1.0f / t->scale, off = (float)t->offset;
  for (size_t i = 0; i < n; i++) {
    float q = src[i] * inv - off;
    q = q < 0 ? 0 : q > 65535 ? 65535 : q;
    d[i] = (uint16_t)(q + 0.5f);
  }
}

/* mask_decode reads the attention mask strictly: UFIXED_POINT_16 codes 65535 (attend) or 0 (masked),
 * as Genie writes them; float 0.0 (attend) or <= -1000 (masked). 0 = attend, -INFINITY = masked. */
static int mask_decode(const hs_graph *g, const hs_tensor *t, const void *p, size_t count, float *dst, char *err,
                       size_t n) {
  if (t->dtype == QNN_DATATYPE_UFIXED_POINT_16) {
    const uint8_t *b = p;
    for (size_t i = 0; i < count; i++) {
      uint16_t q;
      memcpy(&q, b + 2 * i, 2);
      if (q == 65535) dst[i] = 0;
      else if (q == 0) dst[i] = -INFINITY;
      else {
        gfail(0, err, n, "graph %s: attention_mask element %zu is code %u: Genie writes 65535 (attend) or 0 (masked)",
              g->name, i, q);
        return -1;
      }
    }
    return 0;
  }
  hs_load(t, p, 0, count, dst);
  for (size_t i = 0; i < count; i++) {
    if (dst[i] == 0) continue;
    if (dst[i] <= -1000.0f) { dst[i] = -INFINITY; continue; }
    gfail(0, err, n, "graph %s: attention_mask element %zu is %g: want 0.0 (attend) or <= -1000 (masked)", g->name, i,
          (double)dst[i]);
    return -1;
  }
  return 0;
}

size_t hs_genie_scratch(const hs_model *m, const hs_graph *g) {
  const hs_desc *d = &m->d;
  hs_genie_io io;
  char err[256];
  if (hs_genie_bind(d, g, &io, err, sizeof err)) return 0;
  size_t A = io.ar, A1 = A + 1, P = io.p, CL = io.cl, E = d->hidden, HD = d->head_dim, KVD = d->kv_heads * HD;
  size_t L = d->layers, V = d->vocab, qd = d->heads * HD, F = d->ffn, big = qd > E ? qd : E;
  size_t n;
  if (io.first) n = A * E;
  else if (!L) n = 2 * A * E + A * V;
  else
    n = A * CL + 2 * A + A * HD + P + 1 + 2 * A1 * E + 2 * A1 * HD + A1 * A1 + A1 * P + 1 + KVD * P + 1 + KVD * A + A * E + 1 +
        8 * (L + 1) + L * (2 * A1 * KVD + 2 * (P * KVD + 1)) + A * (E + 2 * qd + big + 2 * F) + (io.last ? A1 * V : 0);
  hs_genie_io_free(&io);
  return 4 * n + 64 * (40 + 4 * L); /* floats (pointers counted as two), and each allocation's alignment */
}

uint32_t hs_genie_run(const hs_model *m, const hs_graph *g, void **in, void **out, char *err, size_t n) {
  const hs_desc *d = &m->d;
  hs_genie_io io;
  if (hs_genie_bind(d, g, &io, err, n)) return QNN_GRAPH_ERROR_INVALID_TENSOR;
  int AR = (int)io.ar, P = (int)io.p, CL = (int)io.cl, E = (int)d->hidden, HD = (int)d->head_dim, half = HD / 2;
  int NKV = (int)d->kv_heads, KVD = NKV * HD, L = (int)d->layers, V = (int)d->vocab;
  uint32_t code = 0;
  size_t sm = hs_scratch_mark();
  float *x = NULL, *y = NULL, *cs = NULL, *sn = NULL, *ch = NULL, *shh = NULL, *mask = NULL, *smask = NULL;
  float *pmask = NULL, *kbuf = NULL, *obuf = NULL, *lg = NULL;
  int *open = NULL, *live = NULL, *lr = NULL;
  float **nk = NULL, **nv = NULL, **pk = NULL, **pv = NULL;

  if (io.first) { /* the embedding part: every row (it has no mask to tell padding) */
    const int32_t *ids = in[io.ids];
    x = hs_scratch_alloc(sizeof(float) * (size_t)AR * E);
    if (!x) goto oom;
    for (int i = 0; i < AR; i++) {
      if (ids[i] < 0 || ids[i] >= V) {
        code = gfail(QNN_GRAPH_ERROR_INVALID_TENSOR, err, n, "graph %s: input_ids[%d] = %d is outside the vocabulary (%d)",
                     g->name, i, ids[i], V);
        goto done;
      }
      row_of(&m->embed, (uint32_t)ids[i], x + (size_t)i * E);
    }
    hs_embed_scale(m, x, (size_t)AR * E);
    hs_store(&g->out[io.hout], out[io.hout], 0, (size_t)AR * E, x);
    goto done;
  }

  if (!L) { /* the head-only part: every row (it has no mask either) */
    x = hs_scratch_alloc(sizeof(float) * (size_t)AR * E);
    y = hs_scratch_alloc(sizeof(float) * (size_t)AR * E);
    lg = hs_scratch_alloc(sizeof(float) * (size_t)AR * V);
    if (!x || !y || !lg) goto oom;
    hs_load(&g->in[io.hin], in[io.hin], 0, (size_t)AR * E, x);
    hs_forward(m, AR, x, NULL, NULL, 0, NULL, NULL, NULL, NULL, y, NULL, NULL);
    hs_lmhead_n(m, y, AR, lg);
    store(&g->out[io.logits], out[io.logits], 0, (size_t)AR * V, lg);
    goto done;
  }
  mask = hs_scratch_alloc(sizeof(float) * (size_t)AR * CL);
  live = hs_scratch_calloc((size_t)AR, sizeof(int));
  lr = hs_scratch_alloc(sizeof(int) * (size_t)AR);
  ch = hs_scratch_alloc(sizeof(float) * (size_t)AR * half);
  shh = hs_scratch_alloc(sizeof(float) * (size_t)AR * half);
  open = hs_scratch_alloc(sizeof(int) * ((size_t)P + 1));
  if (!mask || !live || !lr || !ch || !shh || !open) goto oom;
  if (mask_decode(g, &g->in[io.mask], in[io.mask], (size_t)AR * CL, mask, err, n)) {
    code = QNN_GRAPH_ERROR_INVALID_TENSOR;
    goto done;
  }
  int nl = 0;
  for (int i = 0; i < AR; i++) {
    for (int j = 0; j < CL && !live[i]; j++) live[i] = mask[(size_t)i * CL + j] == 0;
    if (live[i]) lr[nl++] = i;
  }
  hs_load(&g->in[io.cos], in[io.cos], 0, (size_t)AR * half, ch);
  hs_load(&g->in[io.sin], in[io.sin], 0, (size_t)AR * half, shh);
  /* cos and sin are a rotation, scaled under LongRoPE (header flag 8) by its attention factor. */
  float nominal = (d->flags & HS_FLAG_LONGROPE) ? d->rope_factor : 1.0f, bound = nominal * 1.001f, r2 = nominal * nominal;
  for (int i = 0; i < AR; i++)
    for (int j = 0; j < half; j++) {
      float c = ch[(size_t)i * half + j], s = shh[(size_t)i * half + j];
      if (!(fabsf(c) <= bound) || !(fabsf(s) <= bound)) {
        code = gfail(QNN_GRAPH_ERROR_INVALID_TENSOR, err, n, "graph %s: row %d: cos/sin[%d] = %g/%g is outside [-%g, %g]",
                     g->name, i, j, (double)c, (double)s, (double)nominal, (double)nominal);
        goto done;
      }
      if (live[i] && fabsf(c * c + s * s - r2) > 0.02f * r2) {
        code = gfail(QNN_GRAPH_ERROR_INVALID_TENSOR, err, n,
                     "graph %s: row %d: cos/sin[%d] = %g/%g is not a rotation (cos^2 + sin^2 = %g, want %g)", g->name, i, j,
                     (double)c, (double)s, (double)(c * c + s * s), (double)r2);
        goto done;
      }
    }
  /* A live row may attend this call's rows only where they are live too. */
  for (int r = 0; r < nl; r++)
    for (int c = 0; c < AR; c++)
      if (!live[c] && mask[(size_t)lr[r] * CL + P + c] == 0) {
        code = gfail(QNN_GRAPH_ERROR_INVALID_TENSOR, err, n, "graph %s: row %d attends column %d, the new entry of padding row %d",
                     g->name, lr[r], P + c, c);
        goto done;
      }
  int npast = 0;
  for (int j = 0; j < P; j++) {
    int o = 0;
    for (int r = 0; r < nl && !o; r++) o = mask[(size_t)lr[r] * CL + j] == 0;
    if (o) open[npast++] = j;
  }
  size_t nl1 = (size_t)nl + 1;
  x = hs_scratch_alloc(sizeof(float) * nl1 * E);
  y = hs_scratch_alloc(sizeof(float) * nl1 * E);
  cs = hs_scratch_alloc(sizeof(float) * nl1 * HD);
  sn = hs_scratch_alloc(sizeof(float) * nl1 * HD);
  smask = hs_scratch_alloc(sizeof(float) * nl1 * nl1);
  pmask = hs_scratch_alloc(sizeof(float) * (nl1 * npast + 1));
  kbuf = hs_scratch_alloc(sizeof(float) * ((size_t)KVD * P + 1));
  obuf = hs_scratch_alloc(sizeof(float) * ((size_t)KVD * AR + (size_t)AR * E + 1));
  nk = hs_scratch_calloc((size_t)L + 1, sizeof(float *));
  nv = hs_scratch_calloc((size_t)L + 1, sizeof(float *));
  pk = hs_scratch_calloc((size_t)L + 1, sizeof(float *));
  pv = hs_scratch_calloc((size_t)L + 1, sizeof(float *));
  if (!x || !y || !cs || !sn || !smask || !pmask || !kbuf || !obuf || !nk || !nv || !pk || !pv) goto oom;
  for (int r = 0; r < nl; r++) {
    int i = lr[r];
    hs_load(&g->in[io.hin], in[io.hin], (size_t)i * E, (size_t)E, x + (size_t)r * E);
    hs_rope_row(cs + (size_t)r * HD, sn + (size_t)r * HD, ch + (size_t)i * half, shh + (size_t)i * half, half);
    for (int p = 0; p < npast; p++) pmask[(size_t)r * npast + p] = mask[(size_t)i * CL + open[p]];
    for (int c = 0; c < nl; c++) smask[(size_t)r * nl + c] = mask[(size_t)i * CL + P + lr[c]];
  }
  for (int l = 0; l < L; l++) {
    nk[l] = hs_scratch_alloc(sizeof(float) * nl1 * KVD);
    nv[l] = hs_scratch_alloc(sizeof(float) * nl1 * KVD);
    pk[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KVD + 1));
    pv[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KVD + 1));
    if (!nk[l] || !nv[l] || !pk[l] || !pv[l]) goto oom;
    if (!npast || !nl) continue;
    /* past_key [H,1,d,P] (transposed), past_value [H,1,P,d] */
    hs_load(&g->in[io.kin[l]], in[io.kin[l]], 0, (size_t)KVD * P, kbuf);
    hs_gather_k(pk[l], kbuf, KVD, P, open, npast);
    for (int h = 0; h < NKV; h++)
      for (int p = 0; p < npast; p++)
        hs_load(&g->in[io.vin[l]], in[io.vin[l]], ((size_t)h * P + open[p]) * HD, (size_t)HD, pv[l] + (size_t)p * KVD + h * HD);
  }
  if (nl) hs_forward(m, nl, x, cs, sn, npast, pmask, pk, pv, smask, y, nk, nv);

  /* Outputs: only this call's rows; padding rows poisoned. */
  for (int l = 0; l < L; l++) {
    const hs_tensor *kt = &g->out[io.kout[l]], *vt = &g->out[io.vout[l]];
    memset(obuf, 0, sizeof(float) * (size_t)KVD * AR);
    hs_scatter_k(obuf, nk[l], KVD, AR, lr, nl);
    hs_store(kt, out[io.kout[l]], 0, (size_t)KVD * AR, obuf);
    memset(obuf, 0, sizeof(float) * (size_t)KVD * AR);
    hs_scatter_v(obuf, nv[l], NKV, HD, AR, lr, nl);
    hs_store(vt, out[io.vout[l]], 0, (size_t)KVD * AR, obuf);
    for (int i = 0; i < AR; i++) {
      if (live[i]) continue;
      for (int h = 0; h < NKV; h++) {
        for (int dd = 0; dd < HD; dd++) poison(kt, out[io.kout[l]], (size_t)(h * HD + dd) * AR + i, 1);
        poison(vt, out[io.vout[l]], ((size_t)h * AR + i) * HD, (size_t)HD);
      }
    }
  }
  const hs_tensor *ot = &g->out[io.last ? io.logits : io.hout];
  size_t w = io.last ? (size_t)V : (size_t)E;
  if (io.last) {
    lg = hs_scratch_alloc(sizeof(float) * nl1 * V);
    if (!lg) goto oom;
    if (nl) hs_lmhead_n(m, y, nl, lg);
  }
  for (int r = 0; r < nl; r++)
    store(ot, out[io.last ? io.logits : io.hout], (size_t)lr[r] * w, w, io.last ? lg + (size_t)r * V : x + (size_t)r * E);
  /* A padding row's logits (V wide) are poisoned every 64th entry from entry 0: writing all of them
   * (32 MB per AR-128 call) would cost hostsim more than the call's floor; a runner sampling such a
   * row still reads NaN or the highest code there. */
  for (int i = 0; i < AR; i++)
    if (!live[i]) {
      if (!io.last) poison(ot, out[io.hout], (size_t)i * w, w);
      else if (ot->dtype == QNN_DATATYPE_UFIXED_POINT_16) {
        uint16_t *d = (uint16_t *)out[io.logits] + (size_t)i * w;
        for (size_t k = 0; k < w; k += 64) d[k] = 0xffff;
      } else
        for (size_t k = 0; k < w; k += 64) poison(ot, out[io.logits], (size_t)i * w + k, 1);
    }
  goto done;
oom:
  code = gfail(QNN_COMMON_ERROR_MEM_ALLOC, err, n, "graph %s: out of memory", g->name);
done:
  hs_scratch_release(sm);
  hs_genie_io_free(&io);
  return code;
}
