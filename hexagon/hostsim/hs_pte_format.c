/* hs_pte_format.c - validation and tensor roles of the ExecuTorch static-llama graphs
 * (FORMAT.md "ExecuTorch graphs"); linked into libQnnHtp.so and libQnnSystem.so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_pte.h"
#include "qnn_abi.h"


/* node returns the node name of an input `input_<k>_<node>@0` in buf, or NULL. */
static const char *node(const char *name, char *buf, size_t n) {
  if (strncmp(name, "input_", 6)) return NULL;
  const char *p = name + 6;
  if (*p < '0' || *p > '9') return NULL;
  while (*p >= '0' && *p <= '9') p++;
  if (*p != '_') return NULL;
  p++;
  const char *at = strrchr(p, '@');
  if (!at || strcmp(at, "@0")) return NULL;
  size_t l = (size_t)(at - p);
  if (l == 0 || l >= n) return NULL;
  memcpy(buf, p, l);
  buf[l] = 0;
  return buf;
}

void hs_et_io_free(hs_et_io *io) {
  free(io->k);
  free(io->v);
  io->k = io->v = NULL;
}

static const uint32_t t_int[] = {QNN_DATATYPE_INT_32, 0};
static const uint32_t t_mask[] = {QNN_DATATYPE_UFIXED_POINT_16, QNN_DATATYPE_UFIXED_POINT_8, QNN_DATATYPE_FLOAT_32, 0};
static const uint32_t t_kv[] = {QNN_DATATYPE_UFIXED_POINT_8, QNN_DATATYPE_UFIXED_POINT_16, QNN_DATATYPE_FLOAT_32, 0};
static const uint32_t t_io[] = {QNN_DATATYPE_UFIXED_POINT_16, QNN_DATATYPE_FLOAT_32, 0};

int hs_et_bind(const hs_desc *d, const hs_graph *g, hs_et_io *io, char *err, size_t n) {
  memset(io, 0, sizeof *io);
  io->tokens = io->pos = io->mask = io->h = io->cos = io->sin = -1;
  uint32_t L = d->layers;
  io->k = malloc(sizeof(int) * (L + 1));
  io->v = malloc(sizeof(int) * (L + 1));
  if (!io->k || !io->v) { hs_et_io_free(io); return hs_fail(err, n, "out of memory"); }
  for (uint32_t l = 0; l < L; l++) io->k[l] = io->v[l] = -1;
  char nb[64];
  for (uint32_t i = 0; i < g->nin; i++) {
    const char *nd = node(g->in[i].name, nb, sizeof nb);
    int *slot = NULL;
    if (!nd) goto badname;
    if (!strcmp(nd, "tokens")) slot = &io->tokens;
    else if (!strcmp(nd, "input_pos")) slot = &io->pos;
    else if (!strcmp(nd, "atten_mask")) slot = &io->mask;
    else if (!strcmp(nd, "hidden_state")) slot = &io->h;
    else if (!strcmp(nd, "freqs_cos")) slot = &io->cos;
    else if (!strcmp(nd, "freqs_sin")) slot = &io->sin;
    else if (!strncmp(nd, "args_", 5)) {
      char *end;
      unsigned long j = strtoul(nd + 5, &end, 10);
      if (*end || end == nd + 5 || j >= 2ul * L) goto badname;
      slot = j < L ? &io->k[j] : &io->v[j - L];
    } else goto badname;
    if (*slot >= 0) { hs_et_io_free(io); return hs_fail(err, n, "graph %s: input %s given twice", g->name, nd); }
    *slot = (int)i;
    continue;
  badname:
    hs_et_io_free(io);
    return hs_fail(err, n, "graph %s: input %s is not input_<k>_{tokens,input_pos,atten_mask,hidden_state,freqs_cos,"
                        "freqs_sin,args_<j>}@0 (j < %u)", g->name, g->in[i].name, 2 * L);
  }
  io->first = io->tokens >= 0;
  io->last = g->nout == 2 * L + 1;
  io->ar = g->window;
  io->cl = d->ctx;
  io->s = d->ctx - g->window;
  return 0;
}

int hs_et_check(const hs_desc *d, const hs_graph *g, char *err, size_t n) {
  hs_et_io io;
  uint32_t L = d->layers, AR = g->window, CL = d->ctx, NKV = d->kv_heads, HD = d->head_dim;
  if (!L) return hs_fail(err, n, "graph %s: an ExecuTorch shard needs at least one layer", g->name);
  if (!AR || AR >= CL) return hs_fail(err, n, "graph %s: AR %u must be in [1, ctx %u)", g->name, AR, CL);
  if (g->kind == HS_KIND_ET_DECODE && AR != 1) return hs_fail(err, n, "graph %s: kv_forward has AR 1, not %u", g->name, AR);
  int longrope = (d->flags & HS_FLAG_LONGROPE) != 0;
  if (!(d->rope_theta > 0) || !(d->rope_factor >= 1) || !d->rope_orig ||
      (!longrope && (!(d->rope_hi > d->rope_lo) || !(d->rope_lo > 0))))
    return hs_fail(err, n, "graph %s: bad RoPE parameters in header", g->name);
  if (!d->shards || d->layer0 >= 100000) return hs_fail(err, n, "graph %s: bad shard fields in header", g->name);
  if (hs_et_bind(d, g, &io, err, n)) return -1;
  int rc = -1;
  uint32_t S = io.s, nin = 0;
  if (g->nout != 2 * L + 1 && g->nout != 2 * L + 3) {
    hs_fail(err, n, "graph %s: %u outputs, want %u (V,K per layer + logits) or %u (+ hidden_state, cos, sin)", g->name,
         g->nout, 2 * L + 1, 2 * L + 3);
    goto out;
  }
  if (io.first) {
    if (io.pos < 0) { hs_fail(err, n, "graph %s: tokens without input_pos", g->name); goto out; }
    if (io.h >= 0 || io.cos >= 0 || io.sin >= 0) { hs_fail(err, n, "graph %s: a first shard takes no hidden_state/freqs", g->name); goto out; }
    if (longrope && !d->rope_ext) { hs_fail(err, n, "graph %s: LongRoPE (header flag 8) without the weight rope.ext_factor", g->name); goto out; }
    uint32_t td[2] = {1, AR};
    if (hs_want(g, &g->in[io.tokens], 2, td, t_int, err, n) || hs_want(g, &g->in[io.pos], 2, td, t_int, err, n)) goto out;
    nin += 2;
  } else {
    if (io.pos >= 0 || io.h < 0 || io.cos < 0 || io.sin < 0) {
      hs_fail(err, n, "graph %s: needs tokens+input_pos (first shard) or hidden_state+freqs_cos+freqs_sin", g->name);
      goto out;
    }
    uint32_t hd3[3] = {1, AR, d->hidden}, cd[2] = {AR, HD / 2};
    if (hs_want(g, &g->in[io.h], 3, hd3, t_io, err, n) || hs_want(g, &g->in[io.cos], 2, cd, t_io, err, n) ||
        hs_want(g, &g->in[io.sin], 2, cd, t_io, err, n))
      goto out;
    nin += 3;
  }
  if (io.mask < 0) { hs_fail(err, n, "graph %s: missing atten_mask", g->name); goto out; }
  {
    const hs_tensor *mt = &g->in[io.mask];
    uint32_t m4[4] = {1, 1, AR, CL}, m3[3] = {1, AR, CL};
    if (hs_want(g, mt, mt->rank == 3 ? 3 : 4, mt->rank == 3 ? m3 : m4, t_mask, err, n)) goto out;
    nin++;
  }
  for (uint32_t l = 0; l < L; l++) {
    if (io.k[l] < 0 || io.v[l] < 0) { hs_fail(err, n, "graph %s: missing cache input args_%u", g->name, io.k[l] < 0 ? l : L + l); goto out; }
    const hs_tensor *ki = &g->in[io.k[l]], *vi = &g->in[io.v[l]];
    const hs_tensor *vo = &g->out[2 * l], *ko = &g->out[2 * l + 1];
    uint32_t kd[4] = {1, NKV, HD, S}, vd[4] = {1, NKV, S, HD}, kod[4] = {1, NKV, HD, AR}, vod[4] = {1, NKV, AR, HD};
    if (hs_want(g, ki, 4, kd, t_kv, err, n) || hs_want(g, vi, 4, vd, t_kv, err, n) || hs_want(g, ko, 4, kod, t_kv, err, n) ||
        hs_want(g, vo, 4, vod, t_kv, err, n))
      goto out;
    if (ko->dtype != ki->dtype || ko->scale != ki->scale || ko->offset != ki->offset || vo->dtype != vi->dtype ||
        vo->scale != vi->scale || vo->offset != vi->offset) {
      hs_fail(err, n, "graph %s: layer %u: new K/V must have the cache's data type and quantization", g->name, l);
      goto out;
    }
    nin += 2;
  }
  if (g->nin != nin) { hs_fail(err, n, "graph %s: %u inputs, want %u", g->name, g->nin, nin); goto out; }
  if (io.last) {
    uint32_t ld[3] = {1, AR, d->vocab};
    if (hs_want(g, &g->out[2 * L], 3, ld, t_io, err, n)) goto out;
  } else {
    uint32_t hd3[3] = {1, AR, d->hidden}, cd[2] = {AR, HD / 2};
    if (hs_want(g, &g->out[2 * L], 3, hd3, t_io, err, n) || hs_want(g, &g->out[2 * L + 1], 2, cd, t_io, err, n) ||
        hs_want(g, &g->out[2 * L + 2], 2, cd, t_io, err, n))
      goto out;
  }
  if (hs_want_weights(d, g, L, io.first, io.last, err, n)) goto out;
  rc = 0;
out:
  hs_et_io_free(&io);
  return rc;
}
