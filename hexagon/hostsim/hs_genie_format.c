/* hs_genie_format.c - validation and tensor binding of the Genie graphs (FORMAT.md "Genie graphs");
 * linked into libQnnHtp.so and libQnnSystem.so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_genie.h"
#include "qnn_abi.h"


void hs_genie_io_free(hs_genie_io *io) {
  free(io->kin);
  free(io->vin);
  free(io->kout);
  free(io->vout);
  io->kin = io->vin = io->kout = io->vout = NULL;
}

/* kv_name parses past_{key,value}_<l>_{in,out}: *isk, *layer, *isin. */
static int kv_name(const char *s, int *isk, unsigned long *layer, int *isin) {
  const char *p;
  if (!strncmp(s, "past_key_", 9)) *isk = 1, p = s + 9;
  else if (!strncmp(s, "past_value_", 11)) *isk = 0, p = s + 11;
  else return 0;
  if (*p < '0' || *p > '9') return 0;
  char *end;
  *layer = strtoul(p, &end, 10);
  if (!strcmp(end, "_in")) *isin = 1;
  else if (!strcmp(end, "_out")) *isin = 0;
  else return 0;
  return 1;
}

int hs_genie_bind(const hs_desc *d, const hs_graph *g, hs_genie_io *io, char *err, size_t n) {
  memset(io, 0, sizeof *io);
  io->ids = io->mask = io->cos = io->sin = io->hin = io->hout = io->logits = -1;
  uint32_t L = d->layers;
  io->kin = malloc(sizeof(int) * (L + 1));
  io->vin = malloc(sizeof(int) * (L + 1));
  io->kout = malloc(sizeof(int) * (L + 1));
  io->vout = malloc(sizeof(int) * (L + 1));
  if (!io->kin || !io->vin || !io->kout || !io->vout) { hs_genie_io_free(io); return hs_fail(err, n, "out of memory"); }
  for (uint32_t l = 0; l < L; l++) io->kin[l] = io->vin[l] = io->kout[l] = io->vout[l] = -1;
  for (uint32_t i = 0; i < g->nin + g->nout; i++) {
    int isin = i < g->nin, idx = isin ? (int)i : (int)(i - g->nin);
    const char *nm = isin ? g->in[i].name : g->out[i - g->nin].name;
    int *slot = NULL, isk, kin;
    unsigned long layer;
    if (kv_name(nm, &isk, &layer, &kin)) {
      if (kin != isin) { hs_genie_io_free(io); return hs_fail(err, n, "graph %s: %s is an %s of the graph", g->name, nm, isin ? "input" : "output"); }
      if (layer < d->layer0 || layer >= (unsigned long)d->layer0 + L) {
        hs_genie_io_free(io);
        return hs_fail(err, n, "graph %s: %s: this part holds layers %u..%u", g->name, nm, d->layer0, d->layer0 + L - 1);
      }
      uint32_t l = (uint32_t)(layer - d->layer0);
      slot = isin ? (isk ? &io->kin[l] : &io->vin[l]) : (isk ? &io->kout[l] : &io->vout[l]);
    } else if (isin && !strcmp(nm, "input_ids")) slot = &io->ids;
    else if (isin && !strcmp(nm, "attention_mask")) slot = &io->mask;
    else if (isin && !strcmp(nm, "position_ids_cos")) slot = &io->cos;
    else if (isin && !strcmp(nm, "position_ids_sin")) slot = &io->sin;
    else if (!isin && !strcmp(nm, "logits")) slot = &io->logits;
    else if (isin) slot = &io->hin; /* the hidden state from the previous part, by its ONNX name */
    else slot = &io->hout;
    if (*slot >= 0) {
      hs_genie_io_free(io);
      if (slot == &io->hin || slot == &io->hout)
        return hs_fail(err, n, "graph %s: more than one hidden-state %s (%s): unknown tensor name", g->name,
                    isin ? "input" : "output", nm);
      return hs_fail(err, n, "graph %s: tensor %s given twice", g->name, nm);
    }
    *slot = idx;
  }
  io->first = io->ids >= 0;
  io->last = io->logits >= 0;
  io->ar = g->window;
  io->cl = d->ctx;
  io->p = d->ctx - g->window;
  return 0;
}

static const uint32_t t_int[] = {QNN_DATATYPE_INT_32, 0};
static const uint32_t t_act[] = {QNN_DATATYPE_UFIXED_POINT_16, QNN_DATATYPE_FLOAT_16, QNN_DATATYPE_FLOAT_32, 0};
static const uint32_t t_kv[] = {QNN_DATATYPE_UFIXED_POINT_8, QNN_DATATYPE_UFIXED_POINT_16, QNN_DATATYPE_FLOAT_16,
                                QNN_DATATYPE_FLOAT_32, 0};

int hs_genie_check(const hs_desc *d, const hs_graph *g, char *err, size_t n) {
  hs_genie_io io;
  uint32_t L = d->layers, AR = g->window, CL = d->ctx, NKV = d->kv_heads, HD = d->head_dim, E = d->hidden;
  if (!AR || AR >= CL) return hs_fail(err, n, "graph %s: AR %u must be in [1, CL %u)", g->name, AR, CL);
  if (!d->shards) return hs_fail(err, n, "graph %s: a Genie part needs the part count in the header", g->name);
  if (hs_genie_bind(d, g, &io, err, n)) return -1;
  int rc = -1;
  uint32_t P = io.p, nin = 0, nout = 0;
  uint32_t hd3[3] = {1, AR, E};
  if (io.first) {
    uint32_t td[2] = {1, AR};
    if (L) { hs_fail(err, n, "graph %s: the embedding part (input_ids) holds no layers, this one %u", g->name, L); goto out; }
    if (io.last || io.hout < 0) { hs_fail(err, n, "graph %s: the embedding part outputs the hidden state, not logits", g->name); goto out; }
    if (hs_want(g, &g->in[io.ids], 2, td, t_int, err, n) || hs_want(g, &g->out[io.hout], 3, hd3, t_act, err, n)) goto out;
    if (g->nin != 1 || g->nout != 1) { hs_fail(err, n, "graph %s: the embedding part has 1 input and 1 output, not %u and %u", g->name, g->nin, g->nout); goto out; }
    if (!hs_find_weight(d, "model.embed_tokens.weight")) { hs_fail(err, n, "graph %s needs weight model.embed_tokens.weight", g->name); goto out; }
    rc = 0;
    goto out;
  }
  if (!L) { /* a head-only last part: the final norm and the lm-head */
    uint32_t ld[3] = {1, AR, d->vocab};
    if (!io.last || io.hin < 0 || g->nin != 1 || g->nout != 1) {
      hs_fail(err, n, "graph %s: a part without layers is the embedding (input_ids) or the head (hidden state -> logits)", g->name);
      goto out;
    }
    if (hs_want(g, &g->in[io.hin], 3, hd3, t_act, err, n) || hs_want(g, &g->out[io.logits], 3, ld, t_act, err, n)) goto out;
    if (!hs_find_weight(d, "model.norm.weight") || !hs_find_weight(d, (d->flags & 1) ? "model.embed_tokens.weight" : "lm_head.weight")) {
      hs_fail(err, n, "graph %s needs model.norm.weight and the lm-head weight", g->name);
      goto out;
    }
    rc = 0;
    goto out;
  }
  if (io.hin < 0 || io.mask < 0 || io.cos < 0 || io.sin < 0) {
    hs_fail(err, n, "graph %s: needs the hidden state, attention_mask, position_ids_cos and position_ids_sin", g->name);
    goto out;
  }
  if ((io.hout >= 0) == (io.logits >= 0)) { hs_fail(err, n, "graph %s: outputs either logits or the hidden state", g->name); goto out; }
  {
    const hs_tensor *mt = &g->in[io.mask];
    uint32_t md[4] = {1, 1, AR, CL}, cd[4] = {1, 1, AR, HD / 2};
    if (hs_want(g, &g->in[io.hin], 3, hd3, t_act, err, n) || hs_want(g, mt, 4, md, t_act, err, n) ||
        hs_want(g, &g->in[io.cos], 4, cd, t_act, err, n) || hs_want(g, &g->in[io.sin], 4, cd, t_act, err, n))
      goto out;
    if (mt->dtype == QNN_DATATYPE_UFIXED_POINT_16 && mt->offset != -65535) {
      hs_fail(err, n, "graph %s: attention_mask: code 65535 must be 0.0 (offset -65535, not %d)", g->name, mt->offset);
      goto out;
    }
    nin += 4;
  }
  for (uint32_t l = 0; l < L; l++) {
    if (io.kin[l] < 0 || io.vin[l] < 0 || io.kout[l] < 0 || io.vout[l] < 0) {
      hs_fail(err, n, "graph %s: layer %u needs past_key_%u_in/_out and past_value_%u_in/_out", g->name, d->layer0 + l,
           d->layer0 + l, d->layer0 + l);
      goto out;
    }
    uint32_t kd[4] = {NKV, 1, HD, P}, vd[4] = {NKV, 1, P, HD}, kod[4] = {NKV, 1, HD, AR}, vod[4] = {NKV, 1, AR, HD};
    if (hs_want(g, &g->in[io.kin[l]], 4, kd, t_kv, err, n) || hs_want(g, &g->in[io.vin[l]], 4, vd, t_kv, err, n) ||
        hs_want(g, &g->out[io.kout[l]], 4, kod, t_kv, err, n) || hs_want(g, &g->out[io.vout[l]], 4, vod, t_kv, err, n))
      goto out;
    nin += 2;
    nout += 2;
  }
  if (io.last) {
    uint32_t ld[3] = {1, AR, d->vocab};
    if (hs_want(g, &g->out[io.logits], 3, ld, t_act, err, n)) goto out;
  } else if (hs_want(g, &g->out[io.hout], 3, hd3, t_act, err, n)) goto out;
  nout++;
  if (g->nin != nin || g->nout != nout) {
    hs_fail(err, n, "graph %s: %u inputs / %u outputs, want %u / %u", g->name, g->nin, g->nout, nin, nout);
    goto out;
  }
  if (hs_want_weights(d, g, L, 0, io.last, err, n)) goto out;
  rc = 0;
out:
  hs_genie_io_free(&io);
  return rc;
}
