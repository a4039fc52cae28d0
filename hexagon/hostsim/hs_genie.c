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

/* genie_call is one hs_genie_run's state: the graph and its buffers, the model's sizes, the mask,
 * cos/sin and which rows are live (attend something; the others are padding). */
typedef struct {
  const hs_model *m;
  const hs_graph *g;
  hs_genie_io io;
  void **in, **out;
  char *err;
  size_t n;
  int AR, P, CL, E, HD, half, NKV, KVD, L, V;
  float *mask, *ch, *shh; /* [AR, CL]; cos and sin [AR, half] */
  int *live, *lr, nl;     /* live[i]; the live rows lr[0..nl) */
} genie_call;

static uint32_t genie_oom(genie_call *c) {
  return gfail(QNN_COMMON_ERROR_MEM_ALLOC, c->err, c->n, "graph %s: out of memory", c->g->name);
}

/* genie_embed runs the embedding part: every row (it has no mask to tell padding). */
static uint32_t genie_embed(genie_call *c) {
  const int32_t *ids = c->in[c->io.ids];
  float *x = hs_scratch_alloc(sizeof(float) * (size_t)c->AR * c->E);
  if (!x) return genie_oom(c);
  for (int i = 0; i < c->AR; i++) {
    if (ids[i] < 0 || ids[i] >= c->V)
      return gfail(QNN_GRAPH_ERROR_INVALID_TENSOR, c->err, c->n, "graph %s: input_ids[%d] = %d is outside the vocabulary (%d)",
                   c->g->name, i, ids[i], c->V);
    row_of(&c->m->embed, (uint32_t)ids[i], x + (size_t)i * c->E);
  }
  hs_embed_scale(c->m, x, (size_t)c->AR * c->E);
  hs_store(&c->g->out[c->io.hout], c->out[c->io.hout], 0, (size_t)c->AR * c->E, x);
  return 0;
}

/* genie_head runs the head-only part: every row (it has no mask either). */
static uint32_t genie_head(genie_call *c) {
  size_t AE = (size_t)c->AR * c->E;
  float *x = hs_scratch_alloc(sizeof(float) * AE), *y = hs_scratch_alloc(sizeof(float) * AE);
  float *lg = hs_scratch_alloc(sizeof(float) * (size_t)c->AR * c->V);
  if (!x || !y || !lg) return genie_oom(c);
  hs_load(&c->g->in[c->io.hin], c->in[c->io.hin], 0, AE, x);
  hs_forward(c->m, c->AR, x, NULL, NULL, 0, NULL, NULL, NULL, NULL, y, NULL, NULL);
  hs_lmhead_n(c->m, y, c->AR, lg);
  store(&c->g->out[c->io.logits], c->out[c->io.logits], 0, (size_t)c->AR * c->V, lg);
  return 0;
}

/* genie_rows decodes the mask, finds the live rows, loads cos/sin and checks them: a rotation
 * (scaled under LongRoPE, header flag 8, by its attention factor), and no live row attending a
 * padding row's new entry. */
static uint32_t genie_rows(genie_call *c) {
  const hs_desc *d = &c->m->d;
  const hs_graph *g = c->g;
  int AR = c->AR, CL = c->CL, half = c->half;
  c->mask = hs_scratch_alloc(sizeof(float) * (size_t)AR * CL);
  c->live = hs_scratch_calloc((size_t)AR, sizeof(int));
  c->lr = hs_scratch_alloc(sizeof(int) * (size_t)AR);
  c->ch = hs_scratch_alloc(sizeof(float) * (size_t)AR * half);
  c->shh = hs_scratch_alloc(sizeof(float) * (size_t)AR * half);
  if (!c->mask || !c->live || !c->lr || !c->ch || !c->shh) return genie_oom(c);
  if (mask_decode(g, &g->in[c->io.mask], c->in[c->io.mask], (size_t)AR * CL, c->mask, c->err, c->n))
    return QNN_GRAPH_ERROR_INVALID_TENSOR;
  c->nl = 0;
  for (int i = 0; i < AR; i++) {
    for (int j = 0; j < CL && !c->live[i]; j++) c->live[i] = c->mask[(size_t)i * CL + j] == 0;
    if (c->live[i]) c->lr[c->nl++] = i;
  }
  hs_load(&g->in[c->io.cos], c->in[c->io.cos], 0, (size_t)AR * half, c->ch);
  hs_load(&g->in[c->io.sin], c->in[c->io.sin], 0, (size_t)AR * half, c->shh);
  float nominal = (d->flags & HS_FLAG_LONGROPE) ? d->rope_factor : 1.0f, bound = nominal * 1.001f, r2 = nominal * nominal;
  for (int i = 0; i < AR; i++)
    for (int j = 0; j < half; j++) {
      float co = c->ch[(size_t)i * half + j], si = c->shh[(size_t)i * half + j];
      if (!(fabsf(co) <= bound) || !(fabsf(si) <= bound))
        return gfail(QNN_GRAPH_ERROR_INVALID_TENSOR, c->err, c->n, "graph %s: row %d: cos/sin[%d] = %g/%g is outside [-%g, %g]",
                     g->name, i, j, (double)co, (double)si, (double)nominal, (double)nominal);
      if (c->live[i] && fabsf(co * co + si * si - r2) > 0.02f * r2)
        return gfail(QNN_GRAPH_ERROR_INVALID_TENSOR, c->err, c->n,
                     "graph %s: row %d: cos/sin[%d] = %g/%g is not a rotation (cos^2 + sin^2 = %g, want %g)", g->name, i, j,
                     (double)co, (double)si, (double)(co * co + si * si), (double)r2);
    }
  /* A live row may attend this call's rows only where they are live too. */
  for (int r = 0; r < c->nl; r++)
    for (int col = 0; col < AR; col++)
      if (!c->live[col] && c->mask[(size_t)c->lr[r] * CL + c->P + col] == 0)
        return gfail(QNN_GRAPH_ERROR_INVALID_TENSOR, c->err, c->n,
                     "graph %s: row %d attends column %d, the new entry of padding row %d", g->name, c->lr[r], c->P + col, col);
  return 0;
}

/* genie_forward gathers the live rows' inputs and the past slots any of them opens, and runs the
 * layers: y and each layer's new K/V (nk, nv) for the live rows. */
static uint32_t genie_forward(genie_call *c, float *x, float *y, float **nk, float **nv) {
  const hs_graph *g = c->g;
  int P = c->P, CL = c->CL, HD = c->HD, half = c->half, KVD = c->KVD, nl = c->nl;
  int *open = hs_scratch_alloc(sizeof(int) * ((size_t)P + 1));
  if (!open) return genie_oom(c);
  int npast = 0;
  for (int j = 0; j < P; j++) {
    int o = 0;
    for (int r = 0; r < nl && !o; r++) o = c->mask[(size_t)c->lr[r] * CL + j] == 0;
    if (o) open[npast++] = j;
  }
  size_t nl1 = (size_t)nl + 1;
  float *cs = hs_scratch_alloc(sizeof(float) * nl1 * HD), *sn = hs_scratch_alloc(sizeof(float) * nl1 * HD);
  float *smask = hs_scratch_alloc(sizeof(float) * nl1 * nl1), *pmask = hs_scratch_alloc(sizeof(float) * (nl1 * npast + 1));
  float *kbuf = hs_scratch_alloc(sizeof(float) * ((size_t)KVD * P + 1));
  float **pk = hs_scratch_calloc((size_t)c->L + 1, sizeof(float *)), **pv = hs_scratch_calloc((size_t)c->L + 1, sizeof(float *));
  if (!cs || !sn || !smask || !pmask || !kbuf || !pk || !pv) return genie_oom(c);
  for (int r = 0; r < nl; r++) {
    int i = c->lr[r];
    hs_load(&g->in[c->io.hin], c->in[c->io.hin], (size_t)i * c->E, (size_t)c->E, x + (size_t)r * c->E);
    hs_rope_row(cs + (size_t)r * HD, sn + (size_t)r * HD, c->ch + (size_t)i * half, c->shh + (size_t)i * half, half);
    for (int p = 0; p < npast; p++) pmask[(size_t)r * npast + p] = c->mask[(size_t)i * CL + open[p]];
    for (int col = 0; col < nl; col++) smask[(size_t)r * nl + col] = c->mask[(size_t)i * CL + P + c->lr[col]];
  }
  for (int l = 0; l < c->L; l++) {
    nk[l] = hs_scratch_alloc(sizeof(float) * nl1 * KVD);
    nv[l] = hs_scratch_alloc(sizeof(float) * nl1 * KVD);
    pk[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KVD + 1));
    pv[l] = hs_scratch_alloc(sizeof(float) * ((size_t)npast * KVD + 1));
    if (!nk[l] || !nv[l] || !pk[l] || !pv[l]) return genie_oom(c);
    if (!npast || !nl) continue;
    /* past_key [H,1,d,P] (transposed), past_value [H,1,P,d] */
    hs_load(&g->in[c->io.kin[l]], c->in[c->io.kin[l]], 0, (size_t)KVD * P, kbuf);
    hs_gather_k(pk[l], kbuf, KVD, P, open, npast);
    for (int h = 0; h < c->NKV; h++)
      for (int p = 0; p < npast; p++)
        hs_load(&g->in[c->io.vin[l]], c->in[c->io.vin[l]], ((size_t)h * P + open[p]) * HD, (size_t)HD,
                pv[l] + (size_t)p * KVD + h * HD);
  }
  if (nl) hs_forward(c->m, nl, x, cs, sn, npast, pmask, pk, pv, smask, y, nk, nv);
  return 0;
}

/* genie_store_kv writes each layer's new K/V of this call's rows, padding rows poisoned. */
static uint32_t genie_store_kv(genie_call *c, float **nk, float **nv) {
  int AR = c->AR, KVD = c->KVD, HD = c->HD;
  float *obuf = hs_scratch_alloc(sizeof(float) * ((size_t)KVD * AR + 1));
  if (!obuf) return genie_oom(c);
  for (int l = 0; l < c->L; l++) {
    const hs_tensor *kt = &c->g->out[c->io.kout[l]], *vt = &c->g->out[c->io.vout[l]];
    void *kp = c->out[c->io.kout[l]], *vp = c->out[c->io.vout[l]];
    memset(obuf, 0, sizeof(float) * (size_t)KVD * AR);
    hs_scatter_k(obuf, nk[l], KVD, AR, c->lr, c->nl);
    hs_store(kt, kp, 0, (size_t)KVD * AR, obuf);
    memset(obuf, 0, sizeof(float) * (size_t)KVD * AR);
    hs_scatter_v(obuf, nv[l], c->NKV, HD, AR, c->lr, c->nl);
    hs_store(vt, vp, 0, (size_t)KVD * AR, obuf);
    for (int i = 0; i < AR; i++) {
      if (c->live[i]) continue;
      for (int h = 0; h < c->NKV; h++) {
        for (int dd = 0; dd < HD; dd++) poison(kt, kp, (size_t)(h * HD + dd) * AR + i, 1);
        poison(vt, vp, ((size_t)h * AR + i) * HD, (size_t)HD);
      }
    }
  }
  return 0;
}

/* genie_store_rows writes the live rows' hidden states (or, in the last part, logits); a padding
 * row's are poisoned: its logits (V wide) every 64th entry from entry 0, since writing all of them
 * (32 MB per AR-128 call) would cost hostsim more than the call's floor; a runner sampling such a
 * row still reads NaN or the highest code there. */
static uint32_t genie_store_rows(genie_call *c, const float *x, const float *y) {
  int last = c->io.last, slot = last ? c->io.logits : c->io.hout;
  const hs_tensor *ot = &c->g->out[slot];
  size_t w = last ? (size_t)c->V : (size_t)c->E;
  float *lg = NULL;
  if (last) {
    lg = hs_scratch_alloc(sizeof(float) * ((size_t)c->nl + 1) * c->V);
    if (!lg) return genie_oom(c);
    if (c->nl) hs_lmhead_n(c->m, y, c->nl, lg);
  }
  for (int r = 0; r < c->nl; r++)
    store(ot, c->out[slot], (size_t)c->lr[r] * w, w, last ? lg + (size_t)r * c->V : x + (size_t)r * c->E);
  for (int i = 0; i < c->AR; i++)
    if (!c->live[i]) {
      if (!last) poison(ot, c->out[slot], (size_t)i * w, w);
      else if (ot->dtype == QNN_DATATYPE_UFIXED_POINT_16) {
        uint16_t *d = (uint16_t *)c->out[slot] + (size_t)i * w;
        for (size_t k = 0; k < w; k += 64) d[k] = 0xffff;
      } else
        for (size_t k = 0; k < w; k += 64) poison(ot, c->out[slot], (size_t)i * w + k, 1);
    }
  return 0;
}

/* genie_layers runs a part with layers: the rows' checks, the forward pass over the live rows,
 * and the outputs. */
static uint32_t genie_layers(genie_call *c) {
  uint32_t code = genie_rows(c);
  if (code) return code;
  size_t nl1 = (size_t)c->nl + 1;
  float *x = hs_scratch_alloc(sizeof(float) * nl1 * c->E), *y = hs_scratch_alloc(sizeof(float) * nl1 * c->E);
  float **nk = hs_scratch_calloc((size_t)c->L + 1, sizeof(float *)), **nv = hs_scratch_calloc((size_t)c->L + 1, sizeof(float *));
  if (!x || !y || !nk || !nv) return genie_oom(c);
  if ((code = genie_forward(c, x, y, nk, nv)) || (code = genie_store_kv(c, nk, nv))) return code;
  return genie_store_rows(c, x, y);
}

uint32_t hs_genie_run(const hs_model *m, const hs_graph *g, void **in, void **out, char *err, size_t n) {
  const hs_desc *d = &m->d;
  genie_call c = {.m = m, .g = g, .in = in, .out = out, .err = err, .n = n};
  if (hs_genie_bind(d, g, &c.io, err, n)) return QNN_GRAPH_ERROR_INVALID_TENSOR;
  c.AR = (int)c.io.ar, c.P = (int)c.io.p, c.CL = (int)c.io.cl, c.E = (int)d->hidden, c.HD = (int)d->head_dim;
  c.half = c.HD / 2, c.NKV = (int)d->kv_heads, c.KVD = c.NKV * c.HD, c.L = (int)d->layers, c.V = (int)d->vocab;
  size_t sm = hs_scratch_mark();
  uint32_t code = c.io.first ? genie_embed(&c) : !c.L ? genie_head(&c) : genie_layers(&c);
  hs_scratch_release(sm);
  hs_genie_io_free(&c.io);
  return code;
}
